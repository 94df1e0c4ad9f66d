/*
 * abi.c: what tells a caller which library it is running against: the
 * version, as configure wrote it into version.h when the library was
 * built. A caller compares it with the ZR_VERSION_NUMBER of the header it
 * was compiled against.
 */
#include "internal.h"

ZR_API int zr_version(void)
{
    return ZR_VERSION_NUMBER;
}

ZR_API const char *zr_version_string(void)
{
    return ZR_VERSION_STRING;
}
