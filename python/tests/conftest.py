"""Shared fixtures of the binding's tests.

Every test runs in its own temporary folder (the reference examples use
relative store paths). The programs of the build tree are found through
the ZR, ZRECORDFS and ZR_ABI_LAYOUT variables that pytest.sh sets, or next
to the source folder when the tests are run by hand from a built checkout.
"""

import os
import shutil
import subprocess

import numpy as np
import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _program(var, rel):
    path = os.environ.get(var)
    if path:
        return path
    for cand in (os.path.join(TOP, os.path.dirname(rel), ".libs",
                              os.path.basename(rel)), os.path.join(TOP, rel)):
        if os.access(cand, os.X_OK):
            return cand
    found = shutil.which(os.path.basename(rel))
    if found:
        return found
    pytest.fail(f"{rel} is not built: set {var} or build the tree")


@pytest.fixture
def zr():
    """Run the zr tool; return its CompletedProcess (stdout as bytes)."""
    exe = _program("ZR", "src/zr")

    def run(*args, check=True, **kw):
        res = subprocess.run([exe, *map(str, args)], capture_output=True, **kw)
        if check and res.returncode != 0:
            raise AssertionError(f"zr {' '.join(map(str, args))} exited "
                                 f"{res.returncode}: {res.stderr.decode()}")
        return res
    return run


@pytest.fixture
def zrecordfs_path():
    return _program("ZRECORDFS", "fs/zrecordfs")


@pytest.fixture(scope="session")
def abi_layout_path():
    """tests/abi_layout, which prints the headers' layouts (test_abi.py)."""
    return _program("ZR_ABI_LAYOUT", "tests/abi_layout")


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)
