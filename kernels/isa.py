"""Microkernels of the other CPUs' paths: the tile bodies of the ``isa=`` profiles beside AMX.

Every body here computes one 16 x 16 block of C over consecutive K steps of the shared tile loop
(``gemm.py``), exactly as the profile's instruction sequence does (``docs/isa-profiles.md``). Each
C element is one chain in K order, so a body keeps its C block in registers from the first step
to the last and stores it once:

- ``I8SAT`` (VPDPBUSDS): per column, ``acc = sat32(acc + four products)``, quad after quad in K
  order. On AVX512_VNNI targets the body *is* ``vpdpbusds``; elsewhere the quad sum is formed
  exactly in int32 and added with ``llvm.sadd.sat``.
- ``I16PAIRS`` (VPMADDUBSW, VPMADDWD, VPADDD): per column, ``w = sat16(pair sum)`` for the pairs
  (0,1), (2,3) ... from k = 0, then ``acc = wrap32(acc + w)``. On AVX-512BW and AVX2 targets the
  body is those three instructions; elsewhere ``llvm.sadd.sat`` on int16 lanes. The int32 sums
  wrap, so only the pairing matters, never the order in which words are added.
- ``F32FMA_FAST`` / ``F32FMA_EXACT`` (VFMADD231PS): one IEEE binary32 FMA per K element, K
  increasing, denormals kept. The fast body is ``llvm.fma`` vectors, valid where the per-call
  proof shows that no operand is denormal and no result tiny (then the caller's MXCSR.DAZ/FTZ
  cannot act); the exact body runs :func:`fma32_ieee` on bit patterns, for any input.
- ``F16ACC`` (VFMADD231PH): one binary16 FMA per K element into an FP16 accumulator (C's codes,
  uint16). Exact for every input without a proof: the product of two FP16 values is exact in
  binary32, so a binary32 FMA rounded to 11 bits (:func:`_nearest11`) is the one binary16
  rounding unless it landed on a binary16 midpoint or left binary16's normal range; a vector with
  such a lane takes the exact step (:func:`_fma16_exact`): an error-free TwoSum gives the exact
  sum, and rounding it *to odd* at 24 bits before the RNE conversion to binary16 makes the two
  roundings one (24 >= 11 + 2). No binary32 value involved is denormal, and the conversions
  (``vcvtps2ph``/``vcvtph2ps``) ignore MXCSR.FTZ and DAZ (Intel SDM), so the caller's MXCSR
  cannot change a bit either.
- ``F16ACC_NATIVE`` (VFMADD231PH itself): A, B and C as binary16 codes, one ``llvm.fma`` on
  ``half`` vectors per K element. The table (``targets.NATIVE``) runs it where the target has
  AVX512-FP16, in place of ``F16ACC``.

Signed activations (``.S8`` records, int8 A) are shifted to u8 here (``a XOR 0x80``, as oneDNN's
copy kernels flip bit 7); the compensation ``-128 * column sums of B`` is added to C by the
framework before the kernel runs (``tilegemm.profiles``).

K padding: int8 pads (zero bytes) leave every sum unchanged. The float bodies always run a whole
K step; the framework pads A beyond K with -0, and ``fma(-0, +0, acc)`` returns ``acc`` exactly
for every acc (a -0 product is the identity of IEEE addition), so padding changes no bit.

The scalar functions (:func:`fma32_ieee`, :func:`fma16`, bit conversions) are written with
binary64 arithmetic on normal numbers only and integer operations on bit patterns, so they are
exact on any CPU state; ``tilegemm.reference`` runs them too.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import targets
from .exact import nan_fma32, round_ftz
from .families import variant_id
from .rounding import bits_f64, f64_bits
from .vector import ir_loop

__all__ = [
    "I8SAT",
    "I16PAIRS",
    "F32FMA_FAST",
    "F32FMA_EXACT",
    "F16ACC",
    "F16ACC_NATIVE",
    "TILE_BODIES",
    "fma32_ieee",
    "fma16",
    "round_binary",
    "f32_from_bits",
    "f32_to_bits",
    "f16_from_bits",
    "f16_to_bits",
]

TILE = 16
_STEP = 16  # quads (int8) or pairs (16-bit floats) in one K step of the tile loop

#: Variants of ``tiles.tile_multiply`` served by this module.
I8SAT, I16PAIRS, F32FMA_FAST, F32FMA_EXACT, F16ACC, F16ACC_NATIVE = (
    variant_id(n) for n in ("i8sat", "i16pairs", "f32fma_fast", "f32fma_exact", "f16acc", "f16acc_native")
)

# ---------------------------------------------------------------------------------------------
# Scalar arithmetic on exact values (binary64 holding the values), independent of MXCSR
# ---------------------------------------------------------------------------------------------

_TWO_M149 = 2.0**-149
_TWO_P149 = 2.0**149
_TWO_M24 = 2.0**-24
_TWO_P24 = 2.0**24


@njit(cache=True, inline="always")
def _two_sum(x, y):
    """s = fl64(x + y) and t with x + y = s + t exactly (Knuth's TwoSum)."""
    s = x + y
    bb = s - x
    t = (x - (s - bb)) + (y - bb)
    return s, t


@njit(cache=True, inline="always")
def round_binary(s, t, p, emin, emax):
    """The value of the exact ``s + t`` (``s = fl64(s + t)``) rounded to nearest-even in a binary
    format with ``p`` significant bits, normal exponents ``emin .. emax``, subnormals kept and
    overflow to infinity, as a binary64 number. No flush: this is IEEE 754's rounding.

    Works on magnitudes (so ``x - floor(x)`` is exact); ``t`` breaks exact ties of ``s``: it is
    below half a binary64 ulp of ``s``, far below the format's quantum, so it never moves ``s``
    across a midpoint, it only decides one.
    """
    if s == 0.0 or not math.isfinite(s):
        return s
    a = abs(s)
    tt = t if s > 0.0 else -t
    e = math.frexp(a)[1] - 1  # a in [2^e, 2^(e+1))
    q = math.ldexp(1.0, max(e, emin) - p + 1)
    x = a / q
    f = math.floor(x)
    frac = x - f
    if frac > 0.5 or (frac == 0.5 and (tt > 0.0 or (tt == 0.0 and f % 2.0 == 1.0))):
        f += 1.0
    r = f * q
    if r >= math.ldexp(1.0, emax + 1):
        r = math.inf
    return math.copysign(r, s)


# NaNs held in binary64 (docs/semantics.md, "NaN bits"): a binary32 NaN is held as the binary64
# NaN with its sign, the quiet bit set and its payload at the top of the fraction (what a hardware
# widening gives), a binary16 NaN likewise; narrowing takes the payload back.
_QUIET64 = np.uint64(0x0008000000000000)
_NAN64 = np.uint64(0x7FF0000000000000)


@njit(cache=True, inline="always")
def _nan_fma(a, b, c):
    """The NaN an x86 FMA returns where ``a * b + c`` is a NaN, for values held in binary64:
    ``exact.nan_fma32``'s rule, on binary32 (narrowing keeps a held NaN's sign and payload, a
    binary16 one's too, and widening gives them back)."""
    return np.float64(nan_fma32(np.float32(a), np.float32(b), np.float32(c)))


@njit(cache=True, inline="always")
def fma32_ieee(a, b, c):
    """binary32 ``a * b + c`` with one rounding (RNE), denormals kept: the values as binary64.

    ``a * b`` of two binary32 values is exact in binary64 (48 significant bits, exponents far
    inside its range) and TwoSum makes the sum exact. A result in binary32's normal range is
    rounded as ``exact.round_ftz`` rounds it (a binary64 -> binary32 conversion, which FTZ cannot
    touch there, with TwoSum's error deciding exact ties); below 2^-126, where that function
    flushes, :func:`round_binary` rounds onto the denormal grid instead."""
    s, t = _two_sum(a * b, c)
    if s != s:
        return _nan_fma(a, b, c)
    if abs(s) < 2.0**-126:  # zero, or the denormal range (NaN fails the test)
        return round_binary(s, t, 24, -126, 127)
    return np.float64(round_ftz(s, t))


@njit(cache=True, inline="always")
def _widen32(x, bits):
    """A binary32 value, given with its bits, as binary64: a denormal by integer arithmetic (the
    caller's MXCSR.DAZ would read it as zero in a conversion), anything else converted."""
    if (bits & np.uint32(0x7F800000)) == 0:
        v = np.float64(bits & np.uint32(0x7FFFFF)) * _TWO_M149
        return -v if (bits >> np.uint32(31)) != 0 else v
    return np.float64(x)


@njit(cache=True, inline="always")
def fma16(a, b, c):
    """binary16 ``a * b + c`` with one rounding (RNE), subnormals kept, |x| >= 65520 to inf."""
    s, t = _two_sum(a * b, c)
    if s != s:
        return _nan_fma(a, b, c)
    return round_binary(s, t, 11, -14, 15)


@njit(cache=True, inline="always")
def f32_from_bits(bits):
    """binary32 bits -> the value as binary64, by integer operations (no DAZ can act)."""
    bits = np.uint32(bits)
    sign = -1.0 if (bits >> np.uint32(31)) != 0 else 1.0
    e = np.int64((bits >> np.uint32(23)) & np.uint32(0xFF))
    m = np.int64(bits & np.uint32(0x7FFFFF))
    if e == 255:
        if m == 0:
            return sign * math.inf
        # the NaN held in binary64 (sign, payload on top, quieted as a widening does)
        return bits_f64(
            (np.uint64(bits & np.uint32(0x80000000)) << np.uint64(32))
            | _NAN64
            | _QUIET64
            | (np.uint64(m) << np.uint64(29))
        )
    if e == 0:
        return sign * (np.float64(m) * _TWO_M149)
    return sign * math.ldexp(np.float64(m | 0x800000), e - 150)


@njit(cache=True, inline="always")
def f32_to_bits(v):
    """A binary64 value on the binary32 grid (or inf/NaN) -> its binary32 bits (no FTZ can act);
    a NaN keeps its sign and the top of its payload."""
    if v != v:
        u = f64_bits(v)
        return np.uint32(
            ((u >> np.uint64(32)) & np.uint64(0x80000000))
            | np.uint64(0x7FC00000)
            | ((u >> np.uint64(29)) & np.uint64(0x3FFFFF))
        )
    sign = np.uint32(0x80000000) if math.copysign(1.0, v) < 0.0 else np.uint32(0)
    a = abs(v)
    if a == math.inf:
        return sign | np.uint32(0x7F800000)
    if a < 2.0**-126:
        return sign | np.uint32(a * _TWO_P149)
    mant, e = math.frexp(a)  # a = mant * 2^e, mant in [0.5, 1)
    frac = np.uint32((mant * 2.0 - 1.0) * 8388608.0)
    return sign | (np.uint32(e + 126) << np.uint32(23)) | frac


@njit(cache=True, inline="always")
def f16_from_bits(h):
    """binary16 bits -> the value as binary64."""
    h = np.uint32(h)
    sign = -1.0 if (h & np.uint32(0x8000)) != 0 else 1.0
    e = np.int64((h >> np.uint32(10)) & np.uint32(0x1F))
    m = np.int64(h & np.uint32(0x3FF))
    if e == 31:
        if m == 0:
            return sign * math.inf
        return bits_f64(
            (np.uint64(h & np.uint32(0x8000)) << np.uint64(48)) | _NAN64 | _QUIET64 | (np.uint64(m) << np.uint64(42))
        )
    if e == 0:
        return sign * (np.float64(m) * _TWO_M24)
    return sign * math.ldexp(np.float64(m | 0x400), e - 25)


@njit(cache=True, inline="always")
def f16_to_bits(v):
    """A binary64 value on the binary16 grid (or inf/NaN) -> its binary16 bits; a NaN keeps its
    sign and the top of its payload."""
    if v != v:
        u = f64_bits(v)
        return np.uint16(
            ((u >> np.uint64(48)) & np.uint64(0x8000)) | np.uint64(0x7E00) | ((u >> np.uint64(42)) & np.uint64(0x1FF))
        )
    sign = np.uint32(0x8000) if math.copysign(1.0, v) < 0.0 else np.uint32(0)
    a = abs(v)
    if a == math.inf:
        return np.uint16(sign | np.uint32(0x7C00))
    if a < 2.0**-14:
        return np.uint16(sign | np.uint32(a * _TWO_P24))
    mant, e = math.frexp(a)
    frac = np.uint32((mant * 2.0 - 1.0) * 1024.0)
    return np.uint16(sign | (np.uint32(e + 14) << np.uint32(10)) | frac)


# ---------------------------------------------------------------------------------------------
# Vector bodies, as explicit LLVM IR (see vector.py for why)
# ---------------------------------------------------------------------------------------------

_I8 = ir.IntType(8)
_I16 = ir.IntType(16)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_F32 = ir.FloatType()
_F16 = ir.HalfType()


def _vec(t, n):
    return ir.VectorType(t, n)


def _const(n):
    return ir.Constant(_I64, n)


def _ptr(builder, base, offset, vtype):
    return builder.bitcast(builder.gep(base, [offset]), vtype.as_pointer())


def _splat(builder, scalar, vtype):
    undef = ir.Constant(vtype, ir.Undefined)
    v = builder.insert_element(undef, scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, undef, ir.Constant(_vec(_I32, vtype.count), [0] * vtype.count))


def _fn(builder, name, ret, args):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), name)


def _lanes(builder, v, idx):
    """Lanes ``idx`` of vector ``v``."""
    return builder.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), ir.Constant(_vec(_I32, len(idx)), idx))


def _body(emit):
    """An intrinsic ``(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps, a_step, b_step) -> None``
    running ``nsteps`` (at least 1) consecutive K steps with C held in registers between them:
    step ``t`` reads the A panel at ``a_off + t * a_step`` and the B block at ``b_off + t *
    b_step``. Every C element is one chain in K order, so this equals ``nsteps`` one-step calls.

    ``emit(builder, sig, a_ptr, b_ptr, c_ptr, crow, over_steps)`` writes the IR: it loads C (rows
    at ``crow(r)``), calls ``over_steps(step, acc)`` with ``step(arow, b_off, acc) -> acc`` emitting
    one K step (``arow(r)``: the offset of row ``r`` of that step's A panel; ``b_off``: its B
    block; ``acc``: rows of accumulator vectors), and stores what it returns."""

    @intrinsic
    def body(typingctx, A, a_off, lda, B, b_off, C, c_off, ldc, nsteps, a_step, b_step):
        sig = types.void(A, a_off, lda, B, b_off, C, c_off, ldc, nsteps, a_step, b_step)

        def codegen(context, builder, signature, args):
            ptrs = [context.make_array(signature.args[i])(context, builder, args[i]).data for i in (0, 3, 5)]

            def crow(r):
                return builder.add(args[6], builder.mul(args[7], _const(r)))

            def over_steps(step, acc):
                rows, parts = len(acc), len(acc[0])

                def one(t, flat):
                    a0 = builder.add(args[1], builder.mul(t, args[9]))
                    b0 = builder.add(args[4], builder.mul(t, args[10]))

                    def arow(r):
                        return builder.add(a0, builder.mul(args[2], _const(r)))

                    grid = [flat[r * parts : (r + 1) * parts] for r in range(rows)]
                    return [v for row in step(arow, b0, grid) for v in row]

                flat = ir_loop(builder, args[8], one, [v for row in acc for v in row])
                return [flat[r * parts : (r + 1) * parts] for r in range(rows)]

            emit(builder, signature, *ptrs, crow, over_steps)
            return context.get_dummy_value()

        return sig, codegen

    return body


def _a_quad(builder, ap, arow_r, q, shifted):
    """The four A bytes of quad ``q`` of a row as one i32; s8 activations shifted to u8."""
    quad = builder.load(_ptr(builder, ap, builder.add(arow_r, _const(4 * q)), _I32), align=1)
    return builder.xor(quad, ir.Constant(_I32, 0x80808080)) if shifted else quad


def _int_rows(mr: int, width: int, step):
    """A body over ``mr`` rows x 16 columns of int32 C with accumulators of ``width`` lanes:
    ``step(builder, acc_row, a_quad_i32, b_vectors) -> acc_row`` runs one quad."""
    parts = TILE // width
    vt = _vec(_I32, width)

    def emit(builder, sig, ap, bp, cp, crow, over_steps):
        shifted = sig.args[0].dtype.signed  # int8 A: signed activations, shifted by +128
        cptr = [
            [_ptr(builder, cp, builder.add(crow(r), _const(width * v)), vt) for v in range(parts)] for r in range(mr)
        ]

        def one_step(arow, b_off, acc):
            rows = [arow(r) for r in range(mr)]
            for q in range(_STEP):
                # B quad q: 16 columns x 4 bytes; vector v holds columns width*v .. width*(v+1)-1.
                bq = [
                    builder.load(
                        _ptr(builder, bp, builder.add(b_off, _const(64 * q + 4 * width * v)), _vec(_I8, 4 * width)),
                        align=1,
                    )
                    for v in range(parts)
                ]
                for r in range(mr):
                    acc[r] = step(builder, acc[r], _a_quad(builder, ap, rows[r], q, shifted), bq)
            return acc

        acc = over_steps(one_step, [[builder.load(p, align=4) for p in row] for row in cptr])
        for r in range(mr):
            for v in range(parts):
                builder.store(acc[r][v], cptr[r][v], align=4)

    return _body(emit)


def _widen_quads(builder, aq, b, width):
    """Exact products of a (u8, splat over columns) and b (s8), as int32 lanes ``4 * width``."""
    n = 4 * width
    a8 = builder.bitcast(_splat(builder, aq, _vec(_I32, width)), _vec(_I8, n))
    return builder.mul(builder.zext(a8, _vec(_I32, n)), builder.sext(b, _vec(_I32, n)))


def _sum_lanes(builder, x, group):
    """Sums of ``group`` consecutive lanes (a power of two), by even/odd halving."""
    while group > 1:
        n = x.type.count
        x = builder.add(_lanes(builder, x, list(range(0, n, 2))), _lanes(builder, x, list(range(1, n, 2))))
        group //= 2
    return x


def _sat_step(native: bool, width: int):
    if native:  # AVX512_VNNI: the instruction itself

        def step(builder, acc, aq, bq):
            vt = _vec(_I32, 16)
            f = _fn(builder, "llvm.x86.avx512.vpdpbusds.512", vt, [vt, vt, vt])
            a = _splat(builder, aq, vt)
            return [builder.call(f, [acc[0], a, builder.bitcast(bq[0], vt)])]

        return step

    def step(builder, acc, aq, bq):  # type: ignore[no-redef]
        vt = _vec(_I32, width)
        f = _fn(builder, f"llvm.sadd.sat.v{width}i32", vt, [vt, vt])
        return [
            builder.call(f, [acc[v], _sum_lanes(builder, _widen_quads(builder, aq, bq[v], width), 4)])
            for v in range(len(bq))
        ]

    return step


def _pairs_step(kind: str, width: int):
    if kind == "zmm":  # VPMADDUBSW zmm, VPMADDWD zmm with ones, VPADDD

        def step(builder, acc, aq, bq):
            v64, v32w, v16 = _vec(_I8, 64), _vec(_I16, 32), _vec(_I32, 16)
            ubsw = _fn(builder, "llvm.x86.avx512.pmaddubs.w.512", v32w, [v64, v64])
            wd = _fn(builder, "llvm.x86.avx512.pmaddw.d.512", v16, [v32w, v32w])
            a = builder.bitcast(_splat(builder, aq, v16), v64)
            w = builder.call(ubsw, [a, bq[0]])
            return [builder.add(acc[0], builder.call(wd, [w, ir.Constant(v32w, [1] * 32)]))]

        return step
    if kind == "ymm":  # the same on ymm, two per 16 columns

        def step(builder, acc, aq, bq):
            v32, v16w, v8 = _vec(_I8, 32), _vec(_I16, 16), _vec(_I32, 8)
            ubsw = _fn(builder, "llvm.x86.avx2.pmadd.ub.sw", v16w, [v32, v32])
            wd = _fn(builder, "llvm.x86.avx2.pmadd.wd", v8, [v16w, v16w])
            a = builder.bitcast(_splat(builder, aq, v8), v32)
            out = []
            for v in range(len(bq)):
                w = builder.call(ubsw, [a, bq[v]])
                out.append(builder.add(acc[v], builder.call(wd, [w, ir.Constant(v16w, [1] * 16)])))
            return out

        return step

    def step(builder, acc, aq, bq):  # type: ignore[no-redef]  # generic: int16 products, pairs added saturating
        n = 4 * width
        vw, vh = _vec(_I16, n), _vec(_I16, n // 2)
        sat = _fn(builder, f"llvm.sadd.sat.v{n // 2}i16", vh, [vh, vh])
        a8 = builder.bitcast(_splat(builder, aq, _vec(_I32, width)), _vec(_I8, n))
        out = []
        for v in range(len(bq)):
            prod = builder.mul(builder.zext(a8, vw), builder.sext(bq[v], vw))
            w = builder.call(
                sat, [_lanes(builder, prod, list(range(0, n, 2))), _lanes(builder, prod, list(range(1, n, 2)))]
            )
            w32 = builder.sext(w, _vec(_I32, n // 2))
            out.append(builder.add(acc[v], _sum_lanes(builder, w32, 2)))
        return out

    return step


def _b_row(builder, bp, b_off, k, width, v, lane=_F32):
    """Columns ``width*v ..`` of B row ``k`` of a float K step (kernel layout: row-major 32 x 16),
    as ``lane`` values (binary32, or binary16 read from its codes)."""
    vt = _vec(lane, width)
    return builder.load(
        _ptr(builder, bp, builder.add(b_off, _const(TILE * k + width * v)), vt), align=2 if lane is _F16 else 4
    )


def _a_elem(builder, ap, arow_r, k, vt):
    """A's element ``k`` of a row, splat to ``vt`` (a binary16 code read as the number it is)."""
    x = builder.load(builder.gep(ap, [builder.add(arow_r, _const(k))]))
    return _splat(builder, x if x.type == vt.element else builder.bitcast(x, vt.element), vt)


def _chain_rows(mr: int, width: int, c_lane, align: int, load, fma, store, lane=_F32):
    """A body over ``mr`` rows x 16 columns, one FMA chain per C element in K order: C lanes of
    type ``c_lane`` (``align`` bytes) become accumulators through ``load(builder, v)``, each K
    element runs ``fma(builder, a, b, acc)`` on A and B as ``lane`` vectors, and ``store(builder,
    acc)`` gives the lanes back."""
    parts = TILE // width
    vt = _vec(lane, width)
    vc = _vec(c_lane, width)

    def emit(builder, sig, ap, bp, cp, crow, over_steps):
        cptr = [
            [_ptr(builder, cp, builder.add(crow(r), _const(width * v)), vc) for v in range(parts)] for r in range(mr)
        ]

        def one_step(arow, b_off, acc):
            rows = [arow(r) for r in range(mr)]
            for k in range(2 * _STEP):
                bv = [_b_row(builder, bp, b_off, k, width, v, lane) for v in range(parts)]
                for r in range(mr):
                    sa = _a_elem(builder, ap, rows[r], k, vt)
                    acc[r] = [fma(builder, sa, bv[v], acc[r][v]) for v in range(parts)]
            return acc

        acc = over_steps(one_step, [[load(builder, builder.load(p, align=align)) for p in row] for row in cptr])
        for r in range(mr):
            for v in range(parts):
                builder.store(store(builder, acc[r][v]), cptr[r][v], align=align)

    return _body(emit)


def f32fma_rows(mr: int, width: int):
    """``C[mr x 16] = fma(a[k], b[k], C)`` for k = 0 .. 31 of each K step in order."""
    vt = _vec(_F32, width)

    def fma(builder, a, b, acc):
        return builder.call(_fn(builder, f"llvm.fma.v{width}f32", vt, [vt, vt, vt]), [a, b, acc])

    return _chain_rows(mr, width, _F32, 4, lambda builder, v: v, fma, lambda builder, v: v)


def _ci(width, value):
    return ir.Constant(_vec(_I32, width), [value] * width)


def _round16(builder, x, width):
    """binary32 lanes rounded to nearest-even on the binary16 grid (subnormals kept, |x| >= 65520
    to infinity), still as binary32, for any x: F16C's conversions where the target has them
    (``vcvtps2ph`` ignores MXCSR.FTZ, ``vcvtph2ps`` ignores DAZ), else integer operations and a
    magic-number addition, ``(x + M) - M`` with M = 1.5 * 2^(23 + log2 quantum), exact in binary32
    because every value involved is normal."""
    if _F16C:
        vh = _vec(_F16, width)
        return builder.fpext(builder.fptrunc(x, vh), x.type)
    vi = _vec(_I32, width)
    xb = builder.bitcast(x, vi)
    mag = builder.and_(xb, _ci(width, 0x7FFFFFFF))
    sign = builder.and_(xb, _ci(width, -0x80000000))
    e = builder.lshr(mag, _ci(width, 23))
    qe = builder.select(builder.icmp_signed("<", e, _ci(width, 113)), _ci(width, 113), e)  # 2^-14 and up
    magic = builder.bitcast(
        builder.or_(builder.shl(builder.add(qe, _ci(width, 13)), _ci(width, 23)), _ci(width, 0x400000)), x.type
    )
    ax = builder.bitcast(mag, x.type)
    r = builder.fsub(builder.fadd(ax, magic), magic)
    rb = builder.bitcast(r, vi)
    rb = builder.select(builder.icmp_signed(">=", mag, _ci(width, 0x477FF000)), _ci(width, 0x7F800000), rb)  # 65520
    rb = builder.select(builder.icmp_signed(">=", mag, _ci(width, 0x7F800000)), mag, rb)  # inf, NaN as they are
    return builder.bitcast(builder.or_(rb, sign), x.type)


def _load16(builder, h, width):
    """binary16 codes -> binary32 lanes, exactly."""
    if _F16C:
        return builder.fpext(builder.bitcast(h, _vec(_F16, width)), _vec(_F32, width))
    vi = _vec(_I32, width)
    x = builder.zext(h, vi)
    sign = builder.shl(builder.and_(x, _ci(width, 0x8000)), _ci(width, 16))
    mag = builder.and_(x, _ci(width, 0x7FFF))
    normal = builder.add(builder.shl(mag, _ci(width, 13)), _ci(width, (127 - 15) << 23))
    special = builder.or_(builder.shl(mag, _ci(width, 13)), _ci(width, 0x7F800000))
    sub = builder.bitcast(
        builder.fmul(builder.sitofp(mag, _vec(_F32, width)), ir.Constant(_vec(_F32, width), [2.0**-24] * width)), vi
    )
    out = builder.select(builder.icmp_signed("<", mag, _ci(width, 0x400)), sub, normal)
    out = builder.select(builder.icmp_signed(">=", mag, _ci(width, 0x7C00)), special, out)
    return builder.bitcast(builder.or_(out, sign), _vec(_F32, width))


def _store16(builder, x, width):
    """binary32 lanes holding binary16 values -> their binary16 codes, exactly."""
    if _F16C:
        return builder.bitcast(builder.fptrunc(x, _vec(_F16, width)), _vec(_I16, width))
    vi = _vec(_I32, width)
    xb = builder.bitcast(x, vi)
    mag = builder.and_(xb, _ci(width, 0x7FFFFFFF))
    sign = builder.and_(builder.lshr(xb, _ci(width, 16)), _ci(width, 0x8000))
    normal = builder.sub(builder.lshr(mag, _ci(width, 13)), _ci(width, (127 - 15) << 10))
    ax = builder.bitcast(mag, x.type)
    sub = builder.fptosi(builder.fmul(ax, ir.Constant(x.type, [2.0**24] * width)), vi)
    out = builder.select(builder.icmp_signed("<", mag, _ci(width, 0x38800000)), sub, normal)  # below 2^-14
    out = builder.select(builder.icmp_signed(">=", mag, _ci(width, 0x7F800000)), _ci(width, 0x7C00), out)
    # a NaN: quiet, with the top of its payload (as vcvtps2ph gives it)
    nan = builder.or_(_ci(width, 0x7E00), builder.and_(builder.lshr(mag, _ci(width, 13)), _ci(width, 0x3FF)))
    out = builder.select(builder.icmp_signed(">", mag, _ci(width, 0x7F800000)), nan, out)
    return builder.trunc(builder.or_(out, sign), _vec(_I16, width))


def _fma16_exact(builder, a, b, acc, width):
    """One VFMADD231PH step on binary32 vectors holding binary16 values, for any input: the exact
    product, a TwoSum, the sum rounded to odd at 24 bits, then RNE to binary16 (as binary32)."""
    vi = _vec(_I32, width)
    p = builder.fmul(a, b)  # exact: 11 x 11 bits, far inside binary32's normal range
    s = builder.fadd(p, acc)
    bb = builder.fsub(s, p)
    t = builder.fadd(builder.fsub(p, builder.fsub(s, bb)), builder.fsub(acc, bb))
    sb = builder.bitcast(s, vi)
    tb = builder.bitcast(t, vi)
    zero = ir.Constant(vi, [0] * width)
    inexact = builder.fcmp_unordered("!=", t, ir.Constant(t.type, [0.0] * width))
    finite = builder.icmp_unsigned(
        "!=", builder.and_(sb, ir.Constant(vi, [0x7F800000] * width)), ir.Constant(vi, [0x7F800000] * width)
    )
    even = builder.icmp_unsigned("==", builder.and_(sb, ir.Constant(vi, [1] * width)), zero)
    need = builder.and_(builder.and_(inexact, finite), even)
    # t on the far side of zero from s: the exact sum is below |s|, so step towards zero.
    down = builder.icmp_signed("<", builder.xor(sb, tb), zero)
    delta = builder.select(down, ir.Constant(vi, [-1] * width), ir.Constant(vi, [1] * width))
    odd = builder.bitcast(builder.select(need, builder.add(sb, delta), sb), a.type)
    out = _round16(builder, odd, width)
    # A NaN by the rule, not by the order LLVM gave the multiply and add their operands: the
    # first NaN multiplicand, else a NaN acc, quieted (a new NaN is the default one, as computed).
    for x in (acc, b, a):
        quiet = builder.bitcast(builder.or_(builder.bitcast(x, vi), ir.Constant(vi, [0x400000] * width)), a.type)
        out = builder.select(builder.fcmp_unordered("uno", x, x), quiet, out)
    return out


def _nearest11(builder, r, width):
    """binary32 lanes rounded to the nearest number of 11 significant bits, for ``2^-14 <= |r| <
    65520`` (binary16's normal range, where its grid is those numbers) and ``r`` not halfway
    between two of them (the caller sends such lanes elsewhere; which way a tie goes here is
    unspecified): Veltkamp's split with the constant 2^13 + 1, ``g = r * 8193``, ``hi = g - (g -
    r)``, three IEEE operations in round-to-nearest with no overflow (|g| < 2^30). Its high part
    is a rounding to nearest of ``r`` on 24 - 13 bits (S. Boldo, "Pitfalls of a full
    floating-point proof: example on the formal proof of the Veltkamp/Dekker algorithms", IJCAR
    2006); ``tests/test_isa_kernels.py`` checks every binary32 of the range. It needs neither F16C
    nor an exponent, and on Zen 3 and Zen 4 it ran faster than F16C's ``vcvtps2ph``/``vcvtph2ps``
    round trip (``_round16``). LLVM keeps the three operations: the IR carries no fast-math flag
    that would let it fold ``g - (g - r)`` to ``r``."""
    g = builder.fmul(r, ir.Constant(r.type, [8193.0] * width))
    return builder.fsub(g, builder.fsub(g, r))


def _fma16_vec(builder, a, b, acc, width):
    """One VFMADD231PH step: ``r = fma32(a, b, acc)`` rounded to binary16, which is the single
    binary16 rounding of the exact value unless ``r`` landed on a binary16 midpoint (rounding to
    nearest is monotonic, and every midpoint is a binary32 number, so ``r`` can reach one but not
    cross it). Lanes with ``2^-14 <= |r| < 65520`` round by :func:`_nearest11`. A lane that may be
    a midpoint (the 13 bits below binary16's last one are 1000...0) or lies outside that range
    (binary16 subnormals, overflow to infinity, infinities, NaN: one unsigned compare of ``|r| -
    2^-14``) sends the vector through :func:`_fma16_exact`; for normal data that is a few vectors
    in a thousand. ``r`` is never a binary32 denormal: the caller's MXCSR cannot act."""
    vt = a.type
    vi = _vec(_I32, width)
    fma = _fn(builder, f"llvm.fma.v{width}f32", vt, [vt, vt, vt])
    r = builder.call(fma, [a, b, acc])
    fast = _nearest11(builder, r, width)
    rb = builder.bitcast(r, vi)
    mag = builder.and_(rb, _ci(width, 0x7FFFFFFF))
    mid = builder.icmp_unsigned("==", builder.and_(rb, _ci(width, 0x1FFF)), _ci(width, 0x1000))
    # |r| < 2^-14 (0x38800000) or |r| >= 65520 (0x477FF000), NaN included: one wrapping subtraction
    outside = builder.icmp_unsigned(">=", builder.sub(mag, _ci(width, 0x38800000)), _ci(width, 0x477FF000 - 0x38800000))
    lanes = builder.or_(mid, outside)
    any_ = builder.call(_fn(builder, f"llvm.vector.reduce.or.v{width}i1", ir.IntType(1), [lanes.type]), [lanes])
    before = builder.block
    with builder.if_then(any_, likely=False):
        slow = _fma16_exact(builder, a, b, acc, width)
        slow_block = builder.block
    out = builder.phi(vt)
    out.add_incoming(fast, before)
    out.add_incoming(slow, slow_block)
    return out


def f16acc_rows(mr: int, width: int):
    """``C[mr x 16]`` (binary16 codes) through 32 VFMADD231PH steps per K step, in K order; the
    codes convert exactly both ways."""
    return _chain_rows(
        mr,
        width,
        _I16,
        2,
        lambda builder, h: _load16(builder, h, width),
        lambda builder, a, b, acc: _fma16_vec(builder, a, b, acc, width),
        lambda builder, x: _store16(builder, x, width),
    )


def f16acc_native_rows(mr: int, width: int = TILE):
    """``C[mr x 16]`` through 32 VFMADD231PH steps per K step, in K order, on binary16 codes of A,
    B and C read as the numbers they are: ``llvm.fma`` on ``half`` vectors, the IEEE binary16 FMA
    (one rounding of the exact value, nearest-even, subnormals kept), which is the instruction's
    definition. Where the target has AVX512-FP16 it is ``vfmadd231ph`` with A's element as an
    embedded broadcast; elsewhere LLVM computes each lane in binary64 (``fma``, exact or rounded
    once below binary16's precision) and rounds that to binary16 once (``__truncdfhf2``), which is
    the same rounding (``docs/isa-profiles.md``). The table picks this body only where the
    instruction exists (``targets.NATIVE``); the tests run it on every host."""
    vh = _vec(_F16, width)
    vi = _vec(_I16, width)

    def fma(builder, a, b, acc):
        return builder.call(_fn(builder, f"llvm.fma.v{width}f16", vh, [vh, vh, vh]), [a, b, acc])

    return _chain_rows(
        mr,
        width,
        _I16,
        2,
        lambda builder, h: builder.bitcast(h, vh),
        fma,
        lambda builder, x: builder.bitcast(x, vi),
        lane=_F16,
    )


# ---------------------------------------------------------------------------------------------
# Tile multiplies (the ``tile_multiply`` signature of tiles.py)
# ---------------------------------------------------------------------------------------------


def _rows_tile(body, mr_body):
    """A tile multiply over ``nsteps`` K steps from an ``mr_body``-row body. A partial tile runs
    on a 16 x 16 scratch copy of its C block (A panels are zero-padded to 16 rows); only its rows
    are computed."""

    @njit(inline="always")
    def tile(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, nsteps, a_step, b_step):
        partial = mr < TILE or nc < TILE
        if partial:
            for mm in range(TILE):
                for n in range(TILE):
                    scratch[mm * TILE + n] = C[c_off + mm * ldc + n] if mm < mr and n < nc else 0
            tgt, t_off, t_ld = scratch, 0, TILE
        else:
            tgt, t_off, t_ld = C, c_off, ldc
        for mm in range(0, mr, mr_body):
            body(A, a_off + mm * lda, lda, B, b_off, tgt, t_off + mm * t_ld, t_ld, nsteps, a_step, b_step)
        if partial:
            for mm in range(mr):
                for n in range(nc):
                    C[c_off + mm * ldc + n] = scratch[mm * TILE + n]

    return tile


@njit(cache=True, inline="always")
def _f32fma_exact(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, nsteps, a_step, b_step):
    """VFMADD231PS one element at a time through :func:`fma32_ieee`; denormals read and written
    through their bit patterns, so the caller's MXCSR cannot act."""
    Ab, Bb, Cb = A.view(np.uint32), B.view(np.uint32), C.view(np.uint32)
    for mm in range(mr):
        for n in range(nc):
            c = c_off + mm * ldc + n
            acc = _widen32(C[c], Cb[c])
            for t in range(nsteps):
                for k in range(2 * _STEP):
                    i = a_off + t * a_step + mm * lda + k
                    j = b_off + t * b_step + TILE * k + n
                    acc = fma32_ieee(_widen32(A[i], Ab[i]), _widen32(B[j], Bb[j]), acc)
            if abs(acc) < 2.0**-126 and acc != 0.0:  # a denormal result: its bits, exactly
                Cb[c] = f32_to_bits(acc)
            else:  # normal, zero, infinite or NaN: converting is exact and FTZ cannot act
                C[c] = np.float32(acc)


# What the compile target can run natively (the same feature sets as its targets.CLASSES class,
# so the vector widths of targets.SHAPES agree): VPDPBUSDS with AVX512_VNNI, VPMADDUBSW and
# VPMADDWD on zmm with AVX512BW and on ymm with AVX2; generic IR elsewhere.
_HAS = targets.target_features()
_VNNI = {"+avx512f", "+avx512bw", "+avx512vnni"} <= _HAS
_F16C = "+f16c" in _HAS
_PAIRS_KIND = "zmm" if {"+avx512f", "+avx512bw"} <= _HAS else "ymm" if {"+avx2", "+fma"} <= _HAS else "generic"
SAT, PAIRS, FMA, F16, F16N = (targets.shape(f) for f in ("i8sat", "i16pairs", "f32fma", "f16acc", "f16acc_native"))

_i8sat = _rows_tile(_int_rows(SAT.rows, SAT.width, _sat_step(_VNNI, SAT.width)), SAT.rows)
_i16pairs = _rows_tile(_int_rows(PAIRS.rows, PAIRS.width, _pairs_step(_PAIRS_KIND, PAIRS.width)), PAIRS.rows)
_f32fma_fast = _rows_tile(f32fma_rows(FMA.rows, FMA.width), FMA.rows)
_f16acc = _rows_tile(f16acc_rows(F16.rows, F16.width), F16.rows)
_f16acc_native = _rows_tile(f16acc_native_rows(F16N.rows, F16N.width), F16N.rows)

#: variant -> tile multiply over consecutive K steps (``tiles.tile_steps``, and one step for
#: ``tiles.tile_multiply``): ``(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, nsteps,
#: a_step, b_step)``.
TILE_BODIES = {
    I8SAT: _i8sat,
    I16PAIRS: _i16pairs,
    F32FMA_FAST: _f32fma_fast,
    F32FMA_EXACT: _f32fma_exact,
    F16ACC: _f16acc,
    F16ACC_NATIVE: _f16acc_native,
}
