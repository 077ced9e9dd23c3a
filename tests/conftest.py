"""Shared test helpers: operand generation, the kernel tester's comparison, path forcing."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import settings

import tilegemm
from tilegemm import dispatch

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile("tilegemm", derandomize=True, deadline=None, print_blob=True, max_examples=40)
settings.load_profile("tilegemm")

FLOAT_DTYPES = ("bf16", "fp16")
INT_DTYPES = ("s8s8", "s8u8", "u8s8", "u8u8")
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES
INT_RANGE = {"s": (-128, 127), "u": (0, 255)}
SEED_TILINGS = ("1x1", "2x2")  # the seed's two; the edge-shape tester covers every tiling


def operands(dtype, a_shape, b_shape, rng):
    """Random inputs a caller would pass for ``dtype`` (floats, or in-range integers)."""
    if dtype in FLOAT_DTYPES:
        return rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    fmt = tilegemm.formats.get_format(dtype)
    sa, sb = fmt.name[0], fmt.name[2]
    lo, hi = INT_RANGE[sa]
    a = rng.integers(lo, hi + 1, a_shape)
    lo, hi = INT_RANGE[sb]
    return a, rng.integers(lo, hi + 1, b_shape)


def assert_bits(got, want, context=""):
    """The one comparison: bit for bit through tilegemm.bitdiff."""
    d = tilegemm.bitdiff(got, want)
    assert d.identical, f"{context}: {d}"


def reference_stack(a, b, dtype, c=None):
    """tilegemm.reference.matmul over broadcast batch dimensions (reference is 2-D)."""
    a = np.asarray(a)
    b = np.asarray(b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + (a.shape[-2], b.shape[-1]), tilegemm.formats.get_format(dtype).out)
    for idx in np.ndindex(*batch):
        out[idx] = tilegemm.reference.matmul(a[idx], b[idx], dtype, None if c is None else c[idx])
    return out


@pytest.fixture(params=["fast", "exact"])
def path(request, monkeypatch):
    """Run the float kernels through their fast path where the proof allows it, or always exact."""
    if request.param == "exact":
        monkeypatch.setattr(dispatch, "fast_path_ok", lambda *args, **kw: False)
    return request.param
