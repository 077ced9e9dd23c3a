"""PyTorch's own bf16 CPU gemm kernels (an AVX2 server), in their order of float32 sums.

The compiled twins of :mod:`tilegemm.reference.aten` (its docstring gives the three orders, which
steps are fused, and their source): ``notrans`` (four partial sums), ``transa`` (the AVX2 dot product's 8 x 8 lanes,
its 8-lane tail and its scalar tail) and ``sequential``. Every step is one binary32 operation,
round to nearest even with gradual underflow, computed as a binary64 sum rounded once
(:func:`r32`): the operands are bf16 values, whose products are exact in binary64, and the
partial sums are binary32 values held exactly in binary64.

:func:`r32` rounds without a binary32 operation that MXCSR could flush: a result of binary32's
normal range goes through ``cvtsd2ss`` (which FTZ does not touch there), and a smaller one is
rounded on the 2^-149 grid in binary64. The operands reach the kernels as bf16 codes (uint16),
read through ``V``, the table of every code's value as float64 (:data:`VALUES`, built from the
fields, so no MXCSR.DAZ can touch a denormal): no pass over the operands converts them first.
The results are written as float32, exactly (a denormal result is flushed only if the caller set MXCSR.FTZ).

:func:`transa_fast` and :func:`notrans_fast` are ``transa`` and ``notrans`` in the host's binary32
arithmetic, for operands proved to keep every value in flight a binary32 normal or zero (their
docstrings).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .vector import _data, ir_loop

_TWO_149 = 2.0**149
_TWO_M149 = 2.0**-149
_MIN_NORMAL = 2.0**-126


def _values() -> np.ndarray:
    """Every bf16 code's value as float64 (denormals, infinities, NaNs with their payloads),
    built from the fields: no binary32 denormal passes through a conversion MXCSR.DAZ could zero."""
    bits = np.arange(1 << 16, dtype=np.uint32)
    e = ((bits >> 7) & 0xFF).astype(np.int64)
    m = (bits & 0x7F).astype(np.int64)
    mag = np.ldexp(np.where(e > 0, m + 128, m).astype(np.float64), np.where(e > 0, e - 134, -133))
    top = e == 0xFF  # infinities and NaNs: the conversion keeps the payload (quieted)
    with np.errstate(invalid="ignore"):
        mag[top] = np.abs((bits[top] << np.uint32(16)).view(np.float32).astype(np.float64))
    return np.where(bits & 0x8000, -mag, mag)


#: The float64 value of every bf16 code, indexed by the code (the kernels' ``V``).
VALUES = _values()
# Output columns (notrans) and rows of the weight (transa) per parallel job.
_NOTRANS_COLS = 256
_NOTRANS_ROWS = 4
_TRANSA_COLS = 8


@njit(cache=True)
def r32(s):
    """The binary32 value nearest ``s`` (ties to even, gradual underflow), as a float64."""
    r = np.float64(np.float32(s))
    tiny = np.rint(s * _TWO_149) * _TWO_M149
    return tiny if abs(s) < _MIN_NORMAL else r


@njit(cache=True)
def mul_add(acc, a, b):
    """``round32(acc + round32(a * b))``: the unfused step (``a * b`` is exact in binary64)."""
    return r32(acc + r32(a * b))


@njit(cache=True, parallel=True)
def notrans(A, B, V, out):
    """``out[b] = A[b] @ B[b]`` (A (nb, M, K), B (nb, K, N), out float32 (nb, M, N)) in
    ``sum``'s order: product ``l`` into partial ``l % 4`` (the last ``K % 4`` into partial 0),
    then ``((p0 + p1) + p2) + p3``."""
    nb, M, K = A.shape
    N = B.shape[2]
    mblocks = (M + _NOTRANS_ROWS - 1) // _NOTRANS_ROWS
    nblocks = (N + _NOTRANS_COLS - 1) // _NOTRANS_COLS
    main = K - K % 4
    for job in prange(nb * mblocks * nblocks):
        b = job // (mblocks * nblocks)
        rest = job % (mblocks * nblocks)
        i0 = (rest // nblocks) * _NOTRANS_ROWS
        j0 = (rest % nblocks) * _NOTRANS_COLS
        rows = min(i0 + _NOTRANS_ROWS, M) - i0
        w = min(j0 + _NOTRANS_COLS, N) - j0
        acc = np.zeros((_NOTRANS_ROWS, 4, _NOTRANS_COLS))
        for l in range(main):
            q = l % 4
            for i in range(rows):
                a = V[A[b, i0 + i, l]]
                for j in range(w):
                    acc[i, q, j] = r32(acc[i, q, j] + a * V[B[b, l, j0 + j]])
        for l in range(main, K):  # the tail: products rounded, then added
            for i in range(rows):
                a = V[A[b, i0 + i, l]]
                for j in range(w):
                    acc[i, 0, j] = mul_add(acc[i, 0, j], a, V[B[b, l, j0 + j]])
        for i in range(rows):
            for j in range(w):
                s = r32(r32(r32(acc[i, 0, j] + acc[i, 1, j]) + acc[i, 2, j]) + acc[i, 3, j])
                out[b, i0 + i, j0 + j] = np.float32(s)


@njit(cache=True)
def _lanes(v, o):
    """The horizontal sum of the 8 lanes ``v[o:o + 8]``: ``h[i] = v[i] + v[i + 4]``, then
    ``(h0 + h2) + (h1 + h3)``."""
    h0 = r32(v[o] + v[o + 4])
    h1 = r32(v[o + 1] + v[o + 5])
    h2 = r32(v[o + 2] + v[o + 6])
    h3 = r32(v[o + 3] + v[o + 7])
    return r32(r32(h0 + h2) + r32(h1 + h3))


@njit(cache=True, inline="always")
def _transa_shape(A, W):
    """transa's sizes, its jobs (a batch and a block of columns each) and its K blocks' ends:
    blocks of 64 up to ``main``, of 16 up to ``mid``, then the scalar tail."""
    nb, M, K = A.shape
    N = W.shape[1]
    return nb, M, K, N, (N + _TRANSA_COLS - 1) // _TRANSA_COLS, K - K % 64, K - K % 16


@njit(cache=True, parallel=True)
def transa(A, W, V, out):
    """``out[b] = A[b] @ W[b].T`` (A (nb, M, K), W (nb, N, K), out float32 (nb, M, N)) in the
    AVX2 dot product's order (:mod:`tilegemm.reference.aten`)."""
    nb, M, K, N, nblocks, main, mid = _transa_shape(A, W)
    for job in prange(nb * nblocks):
        b = job // nblocks
        j0 = (job % nblocks) * _TRANSA_COLS
        regs = np.zeros(64)
        tail = np.zeros(8)
        for j in range(j0, min(j0 + _TRANSA_COLS, N)):
            for i in range(M):
                regs[:] = 0.0
                for k0 in range(0, main, 64):
                    for t in range(64):  # register t // 8, lane t % 8
                        regs[t] = r32(regs[t] + V[A[b, i, k0 + t]] * V[W[b, j, k0 + t]])
                for step in (4, 2, 1):  # the register tree: r[i] += r[i + step]
                    for t in range(8 * step):
                        regs[t] = r32(regs[t] + regs[t + 8 * step])
                total = _lanes(regs, 0)
                tail[:] = 0.0
                for k0 in range(main, mid, 8):
                    for t in range(8):
                        tail[t] = r32(tail[t] + V[A[b, i, k0 + t]] * V[W[b, j, k0 + t]])
                total = r32(total + _lanes(tail, 0))  # also with no block of 16: -0 + +0 = +0
                for k in range(mid, K):
                    total = mul_add(total, V[A[b, i, k]], V[W[b, j, k]])
                out[b, i, j] = np.float32(total)


@intrinsic
def _fma32(typingctx, a, b, c):
    """binary32 ``a * b + c`` rounded once: ``llvm.fma.f32`` (VFMADD231PS on AVX2)."""
    if not all(t == types.float32 for t in (a, b, c)):
        return None

    def codegen(context, builder, signature, args):
        f32 = ir.FloatType()
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32] * 3), "llvm.fma.f32")
        return builder.call(fma, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


#: transa_fast's register tile, rows of A by rows of W: one 8-lane accumulator per output (12 of
#: AVX2's 16 vector registers).
_TILE = (3, 4)
#: Rows of W per parallel job of transa_fast (a whole number of tiles).
_FAST_COLS = 32
#: Rows of A below which transa_fast reads W as it lies, one output at a time, instead of
#: packing it: packing costs a pass over W whatever M is, which the tiles pay back from about 20
#: rows (1 x 4096 x 4096 and up, one thread, Zen 3: 16 rows 29 ms tiled and 24 ms one at a time,
#: 32 rows 41 ms and 56 ms).
_FEW_ROWS = 20


def _packed_pass(mr: int, nr: int):
    """An intrinsic ``(Ap, a_off, Wp, w_off, blocks, acc, slot)``: one of ATen's eight registers
    (its K indices ``64 q + 8 r + lane``) over ``blocks`` (at least 1) 64-blocks from +0, for a tile
    of ``mr`` rows of A by ``nr`` of W, an ``llvm.fma`` per output and block in K order. The
    operands are packed (:func:`_pack_rows`): block ``q``'s lanes of the tile's rows lie together
    from ``a_off + q * mr * 8`` and ``w_off + q * nr * 8``, so the pass reads two streams. The
    accumulator of output ``o = i * nr + j`` goes to ``acc[slot + 8 * o:][:8]``."""

    @intrinsic
    def run(typingctx, Ap, a_off, Wp, w_off, blocks, acc, slot):
        if not all(isinstance(x, types.Array) and x.dtype == types.float32 for x in (Ap, Wp, acc)):
            return None
        sig = types.void(Ap, a_off, Wp, w_off, blocks, acc, slot)

        def codegen(context, builder, signature, args):
            ap, wp, cp = (_data(context, builder, signature.args[i], args[i]) for i in (0, 2, 5))
            a0, w0, n, s0 = (context.cast(builder, args[i], signature.args[i], types.int64) for i in (1, 3, 4, 6))
            i64 = ir.IntType(64)
            vt = ir.VectorType(ir.FloatType(), 8)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt] * 3), "llvm.fma.v8f32")

            def ptr(base, off):
                return builder.bitcast(builder.gep(base, [off]), vt.as_pointer())

            def step(q, acc_):
                ao = builder.add(a0, builder.mul(q, ir.Constant(i64, mr * 8)))
                wo = builder.add(w0, builder.mul(q, ir.Constant(i64, nr * 8)))
                a = [builder.load(ptr(ap, builder.add(ao, ir.Constant(i64, 8 * i))), align=4) for i in range(mr)]
                out = list(acc_)
                for j in range(nr):
                    w = builder.load(ptr(wp, builder.add(wo, ir.Constant(i64, 8 * j))), align=4)
                    for i in range(mr):
                        out[i * nr + j] = builder.call(fma, [a[i], w, acc_[i * nr + j]])
                return out

            final = ir_loop(builder, n, step, [ir.Constant(vt, [0.0] * 8)] * (mr * nr))
            for o, v in enumerate(final):
                builder.store(v, ptr(cp, builder.add(s0, ir.Constant(i64, 8 * o))), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return run


_pass_tile = _packed_pass(*_TILE)


@intrinsic
def _chains64(typingctx, A, a_off, W, w_off, blocks, regs):
    """One output's 64 accumulators (register ``t // 8``, lane ``t % 8``) over ``blocks`` (at
    least 1) blocks of 64 K indices from +0: eight 8-lane vectors of ``llvm.fma``, held in
    registers across the blocks; then the register tree (``r[i] += r[i + step]`` for step 4, 2,
    1), ``r[0]`` into ``regs[0:8]``. ``A``: float32 values; ``W``: bf16 codes, widened in the
    registers (the code in the high half of the float32 bits: exact), so that a product of few
    rows reads W once, as it lies. Both flat, the chains' operands from ``a_off`` and ``w_off``."""
    if not all(isinstance(x, types.Array) and x.dtype == types.float32 for x in (A, regs)):
        return None
    if not (isinstance(W, types.Array) and W.dtype == types.uint16):
        return None
    sig = types.void(A, a_off, W, w_off, blocks, regs)

    def codegen(context, builder, signature, args):
        ap, wp, rp = (_data(context, builder, signature.args[i], args[i]) for i in (0, 2, 5))
        a0, w0, n = (context.cast(builder, args[i], signature.args[i], types.int64) for i in (1, 3, 4))
        i64 = ir.IntType(64)
        vt = ir.VectorType(ir.FloatType(), 8)
        vh = ir.VectorType(ir.IntType(16), 8)
        vi = ir.VectorType(ir.IntType(32), 8)
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt] * 3), "llvm.fma.v8f32")

        def step(q, acc):
            k0 = builder.mul(q, ir.Constant(i64, 64))
            out = []
            for r in range(8):
                k = builder.add(k0, ir.Constant(i64, 8 * r))
                a = builder.load(builder.bitcast(builder.gep(ap, [builder.add(a0, k)]), vt.as_pointer()), align=4)
                h = builder.load(builder.bitcast(builder.gep(wp, [builder.add(w0, k)]), vh.as_pointer()), align=2)
                w = builder.bitcast(builder.shl(builder.zext(h, vi), ir.Constant(vi, [16] * 8)), vt)
                out.append(builder.call(fma, [a, w, acc[r]]))
            return out

        acc = ir_loop(builder, n, step, [ir.Constant(vt, [0.0] * 8)] * 8)
        for half in (4, 2, 1):
            acc = [builder.fadd(acc[r], acc[r + half]) for r in range(half)]
        builder.store(acc[0], builder.bitcast(rp, vt.as_pointer()), align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _tree32(typingctx, acc, T, o, regs):
    """ATen's register tree (``r[i] += r[i + step]`` for step 4, 2, 1, lane by lane, as 8-lane
    vector adds) over output ``o``'s eight accumulators, register ``r``'s at
    ``acc[(r * T + o) * 8:][:8]`` for a tile of ``T`` outputs: ``r[0]`` into ``regs[0:8]``."""
    if not all(isinstance(x, types.Array) and x.dtype == types.float32 for x in (acc, regs)):
        return None
    sig = types.void(acc, T, o, regs)

    def codegen(context, builder, signature, args):
        cp, rp = (_data(context, builder, signature.args[i], args[i]) for i in (0, 3))
        i64 = ir.IntType(64)
        T_, o_ = (context.cast(builder, args[i], signature.args[i], types.int64) for i in (1, 2))
        vt = ir.VectorType(ir.FloatType(), 8)

        def at(r):
            off = builder.mul(builder.add(builder.mul(ir.Constant(i64, r), T_), o_), ir.Constant(i64, 8))
            return builder.load(builder.bitcast(builder.gep(cp, [off]), vt.as_pointer()), align=4)

        v = [at(r) for r in range(8)]
        for half in (4, 2, 1):
            v = [builder.fadd(v[r], v[r + half]) for r in range(half)]
        builder.store(v[0], builder.bitcast(rp, vt.as_pointer()), align=4)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def _lanes32(v, o):
    """:func:`_lanes` in binary32 arithmetic."""
    return (v[o] + v[o + 4] + (v[o + 2] + v[o + 6])) + (v[o + 1] + v[o + 5] + (v[o + 3] + v[o + 7]))


@njit(cache=True)
def _pack_rows(X, b, rows, r0, n, nblk, P, p0):
    """Rows ``r0 .. r0 + n - 1`` of ``X[b]`` (bf16 codes; a row past ``rows`` repeats the last
    one) widened to float32 bits (the code in the high half: exact) in ``P[p0:]`` (uint32), laid
    out ``[register r][block q][row][lane]``: the K index ``64 q + 8 r + lane`` of each row, so
    that a pass of one register over the tile reads them in order."""
    for i in range(n):
        row = min(r0 + i, rows - 1)
        for q in range(nblk):
            for r in range(8):
                base = p0 + ((r * nblk + q) * n + i) * 8
                k = 64 * q + 8 * r
                for t in range(8):
                    P[base + t] = np.uint32(X[b, row, k + t]) << np.uint32(16)


@njit(cache=True, inline="always")
def _finish32(A, W, b, i, j, V, regs, tail, main, mid, K):
    """Output ``(b, i, j)`` after its 64 chains' tree (``regs``): the lanes' sum, the 8-lane
    tail's chains and their sum, then the scalar tail, unfused (the product rounded, then added)."""
    total = _lanes32(regs, 0)
    for t in range(8):
        tail[t] = 0
    for k0 in range(main, mid, 8):
        for t in range(8):
            tail[t] = _fma32(np.float32(V[A[b, i, k0 + t]]), np.float32(V[W[b, j, k0 + t]]), tail[t])
    total = total + _lanes32(tail, 0)  # also with no block of 16: -0 + +0 = +0
    for k in range(mid, K):
        total = total + np.float32(V[A[b, i, k]]) * np.float32(V[W[b, j, k]])
    return total


@njit(cache=True, parallel=True)
def transa_fast(A, W, V, out):
    """:func:`transa`'s order in the host's binary32 arithmetic: its fused multiply-adds, adds
    and (in the scalar tail) multiplies, the same operations on the same operands as ATen's.

    Only for operands the caller has proved safe (``tilegemm.onednn.chains.binary32_steps_hold``):
    no denormal, infinity or NaN among them, every product zero or a multiple of 2^-126 and no sum
    able to overflow. Then every value in flight is zero or a binary32 normal that is a multiple of
    2^-126, so no result is denormal, infinite or NaN: MXCSR's FTZ and DAZ and the host's own
    default NaN cannot touch a bit, and the hardware's rounding is the one rounding of each step.
    ``A`` (nb, M, K) and ``W`` (nb, N, K): bf16 codes, read through ``V`` (:data:`VALUES`; every
    value they may hold is exact in float32).

    The outputs go in register tiles (:data:`_TILE`), each register of ATen's eight one pass over
    packed copies of the tile's rows; a tile's rows past M or N repeat the last row and are
    computed, not stored. Fewer rows of A than :data:`_FEW_ROWS` go one output at a time. Each
    output's chains are the same operations in the same order whichever way it goes."""
    nb, M, K = A.shape
    N = W.shape[1]
    main, mid = K - K % 64, K - K % 16
    nblk = main // 64
    mr, nr = _TILE
    if M < _FEW_ROWS:
        _transa_rows(A, W, V, out, main, mid)
        return
    mtiles = (M + mr - 1) // mr
    per_row = 8 * nblk * 8  # floats of one packed row
    Ap = np.empty(nb * mtiles * mr * per_row, np.float32)
    Au = Ap.view(np.uint32)
    for t in prange(nb * mtiles):
        _pack_rows(A, t // mtiles, M, (t % mtiles) * mr, mr, nblk, Au, t * mr * per_row)
    jobs = (N + _FAST_COLS - 1) // _FAST_COLS
    for job in prange(nb * jobs):
        b = job // jobs
        j0 = (job % jobs) * _FAST_COLS
        j1 = min(j0 + _FAST_COLS, N)
        ntiles = (j1 - j0 + nr - 1) // nr
        Wp = np.empty(ntiles * nr * per_row, np.float32)
        Wu = Wp.view(np.uint32)
        for jt in range(ntiles):
            _pack_rows(W, b, N, j0 + jt * nr, nr, nblk, Wu, jt * nr * per_row)
        regs = np.zeros(8, np.float32)
        tail = np.empty(8, np.float32)
        acc = np.empty(8 * mr * nr * 8, np.float32)
        for it in range(mtiles):
            i0 = it * mr
            a_tile = (b * mtiles + it) * mr * per_row
            for jt in range(ntiles):
                jj0 = j0 + jt * nr
                if nblk:
                    for r in range(8):
                        a_off = a_tile + r * nblk * mr * 8
                        w_off = jt * nr * per_row + r * nblk * nr * 8
                        _pass_tile(Ap, a_off, Wp, w_off, nblk, acc, r * mr * nr * 8)
                for ii in range(min(mr, M - i0)):
                    for jj in range(min(nr, j1 - jj0)):
                        if nblk:
                            _tree32(acc, mr * nr, ii * nr + jj, regs)
                        out[b, i0 + ii, jj0 + jj] = _finish32(A, W, b, i0 + ii, jj0 + jj, V, regs, tail, main, mid, K)


@njit(cache=True, parallel=True)
def _transa_rows(A, W, V, out, main, mid):
    """:func:`transa_fast` for a few rows of A: one output at a time, its 64 chains in registers
    (:func:`_chains64`), W read once as it lies. Packing W would cost more than the product."""
    nb, M, K = A.shape
    N = W.shape[1]
    Ac = A.reshape(A.size)
    Af = np.empty(A.size, np.uint32)
    for x in range(A.size):
        Af[x] = np.uint32(Ac[x]) << np.uint32(16)
    Aw = Af.view(np.float32)
    Wf = W.reshape(W.size)
    jobs = (N + _FAST_COLS - 1) // _FAST_COLS
    for job in prange(nb * jobs):
        b = job // jobs
        j0 = (job % jobs) * _FAST_COLS
        regs = np.zeros(8, np.float32)
        tail = np.empty(8, np.float32)
        for j in range(j0, min(j0 + _FAST_COLS, N)):
            for i in range(M):
                if main:
                    _chains64(Aw, (b * M + i) * K, Wf, (b * N + j) * K, main // 64, regs)
                out[b, i, j] = _finish32(A, W, b, i, j, V, regs, tail, main, mid, K)


#: notrans_fast's register tile: rows of A by 8 columns, times ATen's four partial sums (12 of
#: AVX2's 16 vector registers).
_NT_ROWS = 3
#: 8-column panels of B per parallel job of notrans_fast: K x 32 columns stay in L2 while every
#: row of A passes.
_NT_PANELS = 4


@intrinsic
def _notrans_tile(typingctx, A, a_offs, B, b_off, ldb, K, acc):
    """ATen's ``notrans`` order for the rows of ``A`` from the flat offsets ``a_offs`` (float32, K
    contiguous) by 8 columns of ``B`` from ``b_off`` (float32, row stride ``ldb``), lane by lane:
    four partial sums from +0 (product ``l`` of the first ``K - K % 4`` into partial ``l % 4``, an
    ``llvm.fma`` each), the tail's products rounded and added into partial 0, then
    ``((p0 + p1) + p2) + p3``; row ``i``'s 8 results into ``acc[8 * i:][:8]``."""
    if not all(isinstance(x, types.Array) and x.dtype == types.float32 for x in (A, B, acc)):
        return None
    if not (isinstance(a_offs, types.UniTuple) and isinstance(a_offs.dtype, types.Integer)):
        return None
    rows = a_offs.count
    sig = types.void(A, a_offs, B, b_off, ldb, K, acc)

    def codegen(context, builder, signature, args):
        ap, bp, cp = (_data(context, builder, signature.args[i], args[i]) for i in (0, 2, 6))
        i64 = ir.IntType(64)
        a0 = [context.cast(builder, builder.extract_value(args[1], i), a_offs.dtype, types.int64) for i in range(rows)]
        b0, ld, k = (context.cast(builder, args[i], signature.args[i], types.int64) for i in (3, 4, 5))
        vt = ir.VectorType(ir.FloatType(), 8)
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt] * 3), "llvm.fma.v8f32")
        undef = ir.Constant(vt, ir.Undefined)
        lanes0 = ir.Constant(ir.VectorType(ir.IntType(32), 8), [0] * 8)

        def operands(l):
            row = builder.gep(bp, [builder.add(b0, builder.mul(l, ld))])
            bv = builder.load(builder.bitcast(row, vt.as_pointer()), align=4)
            av = []
            for i in range(rows):
                a = builder.load(builder.gep(ap, [builder.add(a0[i], l)]), align=4)
                a = builder.insert_element(undef, a, ir.Constant(ir.IntType(32), 0))
                av.append(builder.shuffle_vector(a, undef, lanes0))  # broadcast
            return av, bv

        def quad(t, acc_):
            out = list(acc_)
            for q in range(4):
                av, bv = operands(builder.add(builder.mul(t, ir.Constant(i64, 4)), ir.Constant(i64, q)))
                for i in range(rows):
                    out[q * rows + i] = builder.call(fma, [av[i], bv, acc_[q * rows + i]])
            return out

        def tail(t, p0):
            av, bv = operands(builder.add(main, t))
            return [builder.fadd(p0[i], builder.fmul(av[i], bv)) for i in range(rows)]

        def maybe_loop(trips, body, init):
            """``ir_loop`` where ``trips`` may be 0: its values, or ``init`` unchanged."""
            before = builder.block
            with builder.if_then(builder.icmp_signed(">", trips, ir.Constant(i64, 0))):
                done = ir_loop(builder, trips, body, init)
                last = builder.block
            merged = []
            for v0, v1 in zip(init, done):
                ph = builder.phi(vt)
                ph.add_incoming(v0, before)
                ph.add_incoming(v1, last)
                merged.append(ph)
            return merged

        zero = ir.Constant(vt, [0.0] * 8)
        quads = builder.sdiv(k, ir.Constant(i64, 4))
        main = builder.mul(quads, ir.Constant(i64, 4))
        p = maybe_loop(quads, quad, [zero] * (4 * rows))
        p0 = maybe_loop(builder.sub(k, main), tail, p[:rows])
        for i in range(rows):
            total = builder.fadd(builder.fadd(builder.fadd(p0[i], p[rows + i]), p[2 * rows + i]), p[3 * rows + i])
            builder.store(total, builder.bitcast(builder.gep(cp, [ir.Constant(i64, 8 * i)]), vt.as_pointer()), align=4)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, parallel=True)
def notrans_fast(A, B, out):
    """:func:`notrans`'s order in the host's binary32 arithmetic, for operands proved safe as for
    :func:`transa_fast` (``tilegemm.onednn.chains.binary32_steps_hold``): the four partial sums'
    fused multiply-adds, the tail's products rounded and then added into partial 0, and
    ``((p0 + p1) + p2) + p3``, the same operations on the same operands as ATen's. ``A`` (nb, M,
    K) and ``B`` (nb, K, N): bf16 codes, widened first (exactly: the code in the high half of the
    float32 bits; B's rows padded to whole 8-lane vectors). The outputs go in tiles of
    :data:`_NT_ROWS` rows by 8 columns (:func:`_notrans_tile`); a tile's rows past M repeat the
    last row, and are computed, not stored."""
    nb, M, K = A.shape
    N = B.shape[2]
    panels = (N + 7) // 8
    Au = np.empty(A.size, np.uint32)
    Ac = A.reshape(A.size)
    for x in range(A.size):
        Au[x] = np.uint32(Ac[x]) << np.uint32(16)
    Bu = np.zeros(nb * panels * K * 8, np.uint32)  # [b][panel][l][8 columns]
    for bl in prange(nb * K):
        b, l = bl // K, bl % K
        for j in range(N):
            Bu[((b * panels + j // 8) * K + l) * 8 + j % 8] = np.uint32(B[b, l, j]) << np.uint32(16)
    Af, Bf = Au.view(np.float32), Bu.view(np.float32)
    R = _NT_ROWS
    blocks = (panels + _NT_PANELS - 1) // _NT_PANELS
    for job in prange(nb * blocks):
        b = job // blocks
        p0 = (job % blocks) * _NT_PANELS
        acc = np.empty(R * 8, np.float32)
        for i0 in range(0, M, R):
            rows = (min(i0, M - 1), min(i0 + 1, M - 1), min(i0 + 2, M - 1))
            a_offs = ((b * M + rows[0]) * K, (b * M + rows[1]) * K, (b * M + rows[2]) * K)
            for pn in range(p0, min(p0 + _NT_PANELS, panels)):
                _notrans_tile(Af, a_offs, Bf, (b * panels + pn) * K * 8, 8, K, acc)
                j0 = pn * 8
                for ii in range(min(R, M - i0)):
                    for jj in range(min(8, N - j0)):
                        out[b, i0 + ii, j0 + jj] = acc[ii * 8 + jj]


@njit(cache=True)
def exponent_range(codes):
    """The smallest and largest biased exponent of the nonzero bf16 ``codes`` (flat; 255 for NaN
    and infinity), and whether one of them is a denormal; (255, 0, False) where all are zero.
    One pass, for the proof that picks :func:`transa_fast` on every call."""
    lo, hi, denormal = 255, 0, False
    for x in range(codes.size):
        mag = codes[x] & 0x7FFF
        if mag:
            e = mag >> 7
            lo = min(lo, e)
            hi = max(hi, e)
            denormal |= e == 0
    return lo, hi, denormal


@njit(cache=True, parallel=True)
def sequential(A, B, V, out):
    """``out[b] = A[b] @ B[b]`` (B (nb, K, N)), each output one sum in K order."""
    nb, M, K = A.shape
    N = B.shape[2]
    for job in prange(nb * M):
        b = job // M
        i = job % M
        for j in range(N):
            acc = 0.0
            for k in range(K):
                acc = mul_add(acc, V[A[b, i, k]], V[B[b, k, j]])
            out[b, i, j] = np.float32(acc)
