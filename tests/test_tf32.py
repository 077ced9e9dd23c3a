"""AMX-TF32 (TMMULTF32PS, dtype "tf32"): the contract's worked examples, the TF32 truncation, an
independent rational oracle, NaN bits, the two switches, the paths, tilings and threads, the tile
API, the command line and bad input. Every comparison is of all 32 bits of every output.

Expected values are written from the contract (docs/amx-tf32.md) or computed by the oracle of
this module, which shares no code with ``tilegemm.reference`` or the kernels.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from conftest import reference_stack
from fpenv import DAZ, FTZ, X86, get_mxcsr, mxcsr_flags

import tilegemm
from tilegemm import reference
from tilegemm.amx import TileConfig, TileUnit, UDFault
from tilegemm.amx import intrinsics as amx
from tilegemm.formats import tf32_truncate
from tilegemm.reference import tf32 as tf32_reference

SIGN = 0x80000000
INF = 0x7F800000
QUIET = 0x00400000
INDEF = 0xFFC00000  # the x86 default NaN

ONE = 0x3F800000


def f32(*bits):
    """A float32 array from binary32 bit patterns (no float conversion on the way: sNaN kept)."""
    return np.array(bits, np.uint32).view(np.float32)


def p2(e):
    """The bits of 2^e, normal or denormal binary32."""
    return (e + 127) << 23 if e >= -126 else 1 << (e + 149)


def row(*bits):
    """A 1 x K float32 operand from bit patterns."""
    return f32(*bits).reshape(1, -1)


def col(*bits):
    """A K x 1 float32 operand from bit patterns."""
    return f32(*bits).reshape(-1, 1)


def hexes(x):
    return [f"{int(v):08X}" for v in np.asarray(x).view(np.uint32).ravel()]


def assert_u32(got, want, context=""):
    """All 32 bits of every output: ``want`` as float32 or as uint32 bit patterns."""
    got = np.asarray(got)
    assert got.dtype == np.float32, f"{context}: result dtype {got.dtype}"
    g = got.view(np.uint32)
    w = np.asarray(want)
    w = w.view(np.uint32) if w.dtype == np.float32 else w.astype(np.uint32)
    w = np.broadcast_to(w, g.shape)
    bad = np.argwhere(g != w)
    if bad.size:
        first = [
            f"{tuple(int(i) for i in idx)}: got {int(g[tuple(idx)]):08X} want {int(w[tuple(idx)]):08X}"
            for idx in bad[:8]
        ]
        raise AssertionError(f"{context}: {len(bad)} of {g.size} outputs differ; " + "; ".join(first))
    assert tilegemm.bitdiff(got, w.view(np.float32)).identical, context


# -- the independent oracle (the contract, on bit patterns, with rational arithmetic) --------------


def o_tf32(u):
    """tf32(x): a signalling NaN quieted, then the low 13 significand bits cleared."""
    u = int(u)
    if (u & INF) == INF and u & 0x7FFFFF and not u & QUIET:
        u |= QUIET
    return u & 0xFFFFE000


def o_nan(u):
    return (u & 0x7FFFFFFF) > INF


def o_inf(u):
    return (u & 0x7FFFFFFF) == INF


def o_zero(u):
    return (u & 0x7FFFFFFF) == 0


def o_neg(u):
    return bool(u & SIGN)


def o_value(u):
    """The exact value of finite bits."""
    e, f = (u >> 23) & 0xFF, u & 0x7FFFFF
    v = Fraction(f | (1 << 23), 1) * Fraction(2) ** (e - 150) if e else Fraction(f) * Fraction(2) ** -149
    return -v if o_neg(u) else v


def o_round(q):
    """A non-zero rational to binary32 bits: 24 significant bits, ties to even, unbounded exponent;
    then a result below 2^-126 is a zero of its sign (FTZ), one from 2^128 an infinity."""
    sign = SIGN if q < 0 else 0
    m = abs(q)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    scaled = m / Fraction(2) ** (e - 23)  # in [2^23, 2^24)
    n, rem = divmod(scaled.numerator, scaled.denominator)
    if 2 * rem > scaled.denominator or (2 * rem == scaled.denominator and n & 1):
        n += 1
    if n == 1 << 24:
        n, e = 1 << 23, e + 1
    if e < -126:
        return sign
    if e > 127:
        return sign | INF
    return sign | ((e + 127) << 23) | (n - (1 << 23))


def o_sum_zero(x_zero, x_neg, y_zero, y_neg):
    """The sign of an exact zero sum x + y under round-to-nearest: -0 only for (-0) + (-0)."""
    return SIGN if (x_zero and y_zero and x_neg and y_neg) else 0


def o_fma(a, b, t):
    """fma32(a, b, t): x86's NaN order (a, b, then t; a NaN t wins over Inf * 0), RNE, FTZ."""
    if o_nan(a):
        return a | QUIET
    if o_nan(b):
        return b | QUIET
    if o_nan(t):
        return t | QUIET
    if o_inf(a) or o_inf(b):
        if o_zero(a) or o_zero(b):
            return INDEF
        s = SIGN if o_neg(a) != o_neg(b) else 0
        if o_inf(t) and o_neg(t) != bool(s):
            return INDEF
        return s | INF
    if o_inf(t):
        return t
    p = o_value(a) * o_value(b)
    q = p + o_value(t)
    if q == 0:
        return o_sum_zero(p == 0, o_neg(a) != o_neg(b), o_zero(t), o_neg(t))
    return o_round(q)


def o_add(t, c):
    """add32(t, c): t's NaN, else c's quieted; Inf - Inf the default NaN; RNE, FTZ."""
    if o_nan(t):
        return t | QUIET
    if o_nan(c):
        return c | QUIET
    if o_inf(t) and o_inf(c) and o_neg(t) != o_neg(c):
        return INDEF
    if o_inf(t):
        return t
    if o_inf(c):
        return c
    q = o_value(t) + o_value(c)
    if q == 0:
        return o_sum_zero(o_zero(t), o_neg(t), o_zero(c), o_neg(c))
    return o_round(q)


def o_single(xs, ys):
    """tmp under tf32_rounding="single", finite operands: the exact sum rounded once (+0 if zero)."""
    q = sum((o_value(x) * o_value(y) for x, y in zip(xs, ys)), Fraction(0))
    return 0 if q == 0 else o_round(q)


def oracle(a, b, c=None, dst_daz=True, single=False):
    """The GEMM per the contract: instructions of 16 K (the last shorter), each a chain from +0
    (or, ``single``, one rounding of the exact sum), then add32(tmp, read(dst))."""
    A = np.asarray(a, np.float32).view(np.uint32)
    B = np.asarray(b, np.float32).view(np.uint32)
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N), np.uint32) if c is None else np.asarray(c, np.float32).view(np.uint32)
    out = np.zeros((M, N), np.uint32)
    At = [[o_tf32(x) for x in r] for r in A.tolist()]
    Bt = [[o_tf32(x) for x in r] for r in B.T.tolist()]
    for m in range(M):
        for n in range(N):
            acc = int(C[m, n])
            for k0 in range(0, K, 16):
                xs, ys = At[m][k0 : k0 + 16], Bt[n][k0 : k0 + 16]
                if single:
                    tmp = o_single(xs, ys)
                else:
                    tmp = 0
                    for x, y in zip(xs, ys):
                        tmp = o_fma(x, y, tmp)
                if dst_daz and (acc & INF) == 0:
                    acc &= SIGN  # a denormal dst read as a zero of its sign
                acc = o_add(tmp, acc)
            out[m, n] = acc
    return out


def test_oracle_by_hand():
    """The oracle itself on cases worked out by hand (so that a shared mistake cannot hide)."""
    assert o_tf32(0x3F800800) == ONE  # 1 + 2^-12
    assert o_tf32(0x7F800001) == 0x7FC00000  # sNaN quieted first: still a NaN, not +Inf
    assert o_round(Fraction(2) ** -126 - Fraction(2) ** -151) == p2(-126)  # a tie, to even: up
    assert o_round(Fraction(2) ** -126 - Fraction(2) ** -150) == 0  # 24 bits below 2^-126: flushed
    assert o_round(-(Fraction(2) ** -140)) == SIGN
    assert o_round(Fraction(2) ** 128 - Fraction(2) ** 103) == INF  # a tie, to even: up to 2^128
    assert o_round(Fraction(2) ** 128 - Fraction(2) ** 104) == 0x7F7FFFFF  # the largest finite
    assert o_fma(INF, 0, 0x7FC00001) == 0x7FC00001 and o_fma(INF, 0, ONE) == INDEF
    assert o_add(0, SIGN) == 0 and o_add(SIGN, SIGN) == SIGN


# -- TF32 truncation ----------------------------------------------------------------------------------

TRUNCATE = [
    (0x3F800800, 0x3F800000),  # 1 + 2^-12 reads as 1
    (0x3F801FFF, 0x3F800000),  # truncated, not rounded (RNE to 10 bits would give 0x3F802000)
    (0xBF801FFF, 0xBF800000),  # toward zero for negatives too
    (0x3F802000, 0x3F802000),  # 1 + 2^-10 is a TF32 value
    (0x00080000, 0x00080000),  # 2^-130, a denormal, kept
    (0x00000200, 0x00000000),  # 2^-140: its only bit is below TF32's fraction
    (0x80001FFF, 0x80000000),  # a denormal with only low bits: -0
    (0x807FFFFF, 0x807FE000),  # the largest negative denormal keeps bits 13..22
    (0x7F800000, 0x7F800000),  # +Inf
    (0xFF800000, 0xFF800000),  # -Inf
    (0x7F800001, 0x7FC00000),  # sNaN with a low payload: quieted, then truncated (not +Inf)
    (0xFF800FFF, 0xFFC00000),
    (0x7FA12345, 0x7FE12000),  # sNaN: quiet bit set, payload bits 13..21 and sign kept
    (0x7FC00ABC, 0x7FC00000),  # quiet NaN, payload only in the low 13 bits
    (0xFFC12345, 0xFFC12000),
]


def test_tf32_truncate_table():
    src = np.uint32([s for s, _ in TRUNCATE])
    want = np.uint32([w for _, w in TRUNCATE])
    assert tf32_truncate(src).tolist() == want.tolist()
    assert tf32_reference.tf32(src).view(np.uint32).tolist() == want.tolist()
    assert [o_tf32(s) for s in src] == want.tolist()


def test_a_panels_are_truncated_in_the_layout_pass():
    """A's panels (the kernels' operand) hold each value truncated, from the one compiled pass
    that lays them out, on float32 and on codes alike; rows and K past A stay zero."""
    from tilegemm import dispatch, layouts, packing
    from tilegemm.instructions import resolve

    instr = resolve("amx", "tf32")[2]
    lay = layouts.get(dispatch.lookup("amx", "tf32", "2x2").family.a_layout)
    src = np.uint32([s for s, _ in TRUNCATE])
    want = np.uint32([w for _, w in TRUNCATE])
    m, k = 3, 21  # a row tail and a K tail: 15 values of A's 16 x 16 tiles past the edge
    codes = np.resize(src, m * k).reshape(1, m, k)
    expect = np.zeros((16, 32), np.uint32)  # the bits; assert_u32 compares float32 results by them
    expect[:m, :k] = np.resize(want, m * k).reshape(m, k)
    for a in (codes, codes.view(np.float32)):
        panels, _ = packing.build_a(instr, lay, a, 2)
        got = panels.view(np.float32)[0, 0].transpose(1, 0, 2).reshape(16, 32)
        assert_u32(got, expect, f"A panels from {a.dtype}")


def test_truncation_through_matmul_and_reference():
    """Each truncated value times 1 (and 1 times it, from B), dst +0: the products are the
    truncated values, except NaNs stay as they are and -0 becomes +0 (+0 + -0)."""
    src = [s for s, _ in TRUNCATE]
    want = [w if (w & 0x7FFFFFFF) else 0 for _, w in TRUNCATE]
    # 2^-130 times 1 stays denormal: tiny, flushed to +0 (and 0x807FE000 to -0, then +0 + -0 = +0).
    want = [0 if w in (0x00080000, 0x807FE000) else w for w in want]
    a = f32(*src).reshape(-1, 1)
    ones = f32(ONE).reshape(1, 1)
    for fn in (reference.matmul, tilegemm.matmul):
        assert_u32(fn(a, ones, "tf32"), np.uint32(want).reshape(-1, 1), f"{fn.__module__} A")
        assert_u32(fn(ones, a.T.copy(), "tf32"), np.uint32(want).reshape(1, -1), f"{fn.__module__} B")


def test_float64_inputs_are_rounded_to_float32_first():
    """1 + 2^-10 - 2^-40 (float64): RNE to float32 gives 1 + 2^-10, a TF32 value; truncating the
    float64 directly would give 1."""
    x = np.array([[1 + 2.0**-10 - 2.0**-40]])
    for fn in (reference.matmul, tilegemm.matmul):
        assert_u32(fn(x, np.ones((1, 1)), "tf32"), np.uint32([[0x3F802000]]), fn.__module__)


# -- worked examples (default switches, one instruction, dst = +0) ----------------------------------

WORKED = [
    ("1+2^-12 x 1: truncated", 0x3F800800, ONE, ONE),
    ("(1+2^-10)^2: exact", 0x3F802000, 0x3F802000, 0x3F804008),  # 1 + 2^-9 + 2^-20
    ("2^-70 x 2^-70: flushed", p2(-70), p2(-70), 0x00000000),
    ("2^-130 x 2^20: denormal kept", p2(-130), p2(20), p2(-110)),
    ("2^-140 x 2^20: below TF32", p2(-140), p2(20), 0x00000000),
]


@pytest.mark.parametrize("case", WORKED, ids=[c[0] for c in WORKED])
def test_worked_examples(case):
    name, a, b, out = case
    assert p2(-110) == 0x08800000 and p2(-130) == 0x00080000 and p2(-140) == 0x00000200
    want = np.uint32([[out]])
    assert_u32(reference.matmul(row(a), col(b), "tf32"), want, name + " reference")
    assert [[o for o in oracle(row(a), col(b)).ravel()]] == want.tolist()
    for tiling in tilegemm.TILINGS:
        assert_u32(tilegemm.matmul(row(a), col(b), "tf32", tiling), want, f"{name} {tiling}")
    with tilegemm.plan.forced_path("exact"):
        assert_u32(tilegemm.matmul(row(a), col(b), "tf32"), want, name + " exact")
    # Embedded at a tile edge of a larger GEMM: row 17, column 33; the rest stays +0.
    big_a, big_b = np.zeros((20, 3), np.float32), np.zeros((3, 35), np.float32)
    big_a[17, 1], big_b[1, 33] = f32(a)[0], f32(b)[0]
    got = tilegemm.matmul(big_a, big_b, "tf32", "2x2")
    want_big = np.zeros((20, 35), np.uint32)
    want_big[17, 33] = out
    assert_u32(got, want_big, name + " embedded")


# -- hand-worked chains: FTZ, ties at 2^-126, overflow, cancellation, signed zeros -----------------

# (name, A row bits, B column bits, dst bits, result bits)
CHAINS = [
    # 2^-140 flushed to +0 at the first step, so the second gives 2^-126 (not 2^-126 + 2^-140).
    ("flush then add", [p2(-70), ONE], [p2(-70), p2(-126)], 0, p2(-126)),
    # 2^-126 - 2^-151 is a tie between (2^24 - 1) 2^-150 and 2^-126: to even, up to 2^-126.
    ("tie up to 2^-126", [p2(-63), p2(-75)], [p2(-63), SIGN | p2(-76)], 0, p2(-126)),
    # 2^-126 - 2^-150 = (2^24 - 1) 2^-150 is exact at 24 bits but below 2^-126: flushed to +0.
    ("just below 2^-126", [p2(-63), p2(-74)], [p2(-63), SIGN | p2(-76)], 0, 0),
    # 2^-126 - 3 * 2^-151: a tie between 2^24 - 2 and 2^24 - 1 units: to even (down), flushed.
    ("tie down, flushed", [p2(-63), p2(-75)], [p2(-63), SIGN | p2(-75) | 0x400000], 0, 0),
    # -2^-140 flushes to -0; -0 + -0 = -0, -0 + +0 = +0.
    ("-0 tmp, -0 dst", [SIGN | p2(-70)], [p2(-70)], SIGN, SIGN),
    ("-0 tmp, +0 dst", [SIGN | p2(-70)], [p2(-70)], 0, 0),
    # tmp from +0: +0 + (-0 * 1) = +0, and +0 + -0 = +0.
    ("-0 product, -0 dst", [SIGN], [ONE], SIGN, 0),
    # 2^64 * 2^64 = 2^128 overflows; 2^127 + 2^127 too.
    ("product overflows", [p2(64)], [p2(64)], 0, INF),
    ("negative overflow", [SIGN | p2(64)], [p2(64)], 0, SIGN | INF),
    ("sum overflows", [p2(127), p2(127)], [ONE, ONE], 0, INF),
    # +Inf from the first step stays: fma(2^100, -2^100, +Inf) = +Inf (a finite product).
    ("overflow then finite", [p2(100), p2(100)], [p2(100), SIGN | p2(100)], 0, INF),
    # 1 + 2^-30 -> 1, then 1 - 1 = +0 (one rounding per step).
    ("cancellation", [ONE, p2(-30), SIGN | ONE], [ONE, ONE, ONE], 0, 0),
    # A denormal dst is read as zero (DAZ): 2^-125 + (-2^-127) gives 2^-125.
    ("denormal dst", [p2(-62)], [p2(-63)], SIGN | p2(-127), p2(-125)),
    # 2^-120 (1 + 2^-10) - 2^-120 = 2^-130: an exact cancellation to a tiny sum, flushed.
    ("cancellation to tiny", [p2(-60) | 0x2000, SIGN | p2(-60)], [p2(-60), p2(-60)], 0, 0),
    ("cancellation to -tiny", [SIGN | p2(-60) | 0x2000, p2(-60)], [p2(-60), p2(-60)], SIGN, SIGN),
    # +Inf tmp and -Inf dst: the default NaN; Inf tmp + finite dst: Inf.
    ("Inf tmp + -Inf dst", [p2(64)], [p2(64)], SIGN | INF, INDEF),
    ("Inf dst", [ONE], [ONE], SIGN | INF, SIGN | INF),
]


@pytest.mark.parametrize("case", CHAINS, ids=[c[0] for c in CHAINS])
def test_hand_worked_chains(case):
    name, a, b, dst, out = case
    a, b, c = row(*a), col(*b), f32(dst).reshape(1, 1)
    want = np.uint32([[out]])
    assert oracle(a, b, c).tolist() == want.tolist(), name + " oracle"
    assert_u32(reference.matmul(a, b, "tf32", c=c), want, name + " reference")
    for forced in (None, "exact"):
        with tilegemm.plan.forced_path(forced):
            got = c.copy()
            tilegemm.matmul(a, b, "tf32", out=got, accumulate=True)
            assert_u32(got, want, f"{name} matmul {forced or 'planned'}")


# -- the reference and the kernels against the oracle -----------------------------------------------


def finite_operand(rng, shape):
    """Finite float32 with full 23-bit fractions (truncation matters), of mixed kinds: ordinary,
    about 2^-63 (products about 2^-126), denormals, zeros of both signs, about 2^64 (products
    overflow)."""
    x = rng.standard_normal(shape).astype(np.float32)
    pick = rng.random(shape)
    x = np.where(pick < 0.12, x * np.float32(2.0**-63), x)
    den = rng.integers(1, 1 << 23, shape, dtype=np.uint32) | (rng.integers(0, 2, shape, dtype=np.uint32) << 31)
    x = np.where((pick >= 0.12) & (pick < 0.17), den.view(np.float32), x)
    x = np.where((pick >= 0.17) & (pick < 0.22), np.float32(0.0) * np.sign(x), x)
    x = np.where((pick >= 0.22) & (pick < 0.25), x * np.float32(2.0**64), x)
    return x.astype(np.float32)


def cancelling(a, b):
    """Row 0 of A made of pairs x, -x and B's rows paired equal: exact cancellations in row 0."""
    k = a.shape[1] - a.shape[1] % 2
    a[0, 1:k:2] = -a[0, 0:k:2]
    b[1:k:2] = b[0:k:2]
    return a, b


ORACLE_SHAPES = [(1, 1, 1), (3, 15, 5), (2, 16, 3), (17, 17, 18), (5, 33, 9), (3, 47, 20)]


@pytest.mark.parametrize("m,k,n", ORACLE_SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in ORACLE_SHAPES])
def test_finite_against_the_oracle(m, k, n):
    rng = np.random.default_rng([m, k, n])
    a, b = cancelling(finite_operand(rng, (m, k)), finite_operand(rng, (k, n)))
    c = finite_operand(rng, (m, n))
    want = oracle(a, b, c)
    assert_u32(reference.matmul(a, b, "tf32", c=c), want, "reference")
    for forced in (None, "exact"):
        with tilegemm.plan.forced_path(forced):
            out = c.copy()
            tilegemm.matmul(a, b, "tf32", out=out, accumulate=True)
            assert_u32(out, want, f"matmul {forced or 'planned'}")
    assert_u32(tilegemm.matmul(a, b, "tf32"), oracle(a, b), "dst = +0")


def test_ordinary_data_against_the_oracle_on_the_fast_path():
    """Standard normal operands over partial tiles and K tails: the fast path runs, and gives the
    oracle's bits (so the fast body is checked against the contract, not only the exact one)."""
    rng = np.random.default_rng(5)
    for m, k, n in [(17, 47, 18), (5, 33, 35)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        c = rng.standard_normal((m, n)).astype(np.float32)
        out = c.copy()
        with tilegemm.plan.recording() as rec:
            tilegemm.matmul(a, b, "tf32", out=out, accumulate=True)
        assert rec.calls[-1][1] == "fast", rec.describe()
        assert_u32(out, oracle(a, b, c), f"{m}x{k}x{n}")


# -- NaN bits -------------------------------------------------------------------------------------

# (name, A row bits, B column bits, dst bits, result bits)
NANS = [
    ("NaN in a", [0x7FC12345], [ONE], 0, 0x7FC12000),
    ("sNaN in b", [ONE], [0xFFA00000], 0, 0xFFE00000),
    ("NaN in both: a's", [0x7FC04000], [0xFFC08000], 0, 0x7FC04000),
    ("sNaN in both: a's", [0xFF812000], [0x7FC08000], 0, 0xFFC12000),
    # The NaN of the first step is tmp at the second, which is Inf * 0: tmp's NaN wins.
    ("NaN tmp beats Inf*0", [0x7FC06000, INF], [ONE, 0], 0, 0x7FC06000),
    # Inf * 0 first (default NaN in tmp), then a NaN in b: b's NaN wins over tmp.
    ("later b NaN beats tmp", [INF, ONE], [0, 0x7FC0A000], 0, 0x7FC0A000),
    # Two NaNs at different K: the later step's a/b NaN replaces tmp's.
    ("later a NaN beats tmp", [0x7FC02000, 0xFFC04000], [ONE, ONE], 0, 0xFFC04000),
    ("Inf*0", [INF], [0], 0, INDEF),
    ("0*-Inf", [0], [SIGN | INF], 0, INDEF),
    ("+Inf and -Inf products", [INF, INF], [ONE, SIGN | ONE], 0, INDEF),
    ("Inf product then finite", [INF, ONE], [ONE, ONE], 0, INF),
    ("NaN dst, finite products", [ONE], [ONE], 0x7F812345, 0x7FC12345),  # quieted, not truncated
    ("NaN dst, Inf*0", [INF], [0], 0x7FC12345, INDEF),  # tmp's NaN first
    ("NaN dst, NaN tmp", [0xFFC02000], [ONE], 0x7FC12345, 0xFFC02000),
    ("sNaN truncated to a NaN", [0x7F800001], [ONE], 0, 0x7FC00000),
]


@pytest.mark.parametrize("case", NANS, ids=[c[0] for c in NANS])
def test_nan_bits(case):
    name, a, b, dst, out = case
    a, b, c = row(*a), col(*b), f32(dst).reshape(1, 1)
    want = np.uint32([[out]])
    assert oracle(a, b, c).tolist() == want.tolist(), name + " oracle"
    assert_u32(reference.matmul(a, b, "tf32", c=c), want, name + " reference")
    for tiling in ("1x1", "2x3"):
        for forced in (None, "exact"):
            with tilegemm.plan.forced_path(forced):
                got = c.copy()
                tilegemm.matmul(a, b, "tf32", tiling, out=got, accumulate=True)
            assert_u32(got, want, f"{name} {tiling} {forced or 'planned'}")


def test_nan_of_a_later_instruction_replaces_the_earlier():
    """K = 33 (three instructions): a NaN in the first leaves dst a NaN, the second adds a finite
    tmp to it (dst's NaN kept), the third has its own NaN in tmp, which add32 takes first."""
    a = np.ones((1, 33), np.float32)
    b = np.ones((33, 1), np.float32)
    a[0, 3] = f32(0x7FC02000)[0]
    a[0, 32] = f32(0xFFC04000)[0]  # the third instruction
    want = np.uint32([[0xFFC04000]])
    assert oracle(a, b).tolist() == want.tolist()
    assert_u32(reference.matmul(a, b, "tf32"), want, "reference")
    assert_u32(tilegemm.matmul(a, b, "tf32"), want, "matmul")
    a[0, 32] = 1.0
    assert_u32(tilegemm.matmul(a, b, "tf32"), np.uint32([[0x7FC02000]]), "first NaN kept")


def test_long_k_across_chunks():
    """K = 300 (19 instructions, more than one chunk of the fast body): NaNs placed in an early
    and a late instruction of some rows, Inf * 0 in another; the planned call stays fast, the
    tiles with a NaN rerun exactly from their C before the chunk, and all bits are the
    reference's (and the exact entry's)."""
    rng = np.random.default_rng(300)
    m, k, n = 20, 300, 19
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    a[1, 5] = f32(0x7FC12345)[0]  # instruction 0
    a[1, 290] = f32(0xFF854321)[0]  # instruction 18: its NaN is the result of row 1
    a[17, 270] = f32(0x7FA00001)[0]  # row 17 of the second tile row, late only
    b[280, 2] = np.inf
    a[3, 280] = 0.0  # Inf * 0 in row 3, column 2, instruction 17
    want = reference.matmul(a, b, "tf32", c=c)
    assert want.view(np.uint32)[1, 0] == 0xFFC54000 and want.view(np.uint32)[17, 0] == 0x7FE00000
    assert want.view(np.uint32)[3, 2] == INDEF
    for threads in (1, 2):
        out = c.copy()
        with tilegemm.plan.recording() as rec:
            tilegemm.matmul(a, b, "tf32", "2x2", out=out, accumulate=True, threads=threads)
        assert rec.calls[-1][1] == "fast", rec.describe()
        assert_u32(out, want, f"threads={threads}")
    with tilegemm.plan.forced_path("exact"):
        out = c.copy()
        tilegemm.matmul(a, b, "tf32", "1x1", out=out, accumulate=True)
    assert_u32(out, want, "exact")
    finite = ~np.isnan(want)
    assert_u32(want[finite], oracle(a, b, c)[finite], "finite outputs against the oracle")


def nan_heavy(rng, shape, share=0.15):
    """Ordinary values with ``share`` NaNs of random payloads and signs (quiet and signalling),
    a few infinities and zeros."""
    x = rng.standard_normal(shape).astype(np.float32).view(np.uint32)
    nan = INF | rng.integers(1, 1 << 23, shape, dtype=np.uint32) | (rng.integers(0, 2, shape, dtype=np.uint32) << 31)
    pick = rng.random(shape)
    x = np.where(pick < share, nan, x)
    x = np.where((pick >= share) & (pick < share + 0.03), INF | (x & SIGN), x)
    x = np.where((pick >= share + 0.03) & (pick < share + 0.08), x & SIGN, x)
    return x.astype(np.uint32).view(np.float32)


NAN_SHAPES = [(5, 17, 9), (19, 33, 18), (33, 16, 35)]


@pytest.mark.parametrize("m,k,n", NAN_SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in NAN_SHAPES])
def test_nan_heavy_random(m, k, n):
    rng = np.random.default_rng([11, m, k, n])
    a, b = nan_heavy(rng, (m, k)), nan_heavy(rng, (k, n))
    c = nan_heavy(rng, (m, n), 0.05)
    want = reference.matmul(a, b, "tf32", c=c)
    if m * k * n < 12000:
        assert_u32(want, oracle(a, b, c), "reference against the oracle")
    assert np.isnan(want).mean() > 0.3  # the case is about NaN bits
    for tiling in ("1x1", "2x2", "3x2", "1x6"):
        for threads in (1, 2):
            out = c.copy()
            tilegemm.matmul(a, b, "tf32", tiling, out=out, accumulate=True, threads=threads)
            assert_u32(out, want, f"{tiling} threads={threads}")
    with tilegemm.plan.forced_path("exact"):
        out = c.copy()
        tilegemm.matmul(a, b, "tf32", out=out, accumulate=True, threads=2)
    assert_u32(out, want, "exact")


def test_sparse_nans_in_ordinary_data_take_the_fast_path():
    """A few NaNs in proof-friendly data: the plan stays fast (the NaN tiles rerun exactly) and
    every bit, NaN payloads included, is the reference's."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((37, 50)).astype(np.float32)
    b = rng.standard_normal((50, 45)).astype(np.float32)
    a[5, 7] = f32(0x7FC12345)[0]
    a[20, 40] = f32(0xFF812345)[0]
    b[30, 44] = f32(0x7FAAAAAA)[0]
    b[2, 3] = np.inf
    a[36, 2] = 0.0
    b[2, 10] = np.inf  # Inf * 0 in row 36, column 10
    c = rng.standard_normal((37, 45)).astype(np.float32)
    want = reference.matmul(a, b, "tf32", c=c)
    assert_u32(want, oracle(a, b, c), "reference against the oracle")
    for threads in (1, 2):
        out = c.copy()
        with tilegemm.plan.recording() as rec:
            tilegemm.matmul(a, b, "tf32", "2x2", out=out, accumulate=True, threads=threads)
        assert rec.calls[-1][1] == "fast", rec.describe()
        assert_u32(out, want, f"threads={threads}")


# -- tilings, threads, accumulation, batches ------------------------------------------------------


def test_every_tiling_and_thread_count_gives_the_same_bits():
    rng = np.random.default_rng(21)
    a = rng.standard_normal((37, 50)).astype(np.float32)
    b = rng.standard_normal((50, 45)).astype(np.float32)
    c = rng.standard_normal((37, 45)).astype(np.float32)
    c[0, :3] = f32(0x80000001, 0x00400000, SIGN)
    want = reference.matmul(a, b, "tf32", c=c)
    for tiling in tilegemm.TILINGS:
        for threads in (1, 2):
            out = c.copy()
            tilegemm.matmul(a, b, "tf32", tiling, out=out, accumulate=True, threads=threads)
            assert_u32(out, want, f"{tiling} threads={threads}")


def test_accumulate_continues_the_chain():
    rng = np.random.default_rng(8)
    a1 = rng.standard_normal((9, 40)).astype(np.float32)
    b1 = rng.standard_normal((40, 11)).astype(np.float32)
    a2, b2 = a1[:, :13] * np.float32(3), b1[:13] * np.float32(-0.5)
    first = reference.matmul(a1, b1, "tf32")
    want = reference.matmul(a2, b2, "tf32", c=first)
    out = tilegemm.matmul(a1, b1, "tf32")
    assert_u32(out, first, "first call")
    got = tilegemm.matmul(a2, b2, "tf32", out=out, accumulate=True)
    assert got is out or np.shares_memory(got, out)
    assert_u32(out, want, "second call")
    # Without accumulate, out is overwritten (C starts at +0).
    tilegemm.matmul(a2, b2, "tf32", out=out)
    assert_u32(out, reference.matmul(a2, b2, "tf32"), "out without accumulate")


def test_batched_a():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 7, 20)).astype(np.float32)
    b = rng.standard_normal((20, 18)).astype(np.float32)
    a[1, 2, 3] = f32(0x7FC01234 | 0x2000)[0]
    got = tilegemm.matmul(a, b, "tf32")
    assert got.shape == (3, 7, 18)
    assert_u32(got, reference_stack(a, b, "tf32"), "batched")


# -- the paths ------------------------------------------------------------------------------------


def test_paths_fast_and_exact_give_the_reference():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((19, 35)).astype(np.float32)
    b = rng.standard_normal((35, 21)).astype(np.float32)
    c = rng.standard_normal((19, 21)).astype(np.float32)

    def run(a, b, c, forced=None):
        out = c.copy()
        with tilegemm.plan.forced_path(forced), tilegemm.plan.recording() as rec:
            tilegemm.matmul(a, b, "tf32", out=out, accumulate=True)
        assert len(rec.calls) == 1
        assert_u32(out, reference.matmul(a, b, "tf32", c=c), f"{rec.describe()}")
        return rec.calls[0][1]

    assert run(a, b, c) == "fast"
    assert run(a, b, c, "exact") == "exact"
    den_a = a.copy()
    den_a[4, 5] = f32(p2(-130))[0]  # a denormal input
    assert run(den_a, b, c) == "exact"
    den_c = c.copy()
    den_c[3, 3] = f32(0x80000007)[0]  # a denormal C, accumulated into
    assert run(a, b, den_c) == "exact"
    tiny = a.copy()
    tiny[0, 0] = np.float32(2.0**-120)  # products that can be tiny (flushed): bits only
    run(tiny, b, c)


@pytest.mark.skipif(not X86, reason="MXCSR exists on x86 only")
def test_caller_ftz_daz_does_not_change_bits():
    """The instruction neither reads nor writes MXCSR: a caller's FTZ|DAZ changes no bit on
    either path (denormal inputs and C included), and MXCSR is as the caller left it."""
    rng = np.random.default_rng(12)
    a, b = finite_operand(rng, (19, 40)), finite_operand(rng, (40, 18))
    c = finite_operand(rng, (19, 18))
    c[0, :3] = f32(0x80000001, 0x00400000, SIGN)
    o = rng.standard_normal((19, 40)).astype(np.float32), rng.standard_normal((40, 18)).astype(np.float32)
    runs = [(a, b, c, {}), (a, b, c, {"tf32_dst_daz": False}), (*o, c, {}), (*o, np.zeros_like(c), {})]

    def go():
        outs = []
        for x, y, cc, sw in runs:
            out = cc.copy()
            tilegemm.matmul(x, y, "tf32", out=out, accumulate=True, threads=1, **sw)
            outs.append(out)
        return outs

    want = go()
    before = get_mxcsr()
    with mxcsr_flags(FTZ | DAZ):
        got = go()
        assert get_mxcsr() & (FTZ | DAZ) == FTZ | DAZ
    assert get_mxcsr() == before
    for g, w, (x, y, cc, sw) in zip(got, want, runs):
        assert_u32(g, w, f"{sw} under FTZ|DAZ")
        assert_u32(w, reference.matmul(x, y, "tf32", c=cc, **sw), f"{sw} reference")


# -- the switches ---------------------------------------------------------------------------------

# (name, switch, value, A row bits, B column bits, dst bits, default result, result with the value)
SWITCH_CASES = [
    # tmp = +0, dst = -2^-149: DAZ reads -0, +0 + -0 = +0; kept, the exact -2^-149 flushes to -0.
    ("daz: zero sign", "tf32_dst_daz", False, [0], [ONE], 0x80000001, 0x00000000, 0x80000000),
    # tmp = 2^-125, dst = -2^-127: 2^-125 with DAZ; kept: 1.5 * 2^-126 (normal).
    ("daz: value", "tf32_dst_daz", False, [p2(-62)], [p2(-63)], SIGN | p2(-127), p2(-125), 0x00C00000),
    # tmp = 2^-126, dst = -2^-149: 2^-126 with DAZ; kept: 2^-126 - 2^-149 is tiny, flushed to +0.
    ("daz: flushed", "tf32_dst_daz", False, [p2(-63)], [p2(-63)], 0x80000001, p2(-126), 0x00000000),
    # 1 + 2^-24 ties to 1, twice; summed once: 1 + 2^-23.
    ("rounding: ties", "tf32_rounding", "single", [ONE, p2(-24), p2(-24)], [ONE] * 3, 0, ONE, 0x3F800001),
    # 1 + 2^-30 - 1: +0 per step; 2^-30 summed once.
    ("rounding: cancel", "tf32_rounding", "single", [ONE, p2(-30), SIGN | ONE], [ONE] * 3, 0, 0, p2(-30)),
    # 2^200 overflows at the first step and stays +Inf; the exact sum 2^200 - 2^200 + 1 is 1.
    (
        "rounding: overflow",
        "tf32_rounding",
        "single",
        [p2(100), p2(100), ONE],
        [p2(100), SIGN | p2(100), ONE],
        0,
        INF,
        ONE,
    ),
    # 2^-140 + 2^-126: the step flushes 2^-140 first; summed once, 2^-126 + 2^-140 is normal.
    ("rounding: ftz", "tf32_rounding", "single", [p2(-70), ONE], [p2(-70), p2(-126)], 0, p2(-126), 0x00800200),
]


@pytest.mark.parametrize("case", SWITCH_CASES, ids=[c[0] for c in SWITCH_CASES])
def test_switches(case):
    name, switch, value, a, b, dst, default, other = case
    a, b, c = row(*a), col(*b), f32(dst).reshape(1, 1)
    kw = {switch: value}
    oracle_kw = {"dst_daz": False} if switch == "tf32_dst_daz" else {"single": True}
    assert oracle(a, b, c).tolist() == [[default]], name + " oracle default"
    assert oracle(a, b, c, **oracle_kw).tolist() == [[other]], name + " oracle switched"
    assert_u32(reference.matmul(a, b, "tf32", c=c), np.uint32([[default]]), name + " reference default")
    assert_u32(reference.matmul(a, b, "tf32", c=c, **kw), np.uint32([[other]]), name + " reference switched")
    for forced in (None, "exact"):
        with tilegemm.plan.forced_path(forced):
            for sw, want in (({}, default), (kw, other)):
                got = c.copy()
                tilegemm.matmul(a, b, "tf32", out=got, accumulate=True, **sw)
                assert_u32(got, np.uint32([[want]]), f"{name} matmul {sw} {forced or 'planned'}")
    assert_u32(tile_multiply(a, b, c, **kw), np.uint32([[other]]), name + " tile API switched")
    assert_u32(tile_multiply(a, b, c), np.uint32([[default]]), name + " tile API default")


def test_switches_on_random_data_against_the_oracle():
    """Both switches, each alone and together, over two instructions of finite mixed data (a
    denormal dst in every row), on the planned and the exact entries."""
    rng = np.random.default_rng(14)
    a, b = cancelling(finite_operand(rng, (4, 21)), finite_operand(rng, (21, 5)))
    a[:, 3] = np.float32(1.0)
    b[3] = np.float32(2.0**-126)
    # Column 0: tmp = 2^-125 in the first instruction and +0 in the second, dst denormal:
    # reading dst as zero or not changes the value for good.
    a[:, 0], b[:, 0], b[0, 0] = np.float32(2.0**-62), 0.0, np.float32(2.0**-63)
    c = finite_operand(rng, (4, 5))
    c[:, 0] = f32(0x80200000, 0x80000001, 0x807FFFFF, 0x00000003)
    for daz in (True, False):
        for rounding in ("each_step", "single"):
            want = oracle(a, b, c, dst_daz=daz, single=rounding == "single")
            sw = {"tf32_dst_daz": daz, "tf32_rounding": rounding}
            assert_u32(reference.matmul(a, b, "tf32", c=c, **sw), want, f"reference {sw}")
            for forced in (None, "exact"):
                with tilegemm.plan.forced_path(forced):
                    out = c.copy()
                    tilegemm.matmul(a, b, "tf32", out=out, accumulate=True, **sw)
                assert_u32(out, want, f"matmul {sw} {forced or 'planned'}")
    # The defaults, spelled out, are the defaults.
    assert_u32(
        tilegemm.matmul(a, b, "tf32", tf32_dst_daz=True, tf32_rounding="each_step"),
        tilegemm.matmul(a, b, "tf32"),
        "defaults",
    )


def test_other_switch_readings_run_the_exact_entry():
    """The fast entry holds the default readings only (its family's ``fast_switches``): the plan
    gives any other reading the exact entry, and the fast entry refuses one passed to it."""
    rng = np.random.default_rng(15)
    a, b = rng.standard_normal((20, 40), np.float32), rng.standard_normal((40, 18), np.float32)
    for sw, path in (({}, "fast"), ({"tf32_dst_daz": False}, "exact"), ({"tf32_rounding": "single"}, "exact")):
        with tilegemm.plan.recording() as rec:
            tilegemm.matmul(a, b, "tf32", **sw)
        assert [c[1] for c in rec.calls] == [path], (sw, rec.describe())
    from tilegemm.kernels import tf32 as kernels_tf32

    z = np.zeros(1, np.int64)
    with pytest.raises(ValueError, match="default switches only"):
        kernels_tf32.gemm_tf32_fast.py_func(0, 1, None, None, None, z, z, 16, 1, 1, 0, 1)


def test_single_rounding_nans_and_infinities_match_the_reference():
    """NaN and infinity under tf32_rounding="single" (the contract leaves which NaN open):
    kernels and reference agree; Inf * 0 and +Inf with -Inf still give the default NaN."""
    rng = np.random.default_rng(31)
    a, b = nan_heavy(rng, (6, 20)), nan_heavy(rng, (20, 7))
    c = nan_heavy(rng, (6, 7), 0.05)
    want = reference.matmul(a, b, "tf32", c=c, tf32_rounding="single")
    out = c.copy()
    tilegemm.matmul(a, b, "tf32", out=out, accumulate=True, tf32_rounding="single", threads=2)
    assert_u32(out, want, "single, NaN-heavy")
    for a_, b_ in (([INF, ONE], [0, ONE]), ([INF, INF], [ONE, SIGN | ONE])):
        assert_u32(reference.matmul(row(*a_), col(*b_), "tf32", tf32_rounding="single"), np.uint32([[INDEF]]))
        assert_u32(tilegemm.matmul(row(*a_), col(*b_), "tf32", tf32_rounding="single"), np.uint32([[INDEF]]))


# -- the tile API ---------------------------------------------------------------------------------


def tile_multiply(a, b, dst, **switches):
    """One TMMULTF32PS through tilegemm.amx.intrinsics: A m x k, B k x n (plain binary32 rows),
    dst m x n, loaded from memory and stored back."""
    a, b, dst = (np.ascontiguousarray(x, np.float32) for x in (a, b, dst))
    m, k = a.shape
    n = b.shape[1]
    unit = amx.reset()
    amx._tile_loadconfig(TileConfig(rows=(m, m, k) + (0,) * 5, colsb=(4 * n, 4 * k, 4 * n) + (0,) * 5))
    mem = np.concatenate([x.view(np.uint8).ravel() for x in (dst, a, b)])
    amx._tile_loadd(0, mem, 0, 4 * n)
    amx._tile_loadd(1, mem, dst.nbytes, 4 * k)
    amx._tile_loadd(2, mem, dst.nbytes + a.nbytes, 4 * n)
    amx._tile_mmultf32ps(0, 1, 2, **switches)
    assert unit.counters.macs == m * n * k
    out = np.zeros(dst.nbytes, np.uint8)
    amx._tile_stored(0, out, 0, 4 * n)
    return out.view(np.float32).reshape(m, n)


@pytest.mark.parametrize("m,k,n", [(16, 16, 16), (5, 7, 9)])
def test_tile_api_one_instruction(m, k, n):
    rng = np.random.default_rng([m, k, n])
    a, b = finite_operand(rng, (m, k)), finite_operand(rng, (k, n))
    a[0, : k // 2] = nan_heavy(rng, (1, k // 2), 0.5)[0]
    dst = finite_operand(rng, (m, n))
    dst[-1, :3] = f32(0x80000001, 0x7F812345, 0xFF800000)
    want = reference.matmul(a, b, "tf32", c=dst)
    assert_u32(want, oracle(a, b, dst), "reference against the oracle")
    assert_u32(tile_multiply(a, b, dst), want, f"{m}x{k}x{n}")
    # B rows are plain binary32: a B whose rows hold distinct values gives a result that an
    # interleaved (VNNI pairs) reading would not.
    bb = (np.arange(k * n, dtype=np.float32).reshape(k, n) + 1) * np.float32(0.25)
    aa = np.ones((m, k), np.float32)
    aa[:, ::2] = 2.0
    assert_u32(tile_multiply(aa, bb, np.zeros((m, n), np.float32)), reference.matmul(aa, bb, "tf32"), "plain B")
    assert_u32(reference.matmul(aa, bb, "tf32"), (aa.astype(np.float64) @ bb).astype(np.float32), "small integers")


def test_tile_api_faults_and_names():
    u = TileUnit()
    u.ldtilecfg(TileConfig(rows=(16, 16, 8) + (16,) * 5, colsb=(64,) * 8))
    with pytest.raises(UDFault, match=r"B has 8 rows but A's colsb / 4 = 16"):
        u.tmmultf32ps(0, 1, 2)
    with pytest.raises(UDFault, match=r"three distinct tiles, got tmm3, tmm3, tmm4"):
        u.tmmultf32ps(3, 3, 4)
    with pytest.raises(ValueError, match=r"tf32_rounding='x'"):
        u.tmmultf32ps(3, 4, 5, tf32_rounding="x")
    assert "_tile_mmultf32ps" in amx.__all__ and callable(amx._tile_mmultf32ps)
    rec = tilegemm.instructions.INSTRUCTIONS["TMMULTF32PS"]
    assert rec.group == 1 and rec.k_step == 16 and rec.intrinsic == "_tile_mmultf32ps"
    assert tilegemm.instructions.resolve("amx", "tf32")[2] is rec


# -- command line and bad input -------------------------------------------------------------------


def test_info_lists_the_kernel(capsys):
    from tilegemm.__main__ import main

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "TMMULTF32PS" in out and "docs/amx-tf32.md" in out
    assert "switch tf32_dst_daz: True | False (default True)" in out
    assert "switch tf32_rounding: each_step | single (default each_step)" in out
    kernel_rows = [line for line in out.splitlines() if line.strip().startswith("tmmultf32ps-")]
    assert kernel_rows and "gemm_tf32_fast" in kernel_rows[0], kernel_rows


def test_amx_asm_names_the_instruction():
    """The seed's tile loop compiled by LLVM for Diamond Rapids runs TMMULTF32PS
    (``llvm.x86.tmmultf32ps``), as ``python -m tilegemm ir --dtype tf32 --amx`` prints it."""
    one = tilegemm.inspect.amx_asm("tf32", "1x1")
    assert one.count("tileloadd") == 2 and "tmmultf32ps\t%tmm2, %tmm1, %tmm0" in one
    two = tilegemm.inspect.amx_asm("tf32", "2x2")
    assert "tmmultf32ps\t%tmm6, %tmm4, %tmm0" in two and "tmmultf32ps\t%tmm7, %tmm5, %tmm3" in two
    assert "declare void @llvm.x86.tmmultf32ps(" in tilegemm.inspect.amx_ir("tf32", "1x1")


def test_bad_input():
    x = np.ones((2, 2), np.float32)
    for fn in (tilegemm.matmul, reference.matmul):
        with pytest.raises(TypeError, match=r"operand a has dtype complex128"):
            fn(x.astype(complex), x, "tf32")
        with pytest.raises(TypeError, match=r"operand b has dtype complex64"):
            fn(x, x.astype(np.complex64), "tf32")
        with pytest.raises(ValueError):
            fn(x, np.ones((3, 2), np.float32), "tf32")
        with pytest.raises(ValueError, match=r"tf32_rounding='double' is not one of 'each_step', 'single'"):
            fn(x, x, "tf32", tf32_rounding="double")
        with pytest.raises(ValueError, match=r"tf32_dst_daz=0 is not one of True, False"):
            fn(x, x, "tf32", tf32_dst_daz=0)
        with pytest.raises(ValueError, match=r"switch 'fp8_dst_daz' does not apply to TMMULTF32PS"):
            fn(x, x, "tf32", fp8_dst_daz=True)
    with pytest.raises(ValueError, match=r"inner dimensions do not match"):
        tilegemm.matmul(x, np.ones((3, 2), np.float32), "tf32")
    out = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError):
        tilegemm.matmul(x, x, "tf32", out=out)
