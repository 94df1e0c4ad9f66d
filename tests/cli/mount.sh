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

expect_fail 2 'missing ROOT or MOUNTPOINT' zr mount onlyroot
expect_fail 2 'missing ROOT or MOUNTPOINT' zr mount -o ro root
zr mount --help | grep -q '^Usage: zr mount' || fail "zr mount --help"
exit 0
