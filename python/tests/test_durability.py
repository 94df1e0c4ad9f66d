"""Durable at close: closing a writable store, or leaving its with block,
syncs it, and a sync that fails is raised.

Whether a file was synced is seen from outside: strace records the system
calls of a fresh interpreter doing the work, and every store file written
must be synced after its last write. A sync that really fails comes from a
child of fork(), whose inherited writable handle may not sync while its
parent runs (the library gives ZR_EBUSY).
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap
import traceback

import numpy as np
import pytest

import loaderx
from loaderx import StoreBusyError
from loaderx.zrecord import DenseStore, RaggedStore

# "PID call(FD</path>, ...": strace -y names the file behind each descriptor.
CALL = re.compile(r"^\d+\s+(\w+)\(\d+<([^>]*)>")
SYNCS = ("fsync", "fdatasync")
WRITES = ("pwrite64", "pwritev", "pwritev2", "write")


def traced(script, log="trace.txt"):
    """Run script in a fresh interpreter under strace, with loaderx from
    where this one has it; return the log's lines."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.fail("strace is needed (Debian package strace, scripts/deps.sh)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(loaderx.__file__))
    env["LOADERX_LIBRARY"] = loaderx.library_path
    res = subprocess.run(
        [strace, "-f", "-y", "-qq", "-o", log,
         "-e", "trace=" + ",".join(SYNCS + WRITES),
         sys.executable, "-c", textwrap.dedent(script)],
        env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    with open(log) as f:
        return f.read().splitlines()


def unsynced(lines, folder):
    """The files under folder written after their last sync, and the files
    written at all."""
    folder = os.path.realpath(folder) + os.sep
    last_write, last_sync = {}, {}
    for n, line in enumerate(lines):
        m = CALL.match(line)
        if not m or not m.group(2).startswith(folder):
            continue
        name = m.group(2)[len(folder):]
        if m.group(1) in SYNCS:
            last_sync[name] = n
        elif m.group(1) in WRITES:
            last_write[name] = n
    late = sorted(p for p, n in last_write.items() if last_sync.get(p, -1) < n)
    return late, set(last_write)


def assert_durable(lines, folder):
    late, written = unsynced(lines, folder)
    # meta.zr holds the header that makes appended records visible; seeing
    # it written shows the trace caught the store's writes at all.
    assert "meta.zr" in written, sorted(written)
    assert late == [], f"written after their last sync: {late}"


def test_close_syncs_what_was_appended():
    lines = traced("""
        import numpy as np
        from loaderx.zrecord import DenseStore
        ds = DenseStore.create("d", np.float32, (4,), codec="raw")
        ds.append(np.ones((50, 4), np.float32))
        ds.close()
    """)
    assert_durable(lines, "d")
    with DenseStore.open("d", readonly=True) as ds:
        assert len(ds) == 50


def test_leaving_a_with_block_syncs_what_was_appended():
    lines = traced("""
        import numpy as np
        from loaderx.zrecord import RaggedStore
        with RaggedStore.create("r", np.int32) as rs:
            rs.append([np.arange(n, dtype=np.int32) for n in range(1, 30)])
    """)
    assert_durable(lines, "r")


def test_a_with_block_that_raises_still_syncs_and_closes():
    lines = traced("""
        import numpy as np
        from loaderx.zrecord import DenseStore
        try:
            with DenseStore.create("d", np.int64) as ds:
                ds.append(np.arange(100, dtype=np.int64))
                raise KeyError("the body failed")
        except KeyError:
            pass
        assert ds.closed
    """)
    assert_durable(lines, "d")
    with DenseStore.open("d") as ds:
        np.testing.assert_array_equal(ds[:], np.arange(100))


def in_forked_child(work):
    """Run work() in a child of fork() while this process waits for it;
    fail with the child's traceback if work raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            work()
        except BaseException:
            code = 1
            os.write(w, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        report = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, report


def test_a_sync_that_fails_at_close_is_raised_and_the_store_closed():
    ds = DenseStore.create("d", np.int8)
    ds.append(np.arange(10, dtype=np.int8))

    def work():
        with pytest.raises(StoreBusyError, match="inherited the handle through fork"):
            ds.close()
        assert ds.closed
        ds.close()   # closing again is harmless, and raises nothing

    in_forked_child(work)
    # The parent's handle was never the child's to close, and syncs.
    ds.close()
    with DenseStore.open("d", readonly=True) as again:
        assert again[:].tolist() == list(range(10))


def test_a_failed_sync_after_a_with_block_raised_reports_both():
    rs = RaggedStore.create("r", np.uint8)
    rs.append([np.ones(3, np.uint8)])

    def work():
        try:
            with rs:
                raise ValueError("the body failed")
        except StoreBusyError as e:
            assert isinstance(e.__context__, ValueError)
            shown = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            assert "ValueError: the body failed" in shown, shown
            assert "During handling of the above exception" in shown, shown
        else:
            raise AssertionError("leaving the block raised no sync error")
        assert rs.closed

    in_forked_child(work)
    rs.close()
