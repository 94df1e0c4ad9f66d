"""The exceptions of loaderx: one class per libloaderx status code.

Every failure of a library call becomes a StoreError subclass chosen by the
call's ZR_E* code and carrying the library's own message (zr_last_error,
which names the file, the entry and the detail). Checks that the binding
makes itself before calling the library, such as a dtype or shape that does
not match the store, raise the same classes so that callers catch one
hierarchy. Where a built-in exception means the same thing (IndexError,
ValueError, MemoryError, OSError ...), the class derives from it too, so
code written against NumPy's or the standard library's exceptions keeps
working.
"""

from . import _lib


class StoreError(Exception):
    """A libloaderx call failed.

    ``code`` is the library's ZR_E* status code (a negative number, from
    -30700 down) and ``message`` the library's description of what went
    wrong, which names the file and the entry but not the code.
    """

    code = None

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgumentError(StoreError, ValueError):
    """A bad argument: a bad dtype spelling, flag, shape or index list."""
    code = _lib.ZR_EINVAL


class InvalidIndexError(InvalidArgumentError, IndexError, TypeError):
    """A record key of a type that selects no records (a float, a string,
    None, a lone boolean): an IndexError as in NumPy and a TypeError as in
    Python's sequences."""
    code = _lib.ZR_EINVAL


class StoreMemoryError(StoreError, MemoryError):
    """The library could not allocate memory."""
    code = _lib.ZR_ENOMEM


class StoreIOError(StoreError, OSError):
    """The operating system reported an I/O error."""
    code = _lib.ZR_EIO


class CorruptStoreError(StoreError):
    """The store on disk is damaged or malformed."""
    code = _lib.ZR_ECORRUPT


class StoreNotFoundError(StoreError, FileNotFoundError):
    """The path does not hold a store."""
    code = _lib.ZR_ENOTSTORE


class StoreExistsError(StoreError, FileExistsError):
    """create: the path holds a store, holds other files, or is a file."""
    code = _lib.ZR_EEXIST


class StoreBusyError(StoreError):
    """The store is locked by another handle or process, or in use."""
    code = _lib.ZR_EBUSY


class IndexOutOfRangeError(StoreError, IndexError):
    """A record index is out of range."""
    code = _lib.ZR_ERANGE


class DtypeMismatchError(InvalidArgumentError, TypeError):
    """The data's dtype differs from the store's."""
    code = _lib.ZR_EDTYPE


class ShapeMismatchError(InvalidArgumentError):
    """The data's item shape differs from the store's."""
    code = _lib.ZR_ESHAPE


class RecordTooBigError(InvalidArgumentError):
    """A record is larger than the 2 GiB record limit."""
    code = _lib.ZR_ETOOBIG


class EmptyRecordError(InvalidArgumentError):
    """A record has zero bytes: physical records are never empty."""
    code = _lib.ZR_EEMPTY


class ReadOnlyStoreError(StoreError):
    """A write through a read-only handle."""
    code = _lib.ZR_EROFS


class StoreKindError(InvalidArgumentError):
    """A Dense operation on a Ragged store, or the reverse."""
    code = _lib.ZR_EKIND


class CodecError(StoreError):
    """Compression, decompression set-up or dictionary training failed."""
    code = _lib.ZR_ECODEC


class NoSpaceError(StoreIOError):
    """The disk is full."""
    code = _lib.ZR_ENOSPC


class LimitError(StoreIOError):
    """A limit of the process or system was reached: open files or mappings."""
    code = _lib.ZR_ELIMIT


class AccessDeniedError(StoreError, PermissionError):
    """A remote store refused access: wrong or missing credentials (403)."""
    code = _lib.ZR_EACCESS


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, StoreMemoryError, StoreIOError, CorruptStoreError,
    StoreNotFoundError, StoreExistsError, StoreBusyError,
    IndexOutOfRangeError, DtypeMismatchError, ShapeMismatchError,
    RecordTooBigError, EmptyRecordError, ReadOnlyStoreError, StoreKindError,
    CodecError, NoSpaceError, LimitError, AccessDeniedError)}


def error_from_code(code, message=None):
    """The exception for a failed call's code; the message defaults to the
    calling thread's zr_last_error()."""
    if message is None:
        message = _lib.last_error() or _lib.strerror(code)
    cls = _BY_CODE.get(code, StoreError)
    return cls(message, code)


def check(code):
    """Raise the exception for a negative status code; pass 0 through."""
    if code < 0:
        raise error_from_code(code)
    return code


def invalid(message, cls=InvalidArgumentError):
    """An exception for a check the binding makes itself: like the
    library's, its message says what is wrong and its code is the class's."""
    return cls(message)
