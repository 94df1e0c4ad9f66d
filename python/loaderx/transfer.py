"""push and pull: a store copied to and from an object store.

    loaderx.push("data/train", "s3://datasets/train")
    loaderx.pull("s3://datasets/train", "/scratch/train")

Both are libloaderx's zr_push and zr_pull (lib/transfer.c), as `zr push`
and `zr pull` run them: push sends meta.zr last, so that a prefix whose
upload has not finished is no store to any reader, and pull fills a
folder beside the target and renames it into place once it is whole. The
S3 settings are the AWS tools' (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).
The GIL is released while they run.
"""

from ._lib import ZR_PULL_FORCE, ZR_PULL_MODE_DEFAULT, ZR_PUSH_FORCE, ffi, lib
from .errors import check, invalid
from .zrecord import _c_path

__all__ = ["push", "pull"]


def push(path, url, force=False):
    """Upload the local store at path to url ("s3://bucket/prefix").

    Raises StoreExistsError when the prefix holds any object, unless force
    (which replaces it), or when another push to it is under way or
    published first (of racing pushes one wins); StoreBusyError when the store is being written or
    has a delete or compaction to finish; CorruptStoreError when the check
    after the upload fails; AccessDeniedError, StoreIOError for the server.
    """
    flags = ZR_PUSH_FORCE if force else 0
    check(lib.zr_push(_c_path(path), _c_path(url), flags, ffi.NULL, ffi.NULL))


def pull(url, path, force=False, mode=None):
    """Download the store at url into the local folder path, whole or not
    at all.

    The files get mode (an int such as 0o644; None for 0o600) exactly,
    whatever the umask, and the folder the same with x added where r is
    set (0o644 gives 0o755). Raises InvalidArgumentError (a ValueError)
    for a mode outside 0o777 or without the owner's read and write;
    StoreNotFoundError when url holds no store or an upload that has not
    finished; StoreExistsError when path exists, unless force (which
    replaces a store folder nobody has open).
    """
    flags = ZR_PULL_FORCE if force else 0
    if mode is None:
        mode = ZR_PULL_MODE_DEFAULT
    if isinstance(mode, bool) or not isinstance(mode, int) or mode & ~0o777 or \
            mode & 0o600 != 0o600:
        raise invalid("mode %r is not a file mode of 0o600 to 0o777 that lets the "
                      "owner read and write" % (mode,))
    check(lib.zr_pull_mode(_c_path(url), _c_path(path), flags, mode, ffi.NULL,
                           ffi.NULL))
