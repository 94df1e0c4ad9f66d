"""loaderx: typed persistent record stores and an endless data loader.

    from loaderx.zrecord import DenseStore, RaggedStore
    from loaderx.dataloader import DataLoader
    from loaderx.zsampler import Sampler
    from loaderx.utils import train_dict
    from loaderx.transfer import push, pull

The package binds libloaderx (cffi, ABI mode) and returns NumPy arrays.
``loaderx.library_path`` says which copy of the library was loaded; set
LOADERX_LIBRARY to the path of libloaderx.so to choose one.
``loaderx.__version__`` is that library's version.
"""

from ._lib import library_path, version_string
from .errors import (AccessDeniedError, CodecError, CorruptStoreError, DtypeMismatchError,
                     EmptyRecordError, IndexOutOfRangeError,
                     InvalidArgumentError, InvalidIndexError, LimitError, NoSpaceError,
                     ReadOnlyStoreError,
                     RecordTooBigError, ShapeMismatchError, StoreBusyError,
                     StoreError, StoreExistsError, StoreIOError,
                     StoreKindError, StoreMemoryError, StoreNotFoundError)
from .zrecord import DICT_TIERS, DenseStore, RaggedStore, open_store
from .zsampler import Sampler
from .dataloader import DataLoader
from .utils import train_dict
from .transfer import pull, push

__version__ = version_string()

__all__ = [
    "DenseStore", "RaggedStore", "open_store", "DataLoader", "Sampler",
    "train_dict", "DICT_TIERS", "library_path", "push", "pull",
    "StoreError", "InvalidArgumentError", "InvalidIndexError",
    "StoreMemoryError", "StoreIOError",
    "CorruptStoreError", "StoreNotFoundError", "StoreExistsError",
    "StoreBusyError", "IndexOutOfRangeError", "DtypeMismatchError",
    "ShapeMismatchError", "RecordTooBigError", "EmptyRecordError",
    "ReadOnlyStoreError", "StoreKindError", "CodecError", "NoSpaceError",
    "LimitError", "AccessDeniedError",
]
