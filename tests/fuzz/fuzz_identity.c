/* fuzz_identity.c: the store.zr decoder (zr_identity_decode) on any bytes. */
#include <stdlib.h>

#include "format.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct zr_identity id;
    if (zr_identity_decode(data, size, &id) == 0) {
        /* A decoded identity must encode again. */
        void *buf;
        size_t len;
        if (zr_identity_encode(&id, &buf, &len) == 0)
            free(buf);
    }
    return 0;
}
