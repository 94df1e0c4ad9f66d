#!/bin/bash
# zr --help, zr help CMD, zr CMD --help and zr --version answer on stdout
# with exit 0; a missing or unknown command is a usage error (exit 2).
. "${srcdir:-.}/tests/cli/lib.sh"

commands="create import append export cat info delete compact verify train-dict recode mount push pull"

zr --help >help.txt
for c in $commands; do
    grep -q "^  $c " help.txt || fail "zr --help does not list $c"
    zr "$c" --help >a.txt
    zr help "$c" >b.txt
    head -n1 a.txt | grep -q "^Usage: zr $c" || fail "zr $c --help: $(head -n1 a.txt)"
    cmp -s a.txt b.txt || fail "zr help $c differs from zr $c --help"
    grep -q 'Exit status' a.txt || fail "zr $c --help lacks the exit status"
done
zr help >c.txt
cmp -s help.txt c.txt || fail "zr help differs from zr --help"

version=$(zr --version)
[[ $version =~ ^zr\ \(loaderx\)\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "zr --version: $version"
# The version is configure's, as the header and the library give it.
want=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")
[ "$version" = "zr (loaderx) $want" ] || fail "zr --version says '$version', configure $want"

expect_fail 2 'no command' zr
expect_fail 2 "'frobnicate' is not a zr command" zr frobnicate
expect_fail 2 "unknown option '--frobnicate'" zr --frobnicate
expect_fail 2 "takes one command name" zr help frobnicate
exit 0
