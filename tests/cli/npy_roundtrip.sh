#!/bin/bash
# .npy files of many dtypes, shapes and format versions go into a store and
# come back equal, as NumPy sees them: export, export --range, cat, cat
# --npy, append, info --json.
. "${srcdir:-.}/tests/cli/lib.sh"

# name dtype shape version; the data is random but reproducible.
py '
rng = np.random.default_rng(5)
cases = [
    ("f4",   "<f4",  (50, 3, 4), (1, 0)),
    ("f8",   "<f8",  (20,),      (1, 0)),
    ("bi4",  ">i4",  (30, 2),    (1, 0)),
    ("u1",   "|u1",  (100, 8),   (1, 0)),
    ("b1",   "|b1",  (40, 5),    (1, 0)),
    ("c8",   "<c8",  (10, 2),    (1, 0)),
    ("f2",   "<f2",  (33, 7),    (1, 0)),
    ("i8",   "<i8",  (7, 2, 2, 2), (1, 0)),
    ("i1",   "|i1",  (64,),      (1, 0)),
    ("u2",   "<u2",  (1, 1),     (1, 0)),
    ("s5",   "|S5",  (12,),      (1, 0)),
    ("u3",   "<U3",  (9, 2),     (1, 0)),
    ("v2",   "<f4",  (25, 6),    (2, 0)),
    ("v3",   "<i4",  (25, 6),    (3, 0)),
    ("empty", "<f4", (0, 3),     (1, 0)),
]
for name, dt, shape, ver in cases:
    dt = np.dtype(dt)
    if dt.kind in "SU":
        a = np.array(["".join(rng.choice(list("abcxyz"), 3)) for _ in range(int(np.prod(shape)))],
                     dtype=dt).reshape(shape)
    else:
        a = rng.integers(0, 250, size=shape).astype(dt)
        if dt.kind == "c":
            a = a + 1j * rng.integers(0, 9, size=shape)
    with open(name + ".npy", "wb") as f:
        np.lib.format.write_array(f, a.astype(dt), version=ver)
    print(name, file=open("names", "a"))
'

for name in $(cat names); do
    zr import "s_$name" "$name.npy"
    zr export "s_$name" "out_$name.npy"
    zr info "s_$name" --json >"info_$name.json"
done
py '
import json
for name in open("names").read().split():
    a = np.load(name + ".npy"); b = np.load("out_" + name + ".npy")
    assert a.dtype == b.dtype, (name, a.dtype, b.dtype)
    assert a.shape == b.shape and np.array_equal(a, b), name
    info = json.load(open("info_" + name + ".json"))
    assert info["kind"] == "dense" and info["codec"] == "zstd", info   # the default
    assert info["dtype"] == a.dtype.str and info["records"] == a.shape[0], info
    assert info["item_shape"] == list(a.shape[1:]), info
'

# Ranges and single records against NumPy slicing.
zr export s_f4 r.npy --range 10:17
zr export s_f4 r2.npy --range 45:
zr export s_f4 r3.npy --range :3
zr cat s_f4 3 0 49 3 >cat.bin
zr cat s_f4 5:9 >cat2.bin
zr cat s_f4 7 --npy >one.npy
zr cat s_bi4 2 29 --npy >two.npy
py '
a = np.load("f4.npy")
assert np.array_equal(np.load("r.npy"), a[10:17])
assert np.array_equal(np.load("r2.npy"), a[45:])
assert np.array_equal(np.load("r3.npy"), a[:3])
assert open("cat.bin", "rb").read() == a[[3, 0, 49, 3]].tobytes()
assert open("cat2.bin", "rb").read() == a[5:9].tobytes()
one = np.load("one.npy")
assert one.shape == (3, 4) and np.array_equal(one, a[7])
b = np.load("bi4.npy")
with open("two.npy", "rb") as f:
    for i in (2, 29):
        r = np.lib.format.read_array(f)
        assert r.dtype == b.dtype and np.array_equal(r, b[i])
    assert f.read() == b""
'

# Appending the same array twice more gives the concatenation.
zr append s_u1 u1.npy
zr append s_u1 u1.npy -q
zr export s_u1 app.npy
py 'a = np.load("u1.npy"); assert np.array_equal(np.load("app.npy"), np.concatenate([a, a, a]))'

# A Ragged store takes the rows of an array as records of the item shape.
zr create rg --dtype '<f4' --ragged
zr append rg f4.npy
zr cat rg 0:50 >rg.bin
zr cat rg 12 --npy >rg12.npy
py '
a = np.load("f4.npy")
assert open("rg.bin", "rb").read() == a.tobytes()
assert np.array_equal(np.load("rg12.npy"), a[12])
'

# create with an explicit shape, then append a matching array.
zr create made --dtype '<f4' --shape 3,4 --codec zstd
zr append made f4.npy
zr export made made.npy
py 'assert np.array_equal(np.load("made.npy"), np.load("f4.npy"))'
zr export made - >stdout.npy
cmp stdout.npy made.npy || fail "export to stdout differs from export to a file"
exit 0
