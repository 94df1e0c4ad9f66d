/* helpers.c: temporary folders for the tests. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers.h"

char *zt_tempdir(void)
{
    const char *base = getenv("TMPDIR");
    char *tmpl = zt_join(base && *base ? base : "/tmp", "loaderx-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    return tmpl;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void zt_rmtree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *zt_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}
