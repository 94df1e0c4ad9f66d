#!/bin/sh
# A short kill soak for make check; the long run is documented in doc/testing.md.
exec ./tests/crash_soak --cycles "${LOADERX_SOAK_CYCLES:-25}" --seed "${LOADERX_SOAK_SEED:-1}"
