"""Stores in an object store, through the binding, against a real S3
server (tests/s3/run.sh starts radosgw and sets AWS_* and
LOADERX_TEST_BUCKET; without them these tests are skipped). Stores are
written locally and uploaded with boto3, a client independent of
loaderx's own, then read as s3:// addresses and compared with the arrays
they were written from."""

import json
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

import numpy as np
import pytest

from loaderx import (AccessDeniedError, DataLoader, ReadOnlyStoreError,
                     StoreIOError, StoreNotFoundError)
from loaderx.zrecord import DenseStore, RaggedStore, open_store
from loaderx.zsampler import Sampler

BUCKET = os.environ.get("LOADERX_TEST_BUCKET")
pytestmark = pytest.mark.skipif(not BUCKET, reason="no S3 server (tests/s3/run.sh starts one)")


@pytest.fixture(scope="module")
def s3():
    boto3 = pytest.importorskip("boto3")
    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                        region_name=os.environ.get("AWS_REGION", "us-east-1"))


def upload(s3, folder, skip=()):
    """Upload the store folder's files under a new prefix; its s3:// URL."""
    prefix = f"py-{uuid.uuid4().hex[:12]}"
    for name in sorted(os.listdir(folder)):
        if name not in skip:
            s3.upload_file(os.path.join(folder, name), BUCKET, f"{prefix}/{name}")
    return f"s3://{BUCKET}/{prefix}"


@pytest.fixture
def images(rng):
    return rng.integers(0, 255, size=(300, 3, 16, 16), dtype=np.uint8)


@pytest.fixture
def tokens(rng):
    return [rng.integers(0, 50000, size=1 + (i * 7) % 53).astype(np.int32)
            for i in range(300)]


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_dense_remote_equals_the_arrays(s3, images, codec):
    with DenseStore.create("img", np.uint8, (3, 16, 16), codec=codec) as s:
        s.append(images)
    url = upload(s3, "img")
    with DenseStore.open(url) as r:
        assert not r.writable and len(r) == len(images) and r.path == url
        np.testing.assert_array_equal(r[:], images)
        idx = np.array([299, 0, 5, 5, 150, 0, 298])
        np.testing.assert_array_equal(r[idx], images[idx])
        np.testing.assert_array_equal(r[7], images[7])


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_ragged_remote_equals_the_arrays(s3, tokens, codec):
    with RaggedStore.create("tok", np.int32, codec=codec) as s:
        s.append(tokens)
    url = upload(s3, "tok")
    r = open_store(url)
    assert isinstance(r, RaggedStore)
    idx = [3, 3, 299, 0, 120]
    for got, i in zip(r[idx], idx):
        np.testing.assert_array_equal(got, tokens[i])
    values, lengths = r.padded(idx, pad=-1)
    for row, n, i in zip(values, lengths, idx):
        np.testing.assert_array_equal(row[:n], tokens[i])
        assert (row[n:] == -1).all()
    values, offsets = r.packed(idx)
    for k, i in enumerate(idx):
        np.testing.assert_array_equal(values[offsets[k]:offsets[k + 1]], tokens[i])
    r.close()


def test_a_remote_store_is_read_only(s3, images):
    with DenseStore.create("img", np.uint8, (3, 16, 16)) as s:
        s.append(images[:10])
    url = upload(s3, "img")
    with pytest.raises(ReadOnlyStoreError, match="read-only"):
        DenseStore.open(url, readonly=False)


@pytest.mark.parametrize("change", ["deleted", "shortened", "replaced"])
def test_verify_names_an_object_changed_after_the_open(s3, images, change):
    # The scan stops at the object it cannot read as listed, and the report
    # says which and why instead of the call failing without one.
    with DenseStore.create("img", np.uint8, (3, 16, 16)) as s:
        s.append(images)
    url = upload(s3, "img")
    key = url[len(f"s3://{BUCKET}/"):] + "/0.chunk"
    r = DenseStore.open(url)
    body = open("img/0.chunk", "rb").read()
    if change == "deleted":
        s3.delete_object(Bucket=BUCKET, Key=key)
    elif change == "shortened":
        s3.put_object(Bucket=BUCKET, Key=key, Body=body[:len(body) // 2])
    else:
        s3.put_object(Bucket=BUCKET, Key=key, Body=bytes(255 - b for b in body))
    rep = r.verify()
    r.close()
    assert not rep["ok"]
    assert rep["records_checked"] < len(images)
    file, entry, what = rep["problems"][-1]
    assert entry is None
    assert "0.chunk" in file + what
    assert {"deleted": "missing", "shortened": "shorter",
            "replaced": "changed since it was listed"}[change] in what


def test_threads_that_open_at_once_share_a_new_cache_folder(s3, images, tmp_path,
                                                            monkeypatch):
    # Each open of a new folder writes its marker; threads of one process
    # doing so together must neither fail nor leave a half-written one.
    with DenseStore.create("img", np.uint8, (3, 16, 16)) as s:
        s.append(images)
    url = upload(s3, "img")
    for round_ in range(10):
        cache = tmp_path / f"cache{round_}"
        monkeypatch.setenv("LOADERX_CACHE_DIR", str(cache))
        start = threading.Barrier(8)
        errors, got = [], []

        def read(k):
            try:
                start.wait()
                with DenseStore.open(url) as r:
                    got.append((k, r[k]))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=read, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for k, rec in got:
            np.testing.assert_array_equal(rec, images[k])
        files = {p.name for p in cache.iterdir() if not p.is_dir()}
        assert "CACHEDIR.TAG" in files and files <= {"CACHEDIR.TAG", ".lock"}, files
        assert (cache / "CACHEDIR.TAG").read_text().startswith(
            "Signature: 8a477f597d28d172789f06886806bc55\n")


def test_a_pickled_remote_store_reopens_by_its_address(s3, images):
    with DenseStore.create("img", np.uint8, (3, 16, 16)) as s:
        s.append(images[:20])
    url = upload(s3, "img")
    with DenseStore.open(url) as r:
        again = pickle.loads(pickle.dumps(r))
    np.testing.assert_array_equal(again[:], images[:20])
    assert again.path == url
    again.close()


def test_an_upload_without_its_header_is_not_a_store(s3, images):
    with DenseStore.create("img", np.uint8, (3, 16, 16)) as s:
        s.append(images[:10])
    url = upload(s3, "img", skip=("meta.zr",))
    with pytest.raises(StoreNotFoundError, match="meta.zr"):
        DenseStore.open(url)


def test_push_and_pull_give_back_the_store(s3, tokens):
    import loaderx
    with RaggedStore.create("tok", np.int32, codec="zstd") as s:
        s.append(tokens)
    url = f"s3://{BUCKET}/py-push-{uuid.uuid4().hex[:12]}"
    loaderx.push("tok", url)
    with RaggedStore.open(url) as r:
        assert len(r) == len(tokens)
        for i in (0, 7, len(tokens) - 1):
            np.testing.assert_array_equal(r[i], tokens[i])
    with pytest.raises(loaderx.StoreExistsError, match="--force"):
        loaderx.push("tok", url)
    loaderx.pull(url, "back")
    for name in os.listdir("tok"):
        with open(os.path.join("tok", name), "rb") as a, \
                open(os.path.join("back", name), "rb") as b:
            assert a.read() == b.read(), name
    with pytest.raises(loaderx.StoreExistsError):
        loaderx.pull(url, "back")
    assert os.stat("back").st_mode & 0o777 == 0o700
    assert {os.stat(os.path.join("back", n)).st_mode & 0o777 for n in os.listdir("back")} \
        == {0o600}
    loaderx.pull(url, "back", force=True, mode=0o644)
    assert os.stat("back").st_mode & 0o777 == 0o755
    assert {os.stat(os.path.join("back", n)).st_mode & 0o777 for n in os.listdir("back")} \
        == {0o644}
    for bad in (0o7777, 0o400, 999, "644"):
        with pytest.raises(ValueError, match="mode"):
            loaderx.pull(url, "bad", mode=bad)
    with pytest.raises(StoreNotFoundError):
        loaderx.pull(f"s3://{BUCKET}/py-nothing-{uuid.uuid4().hex[:12]}", "none")
    assert not any(n.startswith("none") for n in os.listdir("."))


def test_access_errors_say_which(s3, images, monkeypatch):
    with DenseStore.create("img", np.uint8, (3, 16, 16)) as s:
        s.append(images[:10])
    url = upload(s3, "img")
    with monkeypatch.context() as m:
        m.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        with pytest.raises(AccessDeniedError) as e:
            DenseStore.open(url)
        assert "not-the-secret" not in str(e.value)
    with pytest.raises(StoreNotFoundError):
        DenseStore.open(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x")
    with monkeypatch.context() as m:
        m.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        with pytest.raises(StoreIOError, match="127.0.0.1:9"):
            DenseStore.open(url)


def test_the_loader_reads_a_remote_store_by_its_address(s3, images):
    with DenseStore.create("ids", np.int64, codec="raw") as s:
        s.append(np.arange(240, dtype=np.int64))
    with DenseStore.create("img", np.uint8, (3, 16, 16), codec="zstd") as s:
        s.append(images[:240])
    ids, img = upload(s3, "ids"), upload(s3, "img")
    loader = DataLoader({"ids": ids, "img": img}, batch_size=16, seed=3, prefetch=2)
    sampler = Sampler(240, 16, Sampler.Mode.CYCLIC, seed=3)
    for step in range(20):
        batch = next(loader)
        want = sampler.batch(step)
        np.testing.assert_array_equal(batch["ids"], want)
        np.testing.assert_array_equal(batch["img"], images[want])
    loader.close()


HOST = """
import json, sys
import numpy as np
from loaderx import DataLoader
url, rank, world, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
loader = DataLoader({"ids": url}, batch_size=8, seed=5, rank=rank, world=world)
print(json.dumps([next(loader)["ids"].tolist() for _ in range(steps)]))
loader.close()
"""


def test_hosts_together_see_each_global_batch_once(s3, tmp_path):
    """Three processes, each a host with a cache folder of its own (the
    third without one), read one remote store through the loader."""
    n, world, steps = 200, 3, 12
    with DenseStore.create("ids", np.int64, codec="raw") as s:
        s.append(np.arange(n, dtype=np.int64))
    url = upload(s3, "ids")
    envs = [dict(os.environ, LOADERX_CACHE_DIR=str(tmp_path / f"host{r}")) for r in range(2)]
    envs.append({k: v for k, v in os.environ.items() if k != "LOADERX_CACHE_DIR"})
    procs = [subprocess.Popen([sys.executable, "-c", HOST, url, str(r), str(world), str(steps)],
                              stdout=subprocess.PIPE, env=envs[r])
             for r in range(world)]
    parts = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    whole = Sampler(n, 8 * world, Sampler.Mode.CYCLIC, seed=5)
    for step in range(steps):
        joined = sum((parts[r][step] for r in range(world)), [])
        assert sorted(joined) == sorted(whole.batch(step).tolist())
        assert len(set(joined)) == len(joined)
    for r in range(2):
        assert any((tmp_path / f"host{r}").rglob("*.chunk"))


class Proxy:
    """A TCP relay to the S3 server that can be cut: a server that goes
    away under an open store, for the test below."""

    def __init__(self, target):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.socks = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            u = socket.create_connection(self.target)
            with self.lock:
                self.socks += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        # shutdown wakes the accept() blocked on the listener, which a
        # close from another thread would leave listening.
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for s in self.socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass


def test_a_server_gone_under_an_open_store_fails_the_read_promptly(s3, images, monkeypatch):
    with DenseStore.create("img", np.uint8, (3, 16, 16)) as s:
        s.append(images)
    url = upload(s3, "img")
    server = urllib.parse.urlsplit(os.environ["AWS_ENDPOINT_URL"])
    proxy = Proxy((server.hostname, server.port))
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("LOADERX_S3_TIMEOUT", "2")
    with DenseStore.open(url) as r:
        np.testing.assert_array_equal(r[[1, 2, 3]], images[[1, 2, 3]])
        proxy.cut()
        t0 = time.monotonic()
        with pytest.raises(StoreIOError, match=f"127.0.0.1:{proxy.port}"):
            r[[7, 8, 9]]
        # Retries back off for a few seconds, then the read fails; a hang
        # would be stopped here rather than by the test run's timeout.
        assert time.monotonic() - t0 < 60
