"""Where the package finds libloaderx and what it says when it cannot.

make install is the one way the package is installed (python/Makemodule.am);
make installcheck imports what it installed."""

import os
import shutil
import subprocess
import sys

import pytest

import loaderx
from loaderx import _lib

PACKAGE = os.path.dirname(os.path.abspath(loaderx.__file__))
LIBRARY = os.path.realpath(loaderx.library_path)
PROBE = "import loaderx; print(loaderx.library_path)"


def run_python(code, path, **env_changes):
    """Run code in a fresh interpreter importing from path only."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOADERX_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env.update({k: v for k, v in env_changes.items() if v is not None})
    env["PYTHONPATH"] = str(path)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, cwd="/")


def copy_package(dest):
    shutil.copytree(PACKAGE, dest / "loaderx",
                    ignore=shutil.ignore_patterns("__pycache__", "_libdir.py"))


def load(package_dir, **environ):
    """Run the package's library search for a copy in package_dir."""
    lib, path = _lib._load(str(package_dir), environ)
    assert hasattr(lib, "zr_open")
    return path


def test_version_is_the_librarys_and_the_packages(zr):
    # One version throughout: the library's (configure's) and zr's; the
    # package has no metadata of its own (make install puts it in place).
    assert loaderx.__version__ == _lib.version_string()
    major, minor, patch = map(int, loaderx.__version__.split("."))
    assert _lib.lib.zr_version() == major * 10000 + minor * 100 + patch
    out = zr("--version").stdout.decode()
    assert out == f"zr (loaderx) {loaderx.__version__}\n"


def test_library_named_by_the_environment_is_the_only_one_tried(tmp_path):
    copy_package(tmp_path)
    assert load(tmp_path / "loaderx", LOADERX_LIBRARY=LIBRARY) == LIBRARY
    wrong = str(tmp_path / "nowhere" / "libloaderx.so")
    with pytest.raises(ImportError) as exc:
        load(tmp_path / "loaderx", LOADERX_LIBRARY=wrong)
    msg = str(exc.value)
    assert "LOADERX_LIBRARY" in msg
    assert f"{wrong} (LOADERX_LIBRARY): no such file" in msg
    # Nothing else was tried.
    assert "build tree" not in msg and "find_library" not in msg


def test_a_file_that_is_not_the_library_is_reported(tmp_path):
    bogus = tmp_path / "libloaderx.so"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(ImportError, match=str(bogus)):
        load(tmp_path, LOADERX_LIBRARY=str(bogus))
    with pytest.raises(ImportError, match="libc.so.6 .* lacks zr_last_error"):
        load(tmp_path, LOADERX_LIBRARY="libc.so.6")


def test_build_tree_layout_is_found_without_settings(tmp_path):
    tree = tmp_path / "tree"
    copy_package(tree / "python")
    (tree / "lib" / ".libs").mkdir(parents=True)
    os.symlink(LIBRARY, tree / "lib" / ".libs" / "libloaderx.so.1")
    assert load(tree / "python" / "loaderx") == \
        str(tree / "lib" / ".libs" / "libloaderx.so.1")


def test_install_prefix_layout_is_found_without_settings(tmp_path):
    prefix = tmp_path / "prefix"
    site = prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" \
        / "site-packages"
    copy_package(site)
    os.symlink(LIBRARY, prefix / "lib" / "libloaderx.so.1")
    assert load(site / "loaderx") == str(prefix / "lib" / "libloaderx.so.1")


def test_recorded_install_libdir_is_found(tmp_path):
    site = tmp_path / "site"
    copy_package(site)
    libdir = tmp_path / "elsewhere"
    libdir.mkdir()
    os.symlink(LIBRARY, libdir / "libloaderx.so.1")
    (site / "loaderx" / "_libdir.py").write_text(
        f'"""Written by make install."""\n\nLIBDIR = {str(libdir)!r}\n')
    assert load(site / "loaderx") == str(libdir / "libloaderx.so.1")


def test_import_fails_listing_every_place_tried_and_why(tmp_path):
    # A fresh interpreter, without the settings of the test run, imports a
    # copy of the package that has no library anywhere near it.
    site = tmp_path / "alone"
    copy_package(site)
    res = run_python(PROBE, site)
    if res.returncode == 0:
        # A libloaderx is installed on this system's loader path; then it
        # must have come from there, not from a folder of this test.
        assert str(tmp_path) not in res.stdout
        return
    err = res.stderr
    assert "cannot find libloaderx" in err and "LOADERX_LIBRARY" in err
    for origin in ("build tree", "install prefix", "find_library",
                   "dynamic loader search path"):
        assert origin in err, err
    assert str(tmp_path / "lib" / ".libs" / "libloaderx.so.1") in err
    assert "no such file" in err
