/* check_abi.c: what a compiled caller relies on: the version the library
 * reports. */
#include <stdio.h>

#include "config.h"
#include "tests/helpers.h"

/* The header's numbers, the library's and configure's AC_INIT version are
 * one version, written by configure, not copied by hand. */
START_TEST(version_is_configures)
{
    unsigned major, minor, patch;
    char end;
    ck_assert_int_eq(sscanf(PACKAGE_VERSION, "%u.%u.%u%c", &major, &minor, &patch, &end), 3);
    ck_assert_str_eq(zr_version_string(), PACKAGE_VERSION);
    ck_assert_str_eq(ZR_VERSION_STRING, PACKAGE_VERSION);
    ck_assert_int_eq(zr_version(), (int)(major * 10000 + minor * 100 + patch));
    ck_assert_int_eq(zr_version(), ZR_VERSION_NUMBER);
    ck_assert_uint_eq(ZR_VERSION_MAJOR, major);
    ck_assert_uint_eq(ZR_VERSION_MINOR, minor);
    ck_assert_uint_eq(ZR_VERSION_PATCH, patch);
}
END_TEST

Suite *suite_abi(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("abi");
    tcase_add_test(tc, version_is_configures);
    suite_add_tcase(s, tc);
    return s;
}
