"""loaderx.torch: the steps each rank and torch worker delivers, checked
against the sampler's batches, resumption, epochs, and the errors of a
loaderx DataLoader carried into a torch worker."""

import os
import pickle
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import loaderx  # noqa: E402

from loaderx import InvalidArgumentError, StoreBusyError  # noqa: E402
from loaderx.dataloader import DataLoader  # noqa: E402
from loaderx.torch import StepLoader, StreamDataset  # noqa: E402
from loaderx.zrecord import DenseStore, RaggedStore  # noqa: E402
from loaderx.zsampler import Sampler  # noqa: E402

N = 200
B = 16
STEPS = N // B  # steps per epoch


@pytest.fixture
def paths(rng):
    """ids (record i holds i), images and tokens of N records."""
    with DenseStore.create("ids", np.int64, codec="raw") as s:
        s.append(np.arange(N, dtype=np.int64))
    with DenseStore.create("images", np.uint8, (3, 4, 4)) as s:
        s.append(rng.integers(0, 255, size=(N, 3, 4, 4), dtype=np.uint8))
    with RaggedStore.create("tokens", np.int32) as s:
        s.append([np.full(1 + i % 7, i, dtype=np.int32) for i in range(N)])
    return {"ids": "ids", "images": "images", "tokens": "tokens"}


def check_step(batch, step, sampler, images):
    """batch is the sampler's step: ids, images and tokens at its indices."""
    idx = sampler.batch(step)
    assert isinstance(batch["ids"], torch.Tensor)
    assert batch["ids"].dtype == torch.int64
    np.testing.assert_array_equal(batch["ids"].numpy(), idx)
    np.testing.assert_array_equal(batch["images"].numpy(), images[idx])
    assert len(batch["tokens"]) == B
    for i, t in zip(idx, batch["tokens"]):
        np.testing.assert_array_equal(t.numpy(), np.full(1 + i % 7, i))


@pytest.mark.parametrize("workers", [0, 2])
def test_every_batch_is_its_step_for_two_epochs(paths, workers):
    ds = StreamDataset(paths, batch_size=B, seed=7)
    loader = StepLoader(ds, num_workers=workers, timeout=60 if workers else 0)
    sampler = Sampler(N, B, "cyclic", seed=7)
    images = DenseStore.open("images", readonly=True)[:]
    assert len(ds) == len(loader) == STEPS
    for epoch in range(2):
        ds.set_epoch(epoch)
        batches = list(loader)
        assert len(batches) == STEPS
        for k, batch in enumerate(batches):
            check_step(batch, epoch * STEPS + k, sampler, images)
        ids = np.concatenate([b["ids"].numpy() for b in batches])
        # CYCLIC: no record twice in an epoch.
        assert len(np.unique(ids)) == STEPS * B
        assert ds.state_dict()["step"] == (epoch + 1) * STEPS


@pytest.mark.parametrize("workers", [0, 2])
def test_a_resumed_run_gives_the_batches_of_an_unbroken_one(paths, workers):
    kw = {"num_workers": workers, "timeout": 60 if workers else 0}
    whole = StreamDataset(paths, batch_size=B, seed=3)
    unbroken = []
    for epoch in range(2):
        whole.set_epoch(epoch)
        unbroken += [b["ids"].numpy().copy() for b in StepLoader(whole, **kw)]

    first = StreamDataset(paths, batch_size=B, seed=3)
    loader = StepLoader(first, **kw)
    for k, batch in enumerate(loader):
        if k == 4:
            break
    # Five batches taken, whatever the workers had prepared beyond them.
    state = pickle.loads(pickle.dumps(loader.state_dict()))
    assert state["step"] == 5 and state["epoch"] == 0
    del loader

    again = StreamDataset(paths, batch_size=B, seed=3)
    again.load_state_dict(state)
    assert len(again) == STEPS - 5
    resumed = []
    for epoch in range(state["epoch"], 2):
        again.set_epoch(epoch)
        resumed += [b["ids"].numpy().copy() for b in StepLoader(again, **kw)]
    assert len(resumed) == 2 * STEPS - 5
    for got, want in zip(resumed, unbroken[5:]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("kind", ["StepLoader", "DataLoader"])
def test_persistent_workers_follow_set_epoch_and_load_state_dict(paths, kind,
                                                                 context):
    """Workers that torch keeps from one epoch to the next were started with
    the dataset of epoch 0: each epoch must still be the one the training
    process reads without workers, and a resume point must reach them."""
    ref = StreamDataset({"ids": "ids"}, batch_size=B, seed=7)
    want = []
    for epoch in range(3):
        ref.set_epoch(epoch)
        want.append(np.stack([b["ids"].numpy() for b in StepLoader(ref)]))
    for a in range(3):
        for b in range(a):
            assert not np.array_equal(want[a], want[b])

    ds = StreamDataset({"ids": "ids"}, batch_size=B, seed=7)
    kw = {"num_workers": 2, "persistent_workers": True,
          "multiprocessing_context": context, "timeout": 60}
    if kind == "StepLoader":
        loader = StepLoader(ds, **kw)
    else:
        loader = torch.utils.data.DataLoader(ds, batch_size=None, **kw)
    for epoch in range(3):
        ds.set_epoch(epoch)
        got = np.stack([b["ids"].numpy() for b in loader])
        np.testing.assert_array_equal(got, want[epoch])
        if kind == "StepLoader":
            assert ds.state_dict()["step"] == (epoch + 1) * STEPS
    # Epoch 1 from its sixth step, in the same workers.
    ds.load_state_dict(dict(ds.state_dict(), step=STEPS + 5))
    got = np.stack([b["ids"].numpy() for b in loader])
    np.testing.assert_array_equal(got, want[1][5:])


def test_epochs_are_new_orders_and_a_state_of_other_sampling_is_refused(paths):
    ds = StreamDataset({"ids": "ids"}, batch_size=B, seed=1)
    ds.set_epoch(3)
    got = [b["ids"] for b in StepLoader(ds)]
    want = Sampler(N, B, "cyclic", seed=1)
    for k, b in enumerate(got):
        np.testing.assert_array_equal(b, want.batch(3 * STEPS + k))
    other = StreamDataset({"ids": "ids"}, batch_size=B, seed=2)
    with pytest.raises(InvalidArgumentError, match="seed"):
        other.load_state_dict(ds.state_dict())
    with pytest.raises(InvalidArgumentError):
        ds.set_epoch(-1)


@pytest.mark.parametrize("workers", [0, 2])
def test_quasi_block_and_window_reach_every_path(paths, workers):
    ds = StreamDataset({"ids": "ids"}, batch_size=B, mode="quasi", seed=3,
                       block=4, window=2)
    want = Sampler(N, B, "quasi", seed=3, block=4, window=2)
    got = [b["ids"] for b in StepLoader(ds, num_workers=workers)]
    assert len(got) == STEPS
    for k, b in enumerate(got):
        np.testing.assert_array_equal(b, want.batch(k))
    assert (ds.state_dict()["block"], ds.state_dict()["window"]) == (4, 2)
    other = StreamDataset({"ids": "ids"}, batch_size=B, mode="quasi", seed=3)
    with pytest.raises(InvalidArgumentError, match="block"):
        other.load_state_dict(ds.state_dict())


def test_bad_arguments_raise(paths):
    with pytest.raises(InvalidArgumentError, match="differ in length"):
        with DenseStore.create("short", np.int64, codec="raw") as s:
            s.append(np.arange(N - 1))
        StreamDataset({"ids": "ids", "short": "short"}, batch_size=B)
    with pytest.raises(InvalidArgumentError, match="both rank and world"):
        StreamDataset(paths, batch_size=B, rank=1)
    with pytest.raises(InvalidArgumentError):
        StreamDataset(paths, batch_size=B, rank=2, world=2)
    with DenseStore.open("ids") as writable:
        with pytest.raises(InvalidArgumentError, match="readonly=True"):
            StreamDataset({"ids": writable}, batch_size=B)
    ds = StreamDataset(paths, batch_size=B)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        StepLoader(ds, batch_size=4)
    with pytest.raises(InvalidArgumentError):
        StepLoader(torch.utils.data.TensorDataset(torch.zeros(3)))


def test_numeric_arguments_are_checked_at_the_call_by_name(paths):
    for kw, name in ((dict(threads=-1), "threads"),
                     (dict(threads=0), "threads"),
                     (dict(threads=1.5), "threads"),
                     (dict(threads=True), "threads"),
                     (dict(threads=10**6), "threads"),
                     (dict(prefetch=0), "prefetch"),
                     (dict(prefetch=-1), "prefetch"),
                     (dict(prefetch=2**64), "prefetch"),
                     (dict(prefetch="2"), "prefetch"),
                     (dict(batch_size=0), "batch_size=0"),
                     (dict(batch_size=1.5), "batch_size"),
                     (dict(seed=-1), "seed"), (dict(seed=2**64), "seed"),
                     (dict(rank=-1, world=2), "rank=-1"),
                     (dict(rank=2, world=2), "rank=2"),
                     (dict(rank=0, world=0), "world=0"),
                     (dict(rank=0.0, world=1), "rank")):
        kw = dict({"batch_size": B}, **kw)
        with pytest.raises(InvalidArgumentError, match=name):
            StreamDataset({"ids": "ids"}, **kw)
    ds = StreamDataset({"ids": "ids"}, batch_size=B, seed=2)
    last = (2**63 - 1) // STEPS - 1
    for epoch in (-1, 1.5, True, "1", 2**64, 2**63, last + 1):
        with pytest.raises(InvalidArgumentError, match="epoch"):
            ds.set_epoch(epoch)
    assert ds.epoch == 0
    # The last epoch accepted is read, and the state after it loads.
    ds.set_epoch(np.uint64(last))
    got = [b["ids"] for b in StepLoader(ds)]
    assert len(got) == STEPS
    np.testing.assert_array_equal(
        got[-1], Sampler(N, B, "cyclic", seed=2).batch((last + 1) * STEPS - 1))
    again = StreamDataset({"ids": "ids"}, batch_size=B, seed=2)
    again.load_state_dict(ds.state_dict())
    assert again.state_dict()["step"] == (last + 1) * STEPS


class _InheritedLoader(torch.utils.data.IterableDataset):
    """The mistake the fork check is for: a loaderx DataLoader made in the
    training process and read in torch's worker processes."""

    def __init__(self, loader):
        super().__init__()
        self.loader = loader

    def __iter__(self):
        return iter(self.loader)


def test_a_loader_inherited_by_a_torch_worker_raises_in_the_trainer(paths):
    loader = DataLoader({"ids": DenseStore.open("ids", readonly=True)},
                        batch_size=B)
    naive = _InheritedLoader(loader)
    # timeout turns a worker that hangs into an error instead of a stuck
    # suite; the check raises long before it.
    batches = torch.utils.data.DataLoader(naive, batch_size=None,
                                          num_workers=1, timeout=30)
    with pytest.raises(StoreBusyError, match="do not survive fork"):
        next(iter(batches))
    # Sent to a "spawn" worker, the loader does not pickle.
    with pytest.raises(TypeError, match="loaderx: a DataLoader cannot be "
                       "pickled"):
        pickle.dumps(naive)
    loader.close()


def test_a_dataset_pickles_as_its_paths_and_parameters(paths):
    ds = StreamDataset({"ids": DenseStore.open("ids", readonly=True)},
                       batch_size=B, seed=4)
    ds.set_epoch(1)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.epoch == 1 and len(copy) == STEPS
    # The copy's epoch is its own: only workers share the original's.
    copy.set_epoch(2)
    assert ds.epoch == 1
    copy.set_epoch(1)
    np.testing.assert_array_equal(next(iter(StepLoader(copy)))["ids"],
                                  Sampler(N, B, "cyclic", seed=4).batch(STEPS))


_RANK = textwrap.dedent("""
    import sys
    import numpy as np
    import torch
    import torch.distributed as dist
    from loaderx.torch import StepLoader, StreamDataset

    rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + port,
                            rank=rank, world_size=2)
    for mode in ("cyclic", "sequential", "iid", "quasi"):
        ds = StreamDataset({"ids": "ids"}, batch_size=8, mode=mode, seed=5)
        assert (ds._rank, ds._world) == (rank, 2), (ds._rank, ds._world)
        steps = []
        for epoch in range(2):
            ds.set_epoch(epoch)
            for batch in StepLoader(ds, num_workers=2, timeout=60):
                parts = [torch.empty(8, dtype=torch.int64) for _ in range(2)]
                dist.all_gather(parts, batch["ids"])
                steps.append(torch.cat(parts).numpy())
        np.save(out + "." + mode + ".npy", np.stack(steps))
    dist.destroy_process_group()
""")


def test_two_ranks_see_each_global_batch_once_per_step(paths, tmp_path):
    """Two processes, torch.distributed over gloo on 127.0.0.1, two torch
    workers each, in every sampling mode: the global batch of every step,
    gathered from both ranks, is the one a single sampler of the whole
    batch draws."""
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    # The ranks import this very package, wherever the tests found it.
    package = os.path.dirname(os.path.dirname(loaderx.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [package, os.environ.get("PYTHONPATH")])))
    procs = [subprocess.Popen([sys.executable, str(script), str(r), port,
                               str(tmp_path / f"rank{r}")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(2)]
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=120)[0].decode())
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a rank did not finish in 120 s")
    for r, p in enumerate(procs):
        assert p.returncode == 0, f"rank {r}:\n{outputs[r]}"
    steps_per_epoch = N // 16
    for mode in ("cyclic", "sequential", "iid", "quasi"):
        # Each rank's half of a step is its own: together they are the
        # global batch that one sampler of the whole batch draws.
        whole = Sampler(N, 16, mode, seed=5)
        for r in range(2):
            seen = np.load(tmp_path / f"rank{r}.{mode}.npy")
            assert seen.shape == (2 * steps_per_epoch, 16)
            for step, batch in enumerate(seen):
                np.testing.assert_array_equal(batch, whole.batch(step))
            if mode == "iid":
                # Draws with replacement: records may repeat, and do.
                assert len(np.unique(seen)) < seen.size
                continue
            # cyclic, quasi and sequential: no record twice in an epoch.
            for epoch in range(2):
                part = seen[epoch * steps_per_epoch:
                            (epoch + 1) * steps_per_epoch]
                assert len(np.unique(part)) == part.size


@pytest.mark.parametrize("workers", [0, 2])
def test_padded_ragged_streams_come_as_one_tensor(paths, workers):
    ds = StreamDataset({"ids": "ids", "tokens": "tokens"}, batch_size=B,
                       seed=6, ragged="padded", pad=-1)
    sampler = Sampler(N, B, "cyclic", seed=6)
    loader = StepLoader(ds, num_workers=workers, timeout=60 if workers else 0)
    for k, batch in enumerate(loader):
        idx = sampler.batch(k)
        np.testing.assert_array_equal(batch["ids"].numpy(), idx)
        lengths = 1 + idx % 7
        np.testing.assert_array_equal(batch["tokens_lengths"].numpy(), lengths)
        tokens = batch["tokens"].numpy()
        assert tokens.shape == (B, lengths.max())
        for row, i in enumerate(idx):
            assert (tokens[row, :lengths[row]] == i).all()
            assert (tokens[row, lengths[row]:] == -1).all()
    assert k == STEPS - 1


@pytest.mark.parametrize("workers", [0, 2])
def test_a_fixed_length_gives_every_step_one_shape(paths, workers):
    ds = StreamDataset({"ids": "ids", "tokens": "tokens"}, batch_size=B,
                       seed=6, ragged="padded", pad=-1, length=9)
    sampler = Sampler(N, B, "cyclic", seed=6)
    loader = StepLoader(ds, num_workers=workers, timeout=60 if workers else 0)
    for k, batch in enumerate(loader):
        idx = sampler.batch(k)
        tokens = batch["tokens"].numpy()
        assert tokens.shape == (B, 9)
        lengths = 1 + idx % 7
        np.testing.assert_array_equal(batch["tokens_lengths"].numpy(), lengths)
        for row, i in enumerate(idx):
            assert (tokens[row, :lengths[row]] == i).all()
            assert (tokens[row, lengths[row]:] == -1).all()
    assert k == STEPS - 1


def train(batches):
    """A few steps of SGD on a linear model; its final weights."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3 * 4 * 4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    for images, ids in batches:
        x = images.reshape(len(images), -1).float()
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), ids.float())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("workers", [0, 2])
def test_a_model_trains_on_the_batches_the_sampler_draws(paths, workers):
    ds = StreamDataset({"images": "images", "ids": "ids"}, batch_size=B,
                       seed=8)
    got = train((b["images"], b["ids"]) for b in
                StepLoader(ds, num_workers=workers,
                           timeout=60 if workers else 0))
    # The same training on batches read directly at the sampler's steps.
    sampler = Sampler(N, B, "cyclic", seed=8)
    images = DenseStore.open("images", readonly=True)[:]
    want = train((torch.from_numpy(images[sampler.batch(k)]),
                  torch.from_numpy(sampler.batch(k))) for k in range(STEPS))
    assert torch.equal(got, want)
    untrained = train([])
    assert not torch.equal(got, untrained)


# ---- batches from torch workers, in the workers' shared buffers -----------

def mapped_buffer(t):
    """The inode of the loaderx batch buffer (a memfd) that this process
    maps at tensor t's memory, or None if t's memory is something else."""
    addr = t.data_ptr()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= addr < hi:
                name = " ".join(fields[5:])
                return int(fields[4]) if name.startswith(
                    "/memfd:loaderx-batch") else None
    return None


def worker_buffers(pid):
    """The inodes of the loaderx batch buffers that process pid holds."""
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        link = f"/proc/{pid}/fd/{fd}"
        try:
            if os.readlink(link).startswith("/memfd:loaderx-batch"):
                out.add(os.stat(link).st_ino)
        except OSError:
            pass
    return out


def test_a_worker_batch_is_the_buffer_the_worker_filled(paths):
    ds = StreamDataset(paths, batch_size=B, seed=7)
    loader = StepLoader(ds, num_workers=1, timeout=60)
    sampler = Sampler(N, B, "cyclic", seed=7)
    images = DenseStore.open("images", readonly=True)[:]
    seen = set()
    for epoch in range(2):
        ds.set_epoch(epoch)
        for k, batch in enumerate(loader):
            check_step(batch, epoch * STEPS + k, sampler, images)
            # Every array of the batch, the Ragged stream's too, lies in
            # one buffer, which the worker (kept from epoch to epoch)
            # holds: the training process maps what the worker filled.
            ino = mapped_buffer(batch["images"])
            assert ino is not None
            assert mapped_buffer(batch["ids"]) == ino
            assert {mapped_buffer(t) for t in batch["tokens"]} == {ino}
            pid = loader._iterator._workers[0].pid
            assert ino in worker_buffers(pid)
            seen.add(ino)
            del batch
    # Let go at once, the batches come back in the buffers torch keeps in
    # flight (prefetch_factor 2) and the two the loop may hold.
    assert len(seen) <= 4


@pytest.mark.parametrize("workers", [1, 2])
def test_what_the_trainer_holds_of_a_batch_keeps_its_records(paths, workers):
    ds = StreamDataset({"ids": "ids", "images": "images"}, batch_size=B,
                       seed=3)
    loader = StepLoader(ds, num_workers=workers, timeout=60)
    sampler = Sampler(N, B, "cyclic", seed=3)
    images = DenseStore.open("images", readonly=True)[:]
    held = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        for k, batch in enumerate(loader):
            step = epoch * STEPS + k
            # Whole batches, and pieces that outlive the batch's tensors:
            # a view, a detached tensor, a NumPy view, a reshaped tensor.
            kind = step % 5
            if kind == 0:
                held.append((step, "batch", batch))
            elif kind == 1:
                held.append((step, "view", batch["ids"][3:]))
            elif kind == 2:
                held.append((step, "detached", batch["images"].detach()))
            elif kind == 3:
                held.append((step, "numpy", batch["images"].numpy()[:, 1]))
            del batch
    assert len(held) > 4 * workers
    for step, kind, got in held:
        idx = sampler.batch(step)
        if kind == "batch":
            np.testing.assert_array_equal(got["ids"].numpy(), idx)
            np.testing.assert_array_equal(got["images"].numpy(), images[idx])
        elif kind == "view":
            np.testing.assert_array_equal(got.numpy(), idx[3:])
        elif kind == "detached":
            np.testing.assert_array_equal(got.numpy(), images[idx])
        else:
            np.testing.assert_array_equal(got, images[idx][:, 1])


def test_a_transform_s_views_stay_in_the_buffer_and_new_arrays_copy(paths):
    def transform(b):
        return {"even": b["ids"][::2],
                "sums": b["images"].astype(np.int64).sum(axis=(1, 2, 3)),
                "pair": (torch.from_numpy(b["images"]), b["ids"][1::3])}

    ds = StreamDataset({"ids": "ids", "images": "images"}, batch_size=B,
                       seed=4, transform=transform)
    sampler = Sampler(N, B, "cyclic", seed=4)
    images = DenseStore.open("images", readonly=True)[:]
    for k, batch in enumerate(StepLoader(ds, num_workers=1, timeout=60)):
        idx = sampler.batch(k)
        np.testing.assert_array_equal(batch["even"].numpy(), idx[::2])
        np.testing.assert_array_equal(
            batch["sums"].numpy(),
            images[idx].astype(np.int64).sum(axis=(1, 2, 3)))
        # A tuple comes as a list, as torch's default_convert makes it.
        assert isinstance(batch["pair"], list)
        np.testing.assert_array_equal(batch["pair"][0].numpy(), images[idx])
        np.testing.assert_array_equal(batch["pair"][1].numpy(), idx[1::3])
        ino = mapped_buffer(batch["pair"][0])
        assert ino is not None
        assert mapped_buffer(batch["even"]) == ino
        assert mapped_buffer(batch["pair"][1]) == ino
        # A new array is torch's to copy, as from any dataset.
        assert mapped_buffer(batch["sums"]) is None
    assert k == STEPS - 1


@pytest.mark.parametrize("layout", ["padded", "packed_flat"])
def test_dense_ragged_streams_from_a_worker_share_the_buffer(paths, layout):
    ds = StreamDataset({"ids": "ids", "tokens": "tokens"}, batch_size=B,
                       seed=6, ragged=layout)
    sampler = Sampler(N, B, "cyclic", seed=6)
    for k, batch in enumerate(StepLoader(ds, num_workers=1, timeout=60)):
        idx = sampler.batch(k)
        want = np.concatenate([np.full(1 + i % 7, i) for i in idx])
        tokens = batch["tokens"].numpy()
        if layout == "padded":
            lengths = batch["tokens_lengths"].numpy()
            tokens = np.concatenate([r[:n] for r, n in zip(tokens, lengths)])
        np.testing.assert_array_equal(tokens, want)
        names = [n for n in batch if n.startswith("tokens")]
        assert len(names) == (2 if layout == "padded" else 3)
        assert len({mapped_buffer(batch[n]) for n in names + ["ids"]}) == 1
        assert mapped_buffer(batch["ids"]) is not None


@pytest.mark.parametrize("pin", [False, True])
def test_share_false_and_pin_memory_give_the_same_batches(paths, pin):
    import warnings
    sampler = Sampler(N, B, "cyclic", seed=7)
    images = DenseStore.open("images", readonly=True)[:]
    ds = StreamDataset(paths, batch_size=B, seed=7, share=pin)
    with warnings.catch_warnings():
        # Without a CUDA device torch says it does not pin.
        warnings.simplefilter("ignore")
        loader = StepLoader(ds, num_workers=2, timeout=60, pin_memory=pin)
        for k, batch in enumerate(loader):
            check_step(batch, k, sampler, images)
            if not pin:
                assert mapped_buffer(batch["images"]) is None
            elif torch.cuda.is_available():
                assert batch["images"].is_pinned()
    assert k == STEPS - 1


def test_one_loader_serves_every_epoch_without_workers(paths):
    ds = StreamDataset({"ids": "ids"}, batch_size=B, seed=7)
    loader = StepLoader(ds)
    sampler = Sampler(N, B, "cyclic", seed=7)
    for epoch in range(2):
        ds.set_epoch(epoch)
        got = [b["ids"].numpy().copy() for b in loader]
        if epoch == 0:
            kept = ds._loader
        assert ds._loader is kept
        for k, ids in enumerate(got):
            np.testing.assert_array_equal(ids, sampler.batch(epoch * STEPS
                                                             + k))
    # A second iteration while one is under way reads a loader of its own;
    # the first goes on where it was.
    ds.set_epoch(2)
    first = iter(loader)
    np.testing.assert_array_equal(next(first)["ids"].numpy(),
                                  sampler.batch(2 * STEPS))
    second = iter(StepLoader(ds))
    for k in range(3):
        np.testing.assert_array_equal(next(second)["ids"].numpy(),
                                      sampler.batch(2 * STEPS + k))
    np.testing.assert_array_equal(next(first)["ids"].numpy(),
                                  sampler.batch(2 * STEPS + 1))
    del first, second
    assert ds._loader is kept
    ds.close()
    assert ds._loader is None
    ds.set_epoch(3)
    np.testing.assert_array_equal(next(iter(loader))["ids"].numpy(),
                                  sampler.batch(3 * STEPS))


def test_views_the_worker_or_a_child_holds_keep_their_records(paths):
    held = []

    def transform(b):
        # A transform that keeps views of the last batches (a mixup
        # would): the worker must not gather into them while it does.
        for view, copy in held:
            np.testing.assert_array_equal(view, copy)
        held[:] = held[-5:] + [(b["ids"], b["ids"].copy())]
        return b

    ds = StreamDataset({"ids": "ids"}, batch_size=B, seed=5,
                       transform=transform)
    sampler = Sampler(N, B, "cyclic", seed=5)
    loader = StepLoader(ds, num_workers=1, timeout=60)
    batches = iter(loader)
    first, second, third = next(batches), next(batches), next(batches)
    # A child of fork() that lets its copies of batches go gives none of
    # the parent's back.
    pid = os.fork()
    if pid == 0:
        from loaderx.torch import _sweep
        del first, second
        _sweep()
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    # share_memory_() moves a tensor to new memory; a NumPy view made
    # before still reads the old, which (while the loader keeps its
    # mapping) stays the batch's as long as the tensor lives.
    view = second["ids"].numpy()
    second["ids"].share_memory_()
    moved = second["ids"]
    del second, third
    for k, batch in enumerate(batches, 3):
        np.testing.assert_array_equal(batch["ids"].numpy(), sampler.batch(k))
    np.testing.assert_array_equal(first["ids"].numpy(), sampler.batch(0))
    np.testing.assert_array_equal(view, sampler.batch(1))
    np.testing.assert_array_equal(moved.numpy(), sampler.batch(1))


def test_a_collate_fn_and_a_bare_torch_loader_get_plain_batches(paths):
    sampler = Sampler(N, B, "cyclic", seed=7)
    ds = StreamDataset({"ids": "ids"}, batch_size=B, seed=7)

    def collate(batch):
        # Runs in the worker, on the dataset's own dict of arrays.
        return {"ids": torch.as_tensor(batch["ids"]),
                "kind": type(batch["ids"]).__name__}

    for loader, kind in (
            (StepLoader(ds, num_workers=1, timeout=60, collate_fn=collate),
             "ndarray"),
            (torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1,
                                         timeout=60), None)):
        for k, batch in enumerate(loader):
            np.testing.assert_array_equal(batch["ids"].numpy(),
                                          sampler.batch(k))
            assert batch.get("kind") == kind
            assert mapped_buffer(batch["ids"]) is None
        assert k == STEPS - 1


def test_a_callers_worker_init_fn_runs_and_new_workers_share(paths):
    def init(worker_id):
        open(f"init-{os.getpid()}-{worker_id}", "w").close()

    ds = StreamDataset({"ids": "ids"}, batch_size=B, seed=7)
    sampler = Sampler(N, B, "cyclic", seed=7)
    loader = StepLoader(ds, num_workers=1, timeout=60, worker_init_fn=init,
                        persistent_workers=False)
    kept = None
    for epoch in range(3):
        ds.set_epoch(epoch)
        for k, batch in enumerate(loader):
            np.testing.assert_array_equal(batch["ids"].numpy(),
                                          sampler.batch(epoch * STEPS + k))
            assert mapped_buffer(batch["ids"]) is not None
        # The last batch of an epoch, held into the next, with new workers.
        if kept is not None:
            np.testing.assert_array_equal(kept["ids"].numpy(),
                                          sampler.batch(epoch * STEPS - 1))
        kept = batch
        del batch
    assert len([f for f in os.listdir() if f.startswith("init-")]) == 3
    # A collate_fn set after the loader was made gets the plain batch.
    loader.collate_fn = lambda b: {"ids": torch.as_tensor(b["ids"])}
    ds.set_epoch(3)
    batch = next(iter(loader))
    np.testing.assert_array_equal(batch["ids"].numpy(),
                                  sampler.batch(3 * STEPS))
    assert mapped_buffer(batch["ids"]) is None


def test_past_its_cells_a_worker_hands_batches_to_torch(paths):
    from loaderx.torch import _CELLS
    ds = StreamDataset(paths, batch_size=B, seed=2)
    sampler = Sampler(N, B, "cyclic", seed=2)
    images = DenseStore.open("images", readonly=True)[:]
    loader = StepLoader(ds, num_workers=1, timeout=60)
    held = []
    epochs = -(-(_CELLS + 8) // STEPS)
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        held.extend(loader)
    # Every batch held: the first _CELLS in buffers of the worker, the
    # rest read as the stores give them and copied by torch.
    shared = [mapped_buffer(b["images"]) is not None for b in held]
    assert shared == [True] * _CELLS + [False] * (len(held) - _CELLS)
    for step, batch in enumerate(held):
        check_step(batch, step, sampler, images)
