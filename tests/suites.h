/* The Check suites run by tests/check_main.c, one ZR_SUITE line each. */
#ifndef ZR_TEST_SUITES_H
#define ZR_TEST_SUITES_H

#include <check.h>

#define ZR_SUITES \
    ZR_SUITE(abi) \
    ZR_SUITE(sampler) \
    ZR_SUITE(loader) \
    ZR_SUITE(format) \
    ZR_SUITE(decimal) \
    ZR_SUITE(indexlist) \
    ZR_SUITE(maint) \
    ZR_SUITE(npy) \
    ZR_SUITE(dense) \
    ZR_SUITE(nomap) \
    ZR_SUITE(cold) \
    ZR_SUITE(ragged) \
    ZR_SUITE(codec) \
    ZR_SUITE(corrupt) \
    ZR_SUITE(badcall) \
    ZR_SUITE(lock) \
    ZR_SUITE(concurrency) \
    ZR_SUITE(faultloop) \
    ZR_SUITE(oom) \
    ZR_SUITE(powercut) \
    ZR_SUITE(edges) \
    ZR_SUITE(manyfiles) \
    ZR_SUITE(workq)

#define ZR_SUITE(name) Suite *suite_##name(void);
ZR_SUITES
#undef ZR_SUITE

#endif
