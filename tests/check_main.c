/*
 * check_main.c: the one runner for every Check suite of libloaderx. Each
 * tests/check_<module>.c exports Suite *suite_<module>(void), listed in
 * suites.h. CK_RUN_SUITE / CK_RUN_CASE pick a subset, as Check allows.
 */
#include <check.h>
#include <stdlib.h>

#include "tests/suites.h"

int main(void)
{
    SRunner *sr = srunner_create(NULL);
#define ZR_SUITE(name) srunner_add_suite(sr, suite_##name());
    ZR_SUITES
#undef ZR_SUITE
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
