"""AMX-FP8 (TDPBF8PS, TDPBHF8PS, TDPHBF8PS, TDPHF8PS): the reference against hand-worked examples
and independent oracles, then matmul, the tile API and the switches against the reference."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from conftest import SEED_TILINGS, assert_bits, instr
from fpenv import DAZ, FTZ, X86, get_mxcsr, mxcsr_flags, set_mxcsr
from numba import njit
from oracle import _round24, exact_op
from worked_examples import FP8, SWITCHES, f32, fp8_operands, g2

import tilegemm
from tilegemm import dispatch, float8, reference
from tilegemm.amx import intrinsics
from tilegemm.formats import BF8, HF8
from tilegemm.kernels import exact
from tilegemm.reference import fp8

FP8_DTYPES = ("bf8", "bf8hf8", "hf8bf8", "hf8")
ML = {"bf8": ml_dtypes.float8_e5m2, "hf8": ml_dtypes.float8_e4m3fn}
ALL = np.arange(256, dtype=np.uint8)


def _formats(dtype):
    i = instr(dtype)
    return i.a, i.b


def _values(codes, fmt):
    """Independent decode: ml_dtypes widening to float64 (exact)."""
    return np.asarray(codes, np.uint8).view(ML[fmt.name]).astype(np.float64)


# -- decoding and rounding -----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [BF8, HF8], ids=["bf8", "hf8"])
def test_fix_and_kinds_of_every_code(fmt):
    v = _values(ALL, fmt)
    k = fp8.kinds(ALL, fmt.minifloat)
    assert np.array_equal(k == fp8.NAN, np.isnan(v))
    assert np.array_equal(k == fp8.POS_INF, np.isposinf(v))
    assert np.array_equal(k == fp8.NEG_INF, np.isneginf(v))
    finite = np.isfinite(v)
    got = fp8.fix(ALL, fmt.minifloat)
    assert got.dtype == np.int64
    assert np.array_equal(got[finite], (v[finite] * 2.0**fmt.minifloat.fix_shift).astype(np.int64))
    assert np.all(got[~finite] == 0)


def test_fix_by_hand():
    # E5M2 0x7B: e = 30, f = 3 -> (4 | 3) << 29 = 57344 * 2^16. 0x01: a denormal, fix 1 = 2^-16.
    assert fp8.fix([0x7B, 0x01, 0xFB, 0x80], BF8.minifloat).tolist() == [7 << 29, 1, -(7 << 29), 0]
    # E4M3 0x7E: e = 15, f = 6 -> (8 | 6) << 14 = 448 * 2^9. 0x38 = 1: (8 | 0) << 6 = 2^9.
    assert fp8.fix([0x7E, 0x38, 0x01, 0x7F], HF8.minifloat).tolist() == [14 << 14, 1 << 9, 1, 0]
    assert BF8.minifloat.fix_shift == 16 and HF8.minifloat.fix_shift == 9
    assert [instr(d).fixed_shift for d in FP8_DTYPES] == [32, 25, 25, 18]


@njit(cache=True)
def _compiled_fix(ebits, mbits, ieee):
    kinds_ = np.zeros(256, np.int64)
    fixes = np.zeros(256, np.int64)
    for c in range(256):
        kinds_[c], fixes[c] = exact.fp8_fix(c, ebits, mbits, ieee)
    return kinds_, fixes


@njit(cache=True)
def _compiled_round(his, los, es):
    out = np.empty(his.size, np.float32)
    for i in range(his.size):
        out[i] = exact.round_scaled(his[i], los[i], es[i])
    return out


@pytest.mark.parametrize("fmt", [BF8, HF8], ids=["bf8", "hf8"])
def test_compiled_twins_of_fix_and_the_decode_table(fmt):
    mf = fmt.minifloat
    kinds_, fixes = _compiled_fix(mf.exponent_bits, mf.mantissa_bits, mf.ieee_specials)
    assert np.array_equal(kinds_, fp8.kinds(ALL, mf)) and np.array_equal(fixes, fp8.fix(ALL, mf))
    # the table's NaN is the quiet NaN whatever the code's payload (float8.decode_table)
    want = np.where(np.isnan(_values(ALL, fmt)), np.float32(np.nan), _values(ALL, fmt)).astype(np.float32)
    assert_bits(float8.decode_table(fmt).astype(np.float32), want, "decode table")


def test_compiled_twin_of_round_scaled():
    """kernels.exact.round_scaled takes the integer as two int64 limbs (hi * 2^32 + lo, lo not
    normalised) and must agree with the reference on every case, ties and edges included."""
    rng = np.random.default_rng(11)
    accs, es = [], []
    for _ in range(20000):
        bits = int(rng.integers(1, 72))
        mag = (int(rng.integers(0, 1 << 62)) << 10 | int(rng.integers(0, 1 << 10))) & ((1 << bits) - 1)
        if rng.random() < 0.3:
            mag = (((int(rng.integers(1 << 23, 1 << 24)) << 1) | 1) << int(rng.integers(0, 45))) + int(
                rng.integers(-1, 2)
            )
        accs.append(mag if rng.random() < 0.5 else -mag)
        es.append(int(rng.integers(-200, 120)))
    accs += [0, 1, -1, (1 << 70) - 1, -(1 << 70)]
    es += [0, -32, -32, -32, -32]
    his = np.array([a >> 32 for a in accs], np.int64)
    los = np.array([a & 0xFFFFFFFF for a in accs], np.int64)
    carry = rng.integers(0, 40, his.size)  # the kernels' lo sums exceed 2^32: move some into lo
    his, los = his - carry, los + (carry << 32)
    want = np.array([fp8.round_scaled(a, e) for a, e in zip(accs, es)], np.float32)
    assert_bits(_compiled_round(his, los, np.array(es, np.int64)), want, "round_scaled twin")


def _round_oracle(q: Fraction) -> float:
    """Independent: nearest binary32 to q (ties to even, unbounded exponent), then zero below
    2^-126 and infinity from 2^128."""
    if q == 0:
        return 0.0
    v = _round24(q)
    if abs(v) >= Fraction(2) ** 128:
        return math.copysign(math.inf, v)
    if abs(v) < Fraction(2) ** -126:
        return math.copysign(0.0, v)
    return float(v)


def test_round_scaled_against_rationals():
    rng = np.random.default_rng(2026)
    cases = [(0, 0), (1, -32), (-1, -32), ((1 << 24) + 1, 0), ((1 << 24) + 3, 0), ((1 << 25) + 2, 0)]
    cases += [((1 << 70) - 1, -32), (-(1 << 70) + 12345, -32), ((1 << 24) - 1, 104), ((1 << 24) - 1, 105)]
    cases += [(1, -126), (1, -127), ((1 << 24) - 1, -150), ((1 << 25) - 1, -151), (3, -128)]
    for _ in range(3000):
        bits = int(rng.integers(1, 72))
        mag = int(rng.integers(0, 1 << 62)) << max(bits - 62, 0) | int(rng.integers(0, 1 << min(bits, 62)))
        mag &= (1 << bits) - 1
        if rng.random() < 0.3:  # exact ties and their neighbours at 24 bits
            shift = int(rng.integers(1, 40))
            mag = ((int(rng.integers(1 << 23, 1 << 24)) << 1) | 1) << (shift - 1)
            mag += int(rng.integers(-1, 2))
        cases.append((mag if rng.random() < 0.5 else -mag, int(rng.integers(-180, 120))))
    for acc, e in cases:
        got = fp8.round_scaled(acc, e)
        want = np.float32(_round_oracle(Fraction(acc) * Fraction(2) ** e))
        assert got.tobytes() == want.tobytes() or (acc == 0 and got == 0), (acc, e, got, want)
    assert np.signbit(fp8.round_scaled(0, 5)) == False  # noqa: E712 - acc = 0 is +0


# -- the reference: worked examples ------------------------------------------------------------


@pytest.mark.parametrize("case", FP8, ids=[f"{c[0]}-{c[1]}" for c in FP8])
def test_worked_examples_reference(case):
    _, dtype, a_dw, b_dw, dst, out = case
    a, b = fp8_operands(a_dw, b_dw)
    got = reference.matmul(a, b, dtype, c=np.array([[f32(dst)]]))
    assert_bits(got, np.array([[f32(out)]]), case[0])
    if np.isnan(f32(out)):  # the reference spells the default NaN out
        assert got.view(np.uint32)[0, 0] == out


@pytest.mark.parametrize("switch,value,example,dtype,out", [s for s in SWITCHES if s[0].startswith("fp8")])
def test_switch_examples_reference(switch, value, example, dtype, out):
    _, _, a_dw, b_dw, dst, default = next(c for c in FP8 if c[0] == example and c[1] == dtype)
    a, b = fp8_operands(a_dw, b_dw)
    c = np.array([[f32(dst)]])
    assert_bits(reference.matmul(a, b, dtype, c=c, **{switch: value}), np.array([[f32(out)]]), switch)
    assert_bits(reference.matmul(a, b, dtype, c=c), np.array([[f32(default)]]), switch + " default")


def test_gemm_k_steps_round_per_step_reference():
    a, b, out = g2()
    assert_bits(reference.matmul(a, b, "hf8"), np.array([[f32(out)]]), "G-2")
    # One instruction over all of K (K = 65 > 64 cannot be one tile; the same values with the
    # last one moved into the first step) gives the single exact rounding instead.
    a1, b1 = a[:, :64].copy(), b[:64].copy()
    a1[0, 2], b1[2, 0] = 0x18, 0x18
    assert_bits(reference.matmul(a1, b1, "hf8"), np.array([[f32(0x47800001)]]), "one step")


def test_sde_revive_cancelled_at_a_dword_end():
    # Products +Inf, -Inf, 0, 0 in dword 0 (cancelled at its end: NaN) ...
    a, b = fp8_operands([0x00007C7C], [0x0000BC3C])
    assert np.isnan(reference.matmul(a, b, "bf8", fp8_inf_cancel="sde_revive")[0, 0])
    # ... but +Inf in dword 0 and -Inf in dword 1, +Inf again later in dword 1: state + then
    # cancelled then + within dword 1: +Inf. Strict gives NaN.
    a, b = fp8_operands([0x0000007C, 0x00007C7C], [0x0000003C, 0x00003CBC])
    assert reference.matmul(a, b, "bf8", fp8_inf_cancel="sde_revive")[0, 0] == np.inf
    assert np.isnan(reference.matmul(a, b, "bf8")[0, 0])
    # -Inf only: -Inf either way.
    a, b = fp8_operands([0x000000FC], [0x0000003C])
    for v in ("strict", "sde_revive"):
        assert reference.matmul(a, b, "bf8", fp8_inf_cancel=v)[0, 0] == -np.inf


# -- the reference against independent oracles ---------------------------------------------------


def _single_product_oracle(x, y, c):
    """C + x*y for one product (K = 1): x*y is exact in binary64 and a binary32 normal or zero, so
    numpy's float32 rounding of it is the one rounding; acc = 0 gives +0; the add is numpy float32
    (no result can be tiny: |s| >= 2^-32), after reading a denormal C as zero."""
    with np.errstate(all="ignore"):
        p = x * y
        s = np.where(p == 0, 0.0, p).astype(np.float32)
        cc = np.where(np.abs(c) < 2.0**-126, np.copysign(np.float32(0), c), c).astype(np.float32)
        r = (cc + s).astype(np.float32)
    # AMX-FP8 writes the default NaN for every NaN result (a NaN input or C, Inf * 0, Inf - Inf)
    return np.where(np.isnan(r), np.uint32(0xFFC00000).view(np.float32), r)


C_VALUES = [-0.0, 1.0, -3.5, float(np.float32(2.0**-140)), -float(np.float32(2.0**-149)), 3e38, -np.inf, np.nan]


@functools.lru_cache(maxsize=None)
def single_products(dtype):
    """All 256 x 256 code pairs (A 256 x 1, B 1 x 256), the C values to start from (0, then a
    table in which every output starts at one of C_VALUES), and the reference's results."""
    a = ALL.reshape(256, 1)
    b = ALL.reshape(1, 256)
    rng = np.random.default_rng(len(dtype))
    cs = [np.zeros((256, 256), np.float32), rng.choice(np.float32(C_VALUES), (256, 256))]
    return a, b, cs, [reference.matmul(a, b, dtype, c=c) for c in cs]


@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_all_single_products_reference(dtype):
    """All 256 x 256 code pairs, with C = 0 and other starting values, against the oracle."""
    fa, fb = _formats(dtype)
    a, b, cs, refs = single_products(dtype)
    x, y = _values(a, fa), _values(b, fb)
    for c, ref in zip(cs, refs):
        assert_bits(ref, _single_product_oracle(x, y, c), f"{dtype}, C = {c[0, :3]}...")


def _sum_oracle(a_codes, b_codes, fa, fb, c):
    """Finite inputs: per tile step of 64, the exact sum of products as a Fraction, rounded once,
    then added to C by the exact rational oracle (DAZ on C, FTZ)."""
    xa, yb = _values(a_codes, fa), _values(b_codes, fb)
    m, k = xa.shape
    n = yb.shape[1]
    out = np.array(c, np.float32)
    for k0 in range(0, k, 64):
        for i in range(m):
            for j in range(n):
                s = sum((Fraction(xa[i, t]) * Fraction(yb[t, j]) for t in range(k0, min(k, k0 + 64))), Fraction(0))
                out[i, j] = exact_op(float(np.float32(_round_oracle(s))), 1.0, float(out[i, j]))
    return out


@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_sums_against_rationals(dtype):
    """Many products per step, spread over the whole exponent range (cancellations included)."""
    fa, fb = _formats(dtype)
    rng = np.random.default_rng([7, len(dtype)])
    finite_a = ALL[np.isfinite(_values(ALL, fa))]
    finite_b = ALL[np.isfinite(_values(ALL, fb))]
    for m, n, k in [(3, 2, 4), (2, 3, 63), (2, 2, 130)]:
        a = rng.choice(finite_a, (m, k))
        b = rng.choice(finite_b, (k, n))
        b[:, 0] = (a[0] ^ 0x80) if fa is fb else b[:, 0]  # exact cancellation against row 0
        c = rng.standard_normal((m, n)).astype(np.float32) * np.float32(2.0**-20)
        want = _sum_oracle(a, b, fa, fb, c)
        assert_bits(reference.matmul(a, b, dtype, c=c), want, f"{dtype} {m}x{n}x{k}")


# -- matmul: the worked examples on every tiling, both paths --------------------------------------


@pytest.mark.parametrize("case", FP8, ids=[f"{c[0]}-{c[1]}" for c in FP8])
def test_worked_examples_matmul(case, path):
    name, dtype, a_dw, b_dw, dst, out = case
    a, b = fp8_operands(a_dw, b_dw)
    want = np.array([[f32(out)]])
    for tiling in tilegemm.TILINGS:
        got = np.array([[f32(dst)]])
        tilegemm.matmul(a, b, dtype, tiling, out=got, accumulate=True)
        assert_bits(got, want, f"{name} {tiling}")
    # Embedded at a tile edge of a larger GEMM, neighbours around it (their C starts at 0).
    big_a = np.zeros((20, a.shape[1]), np.uint8)
    big_b = np.zeros((b.shape[0], 35), np.uint8)
    big_a[17], big_b[:, 33] = a[0], b[:, 0]
    c = np.zeros((20, 35), np.float32)
    c[17, 33] = f32(dst)
    tilegemm.matmul(big_a, big_b, dtype, "2x2", out=c, accumulate=True)
    assert_bits(c[17:18, 33:34], want, name + " (embedded)")
    assert not np.delete(np.delete(c, 17, 0), 33, 1).any()  # outputs off its row and column: untouched


@pytest.mark.parametrize("switch,value,example,dtype,out", [s for s in SWITCHES if s[0].startswith("fp8")])
def test_switch_examples_matmul_and_tiles(switch, value, example, dtype, out):
    _, _, a_dw, b_dw, dst, _ = next(c for c in FP8 if c[0] == example and c[1] == dtype)
    a, b = fp8_operands(a_dw, b_dw)
    for tiling in SEED_TILINGS:
        got = np.array([[f32(dst)]])
        tilegemm.matmul(a, b, dtype, tiling, out=got, accumulate=True, **{switch: value})
        assert_bits(got, np.array([[f32(out)]]), f"{switch}={value!r} {tiling}")
    assert_bits(_tile_multiply(dtype, a_dw, b_dw, dst, **{switch: value}), np.array([[f32(out)]]), "tile API")


def test_gemm_k_steps_round_per_step_matmul():
    a, b, out = g2()
    for tiling in tilegemm.TILINGS:
        assert_bits(tilegemm.matmul(a, b, "hf8", tiling), np.array([[f32(out)]]), f"G-2 {tiling}")


# -- matmul: exhaustive single products, K tails, specials ----------------------------------------


@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_all_single_products_matmul(dtype, monkeypatch):
    """The 256 x 256 table through both kernels. With K = 1 each output is one product, which is
    exact in binary64 whatever its size, so the fast body is valid here for every code pair even
    where the per-call proof (made for 64 products) declines: force it, then force the exact one."""
    a, b, cs, refs = single_products(dtype)
    for forced in (True, False):
        monkeypatch.setattr(tilegemm.plan, "fast_path_ok", lambda *args, _f=forced: _f)
        for c, ref in zip(cs, refs):
            for tiling in SEED_TILINGS:
                out = c.copy()
                tilegemm.matmul(a, b, dtype, tiling, out=out, accumulate=True)
                assert_bits(out, ref, f"{dtype} {tiling} {'fast' if forced else 'exact'}")


def _mixed_codes(rng, shape, fmt, specials=0.02):
    """Random codes: mostly the values of standard normals, some zeros, NaN, infinities, extremes."""
    x = rng.standard_normal(shape)
    codes = x.astype(ML[fmt.name]).view(np.uint8)
    pick = rng.random(shape) < specials
    extremes = np.uint8([0x00, 0x80, 0x01, 0x81, 0x7B, 0xFB, 0x7C, 0xFC, 0x7E, 0x7F, 0xFF])
    codes[pick] = rng.choice(extremes, int(pick.sum()))
    return codes


@pytest.mark.parametrize("dtype", FP8_DTYPES)
@pytest.mark.parametrize("k", [1, 63, 64, 65, 129])
def test_k_tails_with_specials(dtype, k, path):
    fa, fb = _formats(dtype)
    rng = np.random.default_rng([k, len(dtype)])
    a = _mixed_codes(rng, (19, k), fa)
    b = _mixed_codes(rng, (k, 18), fb)
    c = rng.standard_normal((19, 18)).astype(np.float32)
    c[0, :4] = [-0.0, f32(0x80000001), np.inf, np.nan]
    want = reference.matmul(a, b, dtype, c=c)
    for tiling in SEED_TILINGS + ("2x3",):
        out = c.copy()
        tilegemm.matmul(a, b, dtype, tiling, out=out, accumulate=True)
        assert_bits(out, want, f"{dtype} K={k} {tiling}")


def test_random_normal_data_takes_the_fast_path_large_values_do_not(monkeypatch):
    seen = []
    real = tilegemm.plan.fast_path_ok
    monkeypatch.setattr(tilegemm.plan, "fast_path_ok", lambda *a: seen.append(real(*a)) or seen[-1])
    rng = np.random.default_rng(4)
    for dtype in FP8_DTYPES:
        i = instr(dtype)
        a, b = i.sample(33, 130, 17, rng)
        assert_bits(tilegemm.matmul(a, b, dtype), reference.matmul(a, b, dtype), dtype)
        assert seen[-1] is True, dtype
    # E5M2 x E5M2 near its top: 2^15 * 2^15 * 64 needs more than binary64's 53 bits from 2^-32.
    a = np.full((3, 70), 0x78, np.uint8)  # 2^15
    a[:, 1] = 0x01  # 2^-16
    b = a.T.copy()
    b[1, 0] = 0x81
    assert_bits(tilegemm.matmul(a, b, "bf8"), reference.matmul(a, b, "bf8"), "large")
    assert seen[-1] is False
    # E4M3 x E4M3 sums always fit binary64: the largest values still take the fast path.
    tilegemm.matmul(np.full((2, 64), 0x7E, np.uint8), np.full((64, 2), 0xFE, np.uint8), "hf8")
    assert seen[-1] is True


def test_a_packed_b_s_exponents_decide_the_proof():
    """A packed B's binary64 blocks are ranged by their own exponents (read as binary32 they gave
    2 for 2^15 and let this call onto the fast path, which loses the 2^-32: 0 instead)."""
    a = np.full((1, 64), 0x5C, np.uint8)  # E5M2 2^8
    a[0, 1] = 0x01  # 2^-16
    b = np.zeros((64, 1), np.uint8)
    b[:3, 0] = [0x78, 0x01, 0xF8]  # 2^15, 2^-16, -2^15: 2^23 + 2^-32 - 2^23 needs 56 bits
    p = tilegemm.pack(b, "bf8")
    assert p.exponent_range("f64", False) == (-16, 15)
    want = reference.matmul(a, b, "bf8")
    assert want[0, 0] == np.float32(2.0**-32)
    assert_bits(tilegemm.matmul(a, p), want, "prepacked")
    assert_bits(tilegemm.matmul(a, b, "bf8"), want, "packed by the call")


def test_prepacked_b_is_shared_by_dtypes_with_its_format():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((20, 70))
    b = rng.standard_normal((70, 30))
    p = tilegemm.pack(b, "bf8")  # B is E5M2 for bf8 and hf8bf8
    assert_bits(tilegemm.matmul(a, p, "hf8bf8"), reference.matmul(a, b, "hf8bf8"), "hf8bf8 on bf8's PackedB")
    with pytest.raises(ValueError, match="contradicts the packed B"):
        tilegemm.matmul(a, p, "bf8hf8")


# -- inputs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [BF8, HF8], ids=["bf8", "hf8"])
def test_inputs_round_once_as_ml_dtypes(fmt):
    dtype = fmt.name
    rng = np.random.default_rng(9)
    x = rng.standard_normal((9, 70)) * np.float64(2.0) ** rng.integers(-20, 20, (9, 70))
    x[0, :6] = [1e6, -1e6, 1 + 2.0**-3 + 2.0**-40, 465.0, np.nan, -np.inf]
    codes = x.astype(ML[dtype]).view(np.uint8)  # ml_dtypes: one rounding from float64
    assert np.array_equal(fmt.to_codes(x, "a", dtype, "nan"), codes)
    if fmt is BF8:  # overflow gives infinity; 1 + 2^-3 + 2^-40 rounds up to 1.25 (through float32: 1.0)
        assert codes[0, :3].tolist() == [0x7C, 0xFC, 0x3D]
    else:  # overflow gives NaN
        assert codes[0, 3] == 0x7F and codes[0, 0] == 0x7F
    y = np.eye(70)[:, :5]
    want = reference.matmul(codes, y, dtype)
    assert_bits(tilegemm.matmul(x, y, dtype, fp8_overflow="nan"), want, "float64 in")
    assert_bits(tilegemm.matmul(codes, y, dtype), want, "uint8 codes in")
    assert_bits(tilegemm.matmul(codes.view(ML[dtype]), y, dtype), want, "ml_dtypes in")
    assert_bits(
        tilegemm.matmul(x.astype(np.float32).astype(ML[dtype]), y, dtype),
        reference.matmul(x.astype(np.float32), y, dtype, fp8_overflow="nan"),
        "float32",
    )
    # Integers other than uint8 are values, not codes.
    assert tilegemm.matmul(np.int16([[3]]), np.int16([[2]]), dtype)[0, 0] == 6


@pytest.mark.parametrize(
    "fmt, values, saturated, first_bad",
    [
        # E4M3: 448 is the largest finite value; 464 is the tie with the NaN code and rounds to
        # even (448); anything above, and an infinity (E4M3 has none), overflows.
        (HF8, [448.0, 463.9, 464.0, 464.1, 1e6, -1e6, np.inf, -np.inf], [0x7E] * 5 + [0xFE, 0x7E, 0xFE], 3),
        # E5M2: 57344 is the largest finite value; 61440 is the tie with infinity and rounds to it
        # (even); its own infinities are not overflows.
        (BF8, [57344.0, 61439.0, 61440.0, 1e6, -1e6, np.inf, -np.inf], [0x7B] * 4 + [0xFB, 0x7C, 0xFC], 2),
    ],
    ids=["hf8", "bf8"],
)
def test_fp8_overflow_errors_saturates_or_keeps_nan(fmt, values, saturated, first_bad):
    dtype = fmt.name
    x = np.array([values, [1.0] * len(values)])
    for arr in (x, x.astype(np.float32)):  # the float64 path and the compiled float32 rounding
        assert fmt.to_codes(arr, "a", dtype, "saturate")[0].tolist() == saturated
        assert np.array_equal(fmt.to_codes(arr, "a", dtype, "nan"), arr.astype(ML[dtype]).view(np.uint8))
        with pytest.raises(
            ValueError, match=rf"operand a has {float(arr[0, first_bad])!r} at index \(0, {first_bad}\)"
        ):
            fmt.to_codes(arr, "a", dtype)
    nan = fmt.to_codes(np.array([np.nan, -np.nan]), "a", dtype, "saturate").view(ML[dtype]).astype(float)
    assert np.isnan(nan).all()  # a NaN is no overflow: it stays NaN in every mode


def test_fp8_overflow_through_matmul_and_pack():
    """The default refuses a call whose operand would turn NaN; ``"saturate"`` gives the bits of
    the operand clipped to the largest finite value; a bad mode or the other 8-bit format is
    refused before anything runs."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 50, (20, 64)), rng.normal(0, 1, (64, 24))
    a[0, 1] = 1000.0
    with pytest.raises(ValueError, match=r"operand a has 1000\.0 at index \(0, 1\).*fp8_overflow='saturate'"):
        tilegemm.matmul(a, b, "hf8")
    clipped = np.clip(a, -448, 448)
    assert_bits(tilegemm.matmul(a, b, "hf8", fp8_overflow="saturate"), tilegemm.matmul(clipped, b, "hf8"))
    assert_bits(
        tilegemm.matmul(b.T, tilegemm.pack(a.T, "hf8", fp8_overflow="saturate")), tilegemm.matmul(b.T, clipped.T, "hf8")
    )
    with pytest.raises(ValueError, match=r"operand b has 1000\.0"):
        tilegemm.pack(a.T, "hf8")
    assert np.isnan(tilegemm.matmul(a, b, "hf8", fp8_overflow="nan")[0]).all()
    with pytest.raises(ValueError, match=r"fp8_overflow must be one of 'error', 'saturate', 'nan', got 'clip'"):
        tilegemm.matmul(a, b, "bf16", fp8_overflow="clip")
    with pytest.raises(TypeError, match=r"operand a has dtype float8_e5m2, but dtype 'hf8' reads a as float8_e4m3fn"):
        tilegemm.matmul(np.ones((2, 4), ML["bf8"]), np.ones((4, 2)), "hf8")


def test_input_errors():
    with pytest.raises(TypeError, match=r"operand a has dtype bool"):
        tilegemm.matmul(np.ones((2, 2), bool), np.ones((2, 2)), "hf8")
    with pytest.raises(TypeError, match=r"operand b has dtype complex128"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2), complex), "bf8")
    with pytest.raises(ValueError, match=r"fp8_inf_cancel='lenient' is not one of 'strict', 'sde_revive'"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), "bf8", fp8_inf_cancel="lenient")
    with pytest.raises(ValueError, match=r"fp8_dst_daz=0 is not one of True, False"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), "bf8", fp8_dst_daz=0)
    with pytest.raises(ValueError, match=r"fp8_dst_daz='False' is not one of True, False"):
        tilegemm.reference.matmul(np.ones((2, 2)), np.ones((2, 2)), "hf8", fp8_dst_daz="False")
    with pytest.raises(ValueError, match=r"switch 'tcmm_rl_negate' does not apply to TDPHF8PS"):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), "hf8", tcmm_rl_negate="product_negate")
    with pytest.raises(
        ValueError, match=r"switch 'fp8_inf_cancel' does not apply to TDPBF16PS \(dtype 'bf16'\); its switches: none"
    ):
        tilegemm.matmul(np.ones((2, 2)), np.ones((2, 2)), "bf16", fp8_inf_cancel="strict")
    # The tile API names the instruction, which the message already says: no "dtype" beside it.
    with pytest.raises(
        ValueError, match=r"switch 'fp8_inf_cancel' does not apply to TCMMRLFP16PS; its switches: tcmm_rl_negate"
    ):
        intrinsics._tile_cmmrlfp16ps(0, 1, 2, fp8_inf_cancel="strict")


# -- the tile API -----------------------------------------------------------------------------------


def _tile_multiply(dtype, a_dw, b_dw, dst, **switches):
    """One TDP*F8PS on tilegemm.amx: A one row of K4 dwords, B K4 rows of one dword, dst 1 x 1."""
    from tilegemm.amx import intrinsics as amx

    unit = amx.reset()
    k4 = len(a_dw)
    amx._tile_loadconfig(tilegemm.amx.TileConfig(rows=(1, 1, k4) + (0,) * 5, colsb=(4, 4 * k4, 4) + (0,) * 5))
    mem = np.concatenate([np.uint32([dst]).view(np.uint8), codes_of(a_dw), codes_of(b_dw)])
    amx._tile_loadd(0, mem, 0, 4)
    amx._tile_loadd(1, mem, 4, 4 * k4)
    amx._tile_loadd(2, mem, 4 + 4 * k4, 4)
    getattr(amx, instr(dtype).intrinsic)(0, 1, 2, **switches)
    assert unit.counters.macs == 4 * k4
    return unit.tile(0, np.float32)


def codes_of(dwords):
    return np.array(dwords, "<u4").view(np.uint8)


@pytest.mark.parametrize("case", FP8, ids=[f"{c[0]}-{c[1]}" for c in FP8])
def test_worked_examples_tile_api(case):
    name, dtype, a_dw, b_dw, dst, out = case
    assert_bits(_tile_multiply(dtype, a_dw, b_dw, dst), np.array([[f32(out)]]), name)


def test_tile_api_faults_and_names():
    from tilegemm.amx import TileConfig, TileUnit, UDFault

    u = TileUnit()
    u.ldtilecfg(TileConfig(rows=(16, 16, 8) + (16,) * 5, colsb=(64,) * 8))
    with pytest.raises(UDFault, match=r"#UD in TDPHBF8PS on tmm2: B has 8 rows but A's colsb / 4 = 16"):
        u.tdphbf8ps(0, 1, 2)
    with pytest.raises(UDFault, match=r"three distinct tiles, got tmm3, tmm3, tmm4"):
        u.tdpbf8ps(3, 3, 4)
    with pytest.raises(ValueError, match="fp8_inf_cancel='x'"):
        u.tdpbhf8ps(3, 4, 5, fp8_inf_cancel="x")
    from tilegemm.amx import intrinsics

    for name in ("_tile_dpbf8ps", "_tile_dpbhf8ps", "_tile_dphbf8ps", "_tile_dphf8ps"):
        assert callable(getattr(intrinsics, name)) and name in intrinsics.__all__


def test_float32_rounding_matches_ml_dtypes_on_a_dense_sample():
    """The compiled float32 -> E5M2 / E4M3 rounding matmul uses for float32 operands: every
    exponent, both sides of every rounding boundary of both formats, NaN payloads and both signs."""
    from tilegemm.convert import f32_to_e4m3fn, f32_to_e5m2

    exps = np.arange(256, dtype=np.uint32) << 23
    edges = [0, 1, 2, 3, 0x7FFFFF, 0x400000, 0x3FFFFF, 0x400001, 0x600000, 0x500000]
    for shift in range(14, 23):  # halfway points of every mantissa width a denormal can keep
        edges += [(1 << shift) - 1, 1 << shift, (1 << shift) + 1, 3 << shift, (3 << shift) - 1]
    rng = np.random.default_rng(3)
    mant = np.concatenate([np.uint32(edges) & 0x7FFFFF, rng.integers(0, 2**23, 100, dtype=np.uint32)])
    bits = (exps[:, None] | mant[None, :]).ravel()
    bits = np.concatenate([bits, bits | 0x80000000])
    x = bits.view(np.float32)
    for f, fmt in ((f32_to_e5m2, BF8), (f32_to_e4m3fn, HF8)):
        with np.errstate(all="ignore"):
            want = x.astype(ML[fmt.name]).view(np.uint8)
        assert np.array_equal(f(bits), want), fmt.name
        assert fmt.f32_round is f
        y = x[np.isfinite(x)].reshape(-1, 1)
        assert_bits(
            tilegemm.matmul(y, np.ones((1, 1), np.float32), fmt.name, fp8_overflow="nan"),
            tilegemm.matmul(y.astype(np.float64), np.ones((1, 1)), fmt.name, fp8_overflow="nan"),
            f"{fmt.name} float32 A through the compiled rounding",
        )


@pytest.mark.skipif(not X86, reason="MXCSR exists on x86 only")
def test_caller_ftz_daz_does_not_change_bits(path):
    """The binary64 sums, the conversion and the final add never meet a denormal, and the exact
    body does not use the FPU's flags: a caller's FTZ|DAZ changes nothing."""
    rng = np.random.default_rng(12)
    runs = []
    for dtype in FP8_DTYPES:
        fa, fb = _formats(dtype)
        a, b = _mixed_codes(rng, (19, 70), fa), _mixed_codes(rng, (70, 18), fb)
        c = rng.standard_normal((19, 18)).astype(np.float32)
        c[0, :3] = [f32(0x80000001), f32(0x00400000), -0.0]  # denormal and zero starting values
        runs += [(a, b, dtype, c, {}), (a, b, dtype, c, {"fp8_dst_daz": False})]
    runs += [(*fp8_operands(x[2], x[3]), x[1], np.array([[f32(x[4])]]), {}) for x in FP8]

    def go():
        outs = []
        for a, b, dtype, c, sw in runs:
            out = c.copy()
            tilegemm.matmul(a, b, dtype, out=out, accumulate=True, threads=1, **sw)
            outs.append(out)
        return outs

    want = go()
    with mxcsr_flags(FTZ | DAZ):
        got = go()
    for g, w, (a, b, dtype, c, sw) in zip(got, want, runs):
        assert_bits(g, w, f"{dtype} {sw} under FTZ|DAZ")
        assert_bits(w, reference.matmul(a, b, dtype, c=c, **sw), f"{dtype} {sw}")


@pytest.mark.parametrize("fmt", [BF8, HF8])
@pytest.mark.parametrize("panel", [np.float64, np.float32])
def test_a_panels_hold_the_values_and_their_exponent_range(fmt, panel):
    """The A pass writes each code's value (binary64, or binary32: layout "fp8_32") into its panel
    slot (zeros elsewhere) and returns the smallest and largest exponent of the non-zero finite
    values, from the codes' decoded values by frexp, not from the pass's own bit arithmetic;
    zeros, NaN and Inf codes do not count, and a matrix of only those has no range."""
    rng = np.random.default_rng(len(fmt.name))
    for m, k in ((3, 1), (17, 70), (40, 129)):
        codes = rng.integers(0, 256, (2, m, k), dtype=np.uint8)
        codes[0, 0, 0] = 0x80  # -0
        dst = np.zeros((2, -(-m // 16), -(-k // 64), 16, 64), panel)
        got = float8.pack_a(codes, fmt, dst)
        values = fmt.decode(codes).astype(np.float64)
        live = values[np.isfinite(values) & (values != 0)]
        exps = np.frexp(live)[1] - 1
        assert got == (int(exps.min()), int(exps.max()))
        panels = np.zeros((2, -(-m // 16) * 16, -(-k // 64) * 64))
        panels[:, :m, :k] = values
        want = panels.reshape(2, -1, 16, dst.shape[2], 64).transpose(0, 1, 3, 2, 4)
        np.testing.assert_array_equal(np.isnan(dst), np.isnan(want))
        np.testing.assert_array_equal(dst[~np.isnan(dst)], want[~np.isnan(want)])
    specials = np.array([[[0x00, 0x80, 0x7F, 0xFF]]], np.uint8)  # zeros and NaN in both formats
    assert float8.pack_a(specials, fmt, np.zeros((1, 1, 1, 16, 64), panel)) is None


@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_zero_sums_meet_every_kind_of_c_across_many_steps(dtype):
    """Rows of A that are zero (every step adds +0) or -0 through the first 17 steps, beside C
    values of every kind, over full tiles and K past one body call (16 steps): a denormal or -0 C
    must become +0 at the first step and a NaN C the default NaN, however many steps follow."""
    fa, fb = _formats(dtype)
    rng = np.random.default_rng([3, len(dtype)])
    m, k, n = 48, 17 * 64 + 5, 32
    a = _mixed_codes(rng, (m, k), fa, specials=0.0)
    b = _mixed_codes(rng, (k, n), fb, specials=0.0)
    a[0::3] = 0x00
    a[1::3, : 17 * 64] = 0x80
    kinds = np.uint32([0x00000001, 0x80000001, 0x807FFFFF, 0x80000000, 0, 0x7F800000, 0xFF800000, 0x7FC00000])
    c = rng.choice(kinds, (m, n)).view(np.float32)
    want = reference.matmul(a, b, dtype, c=c)
    for threads in (1, 2):
        out = c.copy()
        with tilegemm.plan.recording() as rec:
            tilegemm.matmul(a, b, dtype, "2x2", out=out, accumulate=True, threads=threads)
        assert rec.describe().endswith(": fast"), rec.describe()  # the path under test
        assert_bits(out, want, f"{dtype} threads={threads}")
        nan = np.isnan(out)
        assert (out.view(np.uint32)[nan] == 0xFFC00000).all()


# -- the binary32 kernel (fp8c): a step whose chain of binary32 FMAs rounded runs in binary64 -------


def _chain_operands(dtype, rng, m, k, n, every=False):
    """Codes whose binary32 chains round in some steps and not in others, inside the per-call
    proof: values up to 2^6 (E5M2 x E5M2 sums then fit binary64: 6 + 6 + 2 + 6 + 32 <= 53), scaled
    so partial sums reach 2^6 to 2^9, and a few of each format's smallest values among them.
    ``every``: also the smallest value at the start of every step, in every row of A and every
    column of B, so that every step of every row rounds."""
    fa, fb = _formats(dtype)

    def codes(shape, fmt, scale):
        x = np.clip(rng.standard_normal(shape) * scale, -56, 56).astype(ML[fmt.name]).view(np.uint8)
        x[rng.random(shape) < 0.01] = 0x01  # 2^-16 (E5M2) or 2^-9 (E4M3)
        return x

    a, b = codes((m, k), fa, 8.0), codes((k, n), fb, 2.0)
    if every:
        a[:, ::64] = 0x01
        b[::64, :] = 0x01
    return a, b


def _steps_that_round_in_binary32(a, b, dtype):
    """Per output and K step of 64: whether the chain ``acc = fl32(acc + a_k b_k)`` from +0, K in
    order, ends away from the exact sum. The products are exact in binary64, and so is each
    ``acc + p`` for these operands (|sums| < 2^22, every product a multiple of 2^-32), so the
    binary64 sum rounded to binary32 is one binary32 FMA."""
    fa, fb = _formats(dtype)
    A, B = _values(a, fa), _values(b, fb)
    k = A.shape[1]
    out = []
    for k0 in range(0, k, 64):
        acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
        exact_sum = np.zeros(acc.shape)
        for kk in range(k0, min(k0 + 64, k)):
            p = np.outer(A[:, kk], B[kk])
            exact_sum += p
            acc = (acc.astype(np.float64) + p).astype(np.float32)
        assert np.abs(exact_sum).max() < 2.0**22
        out.append(acc.astype(np.float64) != exact_sum)
    return np.stack(out)


@pytest.mark.parametrize("dtype", FP8_DTYPES)
@pytest.mark.parametrize("every", [False, True], ids=["some", "every"])
def test_steps_whose_binary32_chain_rounds_run_in_binary64(dtype, every):
    """The binary32 kernel's steps, some of whose FMA chains round: the data must have such steps
    (else the binary64 redo goes untested) and steps without, within one call; the call stays on
    fp8c's fast path and gives the reference's bits, over partial tiles, K tails, several
    tilings and both thread counts. ``every``: every row rounds in every step, over more steps
    than one body call runs (16), so the back-off's straight binary64 steps run too. Without the
    redo, every case fails."""
    rng = np.random.default_rng([7, len(dtype), every])
    m, k, n = 37, (20 if every else 3) * 64 + 17, 45
    a, b = _chain_operands(dtype, rng, m, k, n, every)
    rounds = _steps_that_round_in_binary32(a, b, dtype)
    if every:
        assert rounds.any(axis=2).all()  # in every step, every row has an output that rounds
    else:
        assert 0.01 < rounds.mean() < 0.9, rounds.mean()
    c = rng.standard_normal((m, n)).astype(np.float32)
    want = reference.matmul(a, b, dtype, c=c)
    for tiling in SEED_TILINGS + ("2x3",):
        for threads in (1, 2):
            out = c.copy()
            with tilegemm.plan.recording() as rec:
                tilegemm.matmul(a, b, dtype, tiling, out=out, accumulate=True, threads=threads)
            assert rec.calls[-1][0].split("-")[2] == "fp8c" and rec.calls[-1][1] == "fast", rec.describe()
            assert_bits(out, want, f"{dtype} {tiling} threads={threads}")


@pytest.mark.skipif(not X86, reason="MXCSR exists on x86 only")
def test_binary32_body_runs_under_its_own_mxcsr_and_restores_the_callers():
    """The body sets MXCSR for its steps and puts the caller's back on exit. Run in this thread
    (one K step of one tile, not a parallel call) under a caller's MXCSR with every flag set,
    FTZ, DAZ and rounding toward -inf: the bits are the reference's, steps that round in binary32
    and steps that do not alike, and MXCSR is as it was, to the bit."""
    dtype = "bf8"
    rng = np.random.default_rng(9)
    a, b = _chain_operands(dtype, rng, 16, 64, 16)
    rounds = _steps_that_round_in_binary32(a, b, dtype)[0]
    assert rounds.any() and not rounds.all(), rounds.mean()
    fa, fb = _formats(dtype)
    A = _values(a, fa).astype(np.float32)  # one panel: 16 rows of 64
    B = _values(b, fb).astype(np.float32)  # one block: [k][n]
    c = rng.standard_normal((16, 16)).astype(np.float32)
    c[0, :3] = [f32(0x80000001), f32(0x00400000), -0.0]  # read with DAZ, as the instruction does
    want = reference.matmul(a, b, dtype, c=c)
    step = dispatch.FAMILIES["fp8c"].superblock_step(1, 1, 1, (0, 0))  # the switches at their defaults
    out = c.copy()
    step(A.ravel(), B.ravel(), out.ravel(), np.empty(256, np.float32))  # compiled beforehand
    assert_bits(out, want, "default MXCSR")
    caller = 0x1F80 | 0x3F | FTZ | DAZ | (1 << 13)  # masks, all six flags, FTZ, DAZ, round down
    old = get_mxcsr()
    out = c.copy()
    set_mxcsr(caller)
    try:
        step(A.ravel(), B.ravel(), out.ravel(), np.empty(256, np.float32))
        after = get_mxcsr()
    finally:
        set_mxcsr(old)
    assert after == caller, (hex(after), hex(caller))
    assert_bits(out, want, "caller's MXCSR with FTZ, DAZ, round down")
