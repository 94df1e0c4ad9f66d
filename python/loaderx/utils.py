"""train_dict: the dictionary for 'zstd_dict' stores, trained by hand.

A dictionary is trained once, on data that has settled, and handed to
DenseStore.create or RaggedStore.create as dict_bytes; a store never trains
its own. The tier (see loaderx.zrecord.DICT_TIERS) fixes both the
dictionary's size and the byte budget of the strided sample it is trained
on, so training costs the same whatever the records' size.
"""

import numpy as np

from ._lib import ffi, lib, libc
from .errors import check, invalid
from .zrecord import _Store, _readable_buffer, _tier_code

__all__ = ["train_dict"]


def train_dict(source, tier="balanced"):
    """Train a zstd dictionary on source; return it as bytes.

    source is one of:
      - an array: its records are the slices along axis 0 (a 1-D array's
        records are its elements);
      - a store: its stored records (for a Ragged store, with the shape
        prefix each record is compressed with);
      - an iterable of records: arrays of any dtype and shape, or bytes.
    tier is 'fast', 'balanced' (the default) or 'max'. Raises CodecError
    when there is too little data to train on.
    """
    code = _tier_code(tier)
    out = ffi.new("void **")
    out_len = ffi.new("size_t *")
    if isinstance(source, _Store):
        ptr = source._enter()
        try:
            check(lib.zr_train_dict_store(ptr, code, out, out_len))
        finally:
            source._leave()
    elif isinstance(source, np.ndarray):
        a = source
        if a.ndim == 0 or a.shape[0] == 0 or a.size == 0:
            raise invalid(f"an array of shape {a.shape} holds no records to "
                          "train on")
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        width = a.nbytes // a.shape[0]
        check(lib.zr_train_dict_buffer(_readable_buffer(a), width, a.shape[0],
                                       code, out, out_len))
    else:
        try:
            records = [np.ascontiguousarray(np.frombuffer(r, dtype=np.uint8))
                       if isinstance(r, (bytes, bytearray, memoryview))
                       else np.asarray(r) for r in source]
        except TypeError:
            raise invalid(f"cannot train on a {type(source).__name__}: "
                          "expected an array, a store or an iterable of "
                          "records") from None
        records = [r if r.flags.c_contiguous else r.copy(order="C")
                   for r in records if r.nbytes]
        if not records:
            raise invalid("no non-empty records to train on")
        bufs = [_readable_buffer(r.reshape(-1)) for r in records]
        ptrs = ffi.new("const void *[]", bufs)
        sizes = ffi.new("size_t[]", [r.nbytes for r in records])
        check(lib.zr_train_dict_records(ptrs, sizes, len(records), code, out,
                                        out_len))
    try:
        return bytes(ffi.buffer(out[0], out_len[0]))
    finally:
        libc.free(out[0])
