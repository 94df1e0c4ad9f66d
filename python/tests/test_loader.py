"""DataLoader: its batches against direct gathers at the sampler's indices,
resumption, the transform on worker threads, and batch lifetimes."""

import copy
import gc
import json
import os
import pickle
import select
import signal
import threading

import numpy as np
import pytest

from loaderx import (InvalidArgumentError, StoreBusyError,
                     StoreNotFoundError)
from loaderx.dataloader import DataLoader
from loaderx.zrecord import DenseStore, RaggedStore
from loaderx.zsampler import Sampler

N = 240


@pytest.fixture
def streams(rng):
    """Three streams of N records: images, ids (record i holds i), tokens."""
    images = rng.integers(0, 255, size=(N, 3, 8, 8), dtype=np.uint8)
    ids = np.arange(N, dtype=np.int64)
    tokens = [rng.integers(0, 50000, size=1 + (i * 7) % 23).astype(np.int32)
              for i in range(N)]
    with DenseStore.create("images", np.uint8, (3, 8, 8), codec="zstd") as s:
        s.append(images)
    with DenseStore.create("ids", np.int64, codec="raw") as s:
        s.append(ids)
    with RaggedStore.create("tokens", np.int32, codec="zstd") as s:
        s.append(tokens)
    stores = {"images": DenseStore.open("images", readonly=True),
              "ids": DenseStore.open("ids", readonly=True),
              "tokens": RaggedStore.open("tokens", readonly=True)}
    return stores


def check_batch(batch, stores, indices):
    """batch holds every stream gathered directly at indices."""
    assert list(batch) == ["images", "ids", "tokens"]
    np.testing.assert_array_equal(batch["ids"], indices)
    np.testing.assert_array_equal(batch["images"], stores["images"][indices])
    want = stores["tokens"][indices]
    assert isinstance(batch["tokens"], list) and len(batch["tokens"]) == len(want)
    for g, w in zip(batch["tokens"], want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("mode", list(Sampler.Mode))
def test_batches_equal_direct_gathers(streams, mode):
    loader = DataLoader(streams, batch_size=32, mode=mode, seed=11,
                        prefetch=3, workers=2)
    sampler = Sampler(N, 32, mode, seed=11)
    for _ in range(12):
        check_batch(next(loader), streams, sampler.next())
    assert loader.step == 12
    loader.close()


def test_resuming_at_a_step_continues_the_same_sequence(streams):
    first = DataLoader(streams, batch_size=24, seed=4)
    seen = [next(first)["ids"].copy() for _ in range(10)]
    resume_at = first.step - 4
    first.close()
    again = DataLoader(streams, batch_size=24, seed=4, start_step=resume_at)
    assert again.step == resume_at
    sampler = again.sampler
    for k in range(6):
        batch = next(again)
        want = sampler.batch(resume_at + k)
        if resume_at + k < 10:
            np.testing.assert_array_equal(batch["ids"], seen[resume_at + k])
        check_batch(batch, streams, want)


def test_transform_runs_on_worker_threads_and_its_result_is_yielded(streams):
    threads = set()

    def collate(batch):
        threads.add(threading.get_ident())
        lengths = np.array([len(t) for t in batch["tokens"]])
        padded = np.zeros((len(lengths), lengths.max()), np.int32)
        for row, t in enumerate(batch["tokens"]):
            padded[row, :len(t)] = t
        return {"x": batch["images"].astype(np.float32) / 255,
                "ids": batch["ids"], "tokens": padded, "lengths": lengths}

    loader = DataLoader(streams, batch_size=16, seed=2, transform=collate,
                        workers=3, prefetch=4)
    sampler = loader.sampler
    for _ in range(10):
        out = next(loader)
        idx = sampler.next()
        np.testing.assert_array_equal(out["ids"], idx)
        np.testing.assert_allclose(out["x"], streams["images"][idx] / 255,
                                   rtol=1e-6)
        for row, want in enumerate(streams["tokens"][idx]):
            assert out["lengths"][row] == len(want)
            np.testing.assert_array_equal(out["tokens"][row, :len(want)], want)
    assert threads and threading.get_ident() not in threads
    loader.close()


def test_transform_error_is_raised_for_its_step_and_the_loader_goes_on(streams):
    def picky(batch):
        if (batch["ids"] % 2 == 0).all():
            return batch
        raise ValueError(f"odd id in {batch['ids'].tolist()}")

    # SEQUENTIAL with batch 1: step k holds record k.
    loader = DataLoader({"ids": streams["ids"]}, batch_size=1,
                        mode="sequential", transform=picky)
    assert next(loader)["ids"].tolist() == [0]
    with pytest.raises(ValueError, match=r"odd id in \[1\]"):
        next(loader)
    assert next(loader)["ids"].tolist() == [2]
    assert loader.step == 3


def test_held_batches_stay_valid_while_the_loader_goes_on(streams):
    loader = DataLoader(streams, batch_size=8, seed=6, prefetch=2)
    sampler = loader.sampler
    held = [(next(loader), sampler.next()) for _ in range(25)]
    gc.collect()
    for batch, idx in held:
        check_batch(batch, streams, idx)
    # One array of a batch keeps that batch alive on its own.
    images = [b["images"] for b, _ in held]
    del held
    gc.collect()
    for _ in range(10):
        next(loader)
    sampler2 = Sampler(N, 8, Sampler.Mode.CYCLIC, seed=6)
    for k, img in enumerate(images):
        np.testing.assert_array_equal(img, streams["images"][sampler2.batch(k)])


def test_closed_loader_keeps_handed_out_batches_and_frees_the_stores(streams):
    loader = DataLoader(streams, batch_size=8, seed=1)
    batch = next(loader)
    idx = Sampler(N, 8, Sampler.Mode.CYCLIC, seed=1).batch(0)
    loader.close()
    assert loader.closed
    with pytest.raises(InvalidArgumentError, match="closed"):
        next(loader)
    check_batch(batch, streams, idx)
    del batch
    gc.collect()
    for s in streams.values():
        s.close()


def test_loader_can_be_dropped_while_a_transform_references_it(streams):
    # A transform that refers to its own loader makes a reference cycle;
    # the collector must be able to end it without hanging.
    box = {}

    def tf(batch):
        return box.get("answer", len(batch["ids"]))

    box["loader"] = DataLoader({"ids": streams["ids"]}, batch_size=4,
                               transform=tf, workers=2)
    assert next(box["loader"]) == 4
    box.clear()
    gc.collect()
    streams["ids"].close()


def test_sharded_loaders_split_the_global_batch(streams):
    world = 3
    loaders = [DataLoader({"ids": streams["ids"]}, batch_size=10, seed=8,
                          rank=r, world=world) for r in range(world)]
    whole = Sampler(N, 30, Sampler.Mode.CYCLIC, seed=8)
    for step in range(5):
        joined = np.concatenate([next(ld)["ids"] for ld in loaders])
        np.testing.assert_array_equal(joined, whole.batch(step))
    for ld in loaders:
        ld.close()


@pytest.mark.parametrize("kwargs", [
    {"batch_size": N + 1}, {"batch_size": 0}, {"prefetch": 0},
    {"workers": 0}, {"mode": "shuffled"}, {"rank": 2, "world": 2},
    {"transform": 3},
])
def test_bad_arguments_raise(streams, kwargs):
    args = {"batch_size": 4}
    args.update(kwargs)
    with pytest.raises(InvalidArgumentError):
        DataLoader(streams, **args)
    # A refused loader leaves the stores free.
    streams["ids"].close()


def test_streams_must_be_a_dict_of_stores(streams):
    with pytest.raises(InvalidArgumentError):
        DataLoader({}, batch_size=1)
    with pytest.raises(InvalidArgumentError):
        DataLoader([streams["ids"]], batch_size=1)
    with pytest.raises(InvalidArgumentError):
        DataLoader({"a": np.zeros(10)}, batch_size=1)


def test_advancing_the_loader_from_its_own_transform_raises(streams):
    box = {}
    ready = threading.Event()

    def reenter(batch):
        # Only step 1's transform advances the loader, once the loader is
        # in the box: the worker prepares steps ahead of the consumer, so
        # which steps run while the box is full is not for the test to
        # race on.
        if batch["ids"].tolist() == [1]:
            assert ready.wait(10)
            next(box["loader"])
        return batch

    loader = DataLoader({"ids": streams["ids"]}, batch_size=1,
                        mode="sequential", transform=reenter, prefetch=1)
    box["loader"] = loader
    ready.set()
    assert next(loader)["ids"].tolist() == [0]
    with pytest.raises(InvalidArgumentError, match="inside a transform"):
        next(loader)
    assert next(loader)["ids"].tolist() == [2]
    loader.close()


# ---- processes, pickling and the loader's conveniences -----------------

def test_a_loader_used_in_a_child_of_fork_raises_at_once(streams):
    loader = DataLoader({"ids": streams["ids"]}, batch_size=4, prefetch=2)
    first = next(loader)["ids"].copy()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        # The child reports what next() did; prefetched batches are in
        # its copy of the loader, but none may be handed out there.
        os.close(r)
        try:
            next(loader)
            msg = b"no error"
        except StoreBusyError as e:
            msg = ("StoreBusyError: " + str(e)).encode()
        except BaseException as e:
            msg = repr(e).encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    # A child that hung would never write: the parent gives up after a
    # generous delay instead of hanging the suite.
    ready, _, _ = select.select([r], [], [], 30)
    msg = os.read(r, 4096).decode() if ready else "no answer"
    os.close(r)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert msg.startswith("StoreBusyError"), msg
    assert f"created in process {os.getpid()}" in msg
    assert "fork()" in msg
    # The parent's loader goes on where it stood.
    sampler = Sampler(N, 4, Sampler.Mode.CYCLIC, seed=0)
    np.testing.assert_array_equal(first, sampler.batch(0))
    np.testing.assert_array_equal(next(loader)["ids"], sampler.batch(1))
    loader.close()


def test_a_loader_cannot_be_pickled_or_copied(streams):
    loader = DataLoader({"ids": streams["ids"]}, batch_size=4)
    for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="loaderx: a DataLoader cannot "
                           "be pickled"):
            attempt(loader)
    loader.close()


def test_paths_are_opened_read_only_and_closed_with_the_loader(streams):
    for s in streams.values():
        s.close()
    loader = DataLoader({"ids": "ids", "tokens": "tokens"}, batch_size=6,
                        seed=3)
    assert all(s.readonly for s in loader.streams.values())
    sampler = Sampler(N, 6, Sampler.Mode.CYCLIC, seed=3)
    with RaggedStore.open("tokens", readonly=True) as tokens:
        for step in range(3):
            batch = next(loader)
            idx = sampler.batch(step)
            np.testing.assert_array_equal(batch["ids"], idx)
            for got, want in zip(batch["tokens"], tokens[idx]):
                np.testing.assert_array_equal(got, want)
    # The loader goes once no array of its batches is held.
    del batch, got, want
    loader.close()
    gc.collect()
    # Closed with the loader: a writer may have the stores again.
    DenseStore.open("ids").close()
    RaggedStore.open("tokens").close()


def test_a_path_that_holds_no_store_raises_and_opens_nothing(streams):
    streams["ids"].close()
    with pytest.raises(StoreNotFoundError):
        DataLoader({"ids": "ids", "none": "missing"}, batch_size=2)
    DenseStore.open("ids").close()


def test_len_is_the_steps_of_a_cycle_and_epoch_counts_cycles(streams):
    loader = DataLoader({"ids": streams["ids"]}, batch_size=32, seed=5)
    assert len(loader) == N // 32 == 7
    seen = []
    for step in range(7):
        assert loader.epoch == 0
        seen.append(next(loader)["ids"].copy())
    assert loader.epoch == 1
    # One cycle reads 7 * 32 distinct records.
    assert len(np.unique(np.concatenate(seen))) == 7 * 32
    loader.close()
    sharded = DataLoader({"ids": streams["ids"]}, batch_size=10, rank=1,
                         world=3, start_step=16)
    assert len(sharded) == N // 30 == 8
    assert sharded.epoch == 2
    sharded.close()


def test_load_state_dict_continues_where_the_state_was_saved(streams):
    loader = DataLoader(streams, batch_size=8, seed=9, workers=2)
    for _ in range(5):
        next(loader)
    state = loader.state_dict()
    assert state["step"] == 5 and state["epoch"] == 0
    assert json.loads(json.dumps(state)) == state
    after = [next(loader) for _ in range(4)]
    other = DataLoader(streams, batch_size=8, seed=9)
    other.load_state_dict(state)
    assert other.step == 5
    sampler = Sampler(N, 8, Sampler.Mode.CYCLIC, seed=9)
    for k, want in enumerate(after):
        got = next(other)
        np.testing.assert_array_equal(got["ids"], want["ids"])
        check_batch(got, streams, sampler.batch(5 + k))
    # The loader that saved the state can go back to it too.
    loader.load_state_dict(state)
    np.testing.assert_array_equal(next(loader)["ids"], after[0]["ids"])
    loader.close()
    other.close()


@pytest.mark.parametrize("change", [{"seed": 10}, {"batch_size": 4},
                                    {"world": 2}, {"mode": "IID"},
                                    {"step": -1}])
def test_a_state_of_other_sampling_is_refused(streams, change):
    loader = DataLoader({"ids": streams["ids"]}, batch_size=8, seed=9)
    state = loader.state_dict()
    state.update(change)
    with pytest.raises(InvalidArgumentError):
        loader.load_state_dict(state)
    # Left as it was.
    np.testing.assert_array_equal(next(loader)["ids"],
                                  Sampler(N, 8, "cyclic", seed=9).batch(0))
    loader.close()


def test_sampler_indices_are_int64(streams):
    loader = DataLoader({"ids": streams["ids"]}, batch_size=8)
    idx = loader.sampler.next()
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(next(loader)["ids"], idx)
    loader.close()


def test_a_second_writable_open_says_to_open_read_only(streams):
    with pytest.raises(StoreBusyError, match="open it with readonly=True"):
        DenseStore.open("ids")
    DenseStore.open("ids", readonly=True).close()


def test_quasi_block_and_window_pass_through(streams):
    loader = DataLoader(streams, batch_size=16, mode="quasi", seed=4,
                        block=8, window=3)
    sampler = Sampler(N, 16, "quasi", seed=4, block=8, window=3)
    for step in range(20):
        batch = next(loader)
        check_batch(batch, streams, sampler.batch(step))
    state = loader.state_dict()
    assert (state["block"], state["window"]) == (8, 3)
    assert (loader.sampler.block, loader.sampler.window) == (8, 3)
    # A state saved with another block means other records.
    other = DataLoader(streams, batch_size=16, mode="quasi", seed=4, block=4,
                       window=3)
    with pytest.raises(InvalidArgumentError, match="block"):
        other.load_state_dict(state)
    other.close()
    resumed = DataLoader(streams, batch_size=16, mode="quasi", seed=4,
                         block=8, window=3)
    resumed.load_state_dict(state)
    check_batch(next(resumed), streams, sampler.batch(20))
    resumed.close()
    loader.close()
    with pytest.raises(InvalidArgumentError, match="QUASI"):
        DataLoader(streams, batch_size=16, mode="cyclic", window=3)
