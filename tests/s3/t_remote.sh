#!/bin/sh
# Stores in an object store, read through the library (tests/s3_remote.c).
set -eu
exec "${top_builddir:-.}/tests/s3_remote"
