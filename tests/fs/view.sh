#!/bin/bash
# view.sh: the read-only view of a tree of stores, through ordinary tools:
# what is listed and hidden, sizes and blocks, the bytes of every record
# (cat, head, odd offsets, cp -r, mmap), find and du, the names that must
# not exist, the refusals (EROFS, EPERM), .stats, a damaged record and a
# store that does not open, parallel readers, and a clean unmount.
. "$(dirname "$0")/lib.sh"

make_tree
m="$tmp/m"
mount_fs "$m" "$tmp/tree"
pid=$DAEMON

# The scan reports the store that does not open, and nothing else.
if grep -v "bad_identity cannot be opened" "$m.log" | grep -q .; then
    fail "the daemon logged more than the bad store: $(head -n 3 "$m.log")"
fi

# Listing: only folders holding stores, only records and control files.
[ "$(ls "$m" | tr '\n' ' ')" = "damaged deep dense ragged_big ragged_raw ragged_zstd scalar_i8 " ] ||
    fail "root lists: $(ls "$m" | tr '\n' ' ')"
[ "$(ls "$m/dense" | tr '\n' ' ')" = "raw_big raw_f4 zstd_u2 " ] || fail "dense/ lists: $(ls "$m/dense")"
[ "$(ls "$m/deep/a" | tr '\n' ' ')" = "b " ] || fail "deep/a lists: $(ls "$m/deep/a")"
for s in $STORES; do
    n=$(records_of "$s")
    want=$( (printf '.compact\n.gather\n.stats\n'; seq 0 $((n - 1))) | LC_ALL=C sort)
    got=$(ls -A "$m/$s" | LC_ALL=C sort)
    [ "$got" = "$want" ] || fail "$s lists: $(echo $got)"
done
ok "listings show stores only, records 0..N-1 and control files"

# Every record, byte for byte, and its attributes.
$CHECK records "$m" "$tmp/exp" 1 $STORES
for s in $STORES; do
    cat "$m/$s/1" | cmp -s - "$tmp/exp/$s/1" || fail "cat $s/1 differs"
done
ok "every record matches"
$CHECK attrs "$m" "$tmp/exp" $STORES
[ "$(stat -c '%s %a %F' "$m/dense/raw_f4/7")" = "48 444 regular file" ] ||
    fail "stat of dense/raw_f4/7: $(stat -c '%s %a %F' "$m/dense/raw_f4/7")"

# Partial reads at odd offsets.
f=deep/a/b/ragged_dict/39
size=$(stat -c %s "$m/$f")
[ "$size" -gt 40 ] || fail "$f is too small for the offset test"
for off in 1 7 13 $((size - 3)); do
    [ "$(tail -c +$((off + 1)) "$m/$f" | head -c 11 | od -An -tx1)" = \
      "$(tail -c +$((off + 1)) "$tmp/exp/$f" | head -c 11 | od -An -tx1)" ] || fail "$f at offset $off"
done
[ "$(head -c 5 "$m/$f" | od -An -tx1)" = "$(head -c 5 "$tmp/exp/$f" | od -An -tx1)" ] || fail "head -c 5 $f"
dd if="$m/$f" of="$tmp/dd.out" bs=3 skip=5 count=4 status=none
dd if="$tmp/exp/$f" of="$tmp/dd.want" bs=3 skip=5 count=4 status=none
cmp -s "$tmp/dd.out" "$tmp/dd.want" || fail "dd at an odd offset of $f"
$CHECK mmap "$m/$f" "$tmp/exp/$f"
ok "partial reads and mmap"

# cp -r of a store folder, find and du.
cp -r "$m/ragged_zstd" "$tmp/copy"
for i in $(seq 0 $(($(records_of ragged_zstd) - 1))); do
    cmp -s "$tmp/copy/$i" "$tmp/exp/ragged_zstd/$i" || fail "cp -r: copy of $i differs"
done
cmp -s "$tmp/copy/.stats" "$m/ragged_zstd/.stats" || fail "cp -r: .stats differs"
ok "cp -r of a store folder"
total=0
for s in $STORES; do total=$((total + $(records_of "$s") + 3)); done
total=$((total + $(ls -A "$m/damaged/zstd_u1" | wc -l)))
[ "$(find "$m" -type f | wc -l)" -eq "$total" ] || fail "find counts $(find "$m" -type f | wc -l) files, expected $total"
[ "$(find "$m" -name '*.zr' -o -name '*.loc' -o -name '*.chunk' | wc -l)" -eq 0 ] || fail "store internals are visible"
want=$(cat "$tmp"/exp/ragged_raw/[0-9]* "$m/ragged_raw/.stats" "$m/ragged_raw/.compact" | wc -c)
[ "$(du -sb "$m/ragged_raw" | cut -f1)" -eq "$want" ] || fail "du -sb ragged_raw: $(du -sb "$m/ragged_raw"), expected $want"
[ "$(du -sB512 "$m/dense/raw_f4" | cut -f1)" -eq $((50 + 2)) ] || fail "du -sB512 dense/raw_f4: $(du -sB512 "$m/dense/raw_f4")"
ok "find and du"

# Names that are not canonical do not exist; nothing can be changed.
$CHECK names "$m/dense/raw_f4" 50
$CHECK names "$m/ragged_raw" 30
r="$m/ragged_raw"
$CHECK errno unlink "$r/3" EPERM  write "$r/3" EROFS  truncate "$r/3" EROFS  chmod "$r/3" EROFS \
    create "$r/new" EROFS  mkdir "$r/dir" EROFS  rmdir "$m/dense" EROFS  rename "$r/3" EROFS \
    symlink "$r/link" EROFS  write "$r/.stats" EROFS  create "$r/.compact" EROFS \
    create "$r/.delete" EROFS
ok "refusals: EPERM for rm, EROFS for every other change"

# A damaged record gives EIO for that file only; a store that does not
# open is shown, empty, and its files give EIO.
$CHECK errno read "$m/damaged/zstd_u1/4" EIO  read "$m/damaged/zstd_u1/4" EIO \
    read "$m/damaged/bad_identity/0" EIO
$CHECK records "$m" "$tmp/exp" 1 damaged/zstd_u1 2>&1 | grep -q "^FAIL: damaged/zstd_u1/4: EIO" ||
    fail "reading damaged/zstd_u1 did not stop at record 4"
for i in 0 1 2 3 5 6 7 8 9; do
    cmp -s "$m/damaged/zstd_u1/$i" "$tmp/exp/damaged/zstd_u1/$i" || fail "damaged/zstd_u1/$i differs"
done
[ -d "$m/damaged/bad_identity" ] || fail "a store that does not open is not shown"
[ -z "$(ls -A "$m/damaged/bad_identity")" ] || fail "a store that does not open lists files"
grep -q "bad_identity cannot be opened" "$m.log" || fail "the store that does not open is not reported"
ok "damaged record and broken store give EIO, the rest reads"

# Four parallel readers, each through every record twice.
readers=""
for k in 1 2 3 4; do
    $CHECK records "$m" "$tmp/exp" 2 $STORES > /dev/null &
    readers="$readers $!"
done
for p in $readers; do wait "$p" || fail "a parallel reader failed"; done
ok "4 parallel readers"

unmount_fs "$m" "$pid"
ok "unmounted; the daemon exited"
