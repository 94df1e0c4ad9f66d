/*
 * model.h: an in-memory model of a Ragged store of test records (see
 * records.h): the id of the record at each index. Delete follows the
 * documented swap-last rule, written here independently of the library.
 */
#ifndef ZR_TEST_MODEL_H
#define ZR_TEST_MODEL_H

#include <loaderx/loaderx.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zt_model {
    uint64_t *ids;
    uint64_t len, cap;
} zt_model;

void zt_model_free(zt_model *m);
void zt_model_copy(zt_model *dst, const zt_model *src);
void zt_model_append(zt_model *m, const uint64_t *ids, uint64_t n);
/* Swap-last delete of a batch: distinct indices, descending order. */
void zt_model_delete(zt_model *m, const uint64_t *idx, size_t n);

/* Append records ids[0..n) to the store (sizes up to max_size). */
int zt_append_ids(zr_store *s, const uint64_t *ids, uint64_t n, size_t max_size);

/* Compare the store with the model: 0 when every index holds the model's
 * record; otherwise -1 and a description in why. */
int zt_model_matches(zr_store *s, const zt_model *m, size_t max_size, char *why, size_t whylen);

#endif
