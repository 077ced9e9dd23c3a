"""The reference against hand-worked SDM cases and an independent exact-rational oracle."""

from __future__ import annotations

import numpy as np
import pytest
from cases import CASES
from conftest import assert_bits, instr
from oracle import exact_op

from tilegemm import reference


def _expected(dtype, value):
    return np.array(value, dtype=instr(dtype).acc)


@pytest.mark.parametrize("name,dtype,a,b,c,expected", CASES, ids=[c[0] for c in CASES])
def test_hand_worked_cases(name, dtype, a, b, c, expected):
    cc = None if c is None else _expected(dtype, c)
    assert_bits(reference.matmul(np.array(a), np.array(b), dtype, c=cc), _expected(dtype, expected), name)


def test_semantics_scalar_boundaries():
    f = np.float32
    assert reference.fma32(f(-(2.0**-76)), f(2.0**-76), f(2.0**-126)) == f(2.0**-126)
    r = reference.fma32(f(-1.5 * 2.0**-75), f(2.0**-74), f(2.0**-126 + 2.0**-149))
    assert r == 0 and not np.signbit(r)
    assert reference.fma32(f(-(2.0**-75)), f(2.0**-76), f(2.0**-126)) == f(2.0**-126)
    assert reference.fma32(f(2.0**100), f(2.0**100), f(-np.inf)) == -np.inf


def _random_f32(rng, n, emin, emax):
    sig = rng.integers(2**23, 2**24, n).astype(np.float64)
    e = rng.integers(emin, emax, n)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * np.ldexp(sig, e - 23)).astype(np.float32)


@pytest.mark.parametrize("kind", ["fma", "add"])
def test_against_exact_rationals(kind):
    """fma32/add32 agree with exact rational arithmetic on cases built to hit the edges."""
    rng = np.random.default_rng(20261202)
    n = 4000
    a = _random_f32(rng, n, -90, 60)
    a = (a.view(np.uint32) & 0xFFFF0000).view(np.float32)  # BF16 values, as the kernels multiply
    b = _random_f32(rng, n, -90, 60)
    b = (b.view(np.uint32) & 0xFFFF0000).view(np.float32)
    if kind == "add":
        b = np.ones(n, np.float32)
    c = _random_f32(rng, n, -150, 100)
    # A third of the cases cancel almost exactly, to land near 2^-126, on ties and on zeros.
    near = rng.random(n) < 0.35
    prod = a.astype(np.float64) * b
    jitter = rng.integers(-3, 4, n) * 2.0 ** rng.integers(-30, -20, n)
    c = np.where(near, (-prod * (1 + jitter)).astype(np.float32), c)
    # Tie cases: c chosen so that prod + c is exactly halfway at 24 bits.
    tie = rng.random(n) < 0.1
    c = np.where(tie, np.float32(1.0), c)
    a = np.where(tie, np.float32(1.0), a)
    b = np.where(tie, np.float32(2.0**-24) * np.where(rng.random(n) < 0.5, 1, 3), b).astype(np.float32)
    got = reference.fma32(a, b, c) if kind == "fma" else reference.add32(a * b, c)
    want = np.array([exact_op(x, y, z) for x, y, z in zip(a, b, c)], np.float32)
    assert_bits(got, want, f"{kind} vs exact rationals")


def test_vdpbf16ps_order():
    # a = [1, 2^24, 1, -2^24], b = 1. VDPBF16PS, odd element of each pair first:
    # 0 + 2^24 = 2^24, + 1 -> 2^24 (tie to even), - 2^24 = 0, + 1 = 1.
    # TDPBF16PS: e = 1 + 1 = 2, o = 2^24 - 2^24 = 0, result 2.
    a = np.array([[1.0, 2.0**24, 1.0, -(2.0**24)]])
    b = np.ones((4, 1))
    assert reference.matmul(a, b, "bf16", isa="avx512")[0, 0] == 1.0
    assert reference.matmul(a, b, "bf16")[0, 0] == 2.0
