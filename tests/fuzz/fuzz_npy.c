/* fuzz_npy.c: the .npy header parser of zr (src/npy.h) on any bytes. */
#include "src/npy.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct npy_header h;
    char err[256];
    uint64_t itemsize, nbytes;
    if (npy_preamble(data, size, &h, err, sizeof err) != NPY_OK)
        return 0;
    if (h.data_offset > size)
        return 0;
    if (npy_parse(data, size, &h, err, sizeof err) == NPY_OK)
        npy_check_supported(&h, &itemsize, &nbytes, err, sizeof err);
    return 0;
}
