"""Random operations on zrecordfs mounts by several processes at once, for
a given time. Every answer must be the right data or an errno: reads at
random offsets and sizes, stat and listings, .gather batches, mmap of
record files are compared with the expectation folder zrfs-mkstores
wrote; opens of names that are not records, writes to records and
garbage written to every control file must fail with the errno the
manual page gives. On the read-write mount garbage goes to .delete
(refused: nothing may be deleted) and .compact (which compacts: records
keep their numbers and bytes), while the other processes read.

    fsabuse.py RO_MNT RW_MNT EXP SECONDS PROCS SEED

Prints the operations made, by kind, and exits 1 on the first wrong
answer (a message names the operation, the path and what came back).
"""
import errno
import json
import mmap
import multiprocessing
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fs"))
from zrfs_check import expected, frame, manifest  # noqa: E402

STORES = ["dense/raw_f4", "dense/zstd_u2", "scalar_i8", "ragged_raw", "ragged_zstd",
          "deep/a/b/ragged_dict"]
# Record 4 of this store is damaged: reading it gives EIO, the others read.
DAMAGED = ("damaged/zstd_u1", 4)
WRITE_REFUSED = {errno.EROFS, errno.EACCES, errno.EPERM}


class Wrong(Exception):
    pass


def name(e):
    return errno.errorcode.get(e, str(e))


def expect_errno(what, want, fn, *args):
    """fn(*args) must fail with one of the errnos in want."""
    try:
        r = fn(*args)
    except OSError as e:
        if e.errno not in want:
            raise Wrong("%s gave %s, expected %s" % (what, name(e.errno),
                                                      "/".join(name(w) for w in want)))
        return
    if isinstance(r, int) and fn is os.open:
        os.close(r)
    raise Wrong("%s succeeded, expected %s" % (what, "/".join(name(w) for w in want)))


def garbage(rng):
    """Bytes that are never a valid index list: at least one byte is not a
    digit or separator, or a number is over 2^64-1."""
    if rng.random() < 0.2:
        return b"9" * rng.randrange(21, 200)
    raw = bytearray(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    raw[rng.randrange(len(raw))] = rng.choice(b"x-+.:;/\x00\xff")
    return bytes(raw)


class Worker:
    def __init__(self, ro, rw, exp, rng):
        self.mnts = [(ro, False), (rw, True)]
        self.exp = exp
        self.rng = rng
        self.counts = {}
        self.info = {}
        for s in STORES + [DAMAGED[0]]:
            kind, _, recs = manifest(exp, s)
            self.info[s] = (kind, dict(recs), len(recs))
        self.want = {}

    def expected(self, store, i):
        key = (store, i)
        if key not in self.want:
            self.want[key] = expected(self.exp, store, i)
        return self.want[key]

    def pick(self, damaged_too=False):
        mnt, rw = self.rng.choice(self.mnts)
        stores = STORES + [DAMAGED[0]] if damaged_too else STORES
        store = self.rng.choice(stores)
        n = self.info[store][2]
        return mnt, rw, store, self.rng.randrange(n)

    def count(self, kind):
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def op_read(self):
        mnt, _, store, i = self.pick(damaged_too=True)
        path = os.path.join(mnt, store, str(i))
        want = self.expected(store, i)
        size = len(want)
        off = self.rng.choice([0, self.rng.randrange(size + 1), size, size + self.rng.randrange(1, 1 << 16)])
        n = self.rng.choice([1, self.rng.randrange(1, 2 * size + 2), 4096, 1 << 20])
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                got = os.pread(fd, n, off)
            finally:
                os.close(fd)
        except OSError as e:
            if (store, i) == DAMAGED and e.errno == errno.EIO:
                self.count("read of the damaged record: EIO")
                return
            raise Wrong("read %s at %d of %d bytes: %s" % (path, off, n, name(e.errno)))
        if (store, i) == DAMAGED:
            # At or past the end the kernel answers from the size alone.
            if off >= size and got == b"":
                self.count("read past the end of the damaged record")
                return
            raise Wrong("read %s (damaged) at %d gave %d bytes" % (path, off, len(got)))
        if got != want[off:off + n]:
            raise Wrong("read %s at %d of %d bytes: %d bytes, not the %d expected" %
                        (path, off, n, len(got), len(want[off:off + n])))
        self.count("read at a random offset and size")

    def op_stat(self):
        mnt, _, store, i = self.pick()
        st = os.stat(os.path.join(mnt, store, str(i)))
        if st.st_size != len(self.expected(store, i)):
            raise Wrong("stat %s/%s/%d: size %d" % (mnt, store, i, st.st_size))
        self.count("stat")

    def op_list(self):
        mnt, rw, store, _ = self.pick()
        names = set(os.listdir(os.path.join(mnt, store)))
        n = self.info[store][2]
        ctl = {".stats", ".gather", ".compact"} | ({".delete"} if rw else set())
        if names != ctl | {str(k) for k in range(n)}:
            raise Wrong("listing of %s/%s: %d names" % (mnt, store, len(names)))
        self.count("listing")

    def op_odd_name(self):
        mnt, _, store, _ = self.pick()
        n = self.info[store][2]
        d = os.path.join(mnt, store)
        odd = ["01", "00", "+1", "-1", " 1", "1 ", "1.", "1.0", "0x1", "1e2", "\u0661", str(n),
               str(n + self.rng.randrange(1, 1 << 40)), "18446744073709551616",
               "99999999999999999999999", "9" * 255, "0" * 255, ".gather2", ".Stats",
               "0\n", "\t0"]
        choice = self.rng.randrange(len(odd) + 4)
        if choice < len(odd):
            path = os.path.join(d, odd[choice])
            expect_errno("open %r" % path, {errno.ENOENT}, os.open, path, os.O_RDONLY)
        elif choice == len(odd):
            # The kernel refuses names over 1024 bytes (FUSE_NAME_MAX); a
            # shorter one reaches the daemon, which has no such record.
            path = os.path.join(d, "x" * self.rng.randrange(256, 5000))
            expect_errno("open of a long name", {errno.ENAMETOOLONG, errno.ENOENT}, os.open, path,
                         os.O_RDONLY)
        elif choice == len(odd) + 1:
            path = os.path.join(d, "0", self.rng.choice(["x", "0", "..", ""]))
            expect_errno("open %r" % path, {errno.ENOTDIR}, os.open, path, os.O_RDONLY)
        elif choice == len(odd) + 2:
            # ".." climbs back out of the store and down into it again.
            base = os.path.basename(store)
            i = self.rng.randrange(n)
            with open(os.path.join(d, "..", base, str(i)), "rb") as f:
                if f.read() != self.expected(store, i):
                    raise Wrong("read through %s/../%s/%d differs" % (d, base, i))
        else:
            # Records are read-only, and nothing can be created.
            i = self.rng.randrange(n)
            expect_errno("write open of a record", WRITE_REFUSED | {errno.EPERM},
                         os.open, os.path.join(d, str(i)), os.O_WRONLY)
            expect_errno("create in a store folder", WRITE_REFUSED | {errno.ENOENT},
                         os.open, os.path.join(d, "new%d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        self.count("odd name or refused write")

    def read_gather(self, fd, store, idx):
        kind, shapes, _ = self.info[store]
        want = b"".join(frame(kind, shapes[i], self.expected(store, i)) for i in idx)
        piece = self.rng.choice([1, 7, 4096, 1 << 20])
        got = b""
        while True:
            b = os.read(fd, piece)
            if not b:
                break
            got += b
            if len(got) > len(want):
                break
        if got != want:
            raise Wrong(".gather of %s in %s: %d bytes, not the %d expected" %
                        (idx[:10], store, len(got), len(want)))

    def op_gather(self):
        mnt, _, store, _ = self.pick()
        n = self.info[store][2]
        fd = os.open(os.path.join(mnt, store, ".gather"), os.O_RDWR)
        try:
            for _ in range(self.rng.randrange(1, 4)):
                if self.rng.random() < 0.5:
                    junk = garbage(self.rng)
                    try:
                        os.write(fd, junk)
                        # A bad number may only be found when the list ends.
                        os.read(fd, 1)
                        raise Wrong("garbage %r to %s/.gather was accepted" % (junk[:40], store))
                    except OSError as e:
                        if e.errno != errno.EINVAL:
                            raise Wrong("garbage to %s/.gather gave %s" % (store, name(e.errno)))
                    self.count("garbage to .gather: EINVAL")
                idx = [self.rng.randrange(n) for _ in range(self.rng.randrange(1, 64))]
                os.write(fd, (" ".join(map(str, idx)) + "\n").encode())
                self.read_gather(fd, store, idx)
                self.count(".gather batch")
        finally:
            os.close(fd)

    def op_control(self):
        mnt, rw, store, _ = self.pick()
        d = os.path.join(mnt, store)
        which = self.rng.choice([".delete", ".compact", ".stats"])
        if which == ".stats":
            expect_errno("write open of .stats", WRITE_REFUSED, os.open, d + "/.stats", os.O_WRONLY)
            with open(d + "/.stats") as f:
                st = json.load(f)
            if st["records"] != self.info[store][2]:
                raise Wrong("%s/.stats counts %d records" % (d, st["records"]))
            self.count(".stats: write refused, read right")
        elif which == ".delete" and not rw:
            expect_errno("open of .delete on a read-only mount", {errno.ENOENT, errno.EROFS},
                         os.open, d + "/.delete", os.O_WRONLY)
            self.count(".delete on a read-only mount: refused")
        elif which == ".delete":
            fd = os.open(d + "/.delete", os.O_WRONLY)
            junk = garbage(self.rng)
            try:
                try:
                    os.write(fd, junk)
                except OSError as e:
                    if e.errno != errno.EINVAL:
                        raise Wrong("garbage to %s/.delete gave %s" % (d, name(e.errno)))
            finally:
                try:
                    os.close(fd)
                except OSError as e:
                    if e.errno != errno.EINVAL:
                        raise Wrong("close of %s/.delete gave %s" % (d, name(e.errno)))
            if len(os.listdir(d)) != self.info[store][2] + 4:
                raise Wrong("garbage to %s/.delete deleted records" % d)
            self.count("garbage to .delete: refused")
        elif not rw:
            expect_errno("write open of .compact on a read-only mount", WRITE_REFUSED,
                         os.open, d + "/.compact", os.O_WRONLY)
            self.count(".compact on a read-only mount: refused")
        elif self.rng.random() < 0.2:
            with open(d + "/.compact", "wb") as f:
                f.write(garbage(self.rng))
            with open(d + "/.compact") as f:
                json.load(f)
            self.count("garbage to .compact: compacted")

    def op_mmap(self):
        mnt, _, store, i = self.pick()
        want = self.expected(store, i)
        with open(os.path.join(mnt, store, str(i)), "rb") as f:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                a = self.rng.randrange(len(want))
                b = self.rng.randrange(a, len(want) + 1)
                if m[a:b] != want[a:b] or len(m) != len(want):
                    raise Wrong("mmap of %s/%s/%d differs" % (mnt, store, i))
        self.count("mmap of a record")

    def run(self, deadline):
        ops = [(self.op_read, 30), (self.op_stat, 8), (self.op_list, 4), (self.op_odd_name, 15),
               (self.op_gather, 15), (self.op_control, 10), (self.op_mmap, 10)]
        fns = [f for f, _ in ops]
        weights = [w for _, w in ops]
        while time.monotonic() < deadline:
            self.rng.choices(fns, weights)[0]()


def work(args):
    ro, rw, exp, seconds, seed = args
    w = Worker(ro, rw, exp, random.Random(seed))
    try:
        w.run(time.monotonic() + seconds)
    except Wrong as e:
        return ("wrong", "seed %d: %s" % (seed, e), w.counts)
    except OSError as e:
        return ("wrong", "seed %d: unexpected %s: %s" % (seed, name(e.errno), e), w.counts)
    return ("ok", "", w.counts)


def main(argv):
    ro, rw, exp, seconds, procs, seed = argv[1], argv[2], argv[3], float(argv[4]), int(argv[5]), int(argv[6])
    with multiprocessing.Pool(procs) as pool:
        results = pool.map(work, [(ro, rw, exp, seconds, seed * 1000 + k) for k in range(procs)])
    total = {}
    for _, _, counts in results:
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    for k in sorted(total):
        print("%9d  %s" % (total[k], k))
    print("%9d  operations by %d processes in %.0f s (seed %d)" % (sum(total.values()), procs, seconds, seed))
    bad = [msg for status, msg, _ in results if status != "ok"]
    for msg in bad:
        print("FAIL: " + msg, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
