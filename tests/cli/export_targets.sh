#!/bin/bash
# zr export replaces only a regular file, or creates one: into a FIFO or a
# character device it writes as cp does, a symlink is followed to the file
# it names, and a directory, a socket, a block device or a dangling symlink
# is refused with one line and nothing changed.
. "${srcdir:-.}/tests/cli/lib.sh"

py 'np.save("a.npy", np.arange(3 * 5, dtype="<i4").reshape(3, 5))'
zr import st a.npy -q

# kind PATH: the file type as stat names it, without following symlinks.
kind() {
    stat -c %F "$1"
}

zr export st new.npy -q
cmp -s new.npy a.npy || fail "export to a new file differs from the input"

echo old >old.npy
zr export st old.npy -q
cmp -s old.npy a.npy || fail "export over a regular file differs from the input"

# A symlink stays a symlink; the file it names gets the array.
echo old >target.npy
ln -s target.npy link.npy
zr export st link.npy -q
[ "$(kind link.npy)" = "symbolic link" ] || fail "the symlink became a $(kind link.npy)"
cmp -s target.npy a.npy || fail "the symlink's target does not hold the export"
ls | grep -q 'tmp-' && fail "a temporary file was left behind: $(ls)"

ln -s missing.npy dangling.npy
expect_fail 1 'dangling.npy is a symlink whose target cannot be reached' zr export st dangling.npy -q
[ "$(kind dangling.npy)" = "symbolic link" ] || fail "the dangling symlink became a $(kind dangling.npy)"
[ ! -e missing.npy ] || fail "export created the dangling symlink's target"

# A FIFO is written into, and is still a FIFO afterwards.
mkfifo pipe
cat pipe >from-pipe.npy &
reader=$!
zr export st pipe -q
wait "$reader"
[ "$(kind pipe)" = "fifo" ] || fail "the FIFO became a $(kind pipe)"
cmp -s from-pipe.npy a.npy || fail "what came through the FIFO differs from the input"

# /dev/stdout is a symlink to a pipe here, which has no path of its own.
zr export st /dev/stdout -q | cmp -s - a.npy || fail "export to /dev/stdout, a pipe, differs"

mkdir dir
expect_fail 1 'dir is a directory' zr export st dir -q

"$PY" -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'
expect_fail 1 'sock is a socket' zr export st sock -q
[ "$(kind sock)" = "socket" ] || fail "the socket became a $(kind sock)"

# Device nodes made here, not the system's: the same major and minor
# numbers as /dev/null and /dev/full, and a loop device's for a block one.
if mknod null c 1 3 2>/dev/null; then
    mknod full c 1 7
    mknod blk b 7 0
    zr export st null -q
    [ "$(kind null)" = "character special file" ] || fail "the null device became a $(kind null)"
    expect_fail 1 'full: No space left on device' zr export st full -q
    [ "$(kind full)" = "character special file" ] || fail "the full device became a $(kind full)"
    expect_fail 1 'blk is a block device' zr export st blk -q
    [ "$(kind blk)" = "block special file" ] || fail "the block device became a $(kind blk)"
    ln -s null link-null
    zr export st link-null -q
    [ "$(kind null)" = "character special file" ] || fail "export through a symlink replaced the device"
else
    echo "SKIP: the character and block device cases need CAP_MKNOD" >&2
fi
echo "export targets: ok"
