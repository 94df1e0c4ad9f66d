"""The binding's declarations against the headers.

In ABI mode cffi lays out a struct from the binding's own declaration
(loaderx/_lib.py), never from the header, and the binding's constants are
plain Python numbers: a field added to the header and not to the binding,
or a code renumbered in one and not the other, would pass unnoticed until a
call read the wrong bytes. tests/abi_layout, compiled against the headers,
prints what the C compiler makes of them; these tests hold the binding to
it.
"""

import subprocess

import pytest

from loaderx import _lib
from loaderx._lib import ffi


@pytest.fixture(scope="module")
def layout(abi_layout_path):
    """The C side: {struct: (size, {field: (offset, size)})} and
    {macro: value}."""
    out = subprocess.run([abi_layout_path], capture_output=True, text=True,
                         check=True).stdout
    structs, consts = {}, {}
    for line in out.splitlines():
        kind, name, *rest = line.split()
        if kind == "struct":
            structs[name] = (int(rest[0]), {})
        elif kind == "field":
            structs[name][1][rest[0]] = (int(rest[1]), int(rest[2]))
        else:
            consts[name] = int(rest[0])
    return structs, consts


def binding_structs():
    """The struct typedefs the binding declares with their fields (not the
    opaque handles)."""
    typedefs, _, _ = ffi.list_types()
    return sorted(t for t in typedefs if ffi.typeof(t).kind == "struct"
                  and ffi.typeof(t).fields is not None)


def test_the_binding_declares_the_structs_it_uses():
    # A struct left out here would not be compared below.
    assert set(binding_structs()) >= {
        "zr_create_opts", "zr_rec", "zr_view", "zr_store_stats",
        "zr_compact_result", "zr_problem", "zr_verify_report",
        "zr_sampler_info", "zr_column", "zr_batch", "zr_loader_opts"}


@pytest.mark.parametrize("name", binding_structs())
def test_struct_layout_matches_the_header(layout, name):
    structs, _ = layout
    assert name in structs, f"{name} is not in tests/abi_layout.c"
    size, fields = structs[name]
    ctype = ffi.typeof(name)
    mine = {f: (field.offset, ffi.sizeof(field.type))
            for f, field in ctype.fields}
    assert ffi.sizeof(ctype) == size, \
        f"{name}: the binding's is {ffi.sizeof(ctype)} bytes, the header's {size}"
    assert mine == fields, f"{name}: fields differ from the header's"


def test_constants_match_the_header(layout):
    _, consts = layout
    mine = {k: v for k, v in vars(_lib).items()
            if k.startswith("ZR_") and isinstance(v, int)}
    unchecked = sorted(set(mine) - set(consts))
    assert not unchecked, f"not printed by tests/abi_layout.c: {unchecked}"
    assert {k: consts[k] for k in mine} == mine


def test_codes_are_outside_errno_and_the_version_is_the_headers(layout):
    _, consts = layout
    codes = [v for k, v in consts.items() if k.startswith("ZR_E")]
    assert len(codes) == 18 and all(v < -4095 for v in codes)
    assert _lib.lib.zr_version() == consts["ZR_VERSION_NUMBER"]
