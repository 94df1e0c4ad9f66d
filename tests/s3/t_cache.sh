#!/bin/bash
# t_cache.sh: the cache folder (LOADERX_CACHE_DIR) of remote stores deletes
# nothing that is not the cache's and trusts no other user. Two stores are
# pushed; then:
#  - a folder of the user's own files ($HOME, say), or of local stores
#    named as the cache names its folders, is refused as a cache folder,
#    and its files are all still there;
#  - in a cache folder, files and folders the cache did not make (a local
#    store among them) survive an eviction that removes the cache's own
#    files of another store; folders are 0700 and files 0600 whatever the
#    umask, and a folder an older release left 0755 is made 0700;
#  - a cache folder of another user's, one writable by others, and a link
#    another user made (the folder or one on the way to it) are refused,
#    naming the folder and what is wrong;
#  - a cache file replaced with a link to one of the user's files leaves
#    that file as it was, and the read is still right;
#  - root and a second user (nobody, through setpriv), each with a cache
#    folder of their own under one sticky folder, both read the store
#    right, and neither can use or read the other's.
# Run by tests/s3/run.sh, which gives the server's environment.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
[ -x "${top_builddir:-.}/src/.libs/zr" ] && zr=${top_builddir:-.}/src/.libs/zr
export LD_LIBRARY_PATH="${top_builddir:-.}/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
zr=$(cd "$(dirname "$zr")" && pwd)/$(basename "$zr")
LD_LIBRARY_PATH=$(cd "${top_builddir:-.}/lib/.libs" && pwd)${LD_LIBRARY_PATH#*/lib/.libs}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/s3-cache.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=t_cache/$$
export LOADERX_CACHE_BLOCK=65536
unset LOADERX_CACHE_DIR LOADERX_CACHE_SIZE

for k in a b; do
    "$PY" -c "
import numpy as np, sys
np.save(sys.argv[1], np.random.default_rng(int(sys.argv[2])).integers(0, 256, size=(64, 32768), dtype=np.uint8))
" "$tmp/$k.npy" "$([ $k = a ] && echo 1 || echo 2)"
    "$zr" import "$tmp/$k" "$tmp/$k.npy" -q
    "$zr" push "$tmp/$k" "s3://$LOADERX_TEST_BUCKET/$prefix/$k" -q
    "$zr" export "$tmp/$k" "$tmp/$k.local.npy" -q
done
a=s3://$LOADERX_TEST_BUCKET/$prefix/a
b=s3://$LOADERX_TEST_BUCKET/$prefix/b

# read URL DIR [ENV...]: export the remote store through cache folder DIR
# and check it against the local export; the error goes to $tmp/err.
read_through() {
    local url=$1 dir=$2 k=${1##*/}
    shift 2
    rm -f "$tmp/out.npy"
    env LOADERX_CACHE_DIR="$dir" "$@" "$zr" export "$url" "$tmp/out.npy" -q 2> "$tmp/err" &&
        cmp -s "$tmp/out.npy" "$tmp/$k.local.npy"
}

# refused DIR WORDS...: a read through DIR fails, naming DIR and saying WORDS.
refused() {
    local dir=$1
    shift
    if read_through "$a" "$dir"; then fail "cache folder $dir was taken"; fi
    grep -qF "$dir" "$tmp/err" || fail "the refusal of $dir does not name it: $(cat "$tmp/err")"
    for w in "$@"; do
        grep -qF -- "$w" "$tmp/err" || fail "the refusal of $dir does not say '$w': $(cat "$tmp/err")"
    done
}

# A folder of the user's: files one level down, with short names, old.
home=$tmp/home
mkdir -p "$home/docs" "$home/0123456789abcdef"
for f in a b c; do head -c 300000 /dev/urandom > "$home/docs/$f"; done
echo notes > "$home/0123456789abcdef/1.chunk"
echo plan > "$home/notes"
touch -d 2001-01-01 "$home"/docs/* "$home/0123456789abcdef/1.chunk" "$home/notes"
(cd "$home" && find . -type f -exec sha256sum {} + | sort) > "$tmp/home.sum"
refused "$home" "CACHEDIR.TAG" "which the cache did not make"
(cd "$home" && LOADERX_CACHE_DIR=. LOADERX_CACHE_SIZE=64K "$zr" export "$a" "$tmp/out.npy" -q) \
    2> "$tmp/err" && fail "cache folder . (a folder of the user's) was taken"
grep -q "CACHEDIR.TAG" "$tmp/err" || fail "the refusal of . said: $(cat "$tmp/err")"
(cd "$home" && find . -type f -exec sha256sum {} + | sort) | cmp -s - "$tmp/home.sum" ||
    fail "files of the user's changed under a refused cache folder"
[ ! -e "$home/CACHEDIR.TAG" ] || fail "a refused folder got a marker"
ok "a folder of the user's files is refused, and left as it was"

# A folder of local stores named by hashes, as the cache names its own:
# their chunks have the cache files' names, but meta.zr and store.zr are
# not the cache's.
stores=$tmp/stores
mkdir "$stores" && cp -r "$tmp/a" "$stores/0123456789abcdef"
touch -d 2001-01-01 "$stores/0123456789abcdef"/*
(cd "$stores" && find . -type f -exec sha256sum {} + | sort) > "$tmp/stores.sum"
refused "$stores" "0123456789abcdef" "which the cache did not make"
(cd "$stores" && find . -type f -exec sha256sum {} + | sort) | cmp -s - "$tmp/stores.sum" ||
    fail "a local store changed under a refused cache folder"
ok "a folder of local stores with hex names is refused, and left as it was"

# A cache folder of the cache's, with the user's files added to it: an
# eviction (store b read with the bound below store a's blocks) removes
# store a's cache files and none of the user's.
c=$tmp/c
read_through "$a" "$c" || fail "a read through a new cache folder: $(cat "$tmp/err")"
head -n 1 "$c/CACHEDIR.TAG" | grep -qx "Signature: 8a477f597d28d172789f06886806bc55" ||
    fail "a new cache folder has no CACHEDIR.TAG"
store_a=$(cd "$c" && ls -d [0-9a-f]*)
[ "$(echo "$store_a" | wc -w)" = 1 ] || fail "one store's cache folder expected: $store_a"
ls "$c/$store_a" | grep -q '\.chunk$' || fail "store a's cache folder has no chunk file"
mkdir "$c/docs" "$c/fedcba9876543210"
cp -r "$tmp/a" "$c/aaaaaaaaaaaaaaaa" # a local store put in the cache folder
echo keep > "$c/docs/1.chunk"
echo keep > "$c/notes"
echo keep > "$c/$store_a/notes"
echo keep > "$c/fedcba9876543210/readme"
touch -d 2001-01-01 "$c/docs/1.chunk" "$c/notes" "$c/$store_a/notes" "$c/fedcba9876543210/readme" \
    "$c/aaaaaaaaaaaaaaaa"/*
find "$c/$store_a" -name '*.chunk' -exec touch -d 2002-01-01 {} +
read_through "$b" "$c" LOADERX_CACHE_SIZE=1M || fail "a read of b through $c: $(cat "$tmp/err")"
if ls "$c/$store_a" | grep -q '\.chunk$'; then fail "no eviction of store a's files happened"; fi
for f in docs/1.chunk notes "$store_a/notes" fedcba9876543210/readme; do
    [ "$(cat "$c/$f" 2>/dev/null)" = keep ] || fail "eviction removed $c/$f, not the cache's"
done
for f in "$tmp/a"/*; do
    cmp -s "$f" "$c/aaaaaaaaaaaaaaaa/${f##*/}" || fail "eviction changed the local store's ${f##*/}"
done
read_through "$a" "$c" || fail "store a after its eviction: $(cat "$tmp/err")"
ok "eviction removes the cache's files and none other"

# Modes: folders 0700, files 0600, whatever the umask.
(umask 000 && read_through "$a" "$tmp/m/deep/cache") || fail "a read through a new deep cache folder"
for d in "$tmp/m" "$tmp/m/deep" "$tmp/m/deep/cache" "$tmp/m/deep/cache"/[0-9a-f]*; do
    [ "$(stat -c %a "$d")" = 700 ] || fail "$d has mode $(stat -c %a "$d"), not 700"
done
for f in "$tmp/m/deep/cache"/[0-9a-f]*/* "$tmp/m/deep/cache/CACHEDIR.TAG"; do
    [ "$(stat -c %a "$f")" = 600 ] || fail "$f has mode $(stat -c %a "$f"), not 600"
done
(umask 0177 && read_through "$a" "$tmp/m2") || fail "a read under umask 0177: $(cat "$tmp/err")"
for f in "$tmp/m2"/[0-9a-f]*/* "$tmp/m2/CACHEDIR.TAG"; do
    [ "$(stat -c %a "$f")" = 600 ] || fail "$f has mode $(stat -c %a "$f") under umask 0177"
done
chmod 755 "$tmp/m2" "$tmp/m2"/[0-9a-f]*
read_through "$a" "$tmp/m2" || fail "a read through a 0755 cache folder: $(cat "$tmp/err")"
for d in "$tmp/m2" "$tmp/m2"/[0-9a-f]*; do
    [ "$(stat -c %a "$d")" = 700 ] || fail "$d was left $(stat -c %a "$d"), not made 700"
done
ok "cache folders are 0700 and files 0600 under umask 000 and 0177"

# Other users. The test folder is opened to them, and holds a sticky
# folder like /tmp where each makes their own.
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent)
chmod 755 "$tmp"
shared=$tmp/shared
mkdir -m 1777 "$shared"
"${nobody[@]}" mkdir -m 0777 "$shared/evil"
chmod 0777 "$shared/evil" # past nobody's umask
refused "$shared/evil" "belongs to uid 65534"
mkdir "$shared/open" && chmod 0777 "$shared/open"
refused "$shared/open" "writable by others"
chmod 0770 "$shared/open"
refused "$shared/open" "writable by its group"
mkdir -m 700 "$tmp/victim"
"${nobody[@]}" ln -s "$tmp/victim" "$shared/link"
refused "$shared/link" "symbolic link of uid 65534"
refused "$shared/link/cache" "$shared/link, on the way to" "symbolic link of uid 65534"
mkdir -m 0777 "$tmp/wide" && mkdir -m 0700 "$tmp/wide/cache"
refused "$tmp/wide/cache" "above the cache folder" "not sticky"
[ -z "$(ls -A "$tmp/victim")" ] || fail "a refused link's target got files"
ok "another user's folder, a folder writable by others and another user's links are refused"

# A cache file swapped for a link to one of the user's files: the file
# stays as it was, the read is right.
victimfile=$tmp/victim/precious
echo precious > "$victimfile"
chunk=$(cd "$c/$store_a" && ls | grep '\.chunk$' | head -n 1)
rm "$c/$store_a/$chunk"
ln -s "$victimfile" "$c/$store_a/$chunk"
read_through "$a" "$c" || fail "a read with a cache file made a link: $(cat "$tmp/err")"
[ "$(cat "$victimfile")" = precious ] || fail "a link in the cache folder had its target written"
ok "a cache file made a link to the user's file leaves that file alone"

# Two users, a cache folder each under the sticky folder: both read right,
# and neither may use or read the other's.
read_through "$a" "$shared/root-cache" || fail "root's read: $(cat "$tmp/err")"
"${nobody[@]}" env LOADERX_CACHE_DIR="$shared/nobody-cache" "$zr" export "$a" "$shared/n1.npy" \
    -q 2> "$tmp/err" || fail "nobody's read: $(cat "$tmp/err")"
cmp -s "$shared/n1.npy" "$tmp/a.local.npy" || fail "nobody read another store"
[ "$(stat -c %U "$shared/nobody-cache")" = nobody ] || fail "nobody's cache folder is not nobody's"
ls "$shared/nobody-cache"/[0-9a-f]*/*.chunk > /dev/null || fail "nobody's cache holds no chunk"
"${nobody[@]}" env LOADERX_CACHE_DIR="$shared/nobody-cache" "$zr" export "$a" "$shared/n2.npy" \
    -q 2> "$tmp/err" || fail "nobody's second read: $(cat "$tmp/err")"
cmp -s "$shared/n2.npy" "$tmp/a.local.npy" || fail "nobody's second read (from its cache) differs"
"${nobody[@]}" env LOADERX_CACHE_DIR="$shared/root-cache" "$zr" export "$a" "$shared/n3.npy" \
    -q 2> "$tmp/err" && fail "nobody used root's cache folder"
grep -q "root-cache" "$tmp/err" || fail "nobody's refusal said: $(cat "$tmp/err")"
ls "$shared/root-cache"/[0-9a-f]*/*.chunk > /dev/null || fail "root's cache holds no chunk"
if "${nobody[@]}" cat "$shared/root-cache"/*/*.chunk > /dev/null 2>&1; then
    fail "nobody read root's cache files"
fi
refused "$shared/nobody-cache" "belongs to uid 65534"
ok "two users' cache folders under one sticky folder"
