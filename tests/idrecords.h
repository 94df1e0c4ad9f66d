/*
 * idrecords.h: reproducible test records. Record id r is a Ragged |u1
 * record whose size and bytes are a pure function of r, and whose first
 * eight bytes are r itself, so any record read back can be checked
 * against the id it should be.
 */
#ifndef ZR_TEST_IDRECORDS_H
#define ZR_TEST_IDRECORDS_H

#include <stddef.h>
#include <stdint.h>

uint64_t zt_mix(uint64_t x);
/* The size of record id r: 8..max_size bytes. */
size_t zt_record_size(uint64_t r, size_t max_size);
/* Fill out (zt_record_size(r, max_size) bytes) with record r. */
void zt_record_fill(uint64_t r, uint8_t *out, size_t size);
/* 1 when the size bytes at p are exactly record r. */
int zt_record_is(uint64_t r, const uint8_t *p, size_t size, size_t max_size);

#endif
