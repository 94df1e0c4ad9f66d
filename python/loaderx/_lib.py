"""The C declarations of libloaderx and the loading of the shared library.

The binding uses cffi in ABI mode: nothing is compiled when the package is
installed, and the library is opened at import time with dlopen. The
declarations below restate lib/loaderx/loaderx.h and lib/loaderx/loader.h;
in ABI mode cffi lays out structs from these declarations alone, so they
must match the headers field for field.

Where the library comes from, in order:

1. the file named by the LOADERX_LIBRARY environment variable (and nothing
   else when it is set, so that a wrong setting is reported, not hidden);
2. the build tree, when the package is imported from the source folder of
   a built checkout (``lib/.libs`` beside ``python/``);
3. the library folder recorded when ``make install`` installed the package;
4. the library folder of an installation prefix, found from where the
   package itself was installed (``PREFIX/lib/pythonX.Y/site-packages``);
5. the system's search (``ctypes.util.find_library`` and the dynamic
   loader's default path).

When none can be opened, the ImportError lists every candidate and the
reason each one failed.
"""

import ast
import ctypes.util
import os

import cffi

CDEF = r"""
typedef struct zr_store zr_store;

typedef struct zr_create_opts {
    size_t size;
    int codec;
    const void *dict;
    size_t dict_len;
} zr_create_opts;

typedef struct zr_rec {
    const void *data;
    const uint64_t *shape;
    uint32_t ndim;
} zr_rec;

typedef struct zr_view {
    const void *data;
    uint64_t nbytes;
    uint32_t ndim;
    uint64_t shape[32];
} zr_view;

typedef struct zr_ragged_dense {
    size_t n;
    int layout;
    uint32_t ndim;
    uint64_t shape[33];
    uint64_t nbytes;
    void *data;
    int64_t *lengths;
    int64_t *offsets;
    uint32_t rec_ndim;
    int64_t *shapes;
} zr_ragged_dense;

typedef struct zr_stats {
    size_t size;
    uint64_t records;
    uint64_t live_bytes;
    uint64_t chunk_bytes;
    uint64_t reclaimable;
    int codec;
    uint64_t dict_bytes;
} zr_store_stats;

typedef struct zr_compact_result {
    size_t size;
    uint64_t records_moved;
    uint64_t bytes_before;
    uint64_t bytes_after;
} zr_compact_result;

typedef struct zr_problem {
    size_t size;
    char file[64];
    uint64_t entry;
    char what[192];
} zr_problem;

typedef struct zr_verify_report {
    size_t size;
    uint64_t records_checked;
    uint64_t nproblems;
    size_t nlisted;
} zr_verify_report;

int zr_version(void);
const char *zr_version_string(void);

const char *zr_strerror(int code);
const char *zr_last_error(void);
int zr_last_error_code(void);
int64_t zr_dtype_itemsize(const char *dtype);

int zr_dense_create(zr_store **out, const char *path, const char *dtype,
                    const uint64_t *item_shape, uint32_t ndim,
                    const zr_create_opts *opts);
int zr_ragged_create(zr_store **out, const char *path, const char *dtype,
                     const zr_create_opts *opts);
int zr_open(zr_store **out, const char *path, int mode);
void zr_close(zr_store *s);
int zr_sync(zr_store *s);

int zr_kind(const zr_store *s);
uint64_t zr_len(const zr_store *s);
const char *zr_dtype(const zr_store *s);
uint64_t zr_itemsize(const zr_store *s);
const uint64_t *zr_item_shape(const zr_store *s, uint32_t *ndim);
uint64_t zr_record_width(const zr_store *s);
int zr_codec(const zr_store *s);
const char *zr_codec_name(int codec);
const char *zr_path(const zr_store *s);
int zr_writable(const zr_store *s);

int zr_append_dense(zr_store *s, const char *dtype, const uint64_t *item_shape,
                    uint32_t ndim, const void *data, uint64_t n, uint64_t *first);
int zr_append_ragged(zr_store *s, const char *dtype, const zr_rec *recs,
                     uint64_t n, uint64_t *first);

int zr_gather_dense(zr_store *s, const uint64_t *idx, size_t n, void *dst);
int zr_ragged_sizes(zr_store *s, const uint64_t *idx, size_t n, uint64_t *sizes);
int zr_gather_ragged(zr_store *s, const uint64_t *idx, size_t n, void *dst,
                     const uint64_t *offsets);

int zr_ragged_densify(const zr_view *recs, size_t n, uint64_t itemsize,
                      int layout, uint64_t rows, const void *pad,
                      zr_ragged_dense **out);
int zr_gather_ragged_dense(zr_store *s, const uint64_t *idx, size_t n,
                           int layout, uint64_t rows, const void *pad,
                           zr_ragged_dense **out);
void zr_ragged_dense_free(zr_ragged_dense *d);

int zr_stats(zr_store *s, zr_store_stats *st);
int zr_delete(zr_store *s, const uint64_t *idx, size_t n);
int zr_compact(zr_store *s, zr_compact_result *res);
int zr_verify(zr_store *s, zr_verify_report **out);
void zr_verify_report_free(zr_verify_report *r);
const zr_problem *zr_verify_problem(const zr_verify_report *r, size_t k);

int zr_train_dict_buffer(const void *buf, size_t width, size_t n, int tier,
                         void **dict, size_t *dict_len);
int zr_train_dict_records(const void *const *recs, const size_t *sizes, size_t n,
                          int tier, void **dict, size_t *dict_len);
int zr_train_dict_store(zr_store *s, int tier, void **dict, size_t *dict_len);
int zr_tier_sizes(int tier, size_t *dict_bytes, size_t *sample_bytes);
int zr_threads(void);

typedef void (*zr_progress_fn)(void *user, uint64_t done, uint64_t total);
int zr_push(const char *path, const char *url, unsigned flags, zr_progress_fn fn,
            void *user);
int zr_pull(const char *url, const char *path, unsigned flags, zr_progress_fn fn,
            void *user);
int zr_pull_mode(const char *url, const char *path, unsigned flags, unsigned mode,
                 zr_progress_fn fn, void *user);

typedef struct zr_sampler zr_sampler;

typedef struct zr_sampler_info {
    size_t size;
    uint64_t n;
    uint64_t batch;
    uint64_t global;
    uint64_t per_cycle;
    uint64_t seed;
    uint32_t rank;
    uint32_t world;
    int mode;
    uint64_t block;
    uint64_t window;
} zr_sampler_info;

typedef struct zr_sampler_opts {
    size_t size;
    int mode;
    uint64_t batch;
    uint64_t seed;
    uint32_t rank;
    uint32_t world;
    uint64_t block;
    uint64_t window;
} zr_sampler_opts;

int zr_sampler_create(zr_sampler **out, uint64_t n, uint64_t batch, int mode,
                      uint64_t seed, uint32_t rank, uint32_t world);
int zr_sampler_create_opts(zr_sampler **out, uint64_t n,
                           const zr_sampler_opts *opts);
void zr_sampler_free(zr_sampler *sm);
int zr_sampler_batch(const zr_sampler *sm, uint64_t step, uint64_t *out);
int zr_sampler_get_info(const zr_sampler *sm, zr_sampler_info *info);

typedef struct zr_loader zr_loader;

typedef struct zr_column {
    const char *name;
    zr_store *store;
    int kind;
    void *data;
    uint64_t nbytes;
    uint64_t width;
    zr_view *views;
} zr_column;

typedef struct zr_batch {
    uint64_t step;
    size_t size;
    const uint64_t *indices;
    size_t nstreams;
    zr_column *streams;
    void *aux;
} zr_batch;

typedef int (*zr_transform_fn)(zr_batch *b, void *user);

typedef struct zr_loader_opts {
    size_t size;
    int mode;
    uint64_t batch;
    uint64_t seed;
    uint32_t rank;
    uint32_t world;
    uint64_t start_step;
    unsigned depth;
    unsigned threads;
    zr_transform_fn transform;
    void *user;
    void (*aux_free)(void *aux, void *user);
    uint64_t block;
    uint64_t window;
} zr_loader_opts;

int zr_loader_create(zr_loader **out, zr_store *const *stores,
                     const char *const *names, size_t nstreams,
                     const zr_loader_opts *opts);
int zr_loader_next(zr_loader *ld, zr_batch **out);
void zr_batch_release(zr_batch *b);
zr_column *zr_batch_column(zr_batch *b, const char *name);
uint64_t zr_loader_step(const zr_loader *ld);
const zr_sampler *zr_loader_sampler(const zr_loader *ld);
void zr_loader_destroy(zr_loader *ld);
"""

# The status codes, kinds, codecs, modes and limits of loaderx.h. They are
# plain Python numbers because cffi's cdef cannot evaluate the header's
# macro expressions.
ZR_OK = 0
ZR_EINVAL = -30700
ZR_ENOMEM = -30701
ZR_EIO = -30702
ZR_ECORRUPT = -30703
ZR_ENOTSTORE = -30704
ZR_EEXIST = -30705
ZR_EBUSY = -30706
ZR_ERANGE = -30707
ZR_EDTYPE = -30708
ZR_ESHAPE = -30709
ZR_ETOOBIG = -30710
ZR_EEMPTY = -30711
ZR_EROFS = -30712
ZR_EKIND = -30713
ZR_ECODEC = -30714
ZR_ENOSPC = -30715
ZR_ELIMIT = -30716
ZR_EACCESS = -30717

ZR_MAX_RECORD = 1 << 31
ZR_MAX_NDIM = 32

ZR_DENSE = 1
ZR_RAGGED = 2

ZR_CODEC_RAW = 0
ZR_CODEC_ZSTD = 1
ZR_CODEC_ZSTD_DICT = 2

ZR_RDONLY = 0
ZR_RDWR = 1
ZR_NOMAP = 2

ZR_PADDED = 1
ZR_PACKED = 2
ZR_PACKED_FLAT = 3

ZR_TIER_FAST = 0
ZR_TIER_BALANCED = 1
ZR_TIER_MAX = 2

ZR_SEQUENTIAL = 1
ZR_IID = 2
ZR_CYCLIC = 3
ZR_QUASI = 4
ZR_QUASI_BLOCK = 64
ZR_QUASI_WINDOW = 16
ZR_SAMPLER_MAX_N = 1 << 63

ZR_LOADER_MAX_DEPTH = 1024
ZR_LOADER_MAX_THREADS = 256

ZR_PUSH_FORCE = 1
ZR_PULL_FORCE = 1
ZR_PULL_MODE_DEFAULT = 0o600

# Symbols looked up right after dlopen: a file that lacks them is an older
# or foreign library, and is reported as such rather than failing later at
# the first call that happens to need one.
_REQUIRED = ("zr_last_error", "zr_dense_create", "zr_gather_ragged",
             "zr_sampler_batch", "zr_sampler_create_opts",
             "zr_loader_create", "zr_loader_destroy",
             "zr_version_string", "zr_pull_mode")

_SONAMES = ("libloaderx.so.1", "libloaderx.so")

ffi = cffi.FFI()
ffi.cdef(CDEF)
# The C library's free(), for the buffers that the dictionary trainer
# allocates with malloc() and hands to the caller.
ffi.cdef("void free(void *);")


def _installed_libdir(package_dir):
    """The library folder that ``make install`` wrote beside the package
    (in _libdir.py), or None. Read, not imported, so that any folder can
    be asked."""
    path = os.path.join(package_dir, "_libdir.py")
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "LIBDIR"
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            return node.value.value
    return None


def _candidates(package_dir):
    """Every (path, origin) to try after LOADERX_LIBRARY, in order."""
    out = []
    # The build tree: python/loaderx/ beside lib/.libs/.
    top = os.path.dirname(os.path.dirname(package_dir))
    for name in _SONAMES:
        out.append((os.path.join(top, "lib", ".libs", name), "build tree"))
    libdir = _installed_libdir(package_dir)
    if libdir:
        for name in _SONAMES:
            out.append((os.path.join(libdir, name), "install libdir"))
    # PREFIX/lib/pythonX.Y/site-packages/loaderx -> PREFIX/lib, and the same
    # for lib64 and Debian's dist-packages.
    site = os.path.dirname(package_dir)
    pylib = os.path.dirname(os.path.dirname(site))
    for name in _SONAMES:
        out.append((os.path.join(pylib, name), "install prefix"))
    return out


def _load(package_dir, environ):
    """Open libloaderx for the package in package_dir, with the settings of
    environ; return (library, the path or name it was opened by)."""
    tried = []

    def attempt(target, origin):
        if os.sep in target and not os.path.exists(target):
            tried.append(f"{target} ({origin}): no such file")
            return None
        try:
            lib = ffi.dlopen(target)
        except OSError as e:
            tried.append(f"{target} ({origin}): {e}")
            return None
        missing = [sym for sym in _REQUIRED if not hasattr(lib, sym)]
        if missing:
            tried.append(f"{target} ({origin}): lacks {', '.join(missing)}")
            return None
        return lib

    env = environ.get("LOADERX_LIBRARY")
    if env:
        lib = attempt(env, "LOADERX_LIBRARY")
        if lib is not None:
            return lib, env
        raise ImportError("loaderx: cannot load libloaderx named by "
                          "LOADERX_LIBRARY:\n  " + "\n  ".join(tried))

    for path, origin in _candidates(package_dir):
        lib = attempt(path, origin)
        if lib is not None:
            return lib, path

    found = ctypes.util.find_library("loaderx")
    if found:
        lib = attempt(found, "ctypes.util.find_library")
        if lib is not None:
            return lib, found
    else:
        tried.append("ctypes.util.find_library('loaderx'): not found")
    for name in _SONAMES:
        lib = attempt(name, "dynamic loader search path")
        if lib is not None:
            return lib, name
    raise ImportError(
        "loaderx: cannot find libloaderx. Build it (make) or install it "
        "(make install), or set LOADERX_LIBRARY to the path of "
        "libloaderx.so. Tried:\n  " + "\n  ".join(tried))


lib, library_path = _load(os.path.dirname(os.path.abspath(__file__)),
                          os.environ)
libc = ffi.dlopen(None)


def new_sized(ctype):
    """A zeroed struct of ctype (a sized struct of loaderx.h) whose size
    field says it is this binding's declaration of it."""
    p = ffi.new(ctype + " *")
    p.size = ffi.sizeof(ctype)
    return p


def version_string():
    """The version of the library that was loaded, "MAJOR.MINOR.PATCH"."""
    return ffi.string(lib.zr_version_string()).decode("ascii")


def last_error():
    """This thread's message for the last failed libloaderx call."""
    return ffi.string(lib.zr_last_error()).decode("utf-8", "replace")


def strerror(code):
    """The name and meaning of a ZR_E* code."""
    return ffi.string(lib.zr_strerror(code)).decode("utf-8", "replace")
