#!/usr/bin/python3
"""The torch benchmark: loaderx.torch against the loaderx DataLoader it
wraps and against torch's own DataLoader, on large dense records.

    bench/torchbench.py [--build DIR] [--out FILE] [options]

prints the "torch" section of doc/benchmarks.md, or with --out replaces
that section of FILE (adding it at the end if FILE has none). DIR is the
build tree holding lib/.libs/libloaderx.so (default: the source tree).

The store is --records uint8 records of --record-kib KiB (8,192 of
256 KiB: 2 GiB) with int64 labels, as a raw loaderx DenseStore and as .npy
files, read once so that every run finds them in the page cache. A step
is --batch records (256: 64 MiB), in a new random order every epoch
(records // batch steps). The training loop reads one byte of every
4 KiB page of each batch (so that every page is mapped, as a copy to a
device would map it, at little cost of its own) and checks their sum
against the batch's labels; the first batches of every run are checked
in full.

Pipelines, each in a fresh process of its own:

- loaderx: loaderx.DataLoader with its defaults, the library's own rate;
- numpy-copy: the batch's rows of a memory-mapped .npy copied into a
  reused buffer one by one, in the training loop: one thread's copy of
  the batch's bytes (np.take, at a third of that, is slower);
- torch-w2: torch's DataLoader over a map-style dataset of the
  memory-mapped .npy files, batch_size and a shuffling sampler,
  num_workers=2 (what a torch user writes first), new workers every
  epoch (torch's default);
- torch-w2-persistent: the same with persistent_workers=True;
- adapter-w0, adapter-w1, adapter-w2: loaderx.torch's StreamDataset
  through its StepLoader with num_workers 0, 1 and 2 (prefetch_factor 2,
  and StepLoader's persistent workers);
- adapter-w2-restart: the same with persistent_workers=False, torch's
  own default, which starts new workers every epoch;
- adapter-w2-pin: the same with pin_memory=True, only where CUDA is.

The pipelines take turns in each of --rounds rounds, in one order and
then the reverse, so that a neighbour's load falls on all of them alike;
a rate is the median of the rounds, a ratio the median of the rounds'
ratios. This process samples
the resident set of each pipeline's process tree every 20 ms (the
process and all its descendants) and reports the peak, and the peak of
the tree's proportional set size (Pss, which counts a page that several
of its processes map once) every 200 ms.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
PAGE = 4096
HEADING = "## torch: loaderx.torch against its loader and torch's"
# In this order in odd rounds and the reverse in even ones, so that the
# pairs of a target run side by side and a load that rises or falls
# through a round weighs on both alike.
PIPELINES = ("loaderx", "adapter-w0", "adapter-w1", "adapter-w2",
             "adapter-w2-restart", "torch-w2", "torch-w2-persistent",
             "numpy-copy")


METHOD = """\
loaderx.torch's StreamDataset through its StepLoader, against the loaderx
DataLoader it wraps and against torch's own DataLoader over the same
records as memory-mapped .npy files, each pipeline in a fresh process.
The training loop reads one byte of every 4 KiB page of each batch (every
page mapped, as a copy to a device maps it) and checks their sum against
the batch's labels. Rows: `loaderx` is `loaderx.DataLoader` with its
defaults (one gathering thread, 2 batches ahead); `numpy-copy` copies the
batch's rows out of the memory map into a reused buffer on the training
thread, one thread's copy rate; `torch-w2` is torch's DataLoader with
`batch_size`, a shuffling sampler and `num_workers=2` (new workers every
epoch, torch's default), `-persistent` with `persistent_workers=True`;
`adapter-wN` is StepLoader with `num_workers=N` (`prefetch_factor=2`,
StepLoader's persistent workers), `-restart` with
`persistent_workers=False`. An epoch is records / batch steps. Peak RSS
is the highest sum of RssAnon, RssFile and RssShmem over the pipeline's
process tree (sampled every 20 ms), in which a page that two processes map
counts twice; peak PSS (every 200 ms) counts it once. A ratio is the
median over the rounds of that round's ratio, the pipelines taking turns
within each round, in the table's order and then in reverse.
bench/torchbench.py's docstring says more.\
"""


def make_store(work, records, width):
    """The records as a DenseStore and .npy files: record i holds i in its
    first 8 bytes and i % 251 in every other byte."""
    from loaderx.zrecord import DenseStore

    labels = np.arange(records, dtype=np.int64)
    npy = np.lib.format.open_memmap(os.path.join(work, "images.npy"), "w+",
                                    np.uint8, (records, width))
    with DenseStore.create(os.path.join(work, "images"), np.uint8, (width,),
                           codec="raw") as ds:
        for s in range(0, records, 256):
            chunk = np.repeat((labels[s:s + 256] % 251).astype(np.uint8)
                              [:, None], width, axis=1)
            chunk[:, :8] = labels[s:s + 256, None].view(np.uint8)
            ds.append(chunk)
            npy[s:s + len(chunk)] = chunk
        ds.sync()
    npy.flush()
    del npy
    np.save(os.path.join(work, "labels.npy"), labels)
    with DenseStore.create(os.path.join(work, "labels"), np.int64,
                           codec="raw") as ds:
        ds.append(labels)
        ds.sync()
    for root, _, files in os.walk(work):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass


def check(imgs, labs, batch, width):
    if imgs.shape != (batch, width) or labs.shape != (batch,):
        raise SystemExit(f"torchbench: a batch of shape {imgs.shape} "
                         f"{labs.shape}")
    head = np.ascontiguousarray(imgs[:, :8]).view(np.int64)[:, 0]
    if not np.array_equal(head, labs) or not np.array_equal(
            imgs[:, PAGE::PAGE], np.repeat((labs % 251).astype(np.uint8)
                                           [:, None], width // PAGE - 1, 1)):
        raise SystemExit("torchbench: a batch holds other records than its "
                         "labels")


# ---- the pipelines, in a child process each -------------------------------


def pipeline(args, kind):
    """An endless iterator of (images, labels) NumPy arrays."""
    work, batch = args.work, args.batch
    if kind == "loaderx":
        from loaderx import DataLoader
        loader = DataLoader({"images": os.path.join(work, "images"),
                             "labels": os.path.join(work, "labels")},
                            batch_size=batch, seed=3)
        for b in loader:
            yield b["images"], b["labels"]
    if kind == "numpy-copy":
        mm = np.load(os.path.join(work, "images.npy"), mmap_mode="r")
        lab = np.load(os.path.join(work, "labels.npy"))
        out = np.empty((batch,) + mm.shape[1:], np.uint8)
        rng = np.random.default_rng(3)
        while True:
            order = rng.permutation(len(mm))
            for s in range(0, len(mm) - batch + 1, batch):
                idx = order[s:s + batch]
                for j, i in enumerate(idx):
                    out[j] = mm[i]
                yield out, lab[idx]
    if kind.startswith("torch-w2"):
        yield from torch_pipeline(args, kind.endswith("-persistent"))
    if kind.startswith("adapter-"):
        yield from adapter_pipeline(args, kind)


def quiet(_):
    # torch.as_tensor warns, once per worker, that a read-only map's views
    # are not writable; the default collate stacks them into new memory.
    import warnings
    warnings.filterwarnings("ignore", message=".*not writable.*")


def torch_pipeline(args, persistent):
    import torch
    from torch.utils.data import DataLoader

    sys.path.insert(0, HERE)
    from pybench import memmap_dataset

    loader = DataLoader(memmap_dataset(args.work, args.records),
                        batch_size=args.batch, shuffle=True, drop_last=True,
                        num_workers=2, prefetch_factor=2, worker_init_fn=quiet,
                        persistent_workers=persistent,
                        generator=torch.Generator().manual_seed(3))
    while True:
        for imgs, labs in loader:
            yield imgs.numpy(), labs.numpy()


def adapter_pipeline(args, kind):
    from loaderx.torch import StepLoader, StreamDataset

    workers = int(kind.split("-")[1][1:])
    ds = StreamDataset({"images": os.path.join(args.work, "images"),
                        "labels": os.path.join(args.work, "labels")},
                       batch_size=args.batch, seed=3)
    extra = {"prefetch_factor": 2} if workers else {}
    if kind.endswith("-restart"):
        extra["persistent_workers"] = False
    loader = StepLoader(ds, num_workers=workers,
                        pin_memory=kind.endswith("-pin"), **extra)
    epoch = 0
    while True:
        ds.set_epoch(epoch)
        for b in loader:
            yield b["images"].numpy(), b["labels"].numpy()
        epoch += 1


def child(args):
    batches = pipeline(args, args.child)
    width = args.record_kib * 1024
    for k in range(args.warmup):
        imgs, labs = next(batches)
        if k < 3:
            check(imgs, labs, args.batch, width)
        del imgs, labs
    pages = width // PAGE
    t0 = time.perf_counter()
    count = touched = 0
    while time.perf_counter() - t0 < args.seconds:
        imgs, labs = next(batches)
        got = int(imgs.reshape(-1)[::PAGE].sum(dtype=np.int64))
        # Each record's first page starts with its label's low byte, the
        # others with label % 251: a batch in a reused buffer that held
        # other records, or was written while read, would not add up.
        if got != int((labs & 255).sum() + (pages - 1) * (labs % 251).sum()):
            raise SystemExit(f"torchbench: {args.child}: batch {count} "
                             "holds other records than its labels")
        touched += got
        del imgs, labs
        count += 1
    dt = time.perf_counter() - t0
    print(json.dumps({"batches_s": count / dt, "batches": count,
                      "touched": touched}), flush=True)
    # Leave at once: torch's workers and loaderx's threads go with the
    # process, and their shutdown is not what is measured.
    os._exit(0)


# ---- the parent ------------------------------------------------------------


def run(args, kind):
    sys.path.insert(0, HERE)
    from pybench import TreeMemory

    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind,
           "--work", args.work, "--records", str(args.records),
           "--record-kib", str(args.record_kib), "--batch", str(args.batch),
           "--seconds", str(args.seconds), "--warmup", str(args.warmup)]
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"),
               LOADERX_LIBRARY=os.path.join(os.path.abspath(args.build),
                                            "lib", ".libs",
                                            "libloaderx.so.1"))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    mem = TreeMemory(proc.pid)
    out = proc.stdout.read()
    rc = proc.wait()
    peak, pss = mem.finish()
    if rc != 0 or not out.strip():
        raise SystemExit(f"torchbench: {kind} failed (exit {rc})")
    result = json.loads(out.strip().splitlines()[-1])
    result["rss"] = peak["rss"] if peak else 0
    result["pss"] = pss
    return result


def cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def report(args, kinds, rounds):
    rate = {k: statistics.median(r[k]["batches_s"] for r in rounds)
            for k in kinds}
    rss = {k: statistics.median(r[k]["rss"] for r in rounds) for k in kinds}
    pss = {k: statistics.median(r[k]["pss"] for r in rounds) for k in kinds}

    def ratio(a, b):
        return statistics.median(r[a]["batches_s"] / r[b]["batches_s"]
                                 for r in rounds)

    sys.path.insert(0, HERE)
    from pybench import machine_line

    import torch
    commit = subprocess.run(["git", "-C", SRC, "rev-parse", "--short",
                             "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    mib = args.batch * args.record_kib / 1024
    opts = "" if (args.records, args.record_kib, args.batch, args.seconds,
                  args.rounds) == (8192, 256, 256, 20, 3) else \
        (f" --records {args.records} --record-kib {args.record_kib} --batch "
         f"{args.batch} --seconds {args.seconds:g} --rounds {args.rounds}")
    lines = [HEADING, "",
             f"Command: `bench/torchbench.py{opts} --out doc/benchmarks.md`, "
             f"at commit {commit} on {time.strftime('%Y-%m-%d')}. Machine: "
             f"{machine_line()}; torch {torch.__version__}.", "",
             METHOD, "",
             f"{args.records} records of {args.record_kib} KiB, batches of "
             f"{args.batch} ({mib:.0f} MiB), {len(rounds)} rounds of "
             f"{args.seconds:g} s, medians.", "",
             "| pipeline | batches/s | GB/s | × loaderx | × torch-w2 | "
             "peak RSS (GiB) | peak PSS (GiB) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for k in kinds:
        gbs = rate[k] * args.batch * args.record_kib * 1024 / 1e9
        lines.append(f"| {k} | {rate[k]:.1f} | {gbs:.2f} | "
                     f"{ratio(k, 'loaderx'):.2f} | {ratio(k, 'torch-w2'):.2f} "
                     f"| {rss[k] / 2**30:.2f} | {pss[k] / 2**30:.2f} |")
    w0, w2 = ratio("adapter-w0", "loaderx"), ratio("adapter-w2", "loaderx")
    w2t = ratio("adapter-w2", "torch-w2")
    w2p = ratio("adapter-w2", "torch-w2-persistent")
    lines += ["", "| target | measured | holds |", "|---|---:|---|",
              f"| adapter-w0 ≥ 0.9× loaderx | {w0:.2f}× | "
              f"{'yes' if w0 >= 0.9 else 'no'} |",
              f"| adapter-w2 ≥ 0.5× loaderx | {w2:.2f}× | "
              f"{'yes' if w2 >= 0.5 else 'no'} |",
              f"| adapter-w2 ≥ 3× torch-w2 | {w2t:.2f}× | "
              f"{'yes' if w2t >= 3 else 'no'} |",
              f"| adapter-w2 ≥ 3× torch-w2-persistent | {w2p:.2f}× | "
              f"{'yes' if w2p >= 3 else 'no'} |"]
    if "adapter-w2-pin" not in kinds:
        lines += ["", "No CUDA device here: pin_memory=True would be a "
                  "no-op, so adapter-w2-pin was not run."]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=SRC)
    p.add_argument("--out")
    p.add_argument("--records", type=int, default=8192)
    p.add_argument("--record-kib", type=int, default=256)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--only", help="comma-separated pipelines to run")
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    if args.record_kib * 1024 % PAGE or args.batch > args.records:
        raise SystemExit("torchbench: --record-kib must be a multiple of 4 "
                         "and --batch at most --records")
    kinds = list(PIPELINES) + (["adapter-w2-pin"] if cuda() else [])
    if args.only:
        kinds = [k for k in kinds if k in args.only.split(",")]
        kinds += [k for k in ("loaderx", "torch-w2", "torch-w2-persistent",
                              "adapter-w0", "adapter-w2") if k not in kinds]
    with tempfile.TemporaryDirectory(prefix="torchbench-",
                                     dir=os.environ.get("TMPDIR")) as work:
        args.work = work
        sys.path.insert(0, os.path.join(SRC, "python"))
        os.environ.setdefault("LOADERX_LIBRARY", os.path.join(
            os.path.abspath(args.build), "lib", ".libs", "libloaderx.so.1"))
        make_store(work, args.records, args.record_kib * 1024)
        rounds = []
        for r in range(args.rounds):
            got = {}
            for k in (kinds if r % 2 == 0 else kinds[::-1]):
                got[k] = run(args, k)
                print(f"torchbench: round {r + 1} {k}: "
                      f"{got[k]['batches_s']:.1f} batches/s, "
                      f"{got[k]['rss'] / 2**30:.2f} GiB", file=sys.stderr)
            rounds.append(got)
    text = report(args, kinds, rounds)
    if not args.out:
        sys.stdout.write(text)
        return
    page = ""
    if os.path.exists(args.out):
        with open(args.out) as f:
            page = f.read()
    # The section runs from its heading to the next "## " heading.
    at = page.find("\n" + HEADING + "\n")
    if at < 0:
        page = page.rstrip("\n") + ("\n\n" if page else "") + text
    else:
        end = page.find("\n## ", at + 1)
        page = page[:at + 1] + text + (page[end:] if end >= 0 else "")
    with open(args.out, "w") as f:
        f.write(page)


if __name__ == "__main__":
    main()
