#!/bin/bash
# zr mount runs zrecordfs with its arguments unchanged (found on PATH when
# it is not next to zr), and says clearly when zrecordfs is missing.
. "${srcdir:-.}/tests/cli/lib.sh"

# zrecordfs is absent from this PATH and from zr's own folder.
PATH=/usr/bin:/bin expect_fail 1 'mount: zrecordfs was not found next to zr .* or on PATH' \
    zr mount root mnt -o ro
[ -x "$(dirname "$ZR")/zrecordfs" ] && fail "a zrecordfs lies next to the zr under test"

# A program named zrecordfs on PATH receives exactly the arguments, and
# its exit status is zr's.
mkdir bin
cat >bin/zrecordfs <<'SH'
#!/bin/sh
for a in "$@"; do printf '%s\n' "$a"; done >args.txt
exit 3
SH
chmod +x bin/zrecordfs
rc=0
PATH=$T/bin:/usr/bin:/bin zr mount "my root" mnt -o ro,npy -f || rc=$?
[ "$rc" = 3 ] || fail "zr mount exited $rc, expected zrecordfs's 3"
printf '%s\n' "my root" mnt -o ro,npy -f | cmp -s - args.txt || fail "zrecordfs got: $(cat args.txt)"

# --version is zrecordfs's and needs no operands.
PATH=$T/bin:/usr/bin:/bin zr mount --version || rc=$?
printf '%s\n' --version | cmp -s - args.txt || fail "zr mount --version gave zrecordfs: $(cat args.txt)"
expect_fail 2 'missing ROOT or MOUNTPOINT' zr mount onlyroot
expect_fail 2 'missing ROOT or MOUNTPOINT' zr mount -o ro root
zr mount --help | grep -q '^Usage: zr mount' || fail "zr mount --help"

# With the real zrecordfs of this build on PATH, zr mount shows a store
# as files, ready when zr returns, and fusermount3 -u ends it.
zrfs_dir=$top_builddir/fs
[ -x "$zrfs_dir/zrecordfs" ] || fail "$zrfs_dir/zrecordfs is not built"
[ -c /dev/fuse ] || fail "/dev/fuse is missing: FUSE is required"
command -v fusermount3 >/dev/null || fail "fusermount3 is missing (Debian package fuse3)"
trap 'mountpoint -q "$T/mnt" && { fusermount3 -u "$T/mnt" || fusermount3 -uz "$T/mnt"; }; rm -rf "$T"' EXIT
py 'np.save("a.npy", np.arange(5 * 3, dtype="<i2").reshape(5, 3))'
zr import st a.npy
mkdir mnt
PATH=$zrfs_dir:$PATH zr mount st mnt -o npy
mountpoint -q mnt || fail "zr mount returned before the mount was ready"
[ "$(ls mnt | LC_ALL=C sort | tr '\n' ' ')" = "0.npy 1.npy 2.npy 3.npy 4.npy " ] || fail "ls: $(ls mnt)"
py '
a = np.load("a.npy")
for i in range(5):
    assert np.array_equal(np.load("mnt/%d.npy" % i), a[i]), i
'
fusermount3 -u mnt
exit 0
