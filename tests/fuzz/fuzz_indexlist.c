/* fuzz_indexlist.c: the control-file index parser of zrecordfs
 * (fs/indexlist.h). The first byte chooses where the text is cut into
 * two writes, as a client may split it. */
#include "fs/indexlist.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t cut = data[0] % size;
    const char *text = (const char *)data + 1;
    size--;
    cut = cut < size ? cut : size;
    struct zfs_idxlist l = {0};
    zfs_idxlist_init(&l, 1000000, 4096);
    if (zfs_idxlist_feed(&l, text, cut) == 0 && zfs_idxlist_feed(&l, text + cut, size - cut) == 0)
        zfs_idxlist_finish(&l);
    zfs_idxlist_free(&l);
    return 0;
}
