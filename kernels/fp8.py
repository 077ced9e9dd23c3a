"""The AMX-FP8 tile multiply (TDPBF8PS, TDPBHF8PS, TDPHBF8PS, TDPHF8PS): a fast and an exact body.

Operands (``tilegemm.packing``, layout ``"f64"``): A panels hold the 8-bit floats as binary64
values (exact), 64 per row per K step; a kernel B block is ``[k][n]`` binary64, 64 x 16. C is
float32. ``codes`` = (fp8_inf_cancel, fp8_dst_daz) as indices (0: strict, 0: DAZ on dst).

The instruction sums all products of a tile step exactly and rounds once (``docs/amx-fp8.md``).

- exact (``fp8_exact``): the products as exact integers in units of 2^-32 (the finest step any
  pair of 8-bit floats has), split at 2^32 into two int64 sums so that no E5M2 x E5M2 sum (up to
  2^70 units) can overflow, then ``exact.round_scaled`` and one ``exact.add32`` into C, with the
  NaN/Inf rules and both switches. Right for every input.
- fast (``fp8_tile_rows``): the products summed in binary64 with vector FMAs. Every product of
  two 8-bit floats is exact in binary64 and a multiple of 2^-F (F = 18, 25 or 32 by format pair),
  so the binary64 sum is exact while every partial sum stays below 2^(53-F): always for E4M3 x
  E4M3 (|sum| < 2^24), and for the other pairs when the per-call proof in ``tilegemm.plan``
  shows it from the operands' largest exponents. Then one ``fptrunc`` is the one rounding (the
  sum is a binary32 normal or zero, never tiny: |s| >= 2^-32), and IEEE semantics give the NaN
  rules for free: a NaN input, Inf * 0, or +Inf with -Inf make the sum NaN. The final add reads a
  denormal C as zero (DAZ) and can produce neither a denormal nor a tiny result (s is 0 or at
  least 2^-32 and a multiple of 2^-55 near any C it cancels), so plain ``fadd`` is exact whatever
  the caller's MXCSR says. NaN results become the default NaN. The non-default readings of the
  switches run the exact body.

Partial tiles and the K tail: A and B are zero-padded, and 0 * 0 adds +0, which changes no bit.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils

from .exact import add32, round_scaled
from .vector import _F32, _I32, _TILE, _body_intrinsic, _const, _ptr, _splat, ir_loop

__all__ = ["FP8_EXACT", "FP8_FAST", "fp8_tile_rows", "fp8_exact"]

# Variants of the tile multiply (``variant`` in the kernel contract, ``tiles.tile_multiply``).
FP8_EXACT, FP8_FAST = 20, 21
_K = 64  # products along K in one full tile multiply
_UNROLL = 4  # products per trip of the fast body's K loop
_F64 = ir.DoubleType()
_INDEF = np.float32(-np.float32(np.nan))  # 0xFFC00000, the x86 default NaN
_UNIT = 2.0**32  # products in units of 2^-32
_UNIT_INV = 2.0**-32


def fp8_tile_rows(mr: int, width: int = 4):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc)``: one full TDP*F8PS for ``mr``
    rows x 16 columns of C, under the fast-path proof (module docstring). ``width``: doubles per
    vector (8: zmm, 4: ymm), a divisor of 16. The K loop is an IR loop of ``_UNROLL`` products
    per trip, which keeps the IR (and the compile) small."""
    vd = ir.VectorType(_F64, width)
    vf = ir.VectorType(_F32, width)
    vi = ir.VectorType(_I32, width)
    parts = _TILE // width

    def emit(builder, sig, ap, bp, cp, rows, b_off, crow):
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vd, [vd] * 3), f"llvm.fma.v{width}f64")
        arow = [rows(r) for r in range(mr)]

        def trip(t, flat):  # _UNROLL products of K for every row and vector
            acc = [flat[r * parts : (r + 1) * parts] for r in range(mr)]
            for u in range(_UNROLL):
                k = builder.add(builder.mul(t, _const(_UNROLL)), _const(u))
                bk = builder.add(b_off, builder.mul(k, _const(_TILE)))
                bv = [
                    builder.load(_ptr(builder, bp, builder.add(bk, _const(width * v)), vd), align=8)
                    for v in range(parts)
                ]
                for r in range(mr):
                    a = _splat(builder, builder.load(_ptr(builder, ap, builder.add(arow[r], k))), vd)
                    acc[r] = [builder.call(fma, [a, bv[v], acc[r][v]]) for v in range(parts)]
            return [x for row in acc for x in row]

        flat = ir_loop(builder, _K // _UNROLL, trip, [ir.Constant(vd, [0.0] * width)] * (mr * parts))
        acc = [flat[r * parts : (r + 1) * parts] for r in range(mr)]

        def splat_i(x):
            return ir.Constant(vi, [x] * width)

        exp_mask, sign_mask = splat_i(0x7F800000), splat_i(0x80000000)
        indef = builder.bitcast(splat_i(0xFFC00000), vf)
        for r in range(mr):
            c0 = crow(r)
            for v in range(parts):
                s = builder.fptrunc(acc[r][v], vf)  # the exact sum, rounded once (RNE)
                cptr = _ptr(builder, cp, builder.add(c0, _const(width * v)), vf)
                dbits = builder.bitcast(builder.load(cptr, align=4), vi)
                denormal = builder.icmp_unsigned("==", builder.and_(dbits, exp_mask), splat_i(0))
                d = builder.bitcast(builder.select(denormal, builder.and_(dbits, sign_mask), dbits), vf)  # DAZ
                out = builder.fadd(d, s)
                out = builder.select(builder.fcmp_unordered("uno", out, out), indef, out)
                builder.store(out, cptr, align=4)

    return _body_intrinsic(emit)


@njit(cache=True)
def _fp8_output(A, a, B, b, nquads, d, revive, dst_daz):
    """One output of a TDP*F8PS: A's row from ``A[a]``, B's column from ``B[b]`` with a stride of
    16; ``d`` the dst value. Compiled once, apart from the loops that call it."""
    nan = d != d
    hi = np.int64(0)
    lo = np.int64(0)
    pinf = False
    ninf = False
    state = 0  # sde_revive: 0 none, 1 +, 2 -, 3 cancelled
    for q in range(nquads):
        for j in range(4):
            x = A[a + 4 * q + j]
            y = B[b + (4 * q + j) * _TILE]
            if x != x or y != y:
                nan = True
            elif math.isinf(x) or math.isinf(y):
                if x == 0 or y == 0:
                    nan = True
                else:
                    own = 2 if (x < 0) != (y < 0) else 1
                    if own == 2:
                        ninf = True
                    else:
                        pinf = True
                    state = own if (state == 0 or state == 3 or state == own) else 3
            else:
                p = x * y * _UNIT  # exact: at most 7 significant bits, below 2^58
                h = math.floor(p * _UNIT_INV)
                hi += np.int64(h)
                lo += np.int64(p - h * _UNIT)  # in [0, 2^32): 64 of them fit easily
        if revive and state == 3:
            nan = True  # cancelled at the end of a dword
    if revive:
        pinf, ninf = state == 1, state == 2
    elif pinf and ninf:
        nan = True
    if pinf:
        s = np.float32(math.inf)
    elif ninf:
        s = np.float32(-math.inf)
    else:
        s = round_scaled(hi, lo, -32)
    if dst_daz and d != 0 and abs(d) < 2.0**-126:
        d = np.float32(math.copysign(0.0, d))  # DAZ: a denormal dst reads as a zero
    r = add32(d, s)
    return _INDEF if (nan or r != r) else r


@njit(cache=True, inline="always")
def fp8_exact(A, a_off, lda, mr, nquads, B, b_off, C, c_off, ldc, nc, scratch, codes):
    """One TDP*F8PS of ``nquads`` quads, exactly as defined, for ``mr`` x ``nc`` outputs."""
    revive = codes[0] != 0
    dst_daz = codes[1] == 0
    for mm in range(mr):
        for n in range(nc):
            c = c_off + mm * ldc + n
            C[c] = _fp8_output(A, a_off + mm * lda, B, b_off + n, nquads, C[c], revive, dst_daz)
