/* helpers.h: shared test utilities: temporary folders and checked calls. */
#ifndef ZR_TEST_HELPERS_H
#define ZR_TEST_HELPERS_H

#include <check.h>
#include <loaderx/loaderx.h>

/* Assert that a libloaderx call returned 0, printing zr_last_error(). */
#define ZR_OK_CALL(call)                                                                   \
    do {                                                                                   \
        int zr_rc_ = (call);                                                               \
        ck_assert_msg(zr_rc_ == 0, "%s failed: %d %s", #call, zr_rc_, zr_last_error());    \
    } while (0)

/* Assert that a call failed with exactly the given code. */
#define ZR_FAIL_CALL(call, code)                                                           \
    do {                                                                                   \
        int zr_rc_ = (call);                                                               \
        ck_assert_msg(zr_rc_ == (code), "%s returned %d (%s), expected %s", #call, zr_rc_,  \
                      zr_last_error(), #code);                                             \
    } while (0)

/* Make a fresh temporary folder; returns a malloc'd path. */
char *zt_tempdir(void);
/* Remove a folder tree (rm -rf). */
void zt_rmtree(const char *path);
/* path/name joined into a malloc'd string. */
char *zt_join(const char *dir, const char *name);

#endif
