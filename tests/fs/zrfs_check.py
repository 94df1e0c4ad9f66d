"""Checks of a zrecordfs mount that are easier to state in Python than in
the shell: attributes, errno values, the .gather protocol, mmap and NPY
files. Each subcommand compares the mount against the expectation folder
written by zrfs-mkstores (one file per record plus a manifest), exits 1
with a message on the first difference and prints one line on success.

    zrfs_check.py records MNT EXP ROUNDS STORE...
                                              the bytes of every record
    zrfs_check.py lookups MNT EXP STORE...    eight threads at once in each folder:
                                              sizes and bytes of every record
    zrfs_check.py attrs MNT EXP STORE...      sizes, blocks, modes, .stats
    zrfs_check.py names STOREDIR N            non-canonical names do not exist
    zrfs_check.py errno OP PATH WANT...       each operation fails with WANT
                                              (an errno name, or OK)
    zrfs_check.py mmap PATH EXPECTED          mmap of a record file
    zrfs_check.py gather MNT EXP STORE...     .gather through os.write/os.read
    zrfs_check.py gather_direct MNT EXP STORE...
                                              .gather opened with O_DIRECT: whole
                                              batches in one read, reads at
                                              offsets, concurrent descriptors
    zrfs_check.py npy MNT EXP STORE...        numpy.load of every record
    zrfs_check.py delete MNT EXP STORE MODEL PIECE...
                                              write PIECEs to .delete, close,
                                              check every record against the
                                              swap-last model kept in MODEL
    zrfs_check.py model MNT EXP STORE MODEL   check every record against MODEL
    zrfs_check.py files DIR SUFFIX LIST       record k (named k + SUFFIX) holds
                                              the bytes of the file on line k
    zrfs_check.py hwm PID                     prints the peak resident KiB
    zrfs_check.py longlist MNT STORE N        a list of more than the most
                                              indices, in one write loop, to
                                              .gather and (-o rw) .delete:
                                              E2BIG, and nothing applied
    zrfs_check.py race MNT N SECONDS          4 readers of record files and
                                              small .deletes at once on the
                                              mount of a zrfs-mkstores count
                                              store of N records; a mount that
                                              stops answering is aborted
"""
import errno
import json
import mmap
import os
import random
import stat
import struct
import sys
import threading
import time


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def manifest(exp, store):
    """(kind, dtype, [(index, shape)]) of a store's expectation."""
    with open(os.path.join(exp, store, "manifest")) as f:
        kind, dtype = f.readline().split()
        recs = []
        for line in f:
            nums = [int(x) for x in line.split()]
            recs.append((nums[0], tuple(nums[2:2 + nums[1]])))
    return kind, dtype, recs


def expected(exp, store, i):
    with open(os.path.join(exp, store, str(i)), "rb") as f:
        return f.read()


def codec_of(store):
    name = store.rsplit("/", 1)[-1]
    return "zstd_dict" if "dict" in name else "zstd" if "zstd" in name else "raw"


def cmd_attrs(mnt, exp, stores):
    for store in stores:
        kind, dtype, recs = manifest(exp, store)
        stored_total = 0
        for i, shape in recs:
            payload = len(expected(exp, store, i))
            st = os.stat(os.path.join(mnt, store, str(i)))
            if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o444:
                fail("%s/%d: mode %o" % (store, i, st.st_mode))
            if st.st_size != payload:
                fail("%s/%d: st_size %d, expected %d" % (store, i, st.st_size, payload))
            stored = payload if kind == "dense" else payload + 8 * (1 + len(shape))
            stored_total += stored
            if st.st_blocks != (stored + 511) // 512:
                fail("%s/%d: st_blocks %d for %d stored bytes" % (store, i, st.st_blocks, stored))
        with open(os.path.join(mnt, store, ".stats")) as f:
            text = f.read()
        if os.stat(os.path.join(mnt, store, ".stats")).st_size != len(text.encode()):
            fail("%s/.stats: st_size differs from its length" % store)
        s = json.loads(text)
        want = {
            "kind": kind,
            "dtype": dtype,
            "item_shape": list(recs[0][1]) if kind == "dense" else None,
            "codec": codec_of(store),
            "records": len(recs),
        }
        for k, v in want.items():
            if s.get(k) != v:
                fail("%s/.stats: %s is %r, expected %r" % (store, k, s.get(k), v))
        if s["reclaimable"] != s["chunk_bytes"] - s["live_bytes"] or s["live_bytes"] <= 0:
            fail("%s/.stats: inconsistent byte counts %r" % (store, s))
        if want["codec"] == "raw" and s["live_bytes"] != stored_total:
            fail("%s/.stats: live_bytes %d, the records hold %d" % (store, s["live_bytes"], stored_total))
        if (s["dict_bytes"] > 0) != (want["codec"] == "zstd_dict"):
            fail("%s/.stats: dict_bytes %d with codec %s" % (store, s["dict_bytes"], want["codec"]))
    print("attributes and .stats of %d stores as expected" % len(stores))


def cmd_names(storedir, n):
    n = int(n)
    bad = ["01", "00", "+1", "-1", " 1", "1 ", "1.0", "1.", "0x1", "1a", "١", str(n),
           str(n + 1), "18446744073709551616", "99999999999999999999999"]
    for name in bad:
        try:
            os.stat(os.path.join(storedir, name))
        except FileNotFoundError:
            continue
        fail("%r exists in %s" % (name, storedir))
    for name in ["0", str(n - 1)]:
        os.stat(os.path.join(storedir, name))
    print("%d non-canonical names absent" % len(bad))


def errno_of(op, path):
    """The errno name an operation on path fails with, or OK."""
    try:
        if op == "read":
            with open(path, "rb") as f:
                f.read()
        elif op in ("write", "create"):
            flags = os.O_WRONLY | (os.O_CREAT | os.O_TRUNC if op == "create" else 0)
            fd = os.open(path, flags, 0o644)
            try:
                os.write(fd, b"0\n")
            finally:
                os.close(fd)
        elif op == "unlink":
            os.unlink(path)
        elif op == "mkdir":
            os.mkdir(path)
        elif op == "rmdir":
            os.rmdir(path)
        elif op == "rename":
            os.rename(path, path + ".renamed")
        elif op == "truncate":
            os.truncate(path, 0)
        elif op == "chmod":
            os.chmod(path, 0o666)
        elif op == "symlink":
            os.symlink("/tmp", path)
        else:
            fail("unknown operation " + op)
    except OSError as e:
        return errno.errorcode[e.errno]
    return "OK"


def cmd_errno(args):
    if len(args) % 3:
        fail("errno takes OP PATH WANT triples")
    for k in range(0, len(args), 3):
        op, path, want = args[k:k + 3]
        got = errno_of(op, path)
        if got != want:
            fail("%s %s gave %s, expected %s" % (op, path, got, want))
    print("%d operations failed as expected" % (len(args) // 3))


def cmd_records(mnt, exp, rounds, stores):
    count = 0
    for _ in range(int(rounds)):
        for store in stores:
            _, _, recs = manifest(exp, store)
            for i, _ in recs:
                try:
                    with open(os.path.join(mnt, store, str(i)), "rb") as f:
                        got = f.read()
                except OSError as e:
                    fail("%s/%d: %s" % (store, i, errno.errorcode[e.errno]))
                if got != expected(exp, store, i):
                    fail("%s/%d: %d bytes differ from the %d expected" % (store, i, len(got), len(expected(exp, store, i))))
                count += 1
    print("%d record reads match" % count)


def cmd_lookups(mnt, exp, stores):
    """Eight threads look up and read the record files of one folder at
    once, each its own records: the kernel sends their LOOKUPs together
    (FUSE_PARALLEL_DIROPS), and every size and byte must still be the
    record's."""
    threads = 8
    for store in stores:
        _, _, recs = manifest(exp, store)
        barrier = threading.Barrier(threads, timeout=60)
        errors = []

        def worker(k):
            # Any failure of a thread, whatever it raises, fails the check.
            try:
                barrier.wait()
                for i, _ in recs[k::threads]:
                    path = os.path.join(mnt, store, str(i))
                    want = expected(exp, store, i)
                    size = os.stat(path).st_size
                    with open(path, "rb") as f:
                        got = f.read()
                    if size != len(want) or got != want:
                        errors.append("%s/%d: size %d, %d bytes, expected %d"
                                      % (store, i, size, len(got), len(want)))
                        return
            except Exception as e:
                errors.append("%s, thread %d: %r" % (store, k, e))

        run_threads(worker, threads, errors)
    print("%d folders looked up in parallel" % len(stores))


def cmd_mmap(path, exp_path):
    with open(exp_path, "rb") as f:
        want = f.read()
    with open(path, "rb") as f:
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            if m[:] != want:
                fail("mmap of %s differs" % path)
            if m[len(want) // 3:len(want) // 3 + 5] != want[len(want) // 3:len(want) // 3 + 5]:
                fail("mmap slice of %s differs" % path)
    print("mmap of %s matches" % path)


def frame(kind, shape, payload):
    """What .gather gives for one record."""
    if kind == "dense":
        return payload
    head = struct.pack("<Q", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
    body = head + payload
    return body + b"\0" * (-len(body) % 8)


def read_all(fd, piece):
    out = []
    while True:
        b = os.read(fd, piece)
        if not b:
            return b"".join(out)
        out.append(b)


def expect_einval(fd, text, where):
    try:
        os.write(fd, text)
    except OSError as e:
        if e.errno != errno.EINVAL:
            fail("%s: write %r gave %s, expected EINVAL" % (where, text, errno.errorcode[e.errno]))
        return
    fail("%s: write %r was accepted" % (where, text))


def cmd_gather(mnt, exp, stores):
    for store in stores:
        kind, dtype, recs = manifest(exp, store)
        n = len(recs)
        shapes = dict(recs)
        want_of = lambda idx: b"".join(frame(kind, shapes[i], expected(exp, store, i)) for i in idx)
        idx = [3 % n, 1, 4 % n, 1, 5 % n, n - 1, 0]
        fd = os.open(os.path.join(mnt, store, ".gather"), os.O_RDWR)
        try:
            if os.read(fd, 100) != b"":
                fail("%s: a fresh .gather is not empty" % store)
            # The list in pieces, one number cut between two writes.
            last = str(n - 1)
            os.write(fd, ("%d %d %d,%d\t%d\n" % tuple(idx[:5])).encode())
            os.write(fd, last[:1].encode())
            os.write(fd, (last[1:] + ", 0").encode())
            got = read_all(fd, 7)
            if got != want_of(idx):
                fail("%s: .gather of %s gave %d bytes, expected %d" % (store, idx, len(got), len(want_of(idx))))
            # Bad lists: EINVAL, and the handle keeps working.
            for bad in [b"x", b"-1", b"1.5", b"+1", str(n).encode() + b" ", b"99999999999999999999999 "]:
                expect_einval(fd, bad, store)
                os.write(fd, b"0 2\n")
                if read_all(fd, 1 << 20) != want_of([0, 2 % n]):
                    fail("%s: .gather after a bad write %r is wrong" % (store, bad))
            # Out of range in a last number that only a read completes.
            os.write(fd, str(n).encode())
            try:
                os.read(fd, 100)
                fail("%s: a read after an out-of-range list succeeded" % store)
            except OSError as e:
                if e.errno != errno.EINVAL:
                    fail("%s: out-of-range read gave %s" % (store, errno.errorcode[e.errno]))
            # A long batch, read in large and in odd-sized pieces: reads
            # that span hundreds of small records and reads that cut
            # records apart must give the same bytes.
            width = max(len(expected(exp, store, i)) for i in range(n))
            big = [(k * 7919 + 3) % n for k in range(max(40, min(3000, (4 << 20) // width)))]
            for piece in (1 << 20, 4093):
                os.write(fd, " ".join(map(str, big)).encode())
                if read_all(fd, piece) != want_of(big):
                    fail("%s: .gather of %d records in %d-byte reads is wrong" % (store, len(big), piece))
            # Leading zeros (seq -w) are numbers; a write during an answer
            # starts a new list.
            os.write(fd, b"01 00\n")
            os.read(fd, 1)
            os.write(fd, b"%d\n" % (n - 1))
            if read_all(fd, 3) != want_of([n - 1]):
                fail("%s: a new list during an answer is wrong" % store)
        finally:
            os.close(fd)
    print(".gather of %d stores as expected" % len(stores))


def read_direct(fd, n, off=None):
    """One read(2) (a pread(2) at off) of up to n bytes into a page-aligned
    buffer, as an O_DIRECT reader makes it; the bytes it gave."""
    buf = mmap.mmap(-1, max(n, 1))
    try:
        got = os.readv(fd, [buf]) if off is None else os.preadv(fd, [buf], off)
        return bytes(buf[:got])
    finally:
        buf.close()


def expect_errno(want, fn, what):
    try:
        fn()
    except OSError as e:
        if e.errno != want:
            fail("%s gave %s, expected %s" % (what, errno.errorcode[e.errno], errno.errorcode[want]))
        return
    fail("%s succeeded, expected %s" % (what, errno.errorcode[want]))


def run_threads(worker, n, errors):
    """worker(0) .. worker(n - 1) on threads of their own; fails with the
    first message a worker put in errors."""
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        fail(errors[0])


def direct_many(path, n, want_of, where):
    """Descriptors of one .gather, O_DIRECT and not, each in its own
    thread writing its own lists and reading whole batches at the same
    time: nobody's batch is cut short or mixed with another's."""
    errors = []

    def worker(k):
        rng = random.Random(k)
        direct = k < 3
        fd = os.open(path, os.O_RDWR | (os.O_DIRECT if direct else 0))
        try:
            for it in range(12):
                idx = [rng.randrange(n) for _ in range(rng.randrange(1, 60))]
                want = want_of(idx)
                os.write(fd, (" ".join(map(str, idx)) + "\n").encode())
                if direct:
                    # Exact-sized buffers, and larger ones (as a Ragged
                    # reader that does not know the length would use).
                    got = read_direct(fd, len(want) + (0 if k % 2 else 5000))
                else:
                    got = read_all(fd, 65536)
                if got != want:
                    errors.append("%s: descriptor %d batch %d: %d bytes, expected %d"
                                  % (where, k, it, len(got), len(want)))
                    return
        except OSError as e:
            errors.append("%s: descriptor %d: %s" % (where, k, errno.errorcode[e.errno]))
        finally:
            os.close(fd)

    run_threads(worker, 4, errors)


def cmd_gather_direct(mnt, exp, stores):
    for store in stores:
        kind, dtype, recs = manifest(exp, store)
        n = len(recs)
        shapes = dict(recs)
        want_of = lambda idx: b"".join(frame(kind, shapes[i], expected(exp, store, i)) for i in idx)
        path = os.path.join(mnt, store, ".gather")
        fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        try:
            if read_direct(fd, 4096) != b"":
                fail("%s: a fresh O_DIRECT .gather is not empty" % store)
            # A list in pieces, then the whole batch in one read into a
            # buffer of its size; the file position then sits at its end.
            idx = [3 % n, 1, 4 % n, 1, 5 % n, n - 1, 0]
            last = str(n - 1)
            os.write(fd, ("%d %d %d,%d\t%d\n" % tuple(idx[:5])).encode())
            os.write(fd, last[:1].encode())
            os.write(fd, (last[1:] + ", 0").encode())
            base = os.lseek(fd, 0, os.SEEK_CUR)
            want = want_of(idx)
            got = read_direct(fd, len(want))
            if got != want:
                fail("%s: O_DIRECT .gather of %s gave %d bytes, expected %d" % (store, idx, len(got), len(want)))
            if read_direct(fd, 4096) != b"":
                fail("%s: O_DIRECT read after the batch is not end of file" % store)
            if os.fstat(fd).st_size != base + len(want) or os.lseek(fd, 0, os.SEEK_END) != base + len(want):
                fail("%s: .gather's size is not where the batch ends" % store)
            # A long batch (several MiB: many requests at once) into a
            # buffer larger than it: one read gives exactly the batch.
            width = max(len(expected(exp, store, i)) for i in range(n))
            big = [(k * 7919 + 3) % n for k in range(max(40, min(3000, (6 << 20) // width)))]
            os.write(fd, " ".join(map(str, big)).encode())
            want = want_of(big)
            got = read_direct(fd, len(want) + 10000)
            if got != want:
                fail("%s: O_DIRECT .gather of %d records gave %d bytes, expected %d" % (store, len(big), len(got), len(want)))
            # Reads at offsets: the batch begins where its list ended, and
            # pieces of it may be read in any order, by several threads at
            # once, and again.
            text = " ".join(map(str, big)).encode()
            os.write(fd, text)
            base = os.lseek(fd, 0, os.SEEK_CUR)
            cuts = sorted(random.Random(n).sample(range(1, len(want)), min(9, len(want) - 1)))
            pieces = list(zip([0] + cuts, cuts + [len(want)]))
            got = {}
            def take(p):
                got[p] = read_direct(fd, p[1] - p[0], base + p[0])
            for order in (pieces[::-1], pieces):
                threads = [threading.Thread(target=take, args=(p,)) for p in order]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                for a, b in pieces:
                    if got[(a, b)] != want[a:b]:
                        fail("%s: pread of batch bytes [%d, %d) differs" % (store, a, b))
            if read_direct(fd, 100, base + len(want) - 10) != want[-10:]:
                fail("%s: a pread across the batch's end is wrong" % store)
            if read_direct(fd, 100, base + len(want)) != b"":
                fail("%s: a pread at the batch's end is not end of file" % store)
            expect_errno(errno.EINVAL, lambda: read_direct(fd, 100, base - 1), "%s: pread below the batch" % store)
            if read_direct(fd, len(want)) != want:
                fail("%s: the batch read on from the write after preads differs" % store)
            # Bad lists: EINVAL, and the descriptor keeps working.
            for bad in [b"x", b"-1", str(n).encode() + b" "]:
                expect_einval(fd, bad, store)
                os.write(fd, b"0 2\n")
                if read_direct(fd, len(want_of([0, 2 % n]))) != want_of([0, 2 % n]):
                    fail("%s: O_DIRECT .gather after a bad write %r is wrong" % (store, bad))
            os.write(fd, str(n).encode())
            expect_errno(errno.EINVAL, lambda: read_direct(fd, 100), "%s: O_DIRECT read of an out-of-range list" % store)
            os.write(fd, b"%d\n" % (n - 1))
            if read_direct(fd, 1 << 20) != want_of([n - 1]):
                fail("%s: O_DIRECT .gather after an out-of-range list is wrong" % store)
        finally:
            os.close(fd)
        direct_many(path, n, want_of, store)
    print("O_DIRECT .gather of %d stores as expected" % len(stores))


def cmd_npy(mnt, exp, stores):
    import numpy as np

    count = 0
    for store in stores:
        kind, dtype, recs = manifest(exp, store)
        for i, shape in recs:
            path = os.path.join(mnt, store, "%d.npy" % i)
            a = np.load(path)
            want = np.frombuffer(expected(exp, store, i), dtype=np.dtype(dtype)).reshape(shape)
            if a.dtype != want.dtype or a.shape != want.shape or a.tobytes() != want.tobytes():
                fail("%s: %s %s differs from %s %s" % (path, a.dtype, a.shape, want.dtype, want.shape))
            if os.stat(path).st_size != len(open(path, "rb").read()):
                fail("%s: st_size differs from its length" % path)
            count += 1
        m = np.load(os.path.join(mnt, store, "0.npy"), mmap_mode="r")
        if m.tobytes() != expected(exp, store, 0):
            fail("%s/0.npy: memory-mapped load differs" % store)
    print("numpy.load of %d records as expected" % count)


def load_model(exp, store, path):
    """Which original record each current index holds."""
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return [i for i, _ in manifest(exp, store)[2]]


def cmd_model(mnt, exp, store, path):
    model = load_model(exp, store, path)
    names = sorted(n for n in os.listdir(os.path.join(mnt, store)) if not n.startswith("."))
    if names != sorted(str(i) for i in range(len(model))):
        fail("%s lists %d records, the model %d" % (store, len(names), len(model)))
    for i, orig in enumerate(model):
        with open(os.path.join(mnt, store, str(i)), "rb") as f:
            if f.read() != expected(exp, store, orig):
                fail("%s/%d does not hold original record %d" % (store, i, orig))
    with open(os.path.join(mnt, store, ".stats")) as f:
        stats = json.load(f)
    if stats["records"] != len(model):
        fail("%s/.stats says %d records, the model %d" % (store, stats["records"], len(model)))
    print("%s: %d records as the model says" % (store, len(model)))


def cmd_delete(mnt, exp, store, path, pieces):
    model = load_model(exp, store, path)
    d = os.path.join(mnt, store)
    idx = sorted({int(x) for x in "".join(pieces).replace(",", " ").split()}, reverse=True)
    # Open every record the delete touches and read it, so the kernel and
    # the daemon have it cached.
    held = {}
    for i in set(idx) | set(range(max(0, len(model) - len(idx)), len(model))):
        fd = os.open(os.path.join(d, str(i)), os.O_RDONLY)
        os.read(fd, 1 << 20)
        held[i] = fd
    fd = os.open(os.path.join(d, ".delete"), os.O_WRONLY)
    for p in pieces:
        os.write(fd, p.encode())
    os.close(fd)
    for i in idx:
        model[i] = model[-1]
        model.pop()
    with open(path, "w") as f:
        json.dump(model, f)
    # Descriptors opened before the delete read the new bytes, or report
    # that their record is gone.
    for i, fd in held.items():
        try:
            got = os.pread(fd, 1 << 20, 0)
            if i >= len(model) or got != expected(exp, store, model[i]):
                fail("%s/%d: a descriptor held across the delete reads stale bytes" % (store, i))
        except OSError as e:
            if i < len(model) or e.errno not in (errno.ESTALE, errno.ENOENT):
                fail("%s/%d: read after the delete: %s" % (store, i, errno.errorcode[e.errno]))
        os.close(fd)
    cmd_model(mnt, exp, store, path)


def cmd_files(d, suffix, listing):
    with open(listing) as f:
        paths = [line.rstrip("\n") for line in f]
    for k, path in enumerate(paths):
        with open(path, "rb") as f:
            want = f.read()
        with open(os.path.join(d, "%d%s" % (k, suffix)), "rb") as f:
            if f.read() != want:
                fail("%d%s differs from %s" % (k, suffix, path))
    print("%d files match their sources" % len(paths))


def cmd_hwm(pid):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                print(line.split()[1])
                return
    fail("no VmHWM for process " + pid)


# The most indices one list may hold (ZFS_LIST_MAX).
LIST_MAX = 1 << 24


def write_loop(fd, data):
    """Write all of data as a write loop does: the rest after a short count."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def cmd_longlist(mnt, store, n):
    """A list one index longer than the most (plus a tail the kernel's
    last request carries alone) fails with E2BIG, at a write or the
    close, and nothing of it is applied."""
    n = int(n)
    d = os.path.join(mnt, store)
    text = b"0 " * (LIST_MAX + 25)
    names = lambda: sorted(x for x in os.listdir(d) if not x.startswith("."))
    before = names()
    if len(before) != n:
        fail("%s lists %d records, expected %d" % (store, len(before), n))
    first = open(os.path.join(d, "0"), "rb").read()
    # .gather: the list fails, the read says so, and then the handle works.
    fd = os.open(os.path.join(d, ".gather"), os.O_RDWR)
    try:
        os.write(fd, b"0\n")
        batch = read_all(fd, 1 << 20)
        expect_errno(errno.E2BIG, lambda: write_loop(fd, text), ".gather: a list of %d indices" % (LIST_MAX + 25))
        expect_errno(errno.E2BIG, lambda: os.read(fd, 1 << 20), ".gather: a read after a list too long")
        os.write(fd, b"0\n")
        if read_all(fd, 1 << 20) != batch:
            fail(".gather: the handle does not work after a list too long")
    finally:
        os.close(fd)
    if not os.path.exists(os.path.join(d, ".delete")):
        print("a list too long fails on .gather")
        return
    # .delete: every later write and the close fail; nothing is deleted.
    # A list refused at its first write sticks the same way: what a
    # careless writer sends after the error is not deleted either.
    for err, send, what in [(errno.E2BIG, lambda fd: write_loop(fd, text),
                             "a list of %d indices" % (LIST_MAX + 25)),
                            (errno.EINVAL, lambda fd: os.write(fd, b"1 x\n"), "a bad first write")]:
        fd = os.open(os.path.join(d, ".delete"), os.O_WRONLY)
        closed = False
        try:
            expect_errno(err, lambda: send(fd), ".delete: " + what)
            expect_errno(err, lambda: os.write(fd, b"1\n"), ".delete: a write after " + what)
            closed = True
            expect_errno(err, lambda: os.close(fd), ".delete: the close after " + what)
        finally:
            if not closed:
                os.close(fd)
    after = names()
    if after != before:
        fail("%s: a list too long deleted %d records" % (store, len(before) - len(after)))
    if open(os.path.join(d, "0"), "rb").read() != first:
        fail("%s: a list too long changed record 0" % store)
    with open(os.path.join(d, ".stats")) as f:
        if json.load(f)["records"] != n:
            fail("%s: .stats counts another number of records after a list too long" % store)
    print("a list too long fails on .gather and .delete and deletes nothing")


def fuse_connection(mnt):
    """The number of mnt's FUSE connection (/sys/fs/fuse/connections), read
    from mountinfo, which asks the file system nothing."""
    mnt = os.path.realpath(mnt)
    conn = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == mnt and " - fuse" in line:
                conn = fields[2].split(":")[1]
    return conn


def abort_connection(conn):
    try:
        with open("/sys/fs/fuse/connections/%s/abort" % conn, "w") as f:
            f.write("1")
        return True
    except OSError:
        return False


def race_reader(d, hot, count, slot, deadline):
    rng = random.Random(slot)
    while time.monotonic() < deadline:
        i = rng.randrange(hot) if rng.random() < 0.9 else rng.randrange(hot, hot + 64)
        try:
            fd = os.open(os.path.join(d, str(i)), os.O_RDONLY)
            try:
                os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ESTALE):
                fail("reader %d: record %d: %s" % (slot, i, os.strerror(e.errno)))
        count[slot] += 1


def race_deleter(d, n, hot, count, slot, deadline):
    """Small swap-last deletes in the records the readers read; after each
    close, what changed reads anew and what went is gone."""
    rng = random.Random(12345)
    model = list(range(n))
    while time.monotonic() < deadline and len(model) > hot + 64:
        idx = rng.sample(range(hot), rng.randint(1, 3))
        with open(os.path.join(d, ".delete"), "w") as f:
            f.write(" ".join(map(str, idx)))
        old = len(model)
        for i in sorted(idx, reverse=True):
            model[i] = model[-1]
            model.pop()
        for i in idx:
            if i < len(model):
                with open(os.path.join(d, str(i)), "rb") as f:
                    if f.read() != bytes([model[i] % 251]):
                        fail("record %d is stale after a delete" % i)
        for i in range(len(model), old):
            if os.path.exists(os.path.join(d, str(i))):
                fail("record %d is still there after a delete" % i)
        count[slot] += 1
        time.sleep(rng.random() * 0.002)
    # Every record, in one batch, as the model says.
    fd = os.open(os.path.join(d, ".gather"), os.O_RDWR)
    try:
        os.write(fd, " ".join(map(str, range(len(model)))).encode())
        if read_all(fd, 1 << 20) != bytes(m % 251 for m in model):
            fail("after %d deletes the records differ from the model" % count[slot])
    finally:
        os.close(fd)


def cmd_race(mnt, n, seconds):
    """4 reader processes and a deleter for SECONDS on a zrfs-mkstores
    count store of N records mounted -o rw at MNT (record i holds the byte
    i % 251). A worker that makes no progress for HANG seconds means the
    mount stopped answering: it is aborted, so that the blocked processes
    end and the test fails instead of hanging."""
    HANG = 15
    n, seconds = int(n), float(seconds)
    conn = fuse_connection(mnt)
    if conn is None:
        fail("%s is not a FUSE mount" % mnt)
    hot, nreaders = 64, 4
    count = mmap.mmap(-1, 8 * (nreaders + 1))
    deadline = time.monotonic() + seconds
    pids = []
    for slot in range(nreaders + 1):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                cnt = memoryview(count).cast("Q")
                if slot < nreaders:
                    race_reader(mnt, hot, cnt, slot, deadline)
                else:
                    race_deleter(mnt, n, hot, cnt, slot, deadline)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException as e:
                print("FAIL: worker %d: %r" % (slot, e), file=sys.stderr)
                code = 1
            os._exit(code)
        pids.append(pid)
    cnt = memoryview(count).cast("Q")
    last, seen = [0] * len(pids), [time.monotonic()] * len(pids)
    status, hung = {}, None
    while len(status) < len(pids):
        time.sleep(0.2)
        now = time.monotonic()
        for k, pid in enumerate(pids):
            if pid in status:
                continue
            got, st = os.waitpid(pid, os.WNOHANG)
            if got:
                status[pid] = os.waitstatus_to_exitcode(st)
            elif cnt[k] != last[k]:
                last[k], seen[k] = cnt[k], now
            elif now - seen[k] > HANG:
                hung = k
        if hung is not None:
            break
    if hung is not None:
        aborted = abort_connection(conn)
        for pid in pids:
            if pid not in status:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
        end = time.monotonic() + 10
        while time.monotonic() < end and len(status) < len(pids):
            for pid in pids:
                if pid not in status and os.waitpid(pid, os.WNOHANG)[0]:
                    status[pid] = -9
            time.sleep(0.1)
        fail("the mount stopped answering: %s %d made no progress for %d s (%s, %s); "
             "operations: %s" % ("reader" if hung < nreaders else "the deleter", hung, HANG,
                                 "aborted" if aborted else "could not abort connection " + conn,
                                 "%d workers left blocked" % (len(pids) - len(status)), list(cnt)))
    bad = [k for k, pid in enumerate(pids) if status[pid] != 0]
    if bad:
        fail("workers %s failed (operations: %s)" % (bad, list(cnt)))
    print("%d reads and %d deletes in %g s" % (sum(cnt[:nreaders]), cnt[nreaders], seconds))


def main(argv):
    if len(argv) < 2:
        fail(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "attrs":
        cmd_attrs(args[0], args[1], args[2:])
    elif cmd == "names":
        cmd_names(*args)
    elif cmd == "errno":
        cmd_errno(args)
    elif cmd == "records":
        cmd_records(args[0], args[1], args[2], args[3:])
    elif cmd == "lookups":
        cmd_lookups(args[0], args[1], args[2:])
    elif cmd == "mmap":
        cmd_mmap(*args)
    elif cmd == "gather":
        cmd_gather(args[0], args[1], args[2:])
    elif cmd == "gather_direct":
        cmd_gather_direct(args[0], args[1], args[2:])
    elif cmd == "delete":
        cmd_delete(args[0], args[1], args[2], args[3], args[4:])
    elif cmd == "model":
        cmd_model(*args)
    elif cmd == "files":
        cmd_files(*args)
    elif cmd == "hwm":
        cmd_hwm(*args)
    elif cmd == "longlist":
        cmd_longlist(*args)
    elif cmd == "race":
        cmd_race(*args)
    elif cmd == "npy":
        cmd_npy(args[0], args[1], args[2:])
    else:
        fail("unknown subcommand " + cmd)


if __name__ == "__main__":
    main(sys.argv)
