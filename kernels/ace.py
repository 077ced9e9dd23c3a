"""The ACE outer products (AVX10 AI Compute Extensions) as tile multiplies: MX and BF16 bodies.

An ACE outer product adds the outer product of two zmm registers into a 16 x 16 tile of C, one
K step (a group: 4 elements, 2 for TOP2BF16PS) at a time, and **rounds into C after every
step** (``docs/ace.md``). A tile multiply here runs the ``nsteps`` outer products of one packed
block (up to 16 steps) for 16 x 16 outputs: exactly ``nsteps``, never the padding steps of a
short last block, because each step's rounding is visible. The integer forms (TOP4B*D) wrap
modulo 2^32, which does not depend on how the sum is grouped: they run AMX's int8 kernels.

Operands (``tilegemm.ace`` builds them):

- MX (``ace_mx``, TOP4MX*PS): A panels hold each element's value times its block scale
  ``2^(sa - 127)`` in binary64 (exact: at most 8 significant bits; a NaN scale makes them NaN),
  64 per row per block; a kernel B block is ``[k][n]`` binary64, scaled by ``2^(sb - 127)``.
  The scales meet in the product, so ``sop * 2^(sa + sb - 254 - F)`` is the sum of the scaled
  products. C is float32, already read with DAZ (the framework does it once: every later C is a
  rounded result, which is never denormal).
- BF16 (``ace_bf16``, TOP2BF16PS): A panels are the BF16 values as exact float32, **denormals
  kept** (the default reading reads no operand as zero), 32 per row per block; a kernel B block is
  ``[pair][element 0 | element 1][n]`` float32. C as given.

Bodies:

- MX exact (``ace_mx_exact``): per output and step, the four products (exact in binary64) are
  summed exactly as two int64 limbs in units of the step's finest product bit, rounded once with
  ``exact.round_scaled`` (ties to even, flush to zero, overflow to infinity), then added to C with
  ``exact.add32``. A NaN scale's values carry their own NaN (``tilegemm.ace.SCALE_NAN_BITS``), so
  the step writes the ``ace_e8m0_nan_result`` NaN without reading C; else a NaN C comes out as
  ``ace_dst_nan`` says; else, with ``ace_fp8_specials="ieee_like"``, a NaN code, Inf * 0 or +Inf
  with -Inf make the step the default NaN, and an infinite code infinity. Right for every input;
  the calls whose operands hold a NaN run it (``tilegemm.plan.make_plan``).
- MX fast (``mx_tile_rows``): the four products summed with binary64 FMAs, one ``fptrunc`` to
  binary32, one ``fadd`` into C. Valid under the per-call proof of ``tilegemm.plan``: the four
  products sum exactly in binary64 (their exponents span fewer than 53 bits), and no step result
  and no C can be tiny (every value is a multiple of a grid of at least 2^-126), so the flush to
  zero never acts; ``fptrunc`` rounds to nearest even and overflows to infinity exactly as the
  instruction's rounding does. A zero sum starts from +0, as the instruction's ``s = +0``.
- MXINT8 in binary32 (``mx32_tile_rows``, family ``ace_mx32``, layout ``"mx32"``: the same
  scaled values as binary32): ``C + fma(a3, b3, fma(a2, b2, fma(a1, b1, a0*b0)))``. A step's four
  products share one scale pair, so their sum is an integer below 2^17 times ``2^(sa + sb -
  266)``, exact in binary32, under the proof of ``tilegemm.plan`` for ``"mx32"`` (every scaled
  value a normal, no partial sum at 2^128, no grid below 2^-126); where it fails, the call runs
  ``ace_mx``. As in the binary64 body, C + 0 first makes a C of -0 +0 (the sum is -0 when all four
  products are, where the instruction adds +0).
- MX FP8 in binary32, step by step (``mx32c_tile_rows``, family ``ace_mx32c``, layout
  ``"mx32c"``: the scaled values in binary32, each A row followed by one bound per step, each B
  block by a row of them). Every product of a step is a multiple of the lowest set bit of its A
  value times that of its B value, so every partial sum is a multiple of g = (the smallest such
  bit among a row's four values) x (among a column's). A's bound is the largest ``sum |a|`` in
  units of its row's bit over the body's rows, B's the largest ``max |b|`` in units of its
  column's over a tile's 16 columns; their product bounds each partial sum in units of g. Where
  it is at most 2^24 the step runs as MXINT8's does (every partial sum exact, the last fused
  multiply-add the step's one rounding), elsewhere (or where a bound is not a number) as the MX
  fast body does, in binary64 on the widened values (a function of its own, on C in memory). The
  per-call proof of ``tilegemm.plan`` for ``"mx32c"`` is the MX fast body's (for those steps) and
  binary32's range conditions on the scaled values (as for ``"mx32"``); where it fails, the call
  runs ``ace_mx``.
- BF16 exact (``ace_bf16_exact``): every reading of ``ace_top2bf16`` one binary32 operation at a
  time, on operands read from their bits (so that a caller's DAZ cannot touch a denormal input),
  with x86's NaN rules; results are written as bits (``gcc_chain`` and ``rs`` keep denormals).
- BF16 fast (``bf16_tile_rows``): ``p0 = a0*b0``, ``s = fma(a1, b1, p0)``, ``C + s``, under the
  proof of ``tilegemm.plan``: no denormal input, every product exact in binary32 and no result
  tiny, so no rounding flushes. The other readings run the exact body.

This module must stay free of ``fastmath``.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .exact import _MIN_NORMAL, add32, nan_fma32, round_ftz, round_scaled, two_sum
from .families import variant_id
from .rounding import bits_f32, f32_bits, f64_bits
from .targets import shape
from .vector import _F32, _I32, _TILE, _const, _data, _ptr, _splat, ir_loop, outlined, phis

__all__ = [
    "ACE_MX_EXACT",
    "ACE_MX_FAST",
    "ACE_MX32_FAST",
    "ACE_MX32C_FAST",
    "MX32C_EXACT",
    "ACE_BF16_EXACT",
    "ACE_BF16_FAST",
    "f32_bits",
    "bits_f32",
    "f32_value",
    "ieee_bits",
    "ftz_bits",
    "x86_fma",
    "mx_tile_rows",
    "mx32_tile_rows",
    "mx32c_tile_rows",
    "bf16_tile_rows",
    "ace_mx_exact",
    "ace_bf16_exact",
    "ace_mx_fast",
    "ace_mx32_fast",
    "ace_mx32c_fast",
    "ace_bf16_fast",
]

# Variants of the tile multiply (``variant`` in the kernel contract, ``tiles.tile_multiply``).
ACE_MX_EXACT, ACE_MX_FAST, ACE_BF16_EXACT, ACE_BF16_FAST = (
    variant_id(n) for n in ("ace_mx_exact", "ace_mx_fast", "ace_bf16_exact", "ace_bf16_fast")
)
ACE_MX32_FAST = variant_id("ace_mx32_fast")  # MXINT8 in binary32 (``mx32_tile_rows``)
ACE_MX32C_FAST = variant_id("ace_mx32c_fast")  # MX FP8 in binary32 where each step's bounds allow (``mx32c_tile_rows``)
_F64 = ir.DoubleType()
_QUIET = np.uint32(0x00400000)
_INDEF = np.uint32(0xFFC00000)
_SIGN = np.uint32(0x80000000)
_EXP = np.uint32(0x7F800000)
_MANT = np.uint32(0x007FFFFF)
_TOP2_SDE, _TOP2_SPEC, _TOP2_RS, _TOP2_GCC = 0, 1, 2, 3  # ace_top2bf16 indices


# -- binary32 as bits ------------------------------------------------------------------------------


@njit(cache=True)
def is_nan(u):
    return (u & _EXP) == _EXP and (u & _MANT) != 0


@njit(cache=True)
def f32_value(u):
    """The exact binary64 value of binary32 bits, made with integer operations only (a denormal
    is converted without an FPU conversion a caller's DAZ could flush). NaN bits give a NaN."""
    e = np.int64((u >> 23) & 0xFF)
    m = np.int64(u & _MANT)
    neg = (u & _SIGN) != 0
    if e == 255:
        if m != 0:
            return math.nan
        return -math.inf if neg else math.inf
    v = math.ldexp(np.float64(m | (0x800000 if e else 0)), (e if e else 1) - 150)
    return -v if neg else v


@njit(cache=True)
def daz_bits(u):
    """DAZ on bits: a denormal becomes a zero of its sign."""
    return u & _SIGN if (u & _EXP) == 0 else u


@njit(cache=True)
def ftz_bits(s, t):
    """Bits of the binary32 of the exact ``s + t``: RNE at 24 bits, then a magnitude below 2^-126
    flushed to zero (``exact.round_ftz``)."""
    return f32_bits(round_ftz(s, t))


@njit(cache=True)
def ieee_bits(s, t):
    """Bits of the IEEE binary32 nearest to the exact ``s + t`` (ties to even), denormals kept: below
    2^-126 the grid is 2^-149. ``s = fl64(s + t)`` and ``t`` its error (``exact.two_sum``)."""
    if not math.isfinite(s):
        return f32_bits(np.float32(s))
    a = abs(s)
    if a >= _MIN_NORMAL:
        return ftz_bits(s, t)  # the normal range rounds as there (no flush can happen)
    q = a * 2.0**149  # exact: a power-of-two scaling
    n = math.floor(q)
    frac = q - n
    if frac > 0.5 or (frac == 0.5 and ((t != 0.0 and (t > 0.0) == (s > 0.0)) or (t == 0.0 and n % 2 == 1))):
        n += 1  # past the midpoint, or on it and odd; n = 2^23 is the smallest normal
    sign = _SIGN if (s < 0.0 or (s == 0.0 and math.copysign(1.0, s) < 0.0)) else np.uint32(0)
    return sign | np.uint32(n)


@njit(cache=True)
def _inf_times_zero(x, y):
    return (math.isinf(x) and y == 0.0) or (x == 0.0 and math.isinf(y))


@njit(cache=True)
def x86_fma(a, b, c, ieee):
    """``a * b + c`` (bits in, bits out), one rounding, x86's NaN rules: a or b NaN -> the first,
    quieted; else c NaN -> c quieted, even for Inf * 0; else Inf * 0 or Inf - Inf -> INDEF.
    ``ieee``: denormal results kept, else flushed (tininess after rounding)."""
    x, y = f32_value(a), f32_value(b)
    if is_nan(a) or is_nan(b) or is_nan(c) or _inf_times_zero(x, y):
        return f32_bits(nan_fma32(bits_f32(a), bits_f32(b), bits_f32(c)))  # the one NaN rule
    p = x * y  # exact in binary64: two 24-bit significands
    z = f32_value(c)
    r = p + z
    if math.isnan(r):
        return _INDEF  # Inf - Inf
    if math.isinf(r):
        return f32_bits(np.float32(r))
    s, t = two_sum(p, z)
    if s == 0.0 and t == 0.0:  # an exact zero: -0 only if both terms are -0
        neg = math.copysign(1.0, p) < 0.0 and math.copysign(1.0, z) < 0.0
        return _SIGN if neg else np.uint32(0)
    return ieee_bits(s, t) if ieee else ftz_bits(s, t)


# -- MX: the exact body -----------------------------------------------------------------------------

_SIG_BITS = 16  # a product of two MX elements has at most 16 significant bits (MXINT8: 8 x 8)
_LIMB = 2.0**32


# A value of a block whose scale is NaN (``tilegemm.ace.SCALE_NAN_BITS``).
_SCALE_NAN = np.uint64(0x7FF8_0000_0ACE_0ACE)
# What a NaN scale writes, by ``ace_e8m0_nan_result`` code (the switch's values in order).
_E8M0_NAN_RESULTS = (np.uint32(0x7FC00000), np.uint32(0xFFC00000))


@njit(cache=True)
def _mx_step(A, a, B, b, c, nan_result, dst_indef):
    """One MX outer-product step of one output: the four scaled products ``A[a+e] * B[b+16e]``,
    rounded once, added into C (bits ``c``). Returns the new C bits.

    NaNs (``docs/semantics.md``, "NaN bits"): a NaN block scale writes ``nan_result`` and C is not
    read; else a NaN C comes out quieted (or, ``dst_indef``, as INDEF); else a NaN sum (a NaN code,
    Inf * 0, +Inf with -Inf) gives INDEF."""
    for e in range(4):
        if f64_bits(A[a + e]) == _SCALE_NAN or f64_bits(B[b + 16 * e]) == _SCALE_NAN:
            return nan_result
    if is_nan(c):
        return _INDEF if dst_indef else c | _QUIET
    total = 0.0
    low = 10**6  # the lowest exponent (frexp's) of a non-zero product
    for e in range(4):
        p = A[a + e] * B[b + 16 * e]
        total += p
        if p != 0.0 and math.isfinite(p):
            low = min(low, math.frexp(p)[1])
    if math.isnan(total):
        return _INDEF  # a NaN scale, a NaN code, Inf * 0 or +Inf with -Inf (ieee_like)
    if math.isinf(total):
        s = np.float32(total)
    else:
        # Exact: every product is an integer times 2^(low - _SIG_BITS); split at 2^32 into limbs.
        unit = low - _SIG_BITS
        hi = np.int64(0)
        lo = np.int64(0)
        for e in range(4):
            p = A[a + e] * B[b + 16 * e]
            if p != 0.0:
                q = math.ldexp(p, -unit)  # an integer below 2^90
                h = math.floor(q / _LIMB)
                hi += np.int64(h)
                lo += np.int64(q - h * _LIMB)
        s = round_scaled(hi, lo, unit)
    return f32_bits(add32(f32_value(daz_bits(c)), s))  # +Inf with -Inf: add32's default NaN


@njit(cache=True)
def ace_mx_exact(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch, codes):
    """``nsteps`` MX outer products, exactly as defined, for ``mr`` x ``nc`` outputs."""
    # the last two switches of every MX record: ace_e8m0_nan_result, ace_dst_nan
    nan_result = _E8M0_NAN_RESULTS[0] if codes[len(codes) - 2] == 0 else _E8M0_NAN_RESULTS[1]
    dst_indef = codes[len(codes) - 1] != 0
    for mm in range(mr):
        for n in range(nc):
            ci = c_off + mm * ldc + n
            c = f32_bits(C[ci])
            for t in range(nsteps):
                c = _mx_step(A, a_off + mm * lda + 4 * t, B, b_off + 64 * t + n, c, nan_result, dst_indef)
            C[ci] = bits_f32(c)


# -- BF16: the exact body --------------------------------------------------------------------------


# Each reading of ace_top2bf16 as a short program over registers (0 a0, 1 a1, 2 b0, 3 b1, 4 C,
# 5 -0, 6 1.0, 7 p0, 8 p1, 9 s): rows (x, y, z, destination, IEEE rounding, flush the result),
# each ``dst = x * y + z`` rounded once; -1 ends a program. One call site of ``x86_fma`` keeps the
# compiled code small.
_PROGRAMS = np.array(
    [
        # sde: p0 = a0*b0 (+ -0 keeps its sign of zero), s = a1*b1 + p0, C = C + s; FTZ each
        [[0, 2, 5, 7, 0, 0], [1, 3, 7, 9, 0, 0], [4, 6, 9, 4, 0, 0], [-1, 0, 0, 0, 0, 0]],
        # spec: p0 = a0*b0, p1 = a1*b1, s = p0 + p1, C = C + s; FTZ each (inputs read with DAZ)
        [[0, 2, 5, 7, 0, 0], [1, 3, 5, 8, 0, 0], [7, 6, 8, 9, 0, 0], [4, 6, 9, 4, 0, 0]],
        # rs: as spec, IEEE roundings, the two sums flushed
        [[0, 2, 5, 7, 1, 0], [1, 3, 5, 8, 1, 0], [7, 6, 8, 9, 1, 1], [4, 6, 9, 4, 1, 1]],
        # gcc_chain: C = a0*b0 + C, then C = a1*b1 + C, IEEE
        [[0, 2, 4, 4, 1, 0], [1, 3, 4, 4, 1, 0], [-1, 0, 0, 0, 0, 0], [-1, 0, 0, 0, 0, 0]],
    ],
    np.int64,
)


@njit(cache=True)
def _top2_step(regs, reading):
    """One TOP2BF16PS step of one output: ``regs[0:5]`` hold a0, a1, b0, b1 and C as binary32
    bits; returns the new C bits."""
    spec_like = reading == _TOP2_SPEC or reading == _TOP2_RS
    if spec_like:  # DAZ on the inputs and C
        for i in range(5):
            regs[i] = daz_bits(regs[i])
    regs[5] = _SIGN
    regs[6] = np.uint32(0x3F800000)
    for op in range(4):
        x, y, z, dst, ieee, flush = _PROGRAMS[reading, op]
        if x < 0:
            break
        r = x86_fma(regs[x], regs[y], regs[z], ieee != 0)
        regs[dst] = daz_bits(r) if flush else r
    if spec_like and is_nan(regs[4]):
        return _INDEF  # these readings write the default NaN
    return regs[4]


@njit(cache=True)
def ace_bf16_exact(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch, codes):
    """``nsteps`` TOP2BF16PS steps, one binary32 operation at a time, for ``mr`` x ``nc`` outputs."""
    reading = codes[0]
    regs = np.empty(10, np.uint32)
    for mm in range(mr):
        for n in range(nc):
            ci = c_off + mm * ldc + n
            c = f32_bits(C[ci])
            for p in range(nsteps):
                a = a_off + mm * lda + 2 * p
                b = b_off + 2 * _TILE * p + n
                regs[0], regs[1] = f32_bits(A[a]), f32_bits(A[a + 1])
                regs[2], regs[3] = f32_bits(B[b]), f32_bits(B[b + _TILE])
                regs[4] = c
                c = _top2_step(regs, reading)
            C[ci] = bits_f32(c)


# -- the fast bodies, as explicit LLVM vector IR --------------------------------------------------


def _steps_intrinsic(emit, name: str | None = None):
    """An intrinsic ``(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps) -> None`` whose IR ``emit``
    writes: ``emit(builder, ap, bp, cp, rows, b_off, crow, nsteps)`` (as ``vector._body_intrinsic``,
    with the number of outer-product steps as an IR value). With a ``name``, the body is a
    function of its own (:func:`vector.outlined`); else it is written inline."""

    @intrinsic
    def body(typingctx, A, a_off, lda, B, b_off, C, c_off, ldc, nsteps):
        sig = types.void(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps)

        def codegen(context, builder, signature, args):
            ptrs = [_data(context, builder, signature.args[i], args[i]) for i in (0, 3, 5)]
            ints = [context.cast(builder, args[i], signature.args[i], types.int64) for i in (1, 2, 4, 6, 7, 8)]

            def inner(fb, ap, bp, cp, a_off_, lda_, b_off_, c_off_, ldc_, steps):
                def rows(r):
                    return fb.add(a_off_, fb.mul(lda_, _const(r)))

                def crow(r):
                    return fb.add(c_off_, fb.mul(ldc_, _const(r)))

                emit(fb, ap, bp, cp, rows, b_off_, crow, steps)

            if name is None:
                inner(builder, *ptrs, *ints)
            else:
                outlined(builder, name, ptrs + ints, inner)
            return context.get_dummy_value()

        return sig, codegen

    return body


def mx_tile_rows(mr: int, width: int = 8):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps)``: ``nsteps`` MX outer
    products for ``mr`` rows x 16 columns of C, under the fast-path proof (module docstring).
    ``width``: doubles per vector (8: zmm, 4: ymm). C stays in registers across the steps
    (float32 vectors of ``2 * width`` lanes, each two rounded sums joined)."""
    assert width in (4, 8), width
    vd = ir.VectorType(_F64, width)
    vf = ir.VectorType(_F32, width)
    parts = _TILE // width

    # C as float32 vectors of 2 * width lanes (a whole register: two rounded binary64 vectors
    # joined), half as many as binary64 vectors per row.
    vc = ir.VectorType(_F32, 2 * width)
    halves = parts // 2
    join = ir.Constant(ir.VectorType(_I32, 2 * width), list(range(2 * width)))

    def emit(builder, ap, bp, cp, rows, b_off, crow, nsteps):
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vd, [vd] * 3), f"llvm.fma.v{width}f64")
        arow = [rows(r) for r in range(mr)]
        cptr = [
            [_ptr(builder, cp, builder.add(crow(r), _const(2 * width * h)), vc) for h in range(halves)]
            for r in range(mr)
        ]
        # C + 0 turns a C of -0 into +0 and changes nothing else. The instruction adds s = +0 for
        # a zero sum, but the sum here can be -0 (all four products -0); that differs only when C
        # is -0, which after this is never so: every later C is +0 + s or nonzero (no flush).
        zero_f = ir.Constant(vc, [0.0] * (2 * width))
        init = [builder.fadd(builder.load(cptr[r][h], align=4), zero_f) for r in range(mr) for h in range(halves)]

        def step(t, flat):
            k0 = builder.mul(t, _const(4))
            bv = [
                [
                    builder.load(
                        _ptr(
                            builder,
                            bp,
                            builder.add(
                                b_off, builder.add(builder.mul(k0, _const(_TILE)), _const(_TILE * e + width * v))
                            ),
                            vd,
                        ),
                        align=8,
                    )
                    for v in range(parts)
                ]
                for e in range(4)
            ]
            out = []
            for r in range(mr):
                a = [
                    _splat(
                        builder, builder.load(_ptr(builder, ap, builder.add(arow[r], builder.add(k0, _const(e))))), vd
                    )
                    for e in range(4)
                ]
                sums = []
                for v in range(parts):
                    acc = builder.fmul(a[0], bv[0][v])  # exact, as every product
                    for e in range(1, 4):
                        acc = builder.call(fma, [a[e], bv[e][v], acc])
                    sums.append(builder.fptrunc(acc, vf))  # the step's one rounding
                for h in range(halves):
                    s = builder.shuffle_vector(sums[2 * h], sums[2 * h + 1], join)
                    out.append(builder.fadd(flat[r * halves + h], s))
            return out

        final = ir_loop(builder, nsteps, step, init)
        for r in range(mr):
            for h in range(halves):
                builder.store(final[r * halves + h], cptr[r][h], align=4)

    # Outlined: inlined into the superblock loop, the AVX2 body's inner loop spilled 12 vector
    # registers where alone it spills 4; outlined, n = 1024 ran about 10% faster on Zen 3 (the
    # BF16 body measured slower outlined and stays inline).
    return _steps_intrinsic(emit, f"tilegemm.ace_mx.{mr}x{width}")


def _f32_c(builder, cp, crow, mr: int, width: int, plus_zero: bool):
    """C's ``mr`` rows x 16 columns as binary32 vectors of ``width``: their pointers
    ``[row][vector]`` and loaded values (flat). ``plus_zero``: C + 0 first, which makes a C of -0
    +0 (for instructions that add s = +0 to a zero sum) and changes nothing else."""
    vt = ir.VectorType(_F32, width)
    parts = _TILE // width
    cptr = [[_ptr(builder, cp, builder.add(crow(r), _const(width * v)), vt) for v in range(parts)] for r in range(mr)]
    init = [builder.load(cptr[r][v], align=4) for r in range(mr) for v in range(parts)]
    if plus_zero:
        init = [builder.fadd(c, ir.Constant(vt, [0.0] * width)) for c in init]
    return cptr, init


def _f32_sums(builder, ap, bp, k, base, mr: int, width: int, group: int) -> list:
    """One step's ``fma(a_{g-1}, b_{g-1}, ... fma(a1, b1, a0*b0))`` per row and vector of 16
    columns (flat), A's elements at ``k[r]``, B's rows of 16 at ``base``; element by element, so
    that one element's B vectors live at a time."""
    vt = ir.VectorType(_F32, width)
    parts = _TILE // width
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt] * 3), f"llvm.fma.v{width}f32")
    s: list = [None] * (mr * parts)
    for e in range(group):
        b = [
            builder.load(_ptr(builder, bp, builder.add(base, _const(_TILE * e + width * v)), vt), align=4)
            for v in range(parts)
        ]
        for r in range(mr):
            a = _splat(builder, builder.load(_ptr(builder, ap, builder.add(k[r], _const(e)))), vt)
            for v in range(parts):
                i = r * parts + v
                s[i] = builder.fmul(a, b[v]) if e == 0 else builder.call(fma, [a, b[v], s[i]])
    return s


def _f32_steps(mr: int, width: int, group: int, plus_zero: bool):
    """The binary32 outer-product bodies: per step of ``group`` elements ``C + fma(..., fma(a1, b1,
    a0*b0))`` for ``mr`` rows x 16 columns, C in registers across the steps (:func:`_f32_c`). B
    blocks are ``[k][n]`` (``[pair][element][n]`` for two elements)."""
    parts = _TILE // width

    def emit(builder, ap, bp, cp, rows, b_off, crow, nsteps):
        arow = [rows(r) for r in range(mr)]
        cptr, init = _f32_c(builder, cp, crow, mr, width, plus_zero)

        def step(t, flat):
            k0 = builder.mul(t, _const(group))
            base = builder.add(b_off, builder.mul(k0, _const(_TILE)))
            k = [builder.add(arow[r], k0) for r in range(mr)]
            s = _f32_sums(builder, ap, bp, k, base, mr, width, group)  # exact under the proof
            return [builder.fadd(flat[i], s[i]) for i in range(mr * parts)]  # the step's add into C

        final = ir_loop(builder, nsteps, step, init)
        for r in range(mr):
            for v in range(parts):
                builder.store(final[r * parts + v], cptr[r][v], align=4)

    return _steps_intrinsic(emit)


def mx32_tile_rows(mr: int, width: int = 16):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps)``: ``nsteps`` MXINT8 outer
    products (TOP4MXBSSPS) for ``mr`` rows x 16 columns of C in binary32, under the proof of
    ``tilegemm.plan`` for layout ``"mx32"`` (module docstring): ``C + fma(a3, b3, fma(a2, b2,
    fma(a1, b1, a0 * b0)))`` with C in registers, after C + 0 (as in :func:`mx_tile_rows`: the sum
    here is -0 when every product is, where the instruction adds s = +0). ``width``: floats per
    vector (16: zmm, 8: ymm)."""
    return _f32_steps(mr, width, 4, True)


def bf16_tile_rows(mr: int, width: int = 16):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps)``: ``nsteps`` TOP2BF16PS
    steps for ``mr`` rows x 16 columns of C, under the fast-path proof: ``C + fma(a1, b1, a0*b0)``
    with C in registers. ``width``: floats per vector (16: zmm, 8: ymm)."""
    return _f32_steps(mr, width, 2, False)


# A step's binary32 sum is exact while its bounds multiply to at most this (``mx32c_tile_rows``).
MX32C_EXACT = 2.0**24


def mx32c_tile_rows(mr: int, width: int = 16, k_block: int = 64):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps)``: ``nsteps`` MX FP8 outer
    products for ``mr`` rows x 16 columns of C, C in binary32 registers across the steps, each
    step in binary32 where its bounds prove that exact and in binary64 elsewhere (layout
    ``"mx32c"``, module docstring). ``width``: floats per vector (16: zmm, 8: ymm).

    Operands: A rows of ``lda = k_block + 16`` floats, the scaled values then one bound per step
    (the body reads its first row's); a B block ``[k][n]`` of ``k_block`` rows, then a row of one
    bound per step. A step runs in binary32 where ``bound_a * bound_b <= 2^24`` (an unordered
    comparison, NaN, is false): ``C + fma(a3, b3, fma(a2, b2, fma(a1, b1, a0 * b0)))``, whose
    partial sums are then exact and whose last rounding is the step's. Elsewhere it runs as
    :func:`mx_tile_rows` does, on the values widened to binary64. C + 0 first, as there."""
    vt = ir.VectorType(_F32, width)
    parts = _TILE // width
    half = width // 2
    vd = ir.VectorType(_F64, half)
    vh = ir.VectorType(_F32, half)
    join = ir.Constant(ir.VectorType(_I32, width), list(range(width)))
    limit = ir.Constant(_F64, MX32C_EXACT)

    def emit(builder, ap, bp, cp, rows, b_off, crow, nsteps):
        arow = [rows(r) for r in range(mr)]
        cptr, init = _f32_c(builder, cp, crow, mr, width, True)  # -0 -> +0, as in mx_tile_rows

        def scalar(ptr, off):
            return builder.load(_ptr(builder, ptr, off))

        def wide(fb, ap_, bp_, cp_, base_, *offs):
            """One step in binary64 on C in memory (A rows at ``offs[:mr]``, C rows at the rest): a
            function of its own, so that the loop keeps few registers live around this rare branch
            (inlined, with C in registers, the AVX2 bodies spilled 20 ymm in their inner loop)."""
            fma64 = cgutils.get_or_insert_function(fb.module, ir.FunctionType(vd, [vd] * 3), f"llvm.fma.v{half}f64")

            def bd(e, h):
                at = fb.add(base_, _const(_TILE * e + half * h))
                return fb.fpext(fb.load(_ptr(fb, bp_, at, vh), align=4), vd)

            for r in range(mr):
                a = [
                    _splat(fb, fb.fpext(fb.load(_ptr(fb, ap_, fb.add(offs[r], _const(e)))), _F64), vd) for e in range(4)
                ]
                for v in range(parts):
                    sums = []
                    for h in (2 * v, 2 * v + 1):
                        acc = fb.fmul(a[0], bd(0, h))  # exact, as every product
                        for e in range(1, 4):
                            acc = fb.call(fma64, [a[e], bd(e, h), acc])
                        sums.append(fb.fptrunc(acc, vh))  # the step's one rounding
                    at = _ptr(fb, cp_, fb.add(offs[mr + r], _const(width * v)), vt)
                    fb.store(fb.fadd(fb.load(at, align=4), fb.shuffle_vector(sums[0], sums[1], join)), at, align=4)

        def step(t, flat):
            k0 = builder.mul(t, _const(4))
            base = builder.add(b_off, builder.mul(k0, _const(_TILE)))
            k = [builder.add(arow[r], k0) for r in range(mr)]
            qa = builder.fpext(scalar(ap, builder.add(arow[0], builder.add(_const(k_block), t))), _F64)
            qb = builder.fpext(scalar(bp, builder.add(b_off, builder.add(_const(k_block * _TILE), t))), _F64)
            exact32 = builder.fcmp_ordered("<=", builder.fmul(qa, qb), limit)
            with builder.if_else(exact32, likely=True) as (then, otherwise):
                with then:
                    s = _f32_sums(builder, ap, bp, k, base, mr, width, 4)
                    fast = [builder.fadd(flat[i], s[i]) for i in range(mr * parts)]
                    fast_block = builder.block
                with otherwise:  # C through its memory, and the step a function of its own
                    for i, c in enumerate(flat):
                        builder.store(c, cptr[i // parts][i % parts], align=4)
                    crows = [crow(r) for r in range(mr)]
                    outlined(builder, f"tilegemm.ace_mx32c.binary64.{mr}x{width}", [ap, bp, cp, base] + k + crows, wide)
                    slow = [builder.load(cptr[i // parts][i % parts], align=4) for i in range(mr * parts)]
                    slow_block = builder.block
            return phis(builder, [(fast, fast_block), (slow, slow_block)])

        final = ir_loop(builder, nsteps, step, init)
        for r in range(mr):
            for v in range(parts):
                builder.store(final[r * parts + v], cptr[r][v], align=4)

    return _steps_intrinsic(emit)


def steps_rows(body, mr_body: int):
    """A tile multiply of ``nsteps`` outer products from a body of ``mr_body`` rows, over the A
    panel's first ``mr`` rows rounded up to whole bodies (the panel is zero-padded to 16 rows); a
    partial tile (mr < 16 or nc < 16) runs on a 16 x 16 scratch copy of its C block, and only the
    real rows and columns are copied back."""

    @njit(inline="always")
    def tile(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch):
        partial = mr < _TILE or nc < _TILE
        if partial:
            for mm in range(_TILE):
                for n in range(_TILE):
                    scratch[mm * _TILE + n] = C[c_off + mm * ldc + n] if mm < mr and n < nc else 0
            tgt, t_off, t_ld = scratch, 0, _TILE
        else:
            tgt, t_off, t_ld = C, c_off, ldc
        for mm in range(0, mr, mr_body):
            body(A, a_off + mm * lda, lda, B, b_off, tgt, t_off + mm * t_ld, t_ld, nsteps)
        if partial:
            for mm in range(mr):
                for n in range(nc):
                    C[c_off + mm * ldc + n] = scratch[mm * _TILE + n]

    return tile


# -- the tile multiplies ``tiles.tile_multiply`` runs for the ACE variants -------------------------

_MX, _MX32, _BF = shape("ace_mx"), shape("ace_mx32"), shape("ace_bf16")
_MX32C = shape("ace_mx32c")
mx_body = mx_tile_rows(_MX.rows, _MX.width)  # also run by the row-of-superblocks loop (gemm.py)
_mx_fast = steps_rows(mx_body, _MX.rows)
_mx32_fast = steps_rows(mx32_tile_rows(_MX32.rows, _MX32.width), _MX32.rows)
_bf16_fast = steps_rows(bf16_tile_rows(_BF.rows, _BF.width), _BF.rows)
mx32c_body = mx32c_tile_rows(_MX32C.rows, _MX32C.width)  # run by the row-of-superblocks loop (gemm.py)
mx32c_fast = steps_rows(mx32c_body, _MX32C.rows)


@njit
def ace_mx_fast(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch, codes):
    _mx_fast(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch)


@njit
def ace_mx32_fast(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch, codes):
    _mx32_fast(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch)


@njit
def ace_mx32c_fast(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch, codes):
    mx32c_fast(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch)


@njit
def ace_bf16_fast(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch, codes):
    if codes[0] == _TOP2_SDE:
        _bf16_fast(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch)
    else:  # the other readings of ace_top2bf16: the exact body
        ace_bf16_exact(A, a_off, lda, mr, nsteps, B, b_off, C, c_off, ldc, nc, scratch, codes)
