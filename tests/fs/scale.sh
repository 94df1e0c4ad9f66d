#!/bin/bash
# scale.sh: real data and a large store. PNG icons found on the machine,
# imported as a Ragged uint8 store and mounted as ROOT itself with
# -o ext=.png, read back byte for byte; a store of a million records lists
# completely without the daemon growing by anything dataset-sized.
. "$(dirname "$0")/lib.sh"

find /usr/share/icons -name '*.png' -type f | LC_ALL=C sort | awk 'NR % 10 == 1' > "$tmp/icons.txt"
count=$(wc -l < "$tmp/icons.txt")
[ "$count" -ge 20 ] || fail "only $count PNG icons under /usr/share/icons (Debian package adwaita-icon-theme)"
"$MKSTORES" files "$tmp/icons" zstd < "$tmp/icons.txt" || fail "importing the icons"
m="$tmp/m"
mount_fs "$m" -o ext=.png "$tmp/icons"
pid=$DAEMON
[ "$(ls "$m" | wc -l)" -eq "$count" ] || fail "the icon store lists $(ls "$m" | wc -l) files, expected $count"
$CHECK files "$m" .png "$tmp/icons.txt"
first=$(head -n 1 "$tmp/icons.txt")
cmp "$m/0.png" "$first" || fail "0.png differs from $first"
[ "$(head -c 8 "$m/1.png" | od -An -c | tr -d ' ')" = '211PNG\r\n032\n' ] || fail "1.png does not start with the PNG signature"
grep -q '"records": '"$count" "$m/.stats" || fail ".stats of the icon store: $(cat "$m/.stats")"
unmount_fs "$m" "$pid"
ok "$count PNG icons read back through -o ext=.png"

n=1000000
"$MKSTORES" count "$tmp/big" $n || fail "building the large store"
m="$tmp/big.m"
# Under AddressSanitizer, freed memory is held back (quarantined), which
# would count libfuse's per-request allocations as growth; the variable
# means nothing to an ordinary build.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0" mount_fs "$m" "$tmp/big"
pid=$DAEMON
cat "$m/.stats" > /dev/null
before=$($CHECK hwm "$pid")
[ "$(ls -f "$m" | wc -l)" -eq $((n + 5)) ] || fail "ls -f of $n records lists $(ls -f "$m" | wc -l) entries"
after=$($CHECK hwm "$pid")
[ $((after - before)) -lt 6144 ] || fail "listing $n records grew the daemon from $before to $after KiB"
[ "$(stat -c %s "$m/$((n - 1))")" -eq 1 ] || fail "stat of the last record"
# Record i holds the byte i % 251.
[ "$(od -An -tu1 "$m/$((n - 1))" | tr -d ' ')" -eq $(((n - 1) % 251)) ] || fail "the last record's byte"
[ "$(od -An -tu1 "$m/123456" | tr -d ' ')" -eq $((123456 % 251)) ] || fail "record 123456's byte"
$CHECK errno read "$m/$n" ENOENT
unmount_fs "$m" "$pid"
ok "$n records list in a daemon that grew by $((after - before)) KiB"
