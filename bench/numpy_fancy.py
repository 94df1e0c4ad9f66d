#!/usr/bin/python3
# The numpy-fancy-raw row of bench/zrbench: what a NumPy user gathers
# with, np.load(path, mmap_mode='r')[idx], timed here around that one
# expression with time.perf_counter (CLOCK_MONOTONIC, as zrbench uses).
#
# usage: numpy_fancy.py NPY BATCHFILE
# It reads requests from stdin: a little-endian u64 count n, then n u64
# indices (n = 0 or end of input ends it). For each it gathers the batch,
# copies it into BATCHFILE (mapped; zrbench maps it too and validates the
# bytes) outside the timed region, and answers with the gather's seconds
# as a little-endian double on stdout.
import mmap
import struct
import sys
import time

import numpy as np


def main():
    path, batch_path = sys.argv[1:3]
    arr = np.load(path, mmap_mode="r")
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    with open(batch_path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
    dst = np.frombuffer(mm, dtype=np.uint8)
    while True:
        head = inp.read(8)
        if len(head) < 8:
            break
        (n,) = struct.unpack("<Q", head)
        if n == 0:
            break
        idx = np.frombuffer(inp.read(8 * n), dtype="<u8").astype(np.intp)
        t0 = time.perf_counter()
        batch = arr[idx]
        t = time.perf_counter() - t0
        dst[: batch.nbytes] = batch.reshape(-1).view(np.uint8)
        out.write(struct.pack("<d", t))
        out.flush()
    del dst
    mm.close()


if __name__ == "__main__":
    main()
