"""AMX-TF32 (TMMULTF32PS): binary32 tiles multiplied at TF32 precision, one FP32 chain per step.

Each instruction of 16 K elements runs, per C element, ``tmp = +0; tmp = fma32(a[k], b[k], tmp)``
for its K elements in order (FTZ after rounding, denormal inputs kept), then
``C = add32(tmp, C)`` (a denormal C read as zero under ``tf32_dst_daz``). The operands arrive
already truncated to TF32 (packing: ``tilegemm.formats.TF32``), so the kernels never round an
input. Layout ``"f32"`` with groups of one: A panels ``[m][k]``, B blocks ``[k][n]``.

- Fast body (``tf32_rows``): C held in registers across a chunk of K steps, per step a vector
  ``tmp`` per row from +0 through 16 FMAs, then one add into C. It is exact under the proof of
  layout ``"f32"`` (``tilegemm.plan.float_proof`` with TF32's 11 significant bits): every product
  is exact in binary32 and no result can be tiny, so neither FTZ nor fusion changes a bit, and a
  padding product of the last step adds +0 to a ``tmp`` that is never -0 (it starts at +0 and
  nothing flushes). NaN bits are the one thing vector FMA code leaves to the compiler (which
  operand LLVM passes first), so a tile whose chunk ends with a NaN anywhere in C is run again
  by the exact body from its C before the chunk: a NaN, once there, stays to the end of the
  chain, and a chunk without one gave the exact bits.
- Exact body (``_exact_steps``): each operation on bit patterns and in binary64 with TwoSum
  (``exact.round_ftz``), NaN and infinity rules written out (the contract's order: a, b, then
  tmp, then C), the last step's own K elements only. It also runs the non-default switches:
  ``tf32_dst_daz=False`` and ``tf32_rounding="single"`` (the step's products summed exactly, as
  an expansion of binary64 partials, and rounded once). Its functions are compiled once as
  functions of their own, not inlined into each caller as Numba IR: inlined, the exact body
  made the first compile of the fast entry take minutes. The fast entry runs the default
  switches only (``fast_switches=False``), so it holds no exact body but the NaN redo.

The family is declared here, and found by its name (``families.get("tf32")``).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from . import exact, families, gemm, isa, rounding, targets, tiles, vector
from ._cache import lazy_vectorize, stamp_with_dependencies
from .exact import round_ftz, two_sum
from .families import TILE, Family, Shape
from .isa import _F32, _a_elem, _b_row, _const, _fn, _ptr, _vec, f32_from_bits
from .rounding import f32_bits
from .vector import ir_loop

__all__ = [
    "truncate",
    "FAMILY",
    "TF32_FAST",
    "TF32_EXACT",
    "tf32_rows",
    "gemm_tf32_fast",
    "gemm_tf32_exact",
    "tile_tf32",
]

# With 32 vector registers: 8 rows of one tmp and one C vector each (16 zmm) beside B and the
# broadcast A element, 8 independent chains for FMA units of latency 4. With 16 ymm: 2 rows of
# two vectors of each (8 registers).
FAMILY = families.declare(
    Family(
        name="tf32",
        stem="tf32",
        module="tf32",
        variant="tf32_fast",
        a_layout="f32",
        b_layout="f32",
        needs_proof=True,
        fast_switches=False,
        nans="fast",
        shapes={
            "avx512_vnni": Shape(8, 16, 16),
            "avx512": Shape(8, 16, 16),
            "avx2": Shape(2, 16, 8),
            "generic": Shape(2, 16, 8),
        },
        tile="tf32",
    )
)

_K = 16  # K elements of one instruction
_SIGN = np.uint32(0x80000000)
_ABS = np.uint32(0x7FFFFFFF)
_INF = np.uint32(0x7F800000)
_QUIET = np.uint32(0x00400000)
_INDEF = np.uint32(0xFFC00000)  # the x86 default NaN
_PARTS = 48  # binary64 partials of an exact sum of 16 products: far more than their exponent span needs


def tf32_rows(mr: int, width: int):
    """The fast body over ``mr`` rows x 16 columns, an intrinsic ``(A, a_off, lda, B, b_off, C,
    c_off, ldc, nsteps, a_step, b_step, S, s_off) -> int``: C held in registers across ``nsteps``
    K steps (step ``t`` reads the A panel at ``a_off + t * a_step`` and the B block at ``b_off + t
    * b_step``), per step ``tmp = +0``, 16 FMAs in K order, ``C = tmp + C``. The C rows it starts
    from go to ``S[s_off:]`` (16 values a row), and it returns whether the C it stores holds a NaN
    (then the exact body redoes the steps from ``S``)."""
    parts = TILE // width
    vt = _vec(_F32, width)

    @intrinsic
    def body(typingctx, A, a_off, lda, B, b_off, C, c_off, ldc, nsteps, a_step, b_step, S, s_off):
        sig = types.int64(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps, a_step, b_step, S, s_off)

        def codegen(context, builder, signature, args):
            ap, bp, cp, sp = (
                context.make_array(signature.args[i])(context, builder, args[i]).data for i in (0, 3, 5, 11)
            )
            fma = _fn(builder, f"llvm.fma.v{width}f32", vt, [vt, vt, vt])
            zero = ir.Constant(vt, [0.0] * width)

            def at(base, off, r, v, ld):
                return _ptr(
                    builder, base, builder.add(off, builder.add(builder.mul(ld, _const(r)), _const(width * v))), vt
                )

            cptr = [[at(cp, args[6], r, v, args[7]) for v in range(parts)] for r in range(mr)]
            start = [[builder.load(q, align=4) for q in row] for row in cptr]
            for r in range(mr):
                for v in range(parts):
                    builder.store(start[r][v], at(sp, args[12], r, v, _const(TILE)), align=4)

            def one(t, flat):
                a0 = builder.add(args[1], builder.mul(t, args[9]))
                b0 = builder.add(args[4], builder.mul(t, args[10]))
                rows = [builder.add(a0, builder.mul(args[2], _const(r))) for r in range(mr)]
                tmp = [[zero] * parts for _ in range(mr)]
                for k in range(_K):
                    bv = [_b_row(builder, bp, b0, k, width, v) for v in range(parts)]
                    for r in range(mr):
                        sa = _a_elem(builder, ap, rows[r], k, vt)
                        tmp[r] = [builder.call(fma, [sa, bv[v], tmp[r][v]]) for v in range(parts)]
                return [builder.fadd(tmp[r][v], flat[r * parts + v]) for r in range(mr) for v in range(parts)]

            acc = ir_loop(builder, args[8], one, [v for row in start for v in row])
            nan = None
            for i, v in enumerate(acc):
                builder.store(v, cptr[i // parts][i % parts], align=4)
                u = builder.fcmp_unordered("uno", v, v)
                nan = u if nan is None else builder.or_(nan, u)
            any_nan = builder.icmp_unsigned(
                "!=", builder.bitcast(nan, ir.IntType(width)), ir.Constant(ir.IntType(width), 0)
            )
            return builder.zext(any_nan, ir.IntType(64))

        return sig, codegen

    return body


@lazy_vectorize(["uint32(uint32)"], (rounding,))
def truncate(bits):
    """binary32 bits -> TF32's: a NaN gets its quiet bit (a signalling NaN is quieted, and no NaN
    becomes an infinity), then the low 13 significand bits are cleared (``tilegemm.formats.TF32``)."""
    return rounding.f32_to_tf32(bits)


@njit(cache=True, inline="always")
def _is_nan(x):
    return (x & _ABS) > _INF


@njit(cache=True)
def _round(s, t):
    """binary32 bits of the exact value s + t (RNE, FTZ after rounding)."""
    return f32_bits(round_ftz(s, t))


@njit(cache=True)
def _fma(a, b, t):
    """fma32(a, b, t) on bit patterns, x86's NaN order (a, b, then t)."""
    if _is_nan(a):
        return a | _QUIET
    if _is_nan(b):
        return b | _QUIET
    if _is_nan(t):
        return t
    a_inf, b_inf = (a & _ABS) == _INF, (b & _ABS) == _INF
    if (a_inf and (b & _ABS) == 0) or (b_inf and (a & _ABS) == 0):
        return _INDEF  # Inf * 0
    if a_inf or b_inf:
        sign = (a ^ b) & _SIGN
        if (t & _ABS) == _INF and (t & _SIGN) != sign:
            return _INDEF  # Inf - Inf
        return sign | _INF
    s, e = two_sum(f32_from_bits(a) * f32_from_bits(b), f32_from_bits(t))  # the product is exact in binary64
    return _round(s, e)


@njit(cache=True)
def _add(t, c):
    """add32(t, c) on bit patterns (c already read with DAZ where the switch says so)."""
    if _is_nan(t):
        return t
    if _is_nan(c):
        return c | _QUIET
    if (t & _ABS) == _INF and (c & _ABS) == _INF and (t & _SIGN) != (c & _SIGN):
        return _INDEF
    s, e = two_sum(f32_from_bits(t), f32_from_bits(c))
    return _round(s, e)


@njit(cache=True)
def _grow(parts, n, x):
    """Add ``x`` to the expansion ``parts[:n]`` (non-overlapping binary64 partials, increasing in
    magnitude; Shewchuk's grow-expansion, as Python's ``math.fsum`` keeps it): exact. Returns n."""
    i = 0
    for j in range(n):
        y = parts[j]
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            parts[i] = lo
            i += 1
        x = hi
    parts[i] = x
    return i + 1


@njit(cache=True)
def _single(A, ai, B, bj, nk, parts):
    """tmp of ``tf32_rounding="single"``: the step's ``nk`` products (A at ``ai + k``, B at
    ``bj + 16 k``) summed exactly and rounded once; NaN from the first product with a NaN operand
    (a before b), else the default NaN for Inf * 0 or opposite infinite products; an exact zero is
    +0, as the chain from +0 gives."""
    Ab, Bb = A.view(np.uint32), B.view(np.uint32)
    inf = np.uint32(0)  # bit 0: a +Inf product, bit 1: a -Inf product
    for k in range(nk):
        a, b = Ab[ai + k], Bb[bj + TILE * k]
        if _is_nan(a):
            return a | _QUIET
        if _is_nan(b):
            return b | _QUIET
    n = 0
    for k in range(nk):
        a, b = Ab[ai + k], Bb[bj + TILE * k]
        a_inf, b_inf = (a & _ABS) == _INF, (b & _ABS) == _INF
        if (a_inf and (b & _ABS) == 0) or (b_inf and (a & _ABS) == 0):
            return _INDEF
        if a_inf or b_inf:
            inf |= np.uint32(2) if (a ^ b) & _SIGN else np.uint32(1)
        elif inf == 0:
            n = _grow(parts, n, f32_from_bits(a) * f32_from_bits(b))
    if inf == 3:
        return _INDEF
    if inf != 0:
        return (_SIGN if inf == 2 else np.uint32(0)) | _INF
    # The sum's binary64 approximation from the top (faithful: math.fsum's first pass), then the
    # sign of what it leaves, exactly: the largest partial of (sum - hi) as an expansion.
    hi = 0.0
    i = n
    while i > 0:
        i -= 1
        x, y = hi, parts[i]
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            m = _grow(parts, i, lo)
            return _round(hi, parts[m - 1])
    return np.uint32(0) if hi == 0.0 else _round(hi, 0.0)


@njit(cache=True)
def _exact_steps(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, nsteps, a_step, b_step, k, kb0, codes):
    """The instruction sequence on bit patterns: steps ``kb0 ..`` of rows ``mr`` x columns ``nc``,
    each step over its own K elements (the last one shorter)."""
    Ab, Bb, Cb = A.view(np.uint32), B.view(np.uint32), C.view(np.uint32)
    dst_daz, single = codes[0] == 0, codes[1] == 1
    parts = np.empty(_PARTS, np.float64)
    for mm in range(mr):
        for n in range(nc):
            c = Cb[c_off + mm * ldc + n]
            for t in range(nsteps):
                nk = min(_K, k - (kb0 + t) * lda)
                ai = a_off + t * a_step + mm * lda
                bj = b_off + t * b_step + n
                if single:
                    tmp = _single(A, ai, B, bj, nk, parts)
                else:
                    tmp = np.uint32(0)
                    for kk in range(nk):
                        tmp = _fma(Ab[ai + kk], Bb[bj + TILE * kk], tmp)
                if dst_daz and (c & _INF) == 0:
                    c &= _SIGN
                c = _add(tmp, c)
            Cb[c_off + mm * ldc + n] = c


_SHAPE = targets.shape("tf32")
_ROWS = _SHAPE.rows
_fast_rows = tf32_rows(_SHAPE.rows, _SHAPE.width)


@njit(inline="always")
def _tile_fast(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, nsteps, a_step, b_step, k, kb0, codes):
    """The fast body over the chunk's steps, the exact body from the C block before them where a
    row group ends with a NaN; the default switches only (the others run the exact body). A
    partial tile runs on a 16 x 16 copy of its C block (A panels and B blocks are zero-padded)."""
    if codes[0] != 0 or codes[1] != 0:
        _exact_steps(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, nsteps, a_step, b_step, k, kb0, codes)
        return
    if mr == TILE and nc == TILE:
        _full_tile(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps, k, kb0, b_step, scratch)
        return
    work = np.zeros(TILE * TILE, C.dtype)
    for mm in range(mr):
        for n in range(nc):
            work[mm * TILE + n] = C[c_off + mm * ldc + n]
    _full_tile(A, a_off, lda, B, b_off, work, 0, TILE, nsteps, k, kb0, b_step, scratch)
    for mm in range(mr):
        for n in range(nc):
            C[c_off + mm * ldc + n] = work[mm * TILE + n]


@njit(inline="always")
def _tile_exact(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, nsteps, a_step, b_step, k, kb0, codes):
    _exact_steps(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, nsteps, a_step, b_step, k, kb0, codes)


@njit(inline="always")
def _full_tile(Af, a_off, lda, Bf, b_off, Cf, c_off, ldc, nsteps, k, kb0, block, save):
    """A full C tile for a chunk of steps (the row-of-superblocks loop's unit): the fast body on
    each group of ``_ROWS`` rows, and where one ends with a NaN in C, its rows again through the
    exact body from the C it started from (``save``, 256 values)."""
    for g in range(0, TILE, _ROWS):
        if _fast_rows(
            Af, a_off + g * lda, lda, Bf, b_off, Cf, c_off + g * ldc, ldc, nsteps, TILE * lda, block, save, 0
        ):
            for mm in range(_ROWS):
                for n in range(TILE):
                    Cf[c_off + (g + mm) * ldc + n] = save[mm * TILE + n]
            _exact_steps(
                Af,
                a_off + g * lda,
                lda,
                _ROWS,
                Bf,
                b_off,
                Cf,
                c_off + g * ldc,
                ldc,
                TILE,
                nsteps,
                TILE * lda,
                block,
                k,
                kb0,
                (0, 0),
            )


TF32_FAST = tiles.register_steps("tf32_fast", _tile_fast, tail=True)
TF32_EXACT = tiles.register_steps("tf32_exact", _tile_exact, tail=True)
# Rows of superblocks, 16 K steps per body call: one body call per 16 steps and C read once per
# 16 steps, where the superblock loop launches one per 8 steps and copies each tile's C block. A
# job spans at most 16 column tiles, so the chunk's B blocks (16 steps x 1 KiB a tile, 256 KiB)
# stay in L2 while the job's rows run across them, and a job holds at least _JOB_TILES row tiles,
# so each B block brought into L2 is used by 128 rows of A before it is evicted. The figures are
# in docs/performance.md.
TF32_ROWS = gemm.register_rows("tf32_rows", TILE, 16, _full_tile, span=16)
_JOB_TILES = 8
_ONE = np.zeros(1, np.int64)


@njit(cache=True, nogil=True)
def gemm_tf32_fast(w, nw, A, B, C, ia, ib, k, rows, cols, dst_daz, rounding):
    # The default switches only (FAMILY.fast_switches): the plan gives the others the exact entry.
    if dst_daz != 0 or rounding != 0:
        raise ValueError("gemm_tf32_fast runs the default switches only; the exact entry runs the others")
    gemm.drive(A, B, C, ia, ib, k, max(rows, _JOB_TILES), cols, TF32_ROWS, (dst_daz, rounding), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_tf32_exact(w, nw, A, B, C, ia, ib, k, rows, cols, dst_daz, rounding):
    gemm.drive(A, B, C, ia, ib, k, rows, cols, TF32_EXACT, (dst_daz, rounding), 1, w, nw)


@njit(cache=True)
def tile_tf32(A, B, C, k, dst_daz, rounding):
    """One TMMULTF32PS on one tile (the tile API), exact, on the calling thread."""
    gemm.drive(A, B, C, _ONE, _ONE, k, 1, 1, TF32_EXACT, (dst_daz, rounding), 1, 0, 1)


for _fn_ in (gemm_tf32_fast, gemm_tf32_exact, tile_tf32):
    stamp_with_dependencies(_fn_, (gemm, tiles, isa, exact, rounding, vector, families, targets))
