/*
 * fuzz.h: the entry point every harness in tests/fuzz defines. Built with
 * clang -fsanitize=fuzzer it is driven by libFuzzer; built with any C
 * compiler and tests/fuzz/replay.c it replays corpus files (make check).
 */
#ifndef ZR_FUZZ_H
#define ZR_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
