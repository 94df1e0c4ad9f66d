#!/usr/bin/python3
"""The Python benchmark: loaderx's binding against the C library, NumPy,
h5py, lmdb and PyTorch, on dense vision records, in one run.

    bench/pybench.py [--build DIR] [--out FILE] [options]

writes doc/python-benchmarks.md (to FILE, or stdout). DIR is the build
tree (default: the source tree), where `make bench` has built
lib/libloaderx.so and bench/pygather.

The workload is batch 256 of uint8 (3, 224, 224) records, 147 KiB each,
drawn uniformly at random with repeats from a store of --records records.
Every backend gets the same source records and the same batch plan. Every
path's bytes are checked against the source before anything is timed.

Three comparisons:

- Store gather. The binding's ``ds[idx]`` (a new array per batch, as a
  program gets it) against bench/pygather, a C program that makes the same
  zr_gather_dense calls into one reused buffer, the library's own rate;
  the library called through cffi into a reused buffer; NumPy's memory map
  (fancy indexing, and np.take into a reused buffer); h5py with one chunk
  per record (read_direct into a reused buffer); the lmdb module, key =
  the record's index as 8 big-endian bytes (copied from the zero-copy
  buffers into a reused array). The backends take turns within each round
  and the rounds are repeated, so that a neighbour's load falls on all of
  them alike; each rate is the plan's bytes over the median round.
- Loaders. loaderx.dataloader.DataLoader against torch.utils.data's
  DataLoader over a NumPy memory map, both with 2 workers and 4 batches in
  flight, against the baselines a careful user tries first (torch with
  num_workers=0 and one fancy index of the memory map per batch, a plain
  NumPy fancy-index loop) and against loaderx.torch's StreamDataset with
  0 and 2 torch workers, each in a fresh process of its own. This process samples the
  resident set of the loader's whole process tree (the process and every
  descendant, found in /proc) every 20 ms and reports its peak; the peak
  of the tree's summed proportional set size (Pss, which shares a page
  among the processes mapping it) is sampled every 200 ms beside it.
  Every loader runs --loader-rounds times, the loaders taking turns, and
  a target's ratio is the median of its rounds' ratios. The loaders'
  CPU time per batch is reported beside their rates. Small-record sets
  (4 KiB and 32 KiB records) compare mmap=False with the NumPy loop.
- Ragged batches, packed. zr_gather_ragged_dense's packed layouts,
  gathered in place, against the two steps a C caller takes
  (zr_gather_ragged_alloc, then zr_ragged_densify), on token sequences
  and on images of mixed sizes.

On a shared machine, run it when no other benchmark runs (under the
machine's benchmark lock, if it has one).
"""

import argparse
import json
import mmap
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import numpy as np

ITEM = (3, 224, 224)
WIDTH = int(np.prod(ITEM))
MIB = float(1 << 20)
# The loaders, each run in a process of its own: "loaderx-nomap" and
# "torch" are the target's pair, the others show the neighbouring settings.
LOADERS = ("loaderx-nomap", "loaderx", "loaderx-prefetch2", "torch",
           "torch-batched", "torch-batched-w0", "numpy-loop",
           "loaderx.torch-w0", "loaderx.torch-w2")
# The small-record workloads of the mmap=False target: records under
# 64 KiB, which a mapped handle copies out of its mapping and an unmapped
# one reads with one pread each. Each is a set of stores of its own,
# uint8 records of SMALL[k] bytes, about as many bytes as the main store.
SMALL = {"4k": 4096, "32k": 32768}
SMALL_LOADERS = tuple(f"{kind}@{tag}" for tag in SMALL
                      for kind in ("loaderx-nomap", "loaderx", "numpy-loop"))
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---- the source records and the stores --------------------------------------


def make_source(n, seed, item=ITEM):
    """n images whose bytes are random, and the labels, which are the
    records' own indices so that a loader's batch says which records it
    holds."""
    rng = np.random.default_rng(seed)
    images = np.empty((n,) + item, dtype=np.uint8)
    for s in range(0, n, 256):
        images[s:s + 256] = rng.integers(0, 256, size=images[s:s + 256].shape,
                                         dtype=np.uint8)
    return images, np.arange(n, dtype=np.int64)


def record_crcs(images):
    return np.array([zlib.crc32(r) for r in images.reshape(len(images), -1)],
                    dtype=np.uint32)


def lmdb_key(i):
    return int(i).to_bytes(8, "big")


def write_stores(work, images, labels):
    """Write every backend's copy of the source; return their sizes."""
    import h5py
    import lmdb
    from loaderx.zrecord import DenseStore

    sizes = {}
    zdir = os.path.join(work, "zrecord")
    os.mkdir(zdir)
    with DenseStore.create(os.path.join(zdir, "images"), np.uint8, ITEM,
                           codec="raw") as ds:
        for s in range(0, len(images), 256):
            ds.append(images[s:s + 256])
        ds.sync()
    with DenseStore.create(os.path.join(zdir, "labels"), np.int64,
                           codec="raw") as ds:
        ds.append(labels)
        ds.sync()
    sizes["zrecord"] = disk_bytes(os.path.join(zdir, "images"))

    np.save(os.path.join(work, "images.npy"), images)
    np.save(os.path.join(work, "labels.npy"), labels)
    sizes["npy"] = disk_bytes(os.path.join(work, "images.npy"))

    h5 = os.path.join(work, "images.h5")
    with h5py.File(h5, "w") as f:
        d = f.create_dataset("images", shape=images.shape, dtype=np.uint8,
                             chunks=(1,) + ITEM)
        for s in range(0, len(images), 256):
            d[s:s + 256] = images[s:s + 256]
    sizes["h5"] = disk_bytes(h5)

    ldir = os.path.join(work, "lmdb")
    env = lmdb.open(ldir, map_size=2 * images.nbytes + (64 << 20),
                    sync=False, metasync=False)
    for s in range(0, len(images), 256):
        with env.begin(write=True) as txn:
            for i in range(s, min(s + 256, len(images))):
                txn.put(lmdb_key(i), images[i].tobytes())
    env.sync(True)
    env.close()
    sizes["lmdb"] = disk_bytes(ldir)
    return sizes


def write_small(args, work, tag):
    """The stores of a small-record set, for the loaders only: the
    records and labels as raw DenseStores and as .npy files, and the
    records' CRCs."""
    work = os.path.join(work, "small" + tag)
    os.mkdir(work)
    from loaderx.zrecord import DenseStore
    item = (SMALL[tag],)
    images, labels = make_source(small_records(args, tag), seed=5, item=item)
    zdir = os.path.join(work, "zrecord")
    os.mkdir(zdir)
    for name, data, shape in (("images", images, item), ("labels", labels, ())):
        with DenseStore.create(os.path.join(zdir, name), data.dtype, shape,
                               codec="raw") as ds:
            for s in range(0, len(data), 4096):
                ds.append(data[s:s + 4096])
            ds.sync()
        np.save(os.path.join(work, name + ".npy"), data)
    np.save(os.path.join(work, "crcs.npy"), record_crcs(images))
    # Read every file once, so that the timed loaders find the page cache
    # warm (as the main set's gather checks leave it).
    for root, _, files in os.walk(work):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass


def disk_bytes(path):
    """Allocated bytes of a file or of every file under a folder."""
    if os.path.isfile(path):
        return os.stat(path).st_blocks * 512
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512
               for d, _, files in os.walk(path) for f in files)


# ---- the store gather ------------------------------------------------------


class CGather:
    """bench/pygather, the library's own gather, driven over its stdin."""

    def __init__(self, exe, store, plan_path, batch):
        self.proc = subprocess.Popen([exe, store, plan_path, str(batch)],
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        first = self.proc.stdout.readline().split()
        if not first or first[0] != "ready":
            raise SystemExit(f"pybench: {exe} did not start: {first}")

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().strip()
        if reply.startswith("error") or not reply:
            raise SystemExit(f"pybench: pygather: {reply or 'no reply'}")
        return reply

    def run(self, first, count):
        """Gather batches first .. first+count-1; their seconds each."""
        return [float(ns) / 1e9
                for ns in self.ask(f"run {first} {count}").split()]

    def dump(self, k, path):
        self.ask(f"dump {k} {path}")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def gather_readers(work, batch):
    """name -> (what it is, function(idx) -> array of the batch)."""
    import h5py
    import lmdb
    from loaderx._lib import ffi, lib
    from loaderx.zrecord import DenseStore

    ds = DenseStore.open(os.path.join(work, "zrecord", "images"), readonly=True)
    reused = np.empty((batch,) + ITEM, dtype=np.uint8)
    reused_c = ffi.from_buffer(reused, require_writable=True)

    def binding(idx):
        return ds[idx]

    def cffi_direct(idx):
        u = np.ascontiguousarray(idx, dtype=np.uint64)
        rc = lib.zr_gather_dense(ds._ptr, ffi.from_buffer("uint64_t[]", u),
                                 u.size, reused_c)
        if rc != 0:
            raise SystemExit(f"pybench: zr_gather_dense: {rc}")
        return reused

    mm = np.load(os.path.join(work, "images.npy"), mmap_mode="r")

    def npy_fancy(idx):
        return mm[idx]

    def npy_take(idx):
        return np.take(mm, idx, axis=0, out=reused)

    h5 = h5py.File(os.path.join(work, "images.h5"), "r")["images"]

    def hdf5(idx):
        for k, i in enumerate(idx):
            h5.read_direct(reused, np.s_[int(i)], np.s_[k])
        return reused

    env = lmdb.open(os.path.join(work, "lmdb"), readonly=True, lock=False)
    flat = reused.reshape(batch, -1)

    def lmdb_get(idx):
        with env.begin(buffers=True) as txn:
            for k, i in enumerate(idx):
                flat[k] = np.frombuffer(txn.get(lmdb_key(i)), dtype=np.uint8)
        return reused

    return {
        "loaderx ds[idx]": ("the binding's indexing: a new array per batch",
                            binding),
        "loaderx via cffi": ("zr_gather_dense called through cffi into one "
                             "reused array", cffi_direct),
        "npy mmap, fancy index": ("np.load(mmap_mode='r')[idx]: a new array "
                                  "per batch", npy_fancy),
        "npy mmap, np.take out=": ("np.take(mmap, idx, axis=0, out=): one "
                                   "reused array", npy_take),
        "h5py, chunk per record": ("Dataset.read_direct per record into one "
                                   "reused array", hdf5),
        "lmdb, key = index": ("txn.get(key) zero-copy, copied into one reused "
                              "array", lmdb_get),
    }


def check_batch(name, got, want):
    got = np.asarray(got)
    if got.dtype != want.dtype or got.shape != want.shape \
            or not np.array_equal(got, want):
        raise SystemExit(f"pybench: {name} returned wrong records")


def bench_gather(args, work, images, plan):
    plan_path = os.path.join(work, "plan.u64")
    np.ascontiguousarray(plan, dtype=np.uint64).tofile(plan_path)
    exe = os.path.join(args.build, "bench", "pygather")
    cg = CGather(exe, os.path.join(work, "zrecord", "images"), plan_path,
                 args.batch)
    readers = gather_readers(work, args.batch)

    # Check every path on every planned batch (pygather on the first three,
    # through a file), which also warms every store's pages.
    for name, (_, read) in readers.items():
        for idx in plan:
            check_batch(name, read(idx), images[idx])
    dump = os.path.join(work, "dump")
    for k in range(min(3, len(plan))):
        cg.dump(k, dump)
        got = np.fromfile(dump, dtype=np.uint8).reshape((args.batch,) + ITEM)
        check_batch("pygather", got, images[plan[k]])
    os.unlink(dump)

    # pygather has read only three batches so far; one untimed pass over
    # the plan brings it to where the Python paths' checks left them.
    cg.run(0, len(plan))

    # The backends take turns batch by batch, so that a change in the
    # machine's load falls on all of them alike. At step k backend i reads
    # batch (k + i) mod len(plan): over a round each reads every batch
    # once, and no backend reads the records that the one before it has
    # just pulled into the CPU's caches. The order rotates with the step
    # and the round, so that each backend goes first equally often.
    names = ["C (bench/pygather)"] + list(readers)
    times = {n: [] for n in names}        # per round: per-batch seconds
    for r in range(args.rounds):
        for n in names:
            times[n].append([])
        for k in range(len(plan)):
            turn = (k + r) % len(names)
            for i in list(range(turn, len(names))) + list(range(turn)):
                name, b = names[i], (k + i) % len(plan)
                if i == 0:
                    times[name][r].extend(cg.run(b, 1))
                    continue
                read = readers[name][1]
                t0 = time.perf_counter()
                read(plan[b])
                times[name][r].append(time.perf_counter() - t0)
    cg.close()

    nbytes = len(plan) * args.batch * WIDTH
    rows = []
    for name in names:
        rounds = [sum(per) for per in times[name]]
        flat = sorted(t for per in times[name] for t in per)
        rows.append({
            "name": name,
            "what": ("the same zr_gather_dense calls from C into one reused "
                     "buffer" if name == names[0] else readers[name][0]),
            "mib_s": nbytes / statistics.median(rounds) / MIB,
            "krec_s": len(plan) * args.batch / statistics.median(rounds) / 1e3,
            "p50_ms": 1e3 * flat[len(flat) // 2],
            "p95_ms": 1e3 * flat[min(len(flat) - 1, int(0.95 * len(flat)))],
            "rounds": rounds,
        })
    c = rows[0]["rounds"]
    ratios = [cr / br for cr, br in zip(c, rows[1]["rounds"])]
    return rows, ratios


# ---- Ragged batches made dense ---------------------------------------------

# Two Ragged workloads: token sequences (int32, 1-D, 128 to 1024 tokens),
# packed by rows, and images of mixed sizes (uint8 (h, w, 3), h and w in
# [64, 256]), packed flat. (name, records, batch, layout name)
RAGGED = (("tokens", 20000, 256, "ZR_PACKED"),
          ("images", 2000, 64, "ZR_PACKED_FLAT"))


def write_ragged(work, name, n, codec):
    from loaderx.zrecord import RaggedStore
    rng = np.random.default_rng(7)
    path = os.path.join(work, f"ragged-{name}-{codec}")
    with RaggedStore.create(path, np.int32 if name == "tokens" else np.uint8,
                            codec=codec) as rs:
        for s in range(0, n, 500):
            if name == "tokens":
                recs = [rng.integers(0, 50000, size=int(rng.integers(128, 1025)),
                                     dtype=np.int32) for _ in range(min(500, n - s))]
            else:
                recs = [rng.integers(0, 256, size=(int(rng.integers(64, 257)),
                                                   int(rng.integers(64, 257)), 3),
                                     dtype=np.uint8) for _ in range(min(500, n - s))]
            rs.append(recs)
        rs.sync()
    return path


def bench_ragged(args, work):
    """zr_gather_ragged_dense's packed layouts, gathered in place, against
    the two steps a caller made before (zr_gather_ragged_alloc, then
    zr_ragged_densify), on the same batches, the two taking turns."""
    import cffi

    from loaderx import _lib
    from loaderx._lib import ffi, lib
    from loaderx.zrecord import RaggedStore

    # The binding does not declare zr_gather_ragged_alloc, which only C
    # callers use: a declaration of it over the same library.
    ffi2 = cffi.FFI()
    ffi2.cdef(_lib.CDEF + """
        typedef struct zr_ragged_batch {
            size_t n;
            zr_view *recs;
            void *buf;
        } zr_ragged_batch;
        int zr_gather_ragged_alloc(zr_store *s, const uint64_t *idx, size_t n,
                                   zr_ragged_batch **out);
        void zr_ragged_batch_free(zr_ragged_batch *b);
    """)
    lib2 = ffi2.dlopen(os.environ["LOADERX_LIBRARY"])
    rows = []
    for name, n, batch, layout_name in RAGGED:
        layout = getattr(_lib, layout_name)
        for codec in ("raw", "zstd"):
            path = write_ragged(work, name, n, codec)
            rs = RaggedStore.open(path, readonly=True)
            ptr = rs._ptr
            ptr2 = ffi2.cast("zr_store *", int(ffi.cast("uintptr_t", ptr)))
            itemsize = rs.dtype.itemsize
            plan = np.random.default_rng(8).integers(
                0, n, size=(args.gather_batches, batch)).astype(np.uint64)
            out = ffi.new("zr_ragged_dense **")
            out2 = ffi2.new("zr_ragged_dense **")
            alloc = ffi2.new("zr_ragged_batch **")

            def in_place(idx):
                rc = lib.zr_gather_ragged_dense(
                    ptr, ffi.from_buffer("uint64_t[]", idx), len(idx), layout,
                    0, ffi.NULL, out)
                assert rc == 0, rc
                return out[0]

            def two_steps(idx):
                rc = lib2.zr_gather_ragged_alloc(
                    ptr2, ffi2.from_buffer("uint64_t[]", idx), len(idx), alloc)
                assert rc == 0, rc
                rc = lib2.zr_ragged_densify(alloc[0].recs, len(idx), itemsize,
                                            layout, 0, ffi2.NULL, out2)
                lib2.zr_ragged_batch_free(alloc[0])
                assert rc == 0, rc
                return out2[0]

            def payload(d, f):
                return bytes(f.buffer(d.data, d.nbytes)), \
                    [d.offsets[k] for k in range(d.n + 1)]

            # Both give the same batch (every planned one), which also
            # warms the store's pages.
            nbytes = 0
            for idx in plan:
                a = in_place(idx)
                b = two_steps(idx)
                if payload(a, ffi) != payload(b, ffi2):
                    raise SystemExit(f"pybench: {name} {codec}: the packed "
                                     "batches differ")
                nbytes += a.nbytes
                lib.zr_ragged_dense_free(a)
                lib2.zr_ragged_dense_free(b)
            times = {"in place": [], "two steps": []}
            for r in range(args.rounds):
                for k, idx in enumerate(plan):
                    order = (("in place", in_place, lib),
                             ("two steps", two_steps, lib2))
                    for label, fn, free in order[::1 if (k + r) % 2 else -1]:
                        t0 = time.perf_counter()
                        d = fn(idx)
                        times[label].append(time.perf_counter() - t0)
                        free.zr_ragged_dense_free(d)
            rs.close()
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append({"name": name, "codec": codec, "layout": layout_name,
                         "batch": batch, "records": n,
                         "mib": nbytes / len(plan) / MIB,
                         "in_place_ms": 1e3 * med["in place"],
                         "two_steps_ms": 1e3 * med["two steps"]})
    return rows


# ---- the loaders -----------------------------------------------------------


def child_loaderx(args, work, crcs, prefetch, mmap):
    from loaderx.dataloader import DataLoader
    from loaderx.zrecord import DenseStore
    from loaderx.zsampler import Sampler

    images = DenseStore.open(os.path.join(work, "zrecord", "images"),
                             readonly=True, mmap=mmap)
    labels = DenseStore.open(os.path.join(work, "zrecord", "labels"),
                             readonly=True, mmap=mmap)
    loader = DataLoader({"images": images, "labels": labels},
                        batch_size=args.batch, mode=Sampler.Mode.IID, seed=3,
                        prefetch=prefetch, workers=2)
    sampler = loader.sampler

    def batches():
        while True:
            b = next(loader)
            yield b["images"], b["labels"], sampler.next()

    run_loader(args, batches(), crcs)


def child_numpy(args, work, crcs):
    """The loop a program writes without a loader: a fancy index of the
    memory maps per batch, in the consuming thread."""
    images = np.load(os.path.join(work, "images.npy"), mmap_mode="r")
    labels = np.load(os.path.join(work, "labels.npy"), mmap_mode="r")
    rng = np.random.default_rng(3)

    def batches():
        while True:
            idx = rng.integers(0, args.records, size=args.batch)
            yield images[idx], labels[idx], idx

    run_loader(args, batches(), crcs)


def child_loaderx_torch(args, work, crcs, workers):
    """loaderx.torch's StreamDataset through its StepLoader, epoch after
    epoch: an epoch is records // batch steps, and torch starts its
    workers again for each."""
    from loaderx.torch import StepLoader, StreamDataset
    from loaderx.zsampler import Sampler

    root = os.path.join(work, "zrecord")
    ds = StreamDataset({"images": os.path.join(root, "images"),
                        "labels": os.path.join(root, "labels")},
                       batch_size=args.batch, mode="iid", seed=3,
                       prefetch=4, threads=2)
    loader = StepLoader(ds, num_workers=workers,
                        prefetch_factor=2 if workers else None)
    sampler = Sampler(args.records, args.batch, "iid", seed=3)

    def batches():
        epoch = 0
        while True:
            ds.set_epoch(epoch)
            for b in loader:
                yield b["images"].numpy(), b["labels"].numpy(), \
                    sampler.next()
            epoch += 1

    run_loader(args, batches(), crcs)


def memmap_dataset(work, records):
    """torch's map-style dataset of work's images.npy and labels.npy,
    mapped by each worker when it first reads: (image, label) views."""
    from torch.utils.data import Dataset

    class MemmapImages(Dataset):
        def __init__(self):
            self.images = self.labels = None

        def __len__(self):
            return records

        def __getitem__(self, i):
            if self.images is None:
                self.images = np.load(os.path.join(work, "images.npy"),
                                      mmap_mode="r")
                self.labels = np.load(os.path.join(work, "labels.npy"),
                                      mmap_mode="r")
            return self.images[i], self.labels[i]

    return MemmapImages()


def child_torch(args, work, crcs, batched, workers=2):
    import warnings

    import torch
    from torch.utils.data import (BatchSampler, DataLoader,
                                  RandomSampler)

    def quiet(_):
        # torch.as_tensor warns, once per worker, that a read-only map's
        # views are not writable; the batches are stacked into new memory.
        warnings.filterwarnings("ignore", message=".*not writable.*")

    data = memmap_dataset(work, args.records)
    # More indices than any run takes: the sampler draws them lazily.
    order = RandomSampler(data, replacement=True, num_samples=1 << 40,
                          generator=torch.Generator().manual_seed(3))
    if batched and workers == 0:
        quiet(None)
        loader = DataLoader(data, batch_size=None,
                            sampler=BatchSampler(order, args.batch, False),
                            num_workers=0)
    elif batched:
        loader = DataLoader(data, batch_size=None,
                            sampler=BatchSampler(order, args.batch, False),
                            num_workers=2, prefetch_factor=2,
                            worker_init_fn=quiet)
    else:
        loader = DataLoader(data, batch_size=args.batch, sampler=order,
                            num_workers=2, prefetch_factor=2,
                            worker_init_fn=quiet)

    def batches():
        for imgs, labs in loader:
            yield imgs.numpy(), labs.numpy(), None

    run_loader(args, batches(), crcs)


def run_loader(args, batches, crcs):
    """Check the first batches, warm up, time, and report on stdout."""
    item = tuple(args.item)
    checked = 0
    for k in range(args.loader_warmup):
        imgs, labs, idx = next(batches)
        if k < 3:
            if imgs.dtype != np.uint8 or imgs.shape != (args.batch,) + item \
                    or labs.shape != (args.batch,):
                raise SystemExit("pybench: the loader's batch has the wrong "
                                 f"shape {imgs.shape} {labs.shape}")
            if idx is not None and not np.array_equal(labs, idx):
                raise SystemExit("pybench: the loader's labels are not its "
                                 "sampler's indices")
            got = record_crcs(imgs)
            if not np.array_equal(got, crcs[labs]):
                raise SystemExit("pybench: the loader returned wrong records")
            checked += 1
        del imgs, labs
    print(json.dumps({"event": "timed"}), flush=True)
    t0 = time.perf_counter()
    # CPU time of this process, all its threads (not of torch's worker
    # processes): what a batch costs the machine, whatever the load.
    c0 = time.process_time()
    touched = count = 0
    while count < args.loader_batches \
            or time.perf_counter() - t0 < args.loader_seconds:
        imgs, labs, _ = next(batches)
        touched += int(imgs.reshape(len(imgs), -1)[:, 0].sum()) + int(labs[0])
        del imgs, labs
        count += 1
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    print(json.dumps({"event": "done", "checked": checked, "batches": count,
                      "seconds": dt, "batches_s": count / dt,
                      "cpu_ms": 1e3 * cpu / count,
                      "touched": touched}), flush=True)


class TreeMemory:
    """The peak memory of a process and all its descendants, sampled."""

    FIELDS = ("RssAnon", "RssFile", "RssShmem")

    def __init__(self, root):
        self.root = root
        self.pids = [root]
        self.peak = None          # {"rss", "RssAnon", ..., "procs"} at peak
        self.peak_pss = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def tree(self):
        parent = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat", "rb") as f:
                        stat = f.read()
                except OSError:
                    continue
                # The fields after the command name, which may hold spaces.
                parent[int(d)] = int(stat[stat.rindex(b")") + 2:].split()[1])
        out, todo = [], [self.root]
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(c for c, pp in parent.items() if pp == p)
        return out

    @staticmethod
    def status(pid):
        got = {}
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    key = line.split(":", 1)[0]
                    if key in TreeMemory.FIELDS:
                        got[key] = int(line.split()[1]) * 1024
        except OSError:
            return None
        return got if len(got) == len(TreeMemory.FIELDS) else None

    @staticmethod
    def pss(pid):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def sample(self):
        k = 0
        while not self.stop.is_set():
            if k % 10 == 0:
                self.pids = self.tree()
            now = {f: 0 for f in self.FIELDS}
            procs = 0
            for p in self.pids:
                st = self.status(p)
                if st:
                    procs += 1
                    for f in self.FIELDS:
                        now[f] += st[f]
            now["rss"] = sum(now[f] for f in self.FIELDS)
            now["procs"] = procs
            if self.peak is None or now["rss"] > self.peak["rss"]:
                self.peak = now
            if k % 10 == 5:
                self.peak_pss = max(self.peak_pss,
                                    sum(self.pss(p) for p in self.pids))
            k += 1
            self.stop.wait(0.02)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return self.peak, self.peak_pss


def small_records(args, tag):
    """Records of the small set tag: about the main store's bytes."""
    return args.records * WIDTH // SMALL[tag]


def bench_loader(args, work, kind):
    base, _, tag = kind.partition("@")
    records, item = args.records, ITEM
    if tag:
        work = os.path.join(work, "small" + tag)
        records, item = small_records(args, tag), (SMALL[tag],)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", base,
           "--item", *map(str, item),
           "--work", work, "--build", args.build, "--records",
           str(records), "--batch", str(args.batch), "--loader-batches",
           str(args.loader_batches), "--loader-seconds",
           str(args.loader_seconds), "--loader-warmup",
           str(args.loader_warmup)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                            env=child_env(args))
    mem = TreeMemory(proc.pid)
    result = None
    for line in proc.stdout:
        msg = json.loads(line)
        if msg["event"] == "done":
            result = msg
    rc = proc.wait()
    peak, peak_pss = mem.finish()
    if rc != 0 or result is None:
        raise SystemExit(f"pybench: the {kind} loader failed (exit {rc})")
    result.update(peak=peak, peak_pss=peak_pss)
    return result


def child_env(args):
    env = dict(os.environ)
    env["LOADERX_LIBRARY"] = library(args)
    env["PYTHONPATH"] = os.path.join(SRC, "python")
    return env


def library(args):
    return os.path.join(os.path.abspath(args.build), "lib", ".libs",
                        "libloaderx.so.1")


# ---- the report ------------------------------------------------------------


def filesystem(path):
    """What holds path: the type of its mount, from /proc/mounts."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    with open("/proc/mounts") as f:
        for line in f:
            _, point, fstype = line.split()[:3]
            if (path == point or path.startswith(point.rstrip("/") + "/")) \
                    and len(point) > len(best):
                best, kind = point, fstype
    return ("a tmpfs, in memory" if kind == "tmpfs"
            else f"the local disk ({kind})")


def machine_line():
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) // 1024
    return (f"{os.cpu_count()} cores ({cpu}), {mem / 1024:.1f} GiB RAM, "
            f"Linux {platform.release()}, Python {platform.python_version()}")


def versions():
    import h5py
    import lmdb
    import torch
    return (f"numpy {np.__version__}, h5py {h5py.__version__} (HDF5 "
            f"{h5py.version.hdf5_version}), lmdb {lmdb.__version__}, torch "
            f"{torch.__version__}")


def fresh_memory_cost(batch):
    """Milliseconds to fault in one fresh batch-sized block: with 4 KiB
    pages (an anonymous mapping, as most allocators give) and with the
    transparent huge pages NumPy asks for on large arrays. The median of
    five, each on memory never touched before."""
    nbytes = batch * WIDTH
    small, huge = [], []
    for _ in range(5):
        m = mmap.mmap(-1, nbytes)
        a = np.frombuffer(m, dtype=np.uint8)
        t0 = time.perf_counter()
        a[::4096] = 1
        small.append(time.perf_counter() - t0)
        del a
        m.close()
        a = np.empty(nbytes, dtype=np.uint8)
        t0 = time.perf_counter()
        a[::4096] = 1
        huge.append(time.perf_counter() - t0)
        del a
    return (1e3 * statistics.median(small), 1e3 * statistics.median(huge))


def copy_cost(batch):
    """Milliseconds for one memcpy of a batch between two arrays touched
    before: the copy rate every loader here is bounded by. The median of
    five."""
    src = np.ones(batch * WIDTH, dtype=np.uint8)
    dst = np.zeros_like(src)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def torch_stack_cost(batch):
    """Milliseconds for torch.stack to collate one batch of records (as
    the default collate does) into a new tensor and into one reused
    tensor: the median of five each."""
    import torch
    src = np.random.default_rng(4).integers(0, 256, size=(batch,) + ITEM,
                                            dtype=np.uint8)
    rows = [torch.from_numpy(r) for r in src]
    reused = torch.empty((batch,) + ITEM, dtype=torch.uint8)
    torch.stack(rows, 0, out=reused)
    fresh, again = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        out = torch.stack(rows, 0)
        fresh.append(time.perf_counter() - t0)
        del out
        t0 = time.perf_counter()
        torch.stack(rows, 0, out=reused)
        again.append(time.perf_counter() - t0)
    return (1e3 * statistics.median(fresh), 1e3 * statistics.median(again))


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def summary(runs):
    """One loader's runs: the median round's batches, the median CPU per
    batch, and the memory of the run that peaked highest."""
    mid = sorted(runs, key=lambda r: r["batches_s"])[len(runs) // 2]
    top = max(runs, key=lambda r: r["peak"]["rss"])
    return {"batches": mid["batches"], "seconds": mid["seconds"],
            "batches_s": statistics.median(r["batches_s"] for r in runs),
            "rounds": [r["batches_s"] for r in runs],
            "cpu_ms": statistics.median(r["cpu_ms"] for r in runs),
            "peak": top["peak"],
            "peak_pss": max(r["peak_pss"] for r in runs)}


def per_round(runs, name, others):
    """The median over the rounds of name's batches/s over the fastest of
    others' in the same round."""
    return statistics.median(
        mine["batches_s"] / max(runs[o][k]["batches_s"] for o in others)
        for k, mine in enumerate(runs[name]))


def verdict(ok):
    return "met" if ok else "**missed**"


def report(args, res):
    g = res["gather"]
    c_rate = g[0]["mib_s"]
    ratio = statistics.median(res["ratios"])
    runs = res["loaders"]
    ld = {name: summary(r) for name, r in runs.items()}
    lx, tt = ld["loaderx-nomap"], ld["torch"]
    speed = per_round(runs, "loaderx-nomap", ["torch"])
    mem = lx["peak"]["rss"] / tt["peak"]["rss"]
    # The baselines a careful user tries first; the fastest in each round.
    base = ["torch-batched-w0", "numpy-loop", "torch", "torch-batched"]
    fastest = max(base, key=lambda n: ld[n]["batches_s"])
    vs_best = per_round(runs, "loaderx-nomap", base)
    mem_best = lx["peak"]["rss"] / ld[fastest]["peak"]["rss"]
    nomap_small = {tag: per_round(runs, f"loaderx-nomap@{tag}",
                            [f"numpy-loop@{tag}"]) for tag in SMALL}
    tw0 = per_round(runs, "loaderx.torch-w0", ["loaderx"])
    out = []
    w = out.append
    w("# Python benchmarks")
    w("")
    w("The Python binding against the C library it wraps and against the "
      "stores and the loader a Python training job would otherwise use.")
    w("")
    w(f"Machine: {res['machine']}; {res['versions']}. Load average "
      f"{res['load_start']} at the start and {res['load_end']} at the end of "
      "the run (1, 5, 15 minutes); the machine is shared.")
    w("")
    small, huge = res["fresh_ms"]
    w(f"Memory never touched before is dear here: faulting in one fresh "
      f"{args.batch * WIDTH / MIB:.1f} MiB block took {small:.0f} ms with "
      f"4 KiB pages and {huge:.0f} ms with the transparent huge pages that "
      "NumPy requests for large arrays (the median of five, measured at "
      f"the start of the run), against {g[0]['p50_ms']:.1f} ms for the "
      "library to gather a whole batch into memory it reuses. A path that "
      "takes new memory for every batch pays that price every batch.")
    w("")
    w("Produced in one run, on a machine others were using (the load "
      "averages above), by")
    w("")
    w("    make bench && bench/pybench.sh > doc/python-benchmarks.md")
    w("")
    w(f"with `{res['argv']}`.")
    w("")
    w("## Targets")
    w("")
    w("| target | measured | |")
    w("|---|---:|---|")
    w(f"| binding gather ≥ 0.9× the C gather | {ratio:.2f}× | "
      f"{verdict(ratio >= 0.9)} |")
    w(f"| DataLoader ≥ 1.5× torch's batches/s | {speed:.2f}× | "
      f"{verdict(speed >= 1.5)} |")
    w(f"| DataLoader peak RSS ≤ 1/3 of torch's | {mem:.2f}× | "
      f"{verdict(mem <= 1 / 3)} |")
    w(f"| DataLoader ≥ 1.5× the fastest of torch-batched-w0, numpy-loop, "
      f"torch with 2 workers (per round; {fastest} overall) | "
      f"{vs_best:.2f}× | {verdict(vs_best >= 1.5)} |")
    w(f"| … at no more peak RSS than {fastest} | {mem_best:.2f}× | "
      f"{verdict(mem_best <= 1)} |")
    for tag, r in nomap_small.items():
        w(f"| `mmap=False` ≥ 1.0× the NumPy memory map, {SMALL[tag] >> 10} "
          f"KiB records | {r:.2f}× | {verdict(r >= 1.0)} |")
    w(f"| loaderx.torch `num_workers=0` ≥ 0.9× loaderx's loader | "
      f"{tw0:.2f}× | {verdict(tw0 >= 0.9)} |")
    w("")
    w("The ratios are loaderx's over the C library's and over the others' "
      "(the rows `loaderx ds[idx]` and `C` below; `loaderx-nomap` against "
      "`torch` and the baselines, `loaderx-nomap@4k` and `@32k` against "
      "`numpy-loop@4k` and `@32k`, `loaderx.torch-w0` against `loaderx`, "
      "under DataLoader). Every loader ran once in each of "
      f"{args.loader_rounds} rounds, in turns; a batches/s ratio is the "
      "median over the rounds of that round's ratio, so that the two "
      "sides of each met the same load, and a peak RSS is the highest "
      "over the rounds. What makes up each loader's peak memory is under "
      "DataLoader.")
    w("")
    w("## Workload")
    w("")
    w(f"{args.records:,} records of uint8 (3, 224, 224), 147 KiB each "
      f"({args.records * WIDTH / MIB:.0f} MiB per store), random bytes. "
      f"Batch {args.batch} ({args.batch * WIDTH / MIB:.1f} MiB), indices "
      f"drawn uniformly with repeats. Every store is on {res['where']} and "
      "was read whole before timing, so its pages are in the page cache "
      "while the batches read them at random: the figures are memory and "
      "CPU bound, not disk bound. Every backend holds the same records; "
      "the gather backends read the same batch plan.")
    w("")
    w("## Store gather")
    w("")
    w(f"{args.gather_batches} planned batches per round, {args.rounds} "
      "rounds; in every round each backend reads the whole plan, the "
      "backends taking turns batch by batch in an order that rotates "
      "with the step and the round, so that load from elsewhere on the "
      "machine falls on all of them alike, and each reading a different "
      "batch from the one read just before it, so that none finds its "
      "records already in the CPU's caches. Every backend's result was "
      "compared with the source records for every planned batch before "
      "timing (bench/pygather's on the first three, through a file; it "
      "then read the plan once untimed). MiB/s and krecords/s are the "
      "plan's bytes and records over the median round; p50 and p95 are "
      "over every batch of every round.")
    w("")
    w("| backend | how | MiB/s | krecords/s | p50 | p95 | vs C |")
    w("|---|---|---:|---:|---:|---:|---:|")
    for row in g:
        w(f"| {row['name']} | {row['what']} | {row['mib_s']:.0f} | "
          f"{row['krec_s']:.1f} | {row['p50_ms']:.2f} ms | "
          f"{row['p95_ms']:.2f} ms | {row['mib_s'] / c_rate:.2f}× |")
    w("")
    w("The C rate comes from bench/pygather, a C program linked to the same "
      "libloaderx.so, making the same zr_gather_dense call per batch into "
      "one buffer allocated and touched once. The binding's figure is "
      "`ds[idx]` as a program writes it: the index array goes through the "
      "binding's selection (range checks, conversion to uint64), the call "
      "is made with the GIL released, and the records land in the returned "
      "array. The target's ratio is the median over the rounds of C's "
      "round time over the binding's, "
      f"{', '.join(f'{r:.2f}' for r in res['ratios'])}. Both make the "
      "same library call per batch; what the binding adds (selecting the "
      "indices, the cffi call) is tens of microseconds against "
      "milliseconds of gather, so the spread of these ratios, and the "
      "difference between the two loaderx rows, is the shared machine's "
      "noise rather than a cost of either path.")
    w("")
    w("## Ragged batches, packed")
    w("")
    w("`RaggedStore.packed`'s library call, zr_gather_ragged_dense, "
      "gathers each record's payload straight to its place in the packed "
      "batch (its shape prefix lands on a neighbour's payload, which is "
      "put back). Before, it took the two steps a C caller takes: gather "
      "the records with their prefixes into one buffer "
      "(zr_gather_ragged_alloc), then copy the payloads out "
      "(zr_ragged_densify). Both, on the same "
      f"{args.gather_batches} batches of random indices, in turns, "
      f"{args.rounds} rounds; the median time per batch. Token "
      "sequences: int32, 128 to 1,024 tokens each, packed by rows "
      "(ZR_PACKED); images: uint8 (h, w, 3) with h and w from 64 to 256, "
      "packed flat (ZR_PACKED_FLAT). Each store was read whole before "
      "timing.")
    w("")
    w("| records | codec | batch | MiB a batch | in place | two steps | "
      "saved |")
    w("|---|---|---:|---:|---:|---:|---:|")
    for r in res["ragged"]:
        w(f"| {r['records']:,} {r['name']} ({r['layout']}) | {r['codec']} | "
          f"{r['batch']} | {r['mib']:.1f} | {r['in_place_ms']:.2f} ms | "
          f"{r['two_steps_ms']:.2f} ms | "
          f"{1 - r['in_place_ms'] / r['two_steps_ms']:.0%} |")
    w("")
    w("## DataLoader")
    w("")
    w(f"Each loader runs in a fresh process: {args.loader_warmup} batches "
      f"of warm-up (the first three checked record by record against the "
      f"source by CRC-32, and against the sampler's indices where the "
      f"loader exposes them), then at least {args.loader_batches} timed "
      f"batches and at least {args.loader_seconds:g} s of them, each "
      "touched and dropped by the consuming loop; batches/s is their "
      "count over their time. Both read an images stream and a labels "
      "stream (int64).")
    w("")
    w("- loaderx-nomap: `DataLoader({'images', 'labels'}, batch_size="
      f"{args.batch}, mode=IID, workers=2, prefetch=4)` over raw "
      "DenseStores opened with `readonly=True, mmap=False`: 4 batches in "
      "flight, as for torch, and the records copied out of the page cache "
      "with pread, so that none of the store is mapped into the process. "
      "This is the row the targets use.")
    w("- loaderx: the same over stores opened with `readonly=True` (the "
      "default `mmap=True`): the labels copied out of a mapping of their "
      "store, whose touched pages count in the process's RSS; the images, "
      "raw records of 64 KiB or more, are read with pread all the same.")
    w("- loaderx-prefetch2: the mapped stores with the default prefetch=2.")
    w("- torch: `torch.utils.data.DataLoader(batch_size="
      f"{args.batch}, num_workers=2, prefetch_factor=2)` (4 batches in "
      "flight, as for loaderx) with a RandomSampler drawing with "
      "replacement (one long epoch, no restarts) over a Dataset whose "
      "`__getitem__` returns the record's view of `np.load(mmap_mode='r')`,"
      " opened by each worker; the default collate stacks the views into "
      "shared memory.")
    w("- torch, batched fetch: the same, but the sampler hands each worker "
      "a list of 256 indices and the Dataset answers with one fancy index "
      "of the memory map (`batch_size=None`), the fastest way to feed this "
      "store to torch's loader with workers.")
    w("- torch-batched-w0: the batched fetch with `num_workers=0`: each "
      "batch is one fancy index of the memory map in the training process, "
      "with nothing prepared ahead and no copy into shared memory.")
    w("- numpy-loop: no loader at all, `images[idx], labels[idx]` of the "
      "memory maps per batch in the consuming loop.")
    w("- loaderx.torch-w0: `StepLoader(StreamDataset({'images', 'labels'}, "
      f"batch_size={args.batch}, mode='iid', prefetch=4, threads=2), "
      "num_workers=0)` over the mapped stores: a loaderx DataLoader in the "
      "training process, its batches wrapped as tensors without a copy. An "
      f"epoch is {args.records // args.batch} steps; the loop runs epoch "
      "after epoch.")
    w("- loaderx.torch-w2: the same with `num_workers=2, prefetch_factor=2`:"
      " each torch worker gathers its steps with the library into shared "
      "buffers that it reuses, which the training process maps without a "
      "copy; StepLoader keeps the workers from epoch to epoch.")
    w("")
    c = {n: ld[n]["cpu_ms"] for n in ld}
    b = {n: ld[n]["batches_s"] for n in ld}
    w("What limits the loaders is copying the bytes out of the page cache, "
      "and the CPU the machine gives them. The CPU time per batch (the "
      "loader's own process, all its threads) was "
      f"{c['loaderx-nomap']:.1f} ms for loaderx-nomap and "
      f"{c['loaderx']:.1f} ms for the mapped loaderx, whose images, raw "
      "records of 64 KiB or more, are read with pread too, against "
      f"{c['numpy-loop']:.1f} ms for the NumPy loop's copy out of its "
      f"mapping and {res['copy_ms']:.1f} ms for one memcpy of a batch "
      "between two buffers allocated once (NumPy's copyto, the median of "
      "five, in the same run). The loader's Python side is not where the "
      "time goes: a batch handed over by next() costs tens of microseconds "
      "against milliseconds of copying. Its two workers can keep both "
      "cores copying, which is what the loader has over a loop on one "
      "thread; the CPU it got, batches/s times CPU per batch, was "
      f"{b['loaderx-nomap'] * c['loaderx-nomap'] / 1e3:.2f} cores for "
      f"loaderx-nomap and {b['numpy-loop'] * c['numpy-loop'] / 1e3:.2f} "
      "for the NumPy loop, on a machine whose load average is above. With "
      "the same cores, a path that spends more CPU a batch gives fewer "
      "batches.")
    w("")
    w("For raw records under 64 KiB an unmapped handle (`mmap=False`) "
      "copies from a mapping too, as long as they lie in the store's first "
      "GiB (a pread costs about twice the copy; doc/performance.md): CPU "
      "per batch "
      + ", ".join(f"{c[f'loaderx-nomap@{t}']:.2f} ms unmapped, "
                  f"{c[f'loaderx@{t}']:.2f} ms mapped and "
                  f"{c[f'numpy-loop@{t}']:.2f} ms for the NumPy loop at "
                  f"{SMALL[t] >> 10} KiB" for t in SMALL)
      + ", that is "
      + " and ".join(f"{1e3 * (c[f'loaderx-nomap@{t}'] - c[f'numpy-loop@{t}']) / args.batch:.1f} µs"
                     for t in SMALL)
      + " more per record than the loop.")
    w("")
    w("The small-record rows (`@4k`, `@32k`) read sets of their own: "
      + ", ".join(f"{small_records(args, t):,} records of uint8 "
                  f"({SMALL[t]},)" for t in SMALL)
      + f", with their int64 labels, batch {args.batch}, on the same disk "
      "and read whole before timing; the loaders are configured as the "
      "rows without the suffix. Both stores are under 1 GiB, so that an "
      "unmapped handle (`mmap=False`) copies their records out of a "
      "mapping as a mapped one does.")
    w("")
    fresh, again = res["stack_ms"]
    w(f"torch.stack, which the default collate uses, took {fresh:.0f} ms to "
      f"stack one batch into a new tensor and {again:.0f} ms into a reused "
      "one, in the same run: torch 1.13 allocates with 4 KiB pages, and "
      "each batch goes into new shared memory, so on this machine the "
      "fresh-memory price above is most of torch's time per batch. "
      "loaderx's loader gathers into batch buffers it recycles. Where "
      "fresh memory is cheap the gap between the two narrows.")
    w("")
    w("| loader | timed (median round) | batches/s | rounds | CPU/batch | "
      "vs torch | peak RSS (tree) | anon | "
      "file | shmem | processes | peak PSS (tree) |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in ld.items():
        p = r["peak"]
        w(f"| {name} | {r['batches']} in {r['seconds']:.1f} s | "
          f"{r['batches_s']:.1f} | "
          f"{' '.join(f'{x:.0f}' for x in r['rounds'])} | "
          f"{r['cpu_ms']:.2f} ms | "
          f"{per_round(runs, name, ['torch']):.2f}× | "
          f"{p['rss'] / MIB:.0f} MiB | {p['RssAnon'] / MIB:.0f} MiB | "
          f"{p['RssFile'] / MIB:.0f} MiB | {p['RssShmem'] / MIB:.0f} MiB | "
          f"{p['procs']} | {r['peak_pss'] / MIB:.0f} MiB |")
    w("")
    w("Peak RSS is the highest sum, over the loader's process and all its "
      "descendants, of RssAnon + RssFile + RssShmem from /proc/PID/status, "
      "sampled every 20 ms from the parent benchmark process for the "
      "loader's whole life (the tree is re-read from /proc every 200 ms); "
      "the anon, file and shmem columns are that sample's parts. A page "
      "that several processes map counts once per process in RSS, as top "
      "and ps count it; PSS (from /proc/PID/smaps_rollup, sampled every "
      "200 ms) divides such a page among them, so it is the tree's memory "
      "without double counting. The file part is the store's pages in the "
      "page cache that the process has touched through its mappings: "
      "torch and the mapped loaderx rows map their store, loaderx-nomap "
      "reads it.")
    w("")
    own = {n: r["peak"]["RssAnon"] + r["peak"]["RssShmem"]
           for n, r in ld.items()}
    w("loaderx's anonymous memory is the interpreter with NumPy and its "
      "batch buffers: the prefetch depth plus the one or two batches the "
      f"consuming loop holds, {args.batch * WIDTH / MIB:.1f} MiB each. "
      "torch's is three interpreters with torch loaded (the main process "
      "and two workers) and the shared-memory batches in flight.")
    w("")
    w("Without that file-backed part, which is the page cache's and counts "
      "once for every process that maps the store, the peaks at the same "
      f"samples are {own['loaderx'] / MIB:.0f} MiB for the mapped loaderx and "
      f"{own['torch'] / MIB:.0f} MiB for torch "
      f"({own['loaderx'] / own['torch']:.2f}×).")
    w("")
    return "\n".join(out) + "\n"


# ---- main ------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=SRC,
                    help="the build tree (default: the source tree)")
    ap.add_argument("--out", help="write the report here (default: stdout)")
    ap.add_argument("--records", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--gather-batches", type=int, default=21)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--loader-batches", type=int, default=100,
                    help="time at least this many batches of each loader")
    ap.add_argument("--loader-seconds", type=float, default=5.0,
                    help="and for at least this long")
    ap.add_argument("--loader-warmup", type=int, default=30)
    ap.add_argument("--work", help="the scratch folder (default: a new one "
                    "under $TMPDIR, removed at the end)")
    ap.add_argument("--loader-rounds", type=int, default=3,
                    help="run every loader this many times, in turns")
    ap.add_argument("--child", choices=LOADERS,
                    help=argparse.SUPPRESS)
    ap.add_argument("--item", type=int, nargs="+", default=list(ITEM),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)

    if args.child:
        crcs = np.load(os.path.join(args.work, "crcs.npy"))
        if args.child.startswith("loaderx"):
            child_loaderx(args, args.work, crcs,
                          2 if args.child == "loaderx-prefetch2" else 4,
                          args.child != "loaderx-nomap")
        elif args.child == "numpy-loop":
            child_numpy(args, args.work, crcs)
        elif args.child.startswith("loaderx.torch"):
            child_loaderx_torch(args, args.work, crcs,
                                int(args.child[-1]))
        else:
            child_torch(args, args.work, crcs,
                        args.child.startswith("torch-batched"),
                        0 if args.child.endswith("-w0") else 2)
        return

    os.environ["LOADERX_LIBRARY"] = library(args)
    sys.path.insert(0, os.path.join(SRC, "python"))
    import loaderx  # noqa: F401  (fails early, naming what it tried)

    res = {"machine": machine_line(), "versions": versions(),
           "load_start": load(), "fresh_ms": fresh_memory_cost(args.batch),
           "stack_ms": torch_stack_cost(args.batch),
           "copy_ms": copy_cost(args.batch),
           "argv": " ".join(["bench/pybench.py"] + sys.argv[1:])}
    work = args.work or tempfile.mkdtemp(prefix="pybench-")
    made = args.work is None
    try:
        os.makedirs(work, exist_ok=True)
        res["where"] = filesystem(work)
        print("pybench: writing the stores in", work, file=sys.stderr)
        images, labels = make_source(args.records, seed=1)
        res["sizes"] = write_stores(work, images, labels)
        np.save(os.path.join(work, "crcs.npy"), record_crcs(images))
        plan = np.random.default_rng(2).integers(
            0, args.records, size=(args.gather_batches, args.batch))
        print("pybench: store gather", file=sys.stderr)
        res["gather"], res["ratios"] = bench_gather(args, work, images, plan)
        del images
        print("pybench: Ragged batches", file=sys.stderr)
        res["ragged"] = bench_ragged(args, work)
        for tag in SMALL:
            print("pybench: writing the", tag, "stores", file=sys.stderr)
            write_small(args, work, tag)
        # Every loader runs once a round, in an order that rotates with the
        # round, so that a change in the machine's load falls on all of
        # them alike; a target's ratio is the median of its rounds' ratios.
        kinds = LOADERS + SMALL_LOADERS
        runs = {kind: [] for kind in kinds}
        for r in range(args.loader_rounds):
            turn = (r * len(kinds)) // args.loader_rounds
            for kind in kinds[turn:] + kinds[:turn]:
                print("pybench: loader", kind, "round", r, file=sys.stderr)
                runs[kind].append(bench_loader(args, work, kind))
        res["loaders"] = runs
        res["load_end"] = load()
        with open(os.path.join(work, "results.json"), "w") as f:
            json.dump(res, f, indent=1)
        text = report(args, res)
        print(json.dumps(res), file=sys.stderr)
    finally:
        if made:
            shutil.rmtree(work, ignore_errors=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
