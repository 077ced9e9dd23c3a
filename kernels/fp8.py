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
- fast over several steps (``fp8_steps_rows``, targets with 32 vector registers): the same sums,
  with C in registers across the K steps of one call; it equals one ``fp8_tile_rows`` per step
  (its docstring says why).

Partial tiles and the K tail: A and B are zero-padded, and 0 * 0 adds +0, which changes no bit.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils

from .exact import add32, round_scaled
from .isa import _body
from .vector import _F32, _I32, _TILE, _body_intrinsic, _const, _ptr, _splat, ir_loop

__all__ = ["FP8_EXACT", "FP8_FAST", "fp8_tile_rows", "fp8_steps_rows", "fp8_exact"]

# Variants of the tile multiply (``variant`` in the kernel contract, ``tiles.tile_multiply``).
FP8_EXACT, FP8_FAST = 20, 21
_K = 64  # products along K in one full tile multiply
_UNROLL = 4  # products per trip of the fast body's K loop
_F64 = ir.DoubleType()
_INDEF = np.float32(-np.float32(np.nan))  # 0xFFC00000, the x86 default NaN
_UNIT = 2.0**32  # products in units of 2^-32
_UNIT_INV = 2.0**-32


def _k_sums(builder, width, mr, ap, bp, rows, b_off):
    """The IR loop of one full step: per row, ``16 / width`` binary64 vectors of exact sums of 64
    products (A elements broadcast, B rows of 16 columns), ``_UNROLL`` products per trip, which
    keeps the IR (and the compile) small. Returns ``sums[r][v]``."""
    vd = ir.VectorType(_F64, width)
    parts = _TILE // width
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vd, [vd] * 3), f"llvm.fma.v{width}f64")

    def trip(t, flat):
        acc = [flat[r * parts : (r + 1) * parts] for r in range(mr)]
        for u in range(_UNROLL):
            k = builder.add(builder.mul(t, _const(_UNROLL)), _const(u))
            bk = builder.add(b_off, builder.mul(k, _const(_TILE)))
            bv = [
                builder.load(_ptr(builder, bp, builder.add(bk, _const(width * v)), vd), align=8) for v in range(parts)
            ]
            for r in range(mr):
                a = _splat(builder, builder.load(_ptr(builder, ap, builder.add(rows[r], k))), vd)
                acc[r] = [builder.call(fma, [a, bv[v], acc[r][v]]) for v in range(parts)]
        return [x for row in acc for x in row]

    flat = ir_loop(builder, _K // _UNROLL, trip, [ir.Constant(vd, [0.0] * width)] * (mr * parts))
    return [flat[r * parts : (r + 1) * parts] for r in range(mr)]


def _daz(builder, c):
    """Float32 vector ``c`` with every denormal read as a zero of its sign (on the bits)."""
    vi = ir.VectorType(_I32, c.type.count)
    bits = builder.bitcast(c, vi)
    tiny = builder.icmp_unsigned("==", builder.and_(bits, _splat_i(vi, 0x7F800000)), _splat_i(vi, 0))
    return builder.bitcast(builder.select(tiny, builder.and_(bits, _splat_i(vi, 0x80000000)), bits), c.type)


def _store_indef(builder, x, ptr):
    """Store float32 vector ``x``, a NaN lane as the default NaN."""
    indef = builder.bitcast(_splat_i(ir.VectorType(_I32, x.type.count), 0xFFC00000), x.type)
    builder.store(builder.select(builder.fcmp_unordered("uno", x, x), indef, x), ptr, align=4)


def _splat_i(vi, x):
    return ir.Constant(vi, [x] * vi.count)


def fp8_tile_rows(mr: int, width: int = 4):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc)``: one full TDP*F8PS for ``mr``
    rows x 16 columns of C, under the fast-path proof (module docstring). ``width``: doubles per
    vector (8: zmm, 4: ymm), a divisor of 16. C is loaded, read with DAZ, added to and stored,
    as one instruction does (the body for 16 vector registers, which the sums fill)."""
    vf = ir.VectorType(_F32, width)

    def emit(builder, sig, ap, bp, cp, rows, b_off, crow):
        sums = _k_sums(builder, width, mr, ap, bp, [rows(r) for r in range(mr)], b_off)
        for r in range(mr):
            for v, acc in enumerate(sums[r]):
                cptr = _ptr(builder, cp, builder.add(crow(r), _const(width * v)), vf)
                s = builder.fptrunc(acc, vf)  # the exact sum, rounded once (RNE)
                _store_indef(builder, builder.fadd(_daz(builder, builder.load(cptr, align=4)), s), cptr)

    return _body_intrinsic(emit)


def fp8_steps_rows(mr: int, width: int = 8):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps, a_step, b_step)``:
    ``nsteps`` consecutive full TDP*F8PS for ``mr`` rows x 16 columns of C (``isa._body``: step
    ``t`` reads the A panel at ``a_off + t * a_step`` and the B block at ``b_off + t * b_step``),
    under the fast-path proof, with C in registers across the steps as float32 vectors of ``2 *
    width`` lanes (two rounded binary64 vectors joined): per step one ``fptrunc`` and one
    ``fadd``. This equals ``nsteps`` calls of :func:`fp8_tile_rows`: DAZ acts only on the first
    step's C (every later C is a sum ``d + s`` of a C read with DAZ and a step sum that is +0
    or at least 2^-32, never denormal: the module docstring says why), and a NaN C stays NaN through
    every later ``fadd``, so mapping NaN to the default NaN once, at the store, gives the same
    bits."""
    vf = ir.VectorType(_F32, width)
    vc = ir.VectorType(_F32, 2 * width)
    halves = _TILE // width // 2
    join = ir.Constant(ir.VectorType(_I32, 2 * width), list(range(2 * width)))

    def emit(builder, sig, ap, bp, cp, crow, over_steps):
        cptr = [
            [_ptr(builder, cp, builder.add(crow(r), _const(2 * width * h)), vc) for h in range(halves)]
            for r in range(mr)
        ]

        def one_step(arow, b_off, c):
            sums = _k_sums(builder, width, mr, ap, bp, [arow(r) for r in range(mr)], b_off)
            out = []
            for r in range(mr):
                s = [builder.fptrunc(x, vf) for x in sums[r]]  # the one rounding (RNE)
                out.append(
                    [builder.fadd(c[r][h], builder.shuffle_vector(s[2 * h], s[2 * h + 1], join)) for h in range(halves)]
                )
            return out

        final = over_steps(one_step, [[_daz(builder, builder.load(p, align=4)) for p in row] for row in cptr])
        for r in range(mr):
            for h in range(halves):
                _store_indef(builder, final[r][h], cptr[r][h])

    return _body(emit)


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
