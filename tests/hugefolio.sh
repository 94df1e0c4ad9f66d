#!/bin/sh
# The nomap suite (huge-page mappings and the page-cache folios an append
# leaves) with a pool of 16 threads, whatever the machine has: an append
# cuts its writes over the pool, and each thread's share must still be
# whole 2 MiB stretches of the chunk.
LOADERX_THREADS=16 CK_RUN_SUITE=nomap exec ./tests/check_loaderx
