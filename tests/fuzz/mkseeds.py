#!/usr/bin/python3
"""mkseeds.py ZR OUTDIR: make the seed corpus of the fuzz harnesses from
stores and .npy files made by zr and NumPy (run from a scratch folder)."""
import os, struct, subprocess, sys
import numpy as np

zr, out = sys.argv[1], sys.argv[2]
for sub in ("store", "identity", "npy", "indexlist"):
    os.makedirs(os.path.join(out, sub), exist_ok=True)
rng = np.random.default_rng(1)
arrays = {
    "f4": rng.random((12, 3), dtype=np.float32),
    "u1": rng.integers(0, 256, (9, 2, 2), dtype=np.uint8),
    "i8": np.arange(10, dtype="<i8"),
    "text": np.frombuffer(b"abcabcabd" * 40, dtype=np.uint8).reshape(40, 9),
}
for name, a in arrays.items():
    np.save(f"{name}.npy", a)
    with open(f"{name}.npy", "rb") as f:
        head = f.read(256)
    open(os.path.join(out, "npy", name), "wb").write(head)
    for codec in ("raw", "zstd"):
        st = f"st-{name}-{codec}"
        subprocess.run([zr, "import", st, f"{name}.npy", "--codec", codec], check=True)
        blob = b""
        for fn in ("store.zr", "meta.zr", "0.loc", "0.chunk", "dict.zr"):
            p = os.path.join(st, fn)
            data = open(p, "rb").read() if os.path.exists(p) else b""
            blob += struct.pack("<I", len(data)) + data
        open(os.path.join(out, "store", f"{name}-{codec}"), "wb").write(blob)
        open(os.path.join(out, "identity", f"{name}-{codec}"), "wb").write(
            open(os.path.join(st, "store.zr"), "rb").read())
for name, text in {"plain": b"\x03" + b"0 1 2 3\n", "commas": b"\x05" + b"10,20,,30\r\n7",
                   "cut": b"\x02" + b"123456 99", "bad": b"\x00" + b"1 x 2",
                   "big": b"\x01" + b"18446744073709551616"}.items():
    open(os.path.join(out, "indexlist", name), "wb").write(text)
