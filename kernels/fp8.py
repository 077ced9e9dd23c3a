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
- binary32, each step checked (``fp8c_steps_rows``, layout ``"fp8_32"``: the same values as
  binary32, exact there): a step's 64 products are summed in a chain of binary32 FMAs from +0.
  Every product of two 8-bit floats is exact in binary32 (at most 8 significant bits, between
  2^-32 and 2^32), so the chain's result is the exact sum exactly when none of its FMAs rounded,
  and then it is its own rounding to binary32. Whether any FMA rounded is what the processor
  records in MXCSR's sticky precision flag (PE, bit 5; Intel SDM vol. 1, 11.5.2.1 and 4.9.1.6):
  the body clears it before the chain and reads it after. A step whose flag is clear is done in
  binary32; a step whose flag is set runs again in binary64, as ``fp8_steps_rows`` does (on the
  values widened exactly, under the same proof). NaN and infinity follow IEEE rules in either
  precision and set no PE, and no sum can overflow or be tiny in binary32 (|sum| < 2^38, a
  non-zero one >= 2^-32). Which steps take binary64 depends on the data, never the bits.

Partial tiles and the K tail: A and B are zero-padded, and 0 * 0 adds +0, which changes no bit.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils

from .exact import add32, round_scaled
from .families import variant_id
from .isa import _body
from .vector import _F32, _I32, _TILE, _body_intrinsic, _const, _ptr, _splat, ir_loop, outlined, phis

__all__ = ["FP8_EXACT", "FP8_FAST", "FP8C_FAST", "fp8_tile_rows", "fp8_steps_rows", "fp8c_steps_rows", "fp8_exact"]

# Variants of the tile multiply (``variant`` in the kernel contract, ``tiles.tile_multiply``).
FP8_EXACT, FP8_FAST, FP8C_FAST = (variant_id(n) for n in ("fp8_exact", "fp8_fast", "fp8c_fast"))
_K = 64  # products along K in one full tile multiply
_UNROLL = 4  # products per trip of the fast body's K loop
_F64 = ir.DoubleType()
_INDEF = np.float32(-np.float32(np.nan))  # 0xFFC00000, the x86 default NaN
_UNIT = 2.0**32  # products in units of 2^-32
_UNIT_INV = 2.0**-32


def _k_sums(builder, width, mr, ap, bp, rows, b_off, element=_F64, init=None, b_stored=None):
    """The IR loop of one full step: per row, ``16 / width`` vectors of ``element`` (binary64, or
    binary32) of the sums of 64 products (A elements broadcast, B rows of 16 columns), one FMA per
    product from ``init`` (default +0), ``_UNROLL`` products per trip, which keeps the IR (and the
    compile) small. Operands are stored as ``element``, or B as ``b_stored`` (binary32, widened
    exactly to binary64). Returns ``sums[r][v]``."""
    vd = ir.VectorType(element, width)
    parts = _TILE // width
    name = "f64" if element == _F64 else "f32"
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vd, [vd] * 3), f"llvm.fma.v{width}{name}")

    def load(ptr, off, lanes=0):
        kept = element if ptr is ap else (b_stored or element)
        x = builder.load(
            _ptr(builder, ptr, off, ir.VectorType(kept, lanes) if lanes else kept), align=8 if kept == _F64 else 4
        )
        return x if kept == element else builder.fpext(x, vd if lanes else element)

    def trip(t, flat):
        acc = [flat[r * parts : (r + 1) * parts] for r in range(mr)]
        for u in range(_UNROLL):
            k = builder.add(builder.mul(t, _const(_UNROLL)), _const(u))
            bk = builder.add(b_off, builder.mul(k, _const(_TILE)))
            bv = [load(bp, builder.add(bk, _const(width * v)), width) for v in range(parts)]
            for r in range(mr):
                a = _splat(builder, load(ap, builder.add(rows[r], k)), vd)
                acc[r] = [builder.call(fma, [a, bv[v], acc[r][v]]) for v in range(parts)]
        return [x for row in acc for x in row]

    start = [ir.Constant(vd, [0.0] * width)] * (mr * parts) if init is None else init
    flat = ir_loop(builder, _K // _UNROLL, trip, start)
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


# MXCSR while the binary32 body runs: every exception masked, round to nearest even, no FTZ or DAZ,
# no flag set (the register's power-on value, Intel SDM vol. 1, 10.2.3); and its precision flag.
_MXCSR_OWN = 0x1F80
_MXCSR_PE = 0x20
_I8P = ir.IntType(8).as_pointer()
_I64 = ir.IntType(64)
# The longest run of steps the binary32 body sends straight to binary64 after steps that rounded
# (a body call runs at most gemm.FP8_K_CHUNK = 16 steps).
_BACKOFF = 16


def _mxcsr(builder, op: str, slot) -> None:
    """``stmxcsr`` (``op="stmxcsr"``) into, or ``ldmxcsr`` from, the i32 at ``slot``."""
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [_I8P]), f"llvm.x86.sse.{op}")
    builder.call(fn, [builder.bitcast(slot, _I8P)])


def _fence(builder, values: list) -> list:
    """``values`` passed through an empty inline-assembly statement with side effects, which emits
    no instruction. LLVM keeps such a statement in its place among the MXCSR accesses (calls with
    side effects), computes its inputs before it and reads its outputs only after it: so a chain
    that starts from a fenced zero cannot begin before the ``ldmxcsr`` ahead of the fence, one
    that ends in a fence is complete before the ``stmxcsr`` after it, and an add that takes a
    fenced sum cannot run ahead of that ``stmxcsr`` and set the flag it reads. Without these,
    LLVM is free to move floating-point arithmetic across the MXCSR accesses (it assumes the
    default floating-point environment)."""
    vt = values[0].type
    n = len(values)
    out_t = vt if n == 1 else ir.LiteralStructType([vt] * n)
    constraint = ",".join(["=v"] * n + [str(i) for i in range(n)])
    out = builder.asm(ir.FunctionType(out_t, [vt] * n), "", constraint, values, True)
    return [out] if n == 1 else [builder.extract_value(out, i) for i in range(n)]


def fp8c_steps_rows(mr: int, width: int = 16, hold_c: bool = True, redo_rows: int = 4):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps, a_step, b_step)``:
    ``nsteps`` consecutive full TDP*F8PS for ``mr`` rows x 16 columns of C on binary32 operands
    (layout ``"fp8_32"``), each step in binary32 where MXCSR.PE shows its chains exact, else again
    in binary64 (module docstring), C in binary32 registers across the steps as in
    :func:`fp8_steps_rows` (DAZ on the first step's C, NaN results stored as the default NaN, the
    same argument for the same bits). ``width``: floats per vector (16: zmm, 8: ymm). ``hold_c``
    False: C goes through memory at every step instead (16 vector registers cannot hold C beside
    the sums), read with DAZ once before the first step and its NaNs made the default NaN after
    the last.

    MXCSR is saved on entry, set to ``_MXCSR_OWN`` before each step's chain (clearing the flag
    that the previous step's adds set), read after it, and restored on exit, so the caller's
    register, its flags included, is as it was. The binary64 step is a function of its own on C in
    memory, over ``redo_rows`` rows at a time (``vector.outlined``), so that the loop keeps few
    registers live around this branch.

    Back-off, for data whose every step rounds in binary32 (which would pay for both sums): after
    two consecutive steps that rounded, the next step runs straight in binary64, after a third 2
    steps, then 4, 8 and at most ``_BACKOFF``; a step whose binary32 sums were exact ends it. Every
    step gives the same bits either way, so this changes only the time. On Zen 4 (BF8, prepacked
    n = 1024, one thread), a call whose every step rounds ran at 0.70 of the binary64 kernel's
    speed with the back-off and 0.59 without it: the binary64 step here widens its binary32
    operands as it goes, and runs at about two thirds of the binary64 body's rate."""
    vt = ir.VectorType(_F32, width)
    parts = _TILE // width
    half = width // 2
    vh = ir.VectorType(_F32, half)
    join = ir.Constant(ir.VectorType(_I32, width), list(range(width)))
    assert mr % redo_rows == 0, (mr, redo_rows)

    def emit(builder, sig, ap, bp, cp, crow, over_steps):
        with builder.goto_entry_block():
            saved, own, probe = (builder.alloca(_I32) for _ in range(3))
            skip, wait = builder.alloca(_I64), builder.alloca(_I64)  # the back-off (registers, after mem2reg)
        builder.store(_const(0), skip)
        builder.store(_const(0), wait)
        _mxcsr(builder, "stmxcsr", saved)
        builder.store(ir.Constant(_I32, _MXCSR_OWN), own)
        cptr = [
            [_ptr(builder, cp, builder.add(crow(r), _const(width * v)), vt) for v in range(parts)] for r in range(mr)
        ]

        def wide(fb, ap_, bp_, cp_, b0, *offs):
            """The step in binary64 for ``redo_rows`` rows: ``_k_sums`` on the widened values (the
            A rows widened once, into a buffer of their own; B as it is loaded), one ``fptrunc``
            per sum, added to C in memory."""
            with fb.goto_entry_block():
                a64 = fb.alloca(ir.ArrayType(_F64, redo_rows * _K))
            a64 = fb.bitcast(a64, _F64.as_pointer())
            vw = ir.VectorType(_F32, 8)
            for r in range(redo_rows):
                for e in range(0, _K, 8):
                    x = fb.load(_ptr(fb, ap_, fb.add(offs[r], _const(e)), vw), align=4)
                    fb.store(
                        fb.fpext(x, ir.VectorType(_F64, 8)),
                        _ptr(fb, a64, _const(r * _K + e), ir.VectorType(_F64, 8)),
                        align=8,
                    )
            rows64 = [_const(r * _K) for r in range(redo_rows)]
            sums = _k_sums(fb, half, redo_rows, a64, bp_, rows64, b0, b_stored=_F32)
            for r in range(redo_rows):
                for v in range(parts):
                    lo, hi = (fb.fptrunc(x, vh) for x in sums[r][2 * v : 2 * v + 2])  # the one rounding
                    at = _ptr(fb, cp_, fb.add(offs[redo_rows + r], _const(width * v)), vt)
                    fb.store(fb.fadd(fb.load(at, align=4), fb.shuffle_vector(lo, hi, join)), at, align=4)

        slots = [p for row in cptr for p in row]

        def binary64(held, rows, b_off):
            """The step in binary64 on C in memory (``held``: C's values, where in registers);
            returns C's values after it, where they live in registers."""
            for x, p in zip(held, slots):
                builder.store(x, p, align=4)
            for g in range(0, mr, redo_rows):
                args = [ap, bp, cp, b_off] + rows[g : g + redo_rows] + [crow(g + r) for r in range(redo_rows)]
                outlined(builder, f"tilegemm.fp8c.binary64.{redo_rows}x{width}", args, wide)
            return [builder.load(p, align=4) for p in slots] if hold_c else []

        def one_step(arow, b_off, c):
            rows = [arow(r) for r in range(mr)]
            held = [x for row in c for x in row]  # empty where C stays in memory
            skip_now = builder.load(skip)
            with builder.if_else(builder.icmp_signed(">", skip_now, _const(0)), likely=False) as (backing_off, trying):
                with backing_off:  # after steps that rounded in a row: this one straight in binary64
                    builder.store(builder.sub(skip_now, _const(1)), skip)
                    direct = (binary64(held, rows, b_off), builder.block)
                with trying:
                    _mxcsr(builder, "ldmxcsr", own)
                    zero = _fence(builder, [ir.Constant(vt, [0.0] * width)])[0]
                    sums = _k_sums(builder, width, mr, ap, bp, rows, b_off, _F32, [zero] * (mr * parts))
                    flat = _fence(builder, [x for row in sums for x in row])
                    _mxcsr(builder, "stmxcsr", probe)
                    flat = _fence(builder, flat)  # the adds below come after the flag is read
                    pe = builder.and_(builder.load(probe), ir.Constant(_I32, _MXCSR_PE))
                    with builder.if_else(builder.icmp_unsigned("!=", pe, ir.Constant(_I32, 0)), likely=False) as (
                        rounded,
                        exact,
                    ):
                        with rounded:  # some FMA rounded: the step again in binary64
                            w = builder.load(wait)
                            builder.store(w, skip)
                            nxt = builder.select(
                                builder.icmp_signed("==", w, _const(0)), _const(1), builder.shl(w, _const(1))
                            )
                            builder.store(
                                builder.select(builder.icmp_signed(">", nxt, _const(_BACKOFF)), _const(_BACKOFF), nxt),
                                wait,
                            )
                            slow = (binary64(held, rows, b_off), builder.block)
                        with exact:  # the binary32 sum is the step's rounded sum
                            builder.store(_const(0), wait)
                            if hold_c:
                                fast = [builder.fadd(x, y) for x, y in zip(held, flat)]
                            else:  # one C vector at a time, so that few registers are live
                                for y, p in zip(flat, slots):
                                    builder.store(builder.fadd(builder.load(p, align=4), y), p, align=4)
                                fast = []
                            fast = (fast, builder.block)
                    tried = (phis(builder, [slow, fast]), builder.block)
            out = phis(builder, [direct, tried])
            return [out[r * parts : (r + 1) * parts] for r in range(mr)] if hold_c else [[] for _ in range(mr)]

        c_in = [[_daz(builder, builder.load(p, align=4)) for p in row] for row in cptr]
        if not hold_c:  # C read with DAZ once, in memory, before the steps
            for row, prow in zip(c_in, cptr):
                for x, p in zip(row, prow):
                    builder.store(x, p, align=4)
        final = over_steps(one_step, c_in if hold_c else [[] for _ in range(mr)])
        for r in range(mr):
            for v in range(parts):
                _store_indef(builder, final[r][v] if hold_c else builder.load(cptr[r][v], align=4), cptr[r][v])
        _mxcsr(builder, "ldmxcsr", saved)

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
            x = np.float64(A[a + 4 * q + j])  # binary64 or binary32 operands: exact either way
            y = np.float64(B[b + (4 * q + j) * _TILE])
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


@njit(cache=True)
def fp8_exact(A, a_off, lda, mr, nquads, B, b_off, C, c_off, ldc, nc, scratch, codes):
    """One TDP*F8PS of ``nquads`` quads, exactly as defined, for ``mr`` x ``nc`` outputs."""
    revive = codes[0] != 0
    dst_daz = codes[1] == 0
    for mm in range(mr):
        for n in range(nc):
            c = c_off + mm * ldc + n
            C[c] = _fp8_output(A, a_off + mm * lda, B, b_off + n, nquads, C[c], revive, dst_daz)
