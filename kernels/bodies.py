"""Register-blocked bodies of the blocked GEMM drivers (``blocked.py``), as explicit LLVM vector IR.

A body computes ``rows`` rows x ``cols`` columns of C for one or more whole K steps (16 pairs or
16 quads), reading B straight from the packed tile blocks of ``PackedB.data`` and A from a
per-thread block packed by the driver. How many C elements one body carries, how wide its
vectors are and where its operands come from are free: each C element still sees exactly the
operations ``docs/semantics.md`` fixes, in their order. The shapes come from the per-target table
``targets.py``; ``tilegemm.inspect`` compiles them for every supported CPU and counts spills.

Operands (flat 1-D arrays, offsets in elements):

- ``A``: row ``r`` of the body, step ``s``, K index ``k`` at ``a_off + r*lda + s*32 + k``
  (float32 values, exact and already read with DAZ where the instruction does), or
  ``s*64 + k`` for bytes (uint8) and widened bytes (int16). Only scalar loads of A are splatted,
  so on AVX-512 LLVM folds a broadcast into the FMA (``{1to16}``) where it feeds one FMA.
- ``B``: the packed tile blocks themselves, uint32 dwords for 16-bit floats (one dword is the
  pair ``even | odd << 16`` of one column: 16 pairs x 16 columns per block) or bytes for INT8
  (16 quads x 16 columns x 4). Tile ``t`` of step ``s`` at ``b_off + t*b_tile + s*b_step``. A BF16
  even element is ``dword << 16`` and the odd one ``dword & 0xFFFF0000``; FP16 elements are
  widened exactly (``fpext half``, VCVTPH2PS, which never reads MXCSR.DAZ).
- ``C``: float32 or int32 rows at ``c_off + r*ldc``, columns ``16*t + v*width``.

Float bodies (``float_body``), TDPBF16PS / TDPFP16PS (``kind="pairs"``: per element ``e``/``o``
from +0, 16 ``fma32`` each in pair order, then ``C = add32(C, add32(e, o))``) or VDPBF16PS
(``kind="dot"``: one chain through C, the odd product first), in one of two modes:

- ``fast``: plain ``llvm.fma`` (always fused, so equal to ``fma32`` wherever no result is tiny:
  overflow, infinities and NaN included). The driver runs it only on blocks whose products are
  provably multiples of at least 2^-126 (and, for ``dot`` and for the final adds, whose C is).
  ``nsteps`` steps of all 16 pairs (the zero pairs that pad the last step change nothing: no
  fast chain is ever -0).
- ``flag``: every FMA and add result that is a binary32 denormal becomes a zero of its sign
  (FTZ on the bit pattern, independent of MXCSR), and any result of magnitude exactly 2^-126
  raises a flag: the one case where IEEE gradual underflow may round up what tininess after
  rounding flushes (docs/semantics.md, "How the kernels stay exact"). One step of ``npairs``
  pairs (the pairs beyond are not run, as the tail rule says); C is written only when no flag
  was raised, and the body returns 1 otherwise, so that the driver redoes that step exactly.

INT8 bodies (``int_body``): ``vnni`` (VPDPBUSD: four u8 x s8 products per lane, modulo 2^32)
or ``madd`` (bytes widened to int16, VPMADDWD, VPADDD: exact for every byte pair). Integer sums
do not depend on their order, so C stays in registers for all ``nsteps`` and is added once.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .vector import ir_loop

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
PAIRS = 16  # pairs (or quads) per whole K step
TILE = 16  # columns of a tile

BSRC_BF16, BSRC_FP16 = 0, 1


def _c64(n):
    return ir.Constant(I64, n)


def _splat(builder, scalar, vt):
    undef = ir.Constant(vt, ir.Undefined)
    v = builder.insert_element(undef, scalar, ir.Constant(I32, 0))
    return builder.shuffle_vector(v, undef, ir.Constant(ir.VectorType(I32, vt.count), [0] * vt.count))


def _vload(builder, base, off, vt, align=4):
    p = builder.gep(base, [off])
    return builder.load(builder.bitcast(p, vt.as_pointer()), align=align)


def _vstore(builder, val, base, off, align=4):
    p = builder.gep(base, [off])
    builder.store(val, builder.bitcast(p, val.type.as_pointer()), align=align)


def _data(context, builder, arrtype, arr):
    return context.make_array(arrtype)(context, builder, arr).data


def _float_operands(context, builder, signature, args, vt):
    """A float body's A, B and C data pointers (arguments 0, 3 and 7) and ``llvm.fma`` on ``vt``."""
    ptrs = [_data(context, builder, signature.args[i], args[i]) for i in (0, 3, 7)]
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt, vt, vt]), f"llvm.fma.v{vt.count}f32")
    return (*ptrs, fma)


def _layout(cols, width):
    """(tiles, vectors per tile) of a body ``cols`` wide: 8 columns are the left or right half of
    one tile (the driver points ``b_off`` at the half)."""
    assert cols in (8, 16, 32, 48, 64) and width in (8, 16) and (cols % width == 0)
    if cols == 8:
        assert width == 8
        return 1, 1
    return cols // TILE, TILE // width


class _Flush:
    """Denormal -> zero of its sign, on the bit pattern; optionally flags a magnitude of 2^-126."""

    def __init__(self, builder, width, flag):
        self.b = builder
        self.vi = ir.VectorType(I32, width)
        self.vf = ir.VectorType(F32, width)
        self.abs = ir.Constant(self.vi, [0x7FFFFFFF] * width)
        self.sign = ir.Constant(self.vi, [0x80000000 - (1 << 32)] * width)
        self.min_normal = ir.Constant(self.vi, [0x00800000] * width)
        self.flag = ir.Constant(ir.VectorType(I1, width), [0] * width) if flag else None

    def __call__(self, x):
        b = self.b
        bits = b.bitcast(x, self.vi)
        mag = b.and_(bits, self.abs)
        tiny = b.icmp_unsigned("<", mag, self.min_normal)
        if self.flag is not None:
            self.flag = b.or_(self.flag, b.icmp_unsigned("==", mag, self.min_normal))
        return b.bitcast(b.select(tiny, b.and_(bits, self.sign), bits), self.vf)


def _widen(builder, dwords, bsrc, width):
    """The (even, odd) float32 vectors of ``width`` packed pairs."""
    vf = ir.VectorType(F32, width)
    vi = ir.VectorType(I32, width)
    if bsrc == BSRC_BF16:
        even = builder.bitcast(builder.shl(dwords, ir.Constant(vi, [16] * width)), vf)
        odd = builder.bitcast(builder.and_(dwords, ir.Constant(vi, [0xFFFF0000 - (1 << 32)] * width)), vf)
        return even, odd
    # The even halves are the 16-bit elements 0, 2, 4 ... of the vector, the odd ones 1, 3, 5 ...
    halves = builder.bitcast(dwords, ir.VectorType(I16, 2 * width))
    vhf = ir.VectorType(F16, width)
    out = []
    for j in (0, 1):
        pick = builder.shuffle_vector(
            halves, halves, ir.Constant(ir.VectorType(I32, width), list(range(j, 2 * width, 2)))
        )
        out.append(builder.fpext(builder.bitcast(pick, vhf), vf))
    return out[0], out[1]


def _fp16_pairs_interleaved(rows: int, cols: int, width: int, unroll: int):
    """The fast TDPFP16PS body with each pair's even and odd chains side by side in one vector.

    A B pair row of ``width // 2`` columns is ``width`` consecutive binary16 values (even, odd,
    even, odd, ...), widened by one VCVTPH2PS; A's pair (even, odd) is one 64-bit broadcast.
    Lane ``2j`` then runs the even chain of a column and lane ``2j + 1`` its odd chain: the same
    ``fma32`` sequence as the split layout, without the shuffles that separate even from odd
    (on AVX2 those cost more than the FMAs they feed). At the end of a step, lanes are swapped
    in pairs to form ``add32(e, o)`` in the even lanes, which are gathered into columns and added
    to C.
    """
    tiles, _ = _layout(cols, width)
    assert cols >= TILE and width % 2 == 0 and (2 * TILE) % width == 0
    per_tile = 2 * TILE // width  # accumulators per row and tile
    nq = tiles * per_tile
    vt = ir.VectorType(F32, width)
    vh = ir.VectorType(F16, width)
    v2 = ir.VectorType(F32, 2)
    mask = ir.VectorType(I32, width)
    swap = ir.Constant(mask, [j ^ 1 for j in range(width)])
    evens = ir.Constant(mask, list(range(0, 2 * width, 2)))
    pair_splat = ir.Constant(mask, [0, 1] * (width // 2))

    @intrinsic
    def body(typingctx, A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps, npairs):
        sig = types.int64(A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps, npairs)

        def codegen(context, builder, signature, args):
            _, a_off_, lda_, _, b_off_, b_tile_, b_step_, _, c_off_, ldc_, nsteps_, _ = args
            ap, bp, cp, fma = _float_operands(context, builder, signature, args, vt)
            zero = ir.Constant(vt, [0.0] * width)

            def step(st, _):  # one K step: the chains from +0, then the adds into C
                a_step = builder.add(a_off_, builder.mul(st, _c64(2 * PAIRS)))
                b_step0 = builder.add(b_off_, builder.mul(st, b_step_))
                arow = [builder.add(a_step, builder.mul(lda_, _c64(r))) for r in range(rows)]
                tb = [builder.add(b_step0, builder.mul(b_tile_, _c64(t))) for t in range(tiles)]

                def pairs(g, flat):  # ``unroll`` pairs for every row and accumulator
                    acc = [flat[r * nq : (r + 1) * nq] for r in range(rows)]
                    for u in range(unroll):
                        p = builder.add(builder.mul(g, _c64(unroll)), _c64(u))
                        bv = []
                        for t in range(tiles):
                            # the pair row's 16 dwords as 32 binary16 values, ``width`` at a time
                            row = builder.gep(bp, [builder.add(tb[t], builder.mul(p, _c64(TILE)))])
                            halves = builder.bitcast(row, vh.as_pointer())
                            for q in range(per_tile):
                                x = builder.load(builder.gep(halves, [_c64(q)]), align=2)
                                bv.append(builder.fpext(x, vt))
                        pa = builder.mul(p, _c64(2))
                        for r in range(rows):
                            pair = builder.bitcast(builder.gep(ap, [builder.add(arow[r], pa)]), v2.as_pointer())
                            a2 = builder.load(pair, align=4)
                            sa = builder.shuffle_vector(a2, a2, pair_splat)
                            acc[r] = [builder.call(fma, [sa, bv[q], acc[r][q]]) for q in range(nq)]
                    return [v for row in acc for v in row]

                flat = ir_loop(builder, PAIRS // unroll, pairs, [zero] * (rows * nq))
                for r in range(rows):
                    # add32(e, o) in the even lanes (e first, as the split layout adds)
                    s = [builder.fadd(v, builder.shuffle_vector(v, v, swap)) for v in flat[r * nq : (r + 1) * nq]]
                    for x in range(nq // 2):  # output vectors of ``width`` columns
                        v = builder.shuffle_vector(s[2 * x], s[2 * x + 1], evens)
                        t, h = divmod(x, per_tile // 2)
                        off = builder.add(builder.add(c_off_, builder.mul(ldc_, _c64(r))), _c64(TILE * t + width * h))
                        _vstore(builder, builder.fadd(_vload(builder, cp, off, vt), v), cp, off)  # add32(C, .)
                return []

            ir_loop(builder, nsteps_, step, [])  # nsteps >= 1, as for the split body
            return _c64(0)

        return sig, codegen

    return body


def float_body(
    kind: str, rows: int, cols: int, width: int, bsrc: int, mode: str, unroll: int = PAIRS, layout: str = "split"
):
    """Intrinsic ``body(A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps, npairs) -> int64``.

    ``kind``: ``"pairs"`` (TDPBF16PS / TDPFP16PS) or ``"dot"`` (VDPBF16PS). ``mode``: ``"fast"``
    (``nsteps`` whole steps, ``npairs`` ignored, returns 0) or ``"flag"`` (one step of ``npairs``
    pairs, returns 1 and leaves C untouched when a result hit 2^-126). See the module docstring.
    ``unroll``: pairs per iteration of the loop over a step's pairs (16: the whole step
    unrolled); fewer keeps LLVM's scheduler from hoisting the B conversions of later pairs where
    they would not fit the registers (AVX2 with FP16). The flag body loops over single pairs.
    ``layout``: ``"interleaved"`` gives the fast TDPFP16PS body whose even and odd chains share
    vectors (:func:`_fp16_pairs_interleaved`); the flag body is the same for both layouts.
    """
    assert kind in ("pairs", "dot") and mode in ("fast", "flag") and bsrc in (BSRC_BF16, BSRC_FP16)
    assert PAIRS % unroll == 0 and layout in ("split", "interleaved")
    if layout == "interleaved" and mode == "fast":
        assert kind == "pairs" and bsrc == BSRC_FP16, "the interleaved layout is TDPFP16PS's"
        return _fp16_pairs_interleaved(rows, cols, width, unroll)
    tiles, parts = _layout(cols, width)
    nv = tiles * parts  # vectors per row
    vt = ir.VectorType(F32, width)
    vi = ir.VectorType(I32, width)
    flag_mode = mode == "flag"
    if flag_mode:
        unroll = 1
    chains = (0, 1) if kind == "pairs" else (1, 0)  # VDPBF16PS: the odd element first
    # accumulator slots: pairs: [row][even/odd][vector]; dot: [row][vector] (the chain through C)
    slots = [(r, j, x) for r in range(rows) for j in (0, 1) for x in range(nv)] if kind == "pairs" else None
    if slots is None:
        slots = [(r, 0, x) for r in range(rows) for x in range(nv)]

    @intrinsic
    def body(typingctx, A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps, npairs):
        sig = types.int64(A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps, npairs)

        def codegen(context, builder, signature, args):
            _, a_off_, lda_, _, b_off_, b_tile_, b_step_, _, c_off_, ldc_, nsteps_, npairs_ = args
            ap, bp, cp, fma = _float_operands(context, builder, signature, args, vt)
            zero = ir.Constant(vt, [0.0] * width)
            no_flag = ir.Constant(ir.VectorType(I1, width), [0] * width)
            coff = [
                [
                    builder.add(builder.add(c_off_, builder.mul(ldc_, _c64(r))), _c64(TILE * t + width * v))
                    for t in range(tiles)
                    for v in range(parts)
                ]
                for r in range(rows)
            ]
            entry = builder.block
            step_head = builder.append_basic_block("body.step")
            pair_head = builder.append_basic_block("body.pairs")
            step_tail = builder.append_basic_block("body.stepend")
            done = builder.append_basic_block("body.done")
            builder.branch(step_head)

            # -- per step: the chains start (pairs: +0; dot: C) -------------------------------
            builder.position_at_end(step_head)
            step = builder.phi(I64)
            step.add_incoming(_c64(0), entry)
            a_step = builder.add(a_off_, builder.mul(step, _c64(2 * PAIRS)))
            b_step0 = builder.add(b_off_, builder.mul(step, b_step_))
            if kind == "pairs":
                start = [zero for _ in slots]
            else:
                start = [_vload(builder, cp, coff[r][x], vt) for r, _, x in slots]
            head_block = builder.block
            builder.branch(pair_head)

            # -- the loop over groups of ``unroll`` pairs ------------------------------------
            builder.position_at_end(pair_head)
            p0 = builder.phi(I64)
            p0.add_incoming(_c64(0), head_block)
            accp = [builder.phi(vt) for _ in slots]
            for ph, v in zip(accp, start):
                ph.add_incoming(v, head_block)
            flagp = builder.phi(no_flag.type) if flag_mode else None
            if flag_mode:
                flagp.add_incoming(no_flag, head_block)
            fl = _Flush(builder, width, flag_mode)
            if flag_mode:
                fl.flag = flagp
            acc = {sl: v for sl, v in zip(slots, accp)}
            arow = [builder.add(a_step, builder.mul(lda_, _c64(r))) for r in range(rows)]
            tb = [builder.add(b_step0, builder.mul(b_tile_, _c64(t))) for t in range(tiles)]
            for u in range(unroll):
                p = builder.add(p0, _c64(u))
                bv = [[], []]
                for t in range(tiles):
                    for v in range(parts):
                        off = builder.add(tb[t], builder.add(builder.mul(p, _c64(TILE)), _c64(width * v)))
                        even, odd = _widen(builder, _vload(builder, bp, off, vi), bsrc, width)
                        bv[0].append(even)
                        bv[1].append(odd)
                pa = builder.mul(p, _c64(2))
                for r in range(rows):
                    for j in chains:
                        a = builder.load(builder.gep(ap, [builder.add(arow[r], builder.add(pa, _c64(j)))]))
                        sa = _splat(builder, a, vt)
                        for x in range(nv):
                            key = (r, j, x) if kind == "pairs" else (r, 0, x)
                            y = builder.call(fma, [sa, bv[j][x], acc[key]])
                            acc[key] = fl(y) if flag_mode else y
            p1 = builder.add(p0, _c64(unroll))
            latch = builder.block
            p0.add_incoming(p1, latch)
            for ph, sl in zip(accp, slots):
                ph.add_incoming(acc[sl], latch)
            if flag_mode:
                flagp.add_incoming(fl.flag, latch)
            limit = npairs_ if flag_mode else _c64(PAIRS)
            builder.cbranch(builder.icmp_signed("<", p1, limit), pair_head, step_tail)

            # -- per step: the final adds (pairs) and the store -------------------------------
            builder.position_at_end(step_tail)
            new = []
            for r in range(rows):
                row = []
                for x in range(nv):
                    if kind == "pairs":
                        s = builder.fadd(acc[(r, 0, x)], acc[(r, 1, x)])  # add32(e, o)
                        s = fl(s) if flag_mode else s
                        c = builder.fadd(_vload(builder, cp, coff[r][x], vt), s)  # add32(C, .)
                        row.append(fl(c) if flag_mode else c)
                    else:
                        row.append(acc[(r, 0, x)])
                new.append(row)
            if flag_mode:
                fbits = builder.bitcast(fl.flag, ir.IntType(width))
                raised = builder.icmp_unsigned("!=", fbits, ir.Constant(ir.IntType(width), 0))
                store = builder.append_basic_block("body.store")
                flag_block = builder.block
                builder.cbranch(raised, done, store)
                builder.position_at_end(store)
                for r in range(rows):
                    for x in range(nv):
                        _vstore(builder, new[r][x], cp, coff[r][x])
                builder.branch(done)
                builder.position_at_end(done)
                result = builder.phi(I64)
                result.add_incoming(_c64(1), flag_block)
                result.add_incoming(_c64(0), store)
                return result
            for r in range(rows):
                for x in range(nv):
                    _vstore(builder, new[r][x], cp, coff[r][x])
            step1 = builder.add(step, _c64(1))
            step.add_incoming(step1, builder.block)
            builder.cbranch(builder.icmp_signed("<", step1, nsteps_), step_head, done)
            builder.position_at_end(done)
            return _c64(0)

        return sig, codegen

    return body


def prefetch_rows(builder, base, off, ld, rows, cols):
    """Prefetch, for writing, ``rows`` rows of ``cols`` 32-bit values at ``base + off``, rows
    ``ld`` apart (``llvm.prefetch``; one per 64-byte line)."""
    i8p = I8.as_pointer()
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [i8p, I32, I32, I32]), "llvm.prefetch.p0"
    )
    for r in range(rows):
        row = builder.add(off, builder.mul(ld, _c64(r)))
        for c in range(0, cols, TILE):
            p = builder.bitcast(builder.gep(base, [builder.add(row, _c64(c))]), i8p)
            builder.call(fn, [p, ir.Constant(I32, 1), ir.Constant(I32, 3), ir.Constant(I32, 1)])


def int_body(kind: str, rows: int, cols: int, width: int, variant: int):
    """Intrinsic ``body(A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps) -> int64``
    for TDPB*D: ``C += A @ B`` over ``nsteps`` whole steps of 16 quads, modulo 2^32.

    ``kind="vnni"``: ``A`` uint8 bytes, one VPDPBUSD per vector and quad; ``variant`` 0: A is the
    unsigned operand and B the signed one, 1: B unsigned and A signed (the driver shifts A by 128
    and corrects C where both have one signedness). ``kind="madd"``: ``A`` int16 (widened at
    packing), B's bytes widened in the body, ``variant`` 0: sign-extended, 1: zero-extended.
    ``kind="widen"``: as ``"madd"``, with VPMADDWD's arithmetic written as target-independent IR
    (the int16 lanes sign-extended to int32, multiplied, and adjacent products added; NEON's
    SMULL and ADDP on AArch64). Its one overflow, (-2^15)^2 + (-2^15)^2, wraps to -2^31 as
    VPMADDWD's does (Intel SDM, PMADDWD), and widened bytes never reach it.
    """
    assert kind in ("vnni", "madd", "widen") and variant in (0, 1)
    tiles, parts = _layout(cols, width)
    nv = tiles * parts
    vi = ir.VectorType(I32, width)
    vh = ir.VectorType(I16, 2 * width)
    vb = ir.VectorType(I8, 2 * width)
    nacc = nv if kind == "vnni" else 2 * nv

    @intrinsic
    def body(typingctx, A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps):
        sig = types.int64(A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps)

        def codegen(context, builder, signature, args):
            _, a_off_, lda_, _, b_off_, b_tile_, b_step_, _, c_off_, ldc_, nsteps_ = args
            ap = _data(context, builder, signature.args[0], args[0])
            bp = _data(context, builder, signature.args[3], args[3])
            cp = _data(context, builder, signature.args[7], args[7])
            if kind == "vnni":
                dot = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(vi, [vi, vi, vi]), f"llvm.x86.avx512.vpdpbusd.{32 * width}"
                )
            elif kind == "madd":
                name = "llvm.x86.avx512.pmaddw.d.512" if width == 16 else "llvm.x86.avx2.pmadd.wd"
                fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vi, [vh, vh]), name)

                def madd(x, y):
                    return builder.call(fn, [x, y])

            else:
                # the even and odd int16 lanes apart first, then two widening multiplies into one
                # sum (SMULL, SMLAL): multiplying all lanes and pairing the products afterwards
                # kept twice the live vectors and spilled hundreds of registers on Neoverse V1
                even_w = ir.Constant(vi, list(range(0, 2 * width, 2)))
                odd_w = ir.Constant(vi, list(range(1, 2 * width, 2)))

                def madd(x, y):
                    def half(v, lanes):
                        return builder.sext(builder.shuffle_vector(v, v, lanes), vi)

                    even = builder.mul(half(x, even_w), half(y, even_w))
                    return builder.add(even, builder.mul(half(x, odd_w), half(y, odd_w)))

            zero = ir.Constant(vi, [0] * width)
            # C is read and written once, after the loop: ask for its lines now, so that they
            # arrive while the loop runs (a call of the driver reaches each block of C once per
            # chunk, usually from memory)
            prefetch_rows(builder, cp, c_off_, ldc_, rows, cols)
            pre = builder.block
            loop = builder.append_basic_block("body.step")
            done = builder.append_basic_block("body.done")
            builder.branch(loop)
            builder.position_at_end(loop)
            step = builder.phi(I64)
            step.add_incoming(_c64(0), pre)
            accp = [[builder.phi(vi) for _ in range(nacc)] for _ in range(rows)]
            for row in accp:
                for ph in row:
                    ph.add_incoming(zero, pre)
            acc = [list(row) for row in accp]
            a_base = builder.add(a_off_, builder.mul(step, _c64(4 * PAIRS)))
            arow = [builder.add(a_base, builder.mul(lda_, _c64(r))) for r in range(rows)]
            b_base = builder.add(b_off_, builder.mul(step, b_step_))
            tb = [builder.add(b_base, builder.mul(b_tile_, _c64(t))) for t in range(tiles)]
            for q in range(PAIRS):
                if kind == "vnni":
                    bv = [
                        _vload(builder, bp, builder.add(tb[t], _c64(64 * q + 4 * width * v)), vi, align=1)
                        for t in range(tiles)
                        for v in range(parts)
                    ]
                    for r in range(rows):
                        ptr = builder.gep(ap, [builder.add(arow[r], _c64(4 * q))])
                        quad = builder.load(builder.bitcast(ptr, I32.as_pointer()), align=1)
                        sa = _splat(builder, quad, vi)
                        for x in range(nacc):
                            ops = [sa, bv[x]] if variant == 0 else [bv[x], sa]
                            acc[r][x] = builder.call(dot, [acc[r][x]] + ops)
                else:
                    ext = builder.sext if variant == 0 else builder.zext
                    bw = [
                        ext(_vload(builder, bp, builder.add(tb[t], _c64(64 * q + 2 * width * h)), vb, align=1), vh)
                        for t in range(tiles)
                        for h in range(2 * parts)
                    ]
                    for r in range(rows):
                        # the A quad as four int16, repeated across the vector (a qword broadcast)
                        ptr = builder.gep(ap, [builder.add(arow[r], _c64(4 * q))])
                        qa = builder.load(builder.bitcast(ptr, I64.as_pointer()), align=2)
                        sa = builder.bitcast(_splat(builder, qa, ir.VectorType(I64, width // 2)), vh)
                        for x in range(nacc):
                            acc[r][x] = builder.add(acc[r][x], madd(sa, bw[x]))
            step1 = builder.add(step, _c64(1))
            latch = builder.block
            step.add_incoming(step1, latch)
            for r in range(rows):
                for x in range(nacc):
                    accp[r][x].add_incoming(acc[r][x], latch)
            builder.cbranch(builder.icmp_signed("<", step1, nsteps_), loop, done)
            builder.position_at_end(done)
            even = ir.Constant(vi, list(range(0, 2 * width, 2)))
            odd = ir.Constant(vi, list(range(1, 2 * width, 2)))
            for r in range(rows):
                crow = builder.add(c_off_, builder.mul(ldc_, _c64(r)))
                for t in range(tiles):
                    for v in range(parts):
                        x = t * parts + v
                        if kind == "vnni":
                            s = acc[r][x]
                        else:  # lanes (2c, 2c+1) of the two half-vectors hold column c's two partial sums
                            lo, hi = acc[r][2 * x], acc[r][2 * x + 1]
                            s = builder.add(builder.shuffle_vector(lo, hi, even), builder.shuffle_vector(lo, hi, odd))
                        off = builder.add(crow, _c64(TILE * t + width * v))
                        _vstore(builder, builder.add(_vload(builder, cp, off, vi), s), cp, off)
            return _c64(0)

        return sig, codegen

    return body


# --------------------------------------------------------------------------------------------
# TDPBF16PS's chains through VDPBF16PS (targets with AVX512_BF16)
# --------------------------------------------------------------------------------------------


class _BFloat(ir.types.Type):
    """LLVM's ``bfloat`` (llvmlite's IR builder has no type for it); VDPBF16PS's intrinsic takes
    vectors of it since LLVM 17."""

    def _to_string(self):
        return "bfloat"

    def __eq__(self, other):
        return isinstance(other, _BFloat)

    def __hash__(self):
        return hash("bfloat")


#: Dwords per chain in one K step: the chain's 16 elements, two per VDPBF16PS lane.
CHAIN_DWORDS = PAIRS // 2
#: Chain buffer dword ``d`` of a step: ``e`` chains in 0..7, ``o`` chains in 8..15.
CHAIN_ROW = 2 * CHAIN_DWORDS


def _vdpbf16ps(builder, width):
    """``llvm.x86.avx512bf16.dpbf16ps.{256,512}`` on ``width`` float lanes, with its operands as
    dword vectors: ``f(acc, a, b) = fma32(a.hi, b.hi, acc)`` then ``fma32(a.lo, b.lo, .)``."""
    vf, vi = ir.VectorType(F32, width), ir.VectorType(I32, width)
    vb = ir.VectorType(_BFloat(), 2 * width)
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vf, [vf, vb, vb]), f"llvm.x86.avx512bf16.dpbf16ps.{32 * width}"
    )

    def call(acc, a, b):
        assert a.type == vi and b.type == vi
        return builder.call(fn, [acc, builder.bitcast(a, vb), builder.bitcast(b, vb)])

    return call


def vdp_body(kind: str, rows: int, cols: int, width: int, unroll: int = 2):
    """A fast body on VDPBF16PS: intrinsic ``body(A, a_off, lda, B, b_off, b_tile, b_step, C,
    c_off, ldc, nsteps, npairs) -> int64`` with the float bodies' contract, for ``nsteps`` whole
    steps (``npairs`` ignored), A and B as uint32 dwords of two BF16 values:
    ``A[a_off + r*lda + s*16 + d]`` is dword ``d`` of step ``s`` of row ``r``, broadcast, and
    ``B[b_off + s*b_step + t*b_tile + d*16 + n]`` the same dword of column ``n`` of tile ``t``.

    VDPBF16PS runs ``fma32`` on its dword's high element and then on its low one, with DAZ/FTZ
    and RNE (``docs/vdpbf16ps.md``); the driver runs a fast body only on blocks where no result
    is tiny, so DAZ/FTZ never act here, as for the FMA bodies.

    - ``kind="pairs"`` (TDPBF16PS): a dword holding ``x[k]`` high and ``x[k + 2]`` low advances
      the ``e`` chain (even k) or the ``o`` chain (odd k) by two of its steps at once. Dwords 0-7
      of a step are ``e``'s, 8-15 ``o``'s (``chain_pack_b``, ``blocked.pack_a_chains``); per C
      element ``e``/``o`` start from +0, take 8 VDPBF16PS each, and ``C = add32(C, add32(e, o))``
      as the FMA body adds. A short last step's padding pairs are +0 in A, and a chain from +0
      is never -0, so they change nothing, as in the FMA body.
    - ``kind="dot"`` (VDPBF16PS itself): the dwords are the pairs, A's as ``blocked.pack_a_pairs``
      makes them and B's as packed; one chain per C element, through C, 16 VDPBF16PS per step in
      pair order.

    C stays in registers over the call's steps and is stored once: its rows are a row of tiles
    apart (the same L1 sets where N is a power of two), and storing and reloading them each step
    held the TDPBF16PS body to 165 of its 230 GFLOP/s on Zen 4 with N = 2048. ``unroll``: dwords
    of each chain per iteration of the loop over a step (a divisor of 8).
    """
    assert kind in ("pairs", "dot") and CHAIN_DWORDS % unroll == 0
    tiles, parts = _layout(cols, width)
    nv = tiles * parts
    vt = ir.VectorType(F32, width)
    vi = ir.VectorType(I32, width)
    chains = (0, 1) if kind == "pairs" else (0,)
    slots = [(r, c, x) for r in range(rows) for c in chains for x in range(nv)]
    per_chain = CHAIN_DWORDS if kind == "pairs" else PAIRS  # dwords of one chain in a step
    trips = per_chain // unroll if kind == "pairs" else PAIRS // (2 * unroll)
    per_trip = unroll if kind == "pairs" else 2 * unroll

    @intrinsic
    def body(typingctx, A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps, npairs):
        sig = types.int64(A, a_off, lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps, npairs)

        def codegen(context, builder, signature, args):
            _, a_off_, lda_, _, b_off_, b_tile_, b_step_, _, c_off_, ldc_, nsteps_, _ = args
            ap, bp, cp = (_data(context, builder, signature.args[i], args[i]) for i in (0, 3, 7))
            dp = _vdpbf16ps(builder, width)
            zero = ir.Constant(vt, [0.0] * width)
            coff = [
                builder.add(builder.add(c_off_, builder.mul(ldc_, _c64(r))), _c64(TILE * t + width * v))
                for r in range(rows)
                for t in range(tiles)
                for v in range(parts)
            ]

            def step(st, cvals):
                a_step = builder.add(a_off_, builder.mul(st, _c64(CHAIN_ROW)))
                b_step0 = builder.add(b_off_, builder.mul(st, b_step_))
                arow = [builder.add(a_step, builder.mul(lda_, _c64(r))) for r in range(rows)]
                tb = [builder.add(b_step0, builder.mul(b_tile_, _c64(t))) for t in range(tiles)]

                def dwords(g, flat):  # ``per_trip`` dwords of each chain, every row
                    acc = dict(zip(slots, flat))
                    for u in range(per_trip):
                        j = builder.add(builder.mul(g, _c64(per_trip)), _c64(u))
                        for c in chains:
                            d = builder.add(j, _c64(CHAIN_DWORDS * c))
                            bv = [
                                _vload(
                                    builder,
                                    bp,
                                    builder.add(tb[t], builder.add(builder.mul(d, _c64(TILE)), _c64(width * v))),
                                    vi,
                                )
                                for t in range(tiles)
                                for v in range(parts)
                            ]
                            for r in range(rows):
                                a = builder.load(builder.gep(ap, [builder.add(arow[r], d)]))
                                sa = _splat(builder, a, vi)
                                for x in range(nv):
                                    # A last: VDPBF16PS's memory operand, so the broadcast is
                                    # folded into it ({1to16}); no NaN reaches this body, so
                                    # the operand order cannot pick another NaN
                                    acc[(r, c, x)] = dp(acc[(r, c, x)], bv[x], sa)
                    return [acc[s] for s in slots]

                if kind == "dot":  # the chain runs through C
                    return ir_loop(builder, trips, dwords, list(cvals))
                acc = dict(zip(slots, ir_loop(builder, trips, dwords, [zero] * len(slots))))
                return [  # add32(C, add32(e, o))
                    builder.fadd(cvals[r * nv + x], builder.fadd(acc[(r, 0, x)], acc[(r, 1, x)]))
                    for r in range(rows)
                    for x in range(nv)
                ]

            cvals = ir_loop(builder, nsteps_, step, [_vload(builder, cp, o, vt) for o in coff])
            for o, v in zip(coff, cvals):
                _vstore(builder, v, cp, o)
            return _c64(0)

        return sig, codegen

    return body


@intrinsic
def chain_pack_b(typingctx, B, b_off, b_tile, b_step, D, nsteps, ntiles):
    """``chain_pack_b(B, b_off, b_tile, b_step, D, nsteps, ntiles)``: the packed BF16 pair blocks
    of ``nsteps`` steps and ``ntiles`` tiles (tile ``t`` of step ``s`` at ``b_off + t*b_tile +
    s*b_step``, pair ``p`` of column ``n`` at ``+ 16*p + n``) rewritten as :func:`vdp_body`'s
    chain dwords into ``D``: ``(t*nsteps + s)*256 + d*16 + n``, each tile's steps together, so
    that a body reads its panel's B as one stream (steps 1 KiB apart, not a row of tiles apart:
    measured on Zen 4, the strided order stalled the VDPBF16PS body on B at n = 2048).

    Pairs ``2j`` and ``2j + 1`` of a column hold its elements ``x[4j] .. x[4j + 3]``; ``e``
    dword ``j`` is ``x[4j + 2] | x[4j] << 16`` and ``o`` dword ``j`` is ``x[4j + 3] | x[4j + 1]
    << 16``: one 16-bit shuffle of the two pair rows each (VPERMT2W with AVX512BW)."""
    sig = types.void(B, b_off, b_tile, b_step, D, nsteps, ntiles)

    def codegen(context, builder, signature, args):
        _, b_off_, b_tile_, b_step_, _, nsteps_, ntiles_ = args
        bp = _data(context, builder, signature.args[0], args[0])
        dp = _data(context, builder, signature.args[4], args[4])
        vi = ir.VectorType(I32, TILE)
        vh = ir.VectorType(I16, 2 * TILE)
        mask = ir.VectorType(I32, 2 * TILE)
        # words of (x = pair 2j, y = pair 2j + 1): x's are 0..31, y's 32..63; lane n's low word
        # is word 2n of its dword, the high word 2n + 1
        pick = [ir.Constant(mask, [w for n in range(TILE) for w in (32 + 2 * n + c, 2 * n + c)]) for c in (0, 1)]
        trips = builder.mul(nsteps_, ntiles_)

        def block(i, _):
            t = builder.sdiv(i, nsteps_)
            s = builder.srem(i, nsteps_)
            src = builder.add(b_off_, builder.add(builder.mul(s, b_step_), builder.mul(t, b_tile_)))
            dst = builder.mul(i, _c64(PAIRS * TILE))
            for j in range(CHAIN_DWORDS):
                x = builder.bitcast(_vload(builder, bp, builder.add(src, _c64(2 * j * TILE)), vi), vh)
                y = builder.bitcast(_vload(builder, bp, builder.add(src, _c64((2 * j + 1) * TILE)), vi), vh)
                for c in (0, 1):
                    d = builder.add(dst, _c64((CHAIN_DWORDS * c + j) * TILE))
                    _vstore(builder, builder.bitcast(builder.shuffle_vector(x, y, pick[c]), vi), dp, d)
            return []

        pre = builder.block
        run = builder.append_basic_block("chains.run")
        done = builder.append_basic_block("chains.done")
        builder.cbranch(builder.icmp_signed(">", trips, _c64(0)), run, done)
        builder.position_at_end(run)
        ir_loop(builder, trips, block, [])
        builder.branch(done)
        builder.position_at_end(done)
        del pre
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def round_bf16_block(typingctx, src, s_off, dst, d_off, n):
    """``round_bf16_block(src, s_off, dst, d_off, n) -> int32``: the first ``n - n % 16`` float32
    values at ``src[s_off:]`` (uint16 halves, two per value) rounded to BF16 (RNE; a NaN stays a
    quiet NaN of its sign), read back with DAZ as binary32 bits into ``dst[d_off:]`` (uint32),
    returning the smallest biased exponent of the non-zero finite results (255: none; -2: a
    NaN). The vector form of ``blocked.pack_a_float``'s loop for float32 A: Numba computes
    integer scalars in 64 bits, which halved that loop's vector width."""
    sig = types.int32(src, s_off, dst, d_off, n)

    def codegen(context, builder, signature, args):
        _, s_off_, _, d_off_, n_ = args
        sp = builder.bitcast(_data(context, builder, signature.args[0], args[0]), I32.as_pointer())
        dp = _data(context, builder, signature.args[2], args[2])
        W = 16
        vi = ir.VectorType(I32, W)

        def k(x):
            return ir.Constant(vi, [x if x < 1 << 31 else x - (1 << 32)] * W)

        trips = builder.sdiv(n_, _c64(W))
        base = builder.sdiv(s_off_, _c64(2))  # in float32 values (s_off is even)
        pre = builder.block
        run = builder.append_basic_block("round.run")
        done = builder.append_basic_block("round.done")
        start = k(255)
        builder.cbranch(builder.icmp_signed(">", trips, _c64(0)), run, done)
        builder.position_at_end(run)

        def chunk(i, lo):
            off = builder.mul(i, _c64(W))
            b = _vload(builder, sp, builder.add(base, off), vi)
            hi = builder.lshr(b, k(16))
            nan = builder.icmp_unsigned(">", builder.and_(b, k(0x7FFFFFFF)), k(0x7F800000))
            quiet = builder.or_(builder.and_(hi, k(0x8000)), k(0x7FC0))
            rounded = builder.lshr(builder.add(builder.add(b, k(0x7FFF)), builder.and_(hi, k(1))), k(16))
            v = builder.shl(builder.select(nan, quiet, rounded), k(16))
            den = builder.icmp_unsigned("==", builder.and_(v, k(0x7F800000)), k(0))
            v = builder.select(den, builder.and_(v, k(0x80000000)), v)
            _vstore(builder, v, dp, builder.add(d_off_, off))
            e = builder.and_(builder.lshr(v, k(23)), k(0xFF))
            vnan = builder.icmp_unsigned(">", builder.and_(v, k(0x7FFFFFFF)), k(0x7F800000))
            none = builder.or_(builder.icmp_unsigned("==", e, k(0)), builder.icmp_unsigned("==", e, k(255)))
            e = builder.select(vnan, k((1 << 32) - 2), builder.select(none, k(255), e))
            return [builder.select(builder.icmp_signed("<", e, lo[0]), e, lo[0])]

        (lo,) = ir_loop(builder, trips, chunk, [start])
        last = builder.block
        builder.branch(done)
        builder.position_at_end(done)
        acc = builder.phi(vi)
        acc.add_incoming(start, pre)
        acc.add_incoming(lo, last)
        m = builder.extract_element(acc, ir.Constant(I32, 0))
        for j in range(1, W):
            x = builder.extract_element(acc, ir.Constant(I32, j))
            m = builder.select(builder.icmp_signed("<", x, m), x, m)
        return m

    return sig, codegen
