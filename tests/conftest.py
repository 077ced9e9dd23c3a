"""Shared test helpers: operand generation, the kernel tester's comparison, path forcing."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import settings

import tilegemm
from tilegemm import instructions, plan

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile("tilegemm", derandomize=True, deadline=None, print_blob=True, max_examples=40)
settings.load_profile("tilegemm")

DEFAULT = instructions.PROFILES[instructions.DEFAULT_ISA]
#: The default profile's dtypes (the AMX instructions), floats and integers, from the records.
ALL_DTYPES = tuple(DEFAULT.dtypes)
FLOAT_DTYPES = tuple(d for d, i in DEFAULT.dtypes.items() if i.is_float)
INT_DTYPES = tuple(d for d, i in DEFAULT.dtypes.items() if not i.is_float)


def _kernel_cases():
    """Every (isa, dtype) any instruction profile defines (library profiles such as "onednn" run
    these kernels inside their own schedule and have their own tests; a profile that is another
    encoding of one already listed, ``Profile.same_as``, is not listed twice), except where an
    earlier case runs the same kernels on the same operands: ACE's int8 outer products run AMX's int8 kernels
    (their references are compared with AMX's in tests/test_ace.py)."""
    cases: dict = {}
    for p in instructions.PROFILES.values():
        if p.library is None and p.same_as is None:
            for d, i in p.dtypes.items():
                cases.setdefault((i.kernel, i.a, i.b, i.acc, i.switches, i.scale_block), (p.name, d))
    return tuple(cases.values())


KERNEL_CASES = _kernel_cases()
SEED_TILINGS = ("1x1", "2x2")  # the seed's two; the kernel tester covers every tiling


def instr(dtype, isa=instructions.DEFAULT_ISA):
    return instructions.resolve(isa, dtype)[2]


def operands(dtype, a_shape, b_shape, rng, isa=instructions.DEFAULT_ISA):
    """Random inputs a caller would pass for ``dtype``: float64 (the conversion rounds once from
    it), or in-range integers as int64; 8-bit floats for ACE's MX outer products, which refuse
    anything else."""
    i = instr(dtype, isa)
    a, b = i.a.sample(a_shape, rng, wide=True), i.b.sample(b_shape, rng, wide=True)
    return i.quantize(a, b, dtype) if i.codes_only else (a, b)


def assert_bits(got, want, context=""):
    """The one comparison: bit for bit through tilegemm.bitdiff."""
    d = tilegemm.bitdiff(got, want)
    assert d.identical, f"{context}: {d}"


def reference_stack(a, b, dtype, c=None, isa=instructions.DEFAULT_ISA):
    """tilegemm.reference.matmul over broadcast batch dimensions (reference is 2-D)."""
    a = np.asarray(a)
    b = np.asarray(b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + (a.shape[-2], b.shape[-1]), instr(dtype, isa).acc)
    for idx in np.ndindex(*batch):
        out[idx] = tilegemm.reference.matmul(a[idx], b[idx], dtype, None if c is None else c[idx], isa=isa)
    return out


@pytest.fixture(params=["fast", "exact"])
def path(request, monkeypatch):
    """Run the float kernels through their fast path where the proof allows it, or always exact."""
    if request.param == "exact":
        monkeypatch.setattr(plan, "fast_path_ok", lambda *args, **kw: False)
        monkeypatch.setattr(plan, "FORCED_PATH", "exact")  # blocked kernels: every block exact
    return request.param


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests that run on one pytest-xdist worker")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Groups for ``pytest -n auto --dist loadgroup`` (the README's test command): the kernel
    tester's cases by (isa, dtype), every other test by its module. A group runs on one worker, so
    the two workers of a cold run compile different kernels instead of racing to compile the same
    ones (the Numba cache makes the second compile of a kernel a load). ``tryfirst``: pytest-xdist
    reads the markers in its own hook of this name, which would otherwise run first
    (tests/test_suite.py checks that the groups arrive)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        callspec = getattr(item, "callspec", None)
        if item.module.__name__.endswith("test_kernels") and callspec is not None and "isa" in callspec.params:
            group = f"kernels-{callspec.params['isa']}-{callspec.params['dtype']}"
        else:
            group = item.module.__name__
        item.add_marker(pytest.mark.xdist_group(group))
