/*
 * abi_layout.c: prints the layout of every public struct of loaderx.h and
 * loader.h (its size, and each field's offset and size) and the value of
 * every integer macro, one per line, as this compiler lays them out.
 *
 * The Python binding restates these structs by hand for cffi, which in ABI
 * mode lays them out from its own declarations alone: nothing else would
 * notice a field added to the header and not to the binding, or a code
 * renumbered in one and not the other. python/tests/test_abi.py compares
 * this output with the binding. It needs only the headers, no library.
 *
 *   struct NAME SIZE
 *   field NAME FIELD OFFSET SIZE
 *   const NAME VALUE
 */
#include <inttypes.h>
#include <stdio.h>

#include <loaderx/loaderx.h>

#define STRUCT(T) printf("struct %s %zu\n", #T, sizeof(T))
#define FIELD(T, f) printf("field %s %s %zu %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))
#define CONST(c) printf("const %s %lld\n", #c, (long long)(c))
#define UCONST(c) printf("const %s %llu\n", #c, (unsigned long long)(c))

int main(void)
{
    STRUCT(zr_create_opts);
    FIELD(zr_create_opts, size);
    FIELD(zr_create_opts, codec);
    FIELD(zr_create_opts, dict);
    FIELD(zr_create_opts, dict_len);

    STRUCT(zr_rec);
    FIELD(zr_rec, data);
    FIELD(zr_rec, shape);
    FIELD(zr_rec, ndim);

    STRUCT(zr_view);
    FIELD(zr_view, data);
    FIELD(zr_view, nbytes);
    FIELD(zr_view, ndim);
    FIELD(zr_view, shape);

    STRUCT(zr_ragged_batch);
    FIELD(zr_ragged_batch, n);
    FIELD(zr_ragged_batch, recs);
    FIELD(zr_ragged_batch, buf);

    STRUCT(zr_ragged_dense);
    FIELD(zr_ragged_dense, n);
    FIELD(zr_ragged_dense, layout);
    FIELD(zr_ragged_dense, ndim);
    FIELD(zr_ragged_dense, shape);
    FIELD(zr_ragged_dense, nbytes);
    FIELD(zr_ragged_dense, data);
    FIELD(zr_ragged_dense, lengths);
    FIELD(zr_ragged_dense, offsets);
    FIELD(zr_ragged_dense, rec_ndim);
    FIELD(zr_ragged_dense, shapes);

    STRUCT(zr_store_stats);
    FIELD(zr_store_stats, size);
    FIELD(zr_store_stats, records);
    FIELD(zr_store_stats, live_bytes);
    FIELD(zr_store_stats, chunk_bytes);
    FIELD(zr_store_stats, reclaimable);
    FIELD(zr_store_stats, codec);
    FIELD(zr_store_stats, dict_bytes);

    STRUCT(zr_compact_result);
    FIELD(zr_compact_result, size);
    FIELD(zr_compact_result, records_moved);
    FIELD(zr_compact_result, bytes_before);
    FIELD(zr_compact_result, bytes_after);

    STRUCT(zr_problem);
    FIELD(zr_problem, size);
    FIELD(zr_problem, file);
    FIELD(zr_problem, entry);
    FIELD(zr_problem, what);

    STRUCT(zr_verify_report);
    FIELD(zr_verify_report, size);
    FIELD(zr_verify_report, records_checked);
    FIELD(zr_verify_report, nproblems);
    FIELD(zr_verify_report, nlisted);

    STRUCT(zr_sampler_info);
    FIELD(zr_sampler_info, size);
    FIELD(zr_sampler_info, n);
    FIELD(zr_sampler_info, batch);
    FIELD(zr_sampler_info, global);
    FIELD(zr_sampler_info, per_cycle);
    FIELD(zr_sampler_info, seed);
    FIELD(zr_sampler_info, rank);
    FIELD(zr_sampler_info, world);
    FIELD(zr_sampler_info, mode);
    FIELD(zr_sampler_info, block);
    FIELD(zr_sampler_info, window);

    STRUCT(zr_sampler_opts);
    FIELD(zr_sampler_opts, size);
    FIELD(zr_sampler_opts, mode);
    FIELD(zr_sampler_opts, batch);
    FIELD(zr_sampler_opts, seed);
    FIELD(zr_sampler_opts, rank);
    FIELD(zr_sampler_opts, world);
    FIELD(zr_sampler_opts, block);
    FIELD(zr_sampler_opts, window);

    STRUCT(zr_column);
    FIELD(zr_column, name);
    FIELD(zr_column, store);
    FIELD(zr_column, kind);
    FIELD(zr_column, data);
    FIELD(zr_column, nbytes);
    FIELD(zr_column, width);
    FIELD(zr_column, views);

    STRUCT(zr_batch);
    FIELD(zr_batch, step);
    FIELD(zr_batch, size);
    FIELD(zr_batch, indices);
    FIELD(zr_batch, nstreams);
    FIELD(zr_batch, streams);
    FIELD(zr_batch, aux);

    STRUCT(zr_loader_opts);
    FIELD(zr_loader_opts, size);
    FIELD(zr_loader_opts, mode);
    FIELD(zr_loader_opts, batch);
    FIELD(zr_loader_opts, seed);
    FIELD(zr_loader_opts, rank);
    FIELD(zr_loader_opts, world);
    FIELD(zr_loader_opts, start_step);
    FIELD(zr_loader_opts, depth);
    FIELD(zr_loader_opts, threads);
    FIELD(zr_loader_opts, transform);
    FIELD(zr_loader_opts, user);
    FIELD(zr_loader_opts, aux_free);
    FIELD(zr_loader_opts, block);
    FIELD(zr_loader_opts, window);

    CONST(ZR_OK);
    CONST(ZR_EINVAL);
    CONST(ZR_ENOMEM);
    CONST(ZR_EIO);
    CONST(ZR_ECORRUPT);
    CONST(ZR_ENOTSTORE);
    CONST(ZR_EEXIST);
    CONST(ZR_EBUSY);
    CONST(ZR_ERANGE);
    CONST(ZR_EDTYPE);
    CONST(ZR_ESHAPE);
    CONST(ZR_ETOOBIG);
    CONST(ZR_EEMPTY);
    CONST(ZR_EROFS);
    CONST(ZR_EKIND);
    CONST(ZR_ECODEC);
    CONST(ZR_ENOSPC);
    CONST(ZR_ELIMIT);
    CONST(ZR_EACCESS);
    UCONST(ZR_MAX_RECORD);
    CONST(ZR_MAX_NDIM);
    CONST(ZR_DENSE);
    CONST(ZR_RAGGED);
    CONST(ZR_CODEC_RAW);
    CONST(ZR_CODEC_ZSTD);
    CONST(ZR_CODEC_ZSTD_DICT);
    CONST(ZR_RDONLY);
    CONST(ZR_RDWR);
    CONST(ZR_NOMAP);
    CONST(ZR_PADDED);
    CONST(ZR_PACKED);
    CONST(ZR_PACKED_FLAT);
    CONST(ZR_TIER_FAST);
    CONST(ZR_TIER_BALANCED);
    CONST(ZR_TIER_MAX);
    CONST(ZR_SEQUENTIAL);
    CONST(ZR_IID);
    CONST(ZR_CYCLIC);
    CONST(ZR_QUASI);
    CONST(ZR_QUASI_BLOCK);
    CONST(ZR_QUASI_WINDOW);
    UCONST(ZR_SAMPLER_MAX_N);
    CONST(ZR_LOADER_MAX_DEPTH);
    CONST(ZR_LOADER_MAX_THREADS);
    CONST(ZR_PUSH_FORCE);
    CONST(ZR_PULL_FORCE);
    CONST(ZR_PULL_MODE_DEFAULT);
    CONST(ZR_VERSION_MAJOR);
    CONST(ZR_VERSION_MINOR);
    CONST(ZR_VERSION_PATCH);
    CONST(ZR_VERSION_NUMBER);
    return fflush(stdout) == 0 ? 0 : 1;
}
