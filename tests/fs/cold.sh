#!/bin/bash
# cold.sh: record files and .gather read while the stores' pages are not
# in the page cache, which zrecordfs reads with read(2) or the library's
# planned gather instead of the mappings (fs/cold.c): every mode gives the
# bytes a warm read gives, a record partly cached too, and cp -r and tar
# of store folders (the read-ahead's sequential readers) copy every record.
. "$(dirname "$0")/lib.sh"

make_tree

# drop PATH...: drop the page cache of every file under PATH (they are
# not mapped by anyone while no daemon serves them), then check with
# fincore, where present, that the chunk files of the wide Dense store
# really left it, so that the reads below are cold ones.
drop() {
    $PY - "$@" <<'PYEOF' || fail "dropping the page cache"
import os, sys
for top in sys.argv[1:]:
    for d, _, files in os.walk(top):
        for f in files:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
PYEOF
    if command -v fincore > /dev/null; then
        local res
        res=$(find "$tmp/tree/dense/raw_big" -type f -size +40k -exec fincore -nb -o RES {} + |
            awk '{ s += $1 } END { print s + 0 }')
        [ "$res" -eq 0 ] || fail "the chunk files of dense/raw_big keep $res bytes cached"
    fi
}

# cold_round NAME CHECK OPTIONS...: a fresh mount with OPTIONS over a
# dropped tree; every record read once cold, then once warm, checked by
# zrfs_check.py CHECK (records: the payload; npy: whole NPY files).
cold_round() {
    local name=$1 check=$2
    shift 2
    local m="$tmp/m-$name"
    drop "$tmp/tree"
    mount_fs "$m" "$@" "$tmp/tree"
    local pid=$DAEMON
    if [ "$check" = records ]; then
        $CHECK records "$m" "$tmp/exp" 2 $STORES > /dev/null
    else
        $CHECK npy "$m" "$tmp/exp" $STORES > /dev/null
        $CHECK npy "$m" "$tmp/exp" $STORES > /dev/null
    fi
    unmount_fs "$m" "$pid"
    ok "$name: every record cold, then warm"
}

cold_round default records
cold_round noopen records -o noopen
cold_round rw records -o rw
cold_round mt records -o mt
cold_round npy npy -o npy

# Several readers in one cold folder at once: the kernel sends their
# LOOKUPs together (fs/mount.c), which the cold threads answer side by
# side, on the one-thread loop and on the multi-threaded one.
for opts in "" "-o mt" "-o rw"; do
    m="$tmp/m-lookups"
    drop "$tmp/tree"
    mount_fs "$m" $opts "$tmp/tree"
    pid=$DAEMON
    $CHECK lookups "$m" "$tmp/exp" $STORES > /dev/null
    unmount_fs "$m" "$pid"
done
ok "parallel lookups and reads in cold folders"

# A record whose first page is cached and the rest not: the cold path
# reads the rest, and the file is whole.
m="$tmp/m"
drop "$tmp/tree"
mount_fs "$m" "$tmp/tree"
pid=$DAEMON
for i in 0 5 11; do
    head -c 100 "$m/dense/raw_big/$i" > /dev/null
    $PY - "$m/dense/raw_big/$i" <<'PYEOF' || fail "dropping the mount's copy of dense/raw_big/$i"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
PYEOF
    cmp -s "$m/dense/raw_big/$i" "$tmp/exp/dense/raw_big/$i" || fail "dense/raw_big/$i, partly cached, differs"
done
ok "records partly cached"

# .gather of batches not in memory: planned by the library rather than
# served by reference from the mapping, the same bytes either way.
unmount_fs "$m" "$pid"
drop "$tmp/tree"
mount_fs "$m" "$tmp/tree"
pid=$DAEMON
$CHECK gather "$m" "$tmp/exp" $STORES > /dev/null
unmount_fs "$m" "$pid"
drop "$tmp/tree"
mount_fs "$m" "$tmp/tree"
pid=$DAEMON
$CHECK gather_direct "$m" "$tmp/exp" $STORES > /dev/null
$CHECK gather_direct "$m" "$tmp/exp" $STORES > /dev/null
ok ".gather cold, then warm"

# Sequential readers: cp -r and tar read each folder's records in order,
# which starts the read-ahead; every copied record is the record. A
# read-write mount shows .delete, which cannot be read: tar leaves it out.
unmount_fs "$m" "$pid"
for opts in "" "-o rw"; do
    rm -rf "$tmp/copy" "$tmp/untar"
    mkdir "$tmp/copy" "$tmp/untar"
    if [ -z "$opts" ]; then
        drop "$tmp/tree"
        mount_fs "$m" "$tmp/tree"
        pid=$DAEMON
        cp -r "$m/dense" "$m/ragged_big" "$m/ragged_zstd" "$tmp/copy/" || fail "cp -r"
        unmount_fs "$m" "$pid"
    fi
    drop "$tmp/tree"
    mount_fs "$m" $opts "$tmp/tree"
    pid=$DAEMON
    tar -C "$m" --exclude=.delete --exclude=.compact -cf - dense ragged_big ragged_zstd |
        tar -C "$tmp/untar" -xf - || fail "tar ($opts)"
    unmount_fs "$m" "$pid"
    for s in dense/raw_f4 dense/zstd_u2 dense/raw_big ragged_big ragged_zstd; do
        n=$(records_of "$s")
        for ((i = 0; i < n; i++)); do
            [ -n "$opts" ] || cmp -s "$tmp/copy/$s/$i" "$tmp/exp/$s/$i" || fail "cp -r: $s/$i differs"
            cmp -s "$tmp/untar/$s/$i" "$tmp/exp/$s/$i" || fail "tar ($opts): $s/$i differs"
        done
    done
    if [ -z "$opts" ]; then ok "cp -r and tar of cold stores"; else ok "$opts: tar of cold stores"; fi
done
