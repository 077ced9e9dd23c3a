"""Register-blocked vector microkernels, emitted as explicit LLVM vector IR through Numba intrinsics.

Why explicit IR: Numba leaves LLVM's SLP vectorizer off, and array accumulators cannot be kept in
registers because Numba cannot mark arrays ``noalias`` (numba issues #5198, #3750). Writing ``<N x float>``
values and ``llvm.fma.vNf32`` directly makes the vector code the definition, not a hope, on any
target LLVM supports (the width and rows of each body come from ``targets.py``: zmm with
AVX-512, ymm with AVX2; other targets get whatever LLVM legalizes the vectors into).

``float_tile_rows(mr)``: one full tile multiply (16 pairs along K) for ``mr`` rows x 16 columns of
C, the fast variant of TDPBF16PS / TDPFP16PS. The kernel B layout is ``[pair][even/odd][n]`` so
each pair needs one broadcast of the even and one of the odd A element per row, and the partial
sums of the even and odd elements live in separate registers, exactly the ``e``/``o`` of the SDM.
Only valid where the fast-path proof holds (see ``tiles.py``).

``int_tile_rows(mr)``: TDPB*D for ``mr`` rows x 16 columns, straight from the packed bytes: byte
pairs widened, multiplied and summed into int32 lanes in the form LLVM lowers to ``vpmaddwd``
(extend, multiply, add even and odd lanes), then added with wraparound. Integer sums do not
depend on order, so this regrouping keeps the bits."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_F32 = ir.FloatType()
_V8I = ir.VectorType(_I32, 8)
_V16I = ir.VectorType(_I32, 16)
_PAIRS = 16  # pairs (float) or quads (int) in one full tile multiply
_TILE = 16  # C tile columns


def _const(n):
    return ir.Constant(_I64, n)


def _ptr(builder, base, offset, vector_type=None):
    p = builder.gep(base, [offset])
    return builder.bitcast(p, vector_type.as_pointer()) if vector_type is not None else p


def _splat(builder, scalar, vtype):
    undef = ir.Constant(vtype, ir.Undefined)
    v = builder.insert_element(undef, scalar, ir.Constant(_I32, 0))
    mask = ir.Constant(ir.VectorType(_I32, vtype.count), [0] * vtype.count)
    return builder.shuffle_vector(v, undef, mask)


def outlined(builder, name: str, args: list, emit) -> None:
    """Call ``emit(fbuilder, *params)`` as the body of a separate ``noinline`` function of the
    caller's module (created once per module under ``name``, which must name what ``emit``
    writes): LLVM then allocates the body's registers on its own, where inlined into a large
    driver its inner loop can inherit the driver's live values and spill."""
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ir.VoidType(), [a.type for a in args]), name=name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        fb = ir.IRBuilder(fn.append_basic_block("entry"))
        emit(fb, *fn.args)
        fb.ret_void()
    builder.call(fn, args)


def phis(builder, branches: list) -> list:
    """At the block where branches meet, one phi per value: ``branches`` holds, per incoming
    branch, ``(values, block)``, the values that branch ends with (all of one length and type
    position by position) and the block it ends in."""
    out = []
    for i, first in enumerate(branches[0][0]):
        ph = builder.phi(first.type)
        for values, block in branches:
            ph.add_incoming(values[i], block)
        out.append(ph)
    return out


def _fma_fn(builder, vt):
    fnty = ir.FunctionType(vt, [vt, vt, vt])
    return cgutils.get_or_insert_function(builder.module, fnty, f"llvm.fma.v{vt.count}f32")


def _data(context, builder, arrtype, arr):
    return context.make_array(arrtype)(context, builder, arr).data


def _body_intrinsic(emit):
    """An intrinsic ``(A, a_off, lda, B, b_off, C, c_off, ldc) -> None`` whose IR ``emit`` writes.

    ``emit(builder, sig, ap, bp, cp, rows, c_off, ldc)`` gets the three data pointers, the flat
    offsets of the body's A rows (``rows(r)``), and C's offset and row stride."""

    @intrinsic
    def body(typingctx, A, a_off, lda, B, b_off, C, c_off, ldc):
        sig = types.void(A, a_off, lda, B, b_off, C, c_off, ldc)

        def codegen(context, builder, signature, args):
            A_, a_off_, lda_, B_, b_off_, C_, c_off_, ldc_ = args
            ptrs = [_data(context, builder, signature.args[i], args[i]) for i in (0, 3, 5)]

            def rows(r):
                return builder.add(a_off_, builder.mul(lda_, _const(r)))

            def crow(r):
                return builder.add(c_off_, builder.mul(ldc_, _const(r)))

            emit(builder, signature, *ptrs, rows, b_off_, crow)
            return context.get_dummy_value()

        return sig, codegen

    return body


def _load_b_pair(builder, bp, b_off, p, vt):
    """B vectors of pair ``p`` of a float kernel block: ``[even|odd][vector of 16 columns]``."""
    parts = _TILE // vt.count
    return [
        [
            builder.load(
                _ptr(builder, bp, builder.add(b_off, _const(2 * _TILE * p + _TILE * j + vt.count * v)), vt), align=4
            )
            for v in range(parts)
        ]
        for j in range(2)
    ]


def float_tile_rows(mr: int, width: int = 8):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc)``: ``C[mr x 16] += tile multiply``.

    ``A`` float32 (row ``r`` of the step at flat index ``a_off + r*lda``, 32 K values), ``B`` the
    kernel-layout float32 block at ``b_off`` (16 pairs x [even 16 | odd 16]), ``C`` float32 rows at
    ``c_off + r*ldc``. Per C element: ``e``/``o`` start at +0, 16 FMAs each, then ``C + (e + o)``.
    ``width`` is the vector length in floats (8: ymm, 16: zmm), a divisor of 16.
    """
    vt = ir.VectorType(_F32, width)
    parts = _TILE // width  # vectors per 16 columns

    def emit(builder, sig, ap, bp, cp, rows, b_off, crow):
        zero = ir.Constant(vt, [0.0] * width)
        fma = _fma_fn(builder, vt)
        # acc[r][j][v]: j = 0 even, 1 odd partial sums; v = which vector of the 16 columns.
        acc = [[[zero] * parts for _ in range(2)] for _ in range(mr)]
        arow = [rows(r) for r in range(mr)]
        for p in range(_PAIRS):
            bv = _load_b_pair(builder, bp, b_off, p, vt)
            for r in range(mr):
                for j in range(2):
                    sa = _splat(builder, builder.load(_ptr(builder, ap, builder.add(arow[r], _const(2 * p + j)))), vt)
                    acc[r][j] = [builder.call(fma, [sa, bv[j][v], acc[r][j][v]]) for v in range(parts)]
        for r in range(mr):
            c0 = crow(r)
            for v in range(parts):
                cptr = _ptr(builder, cp, builder.add(c0, _const(width * v)), vt)
                s = builder.fadd(acc[r][0][v], acc[r][1][v])  # add32(e, o)
                builder.store(builder.fadd(builder.load(cptr, align=4), s), cptr, align=4)

    return _body_intrinsic(emit)


def float_dot_rows(mr: int, width: int = 8, pairs: int = _PAIRS):
    """Intrinsic ``dot(A, a_off, lda, B, b_off, C, c_off, ldc)``: ``pairs`` VDPBF16PS steps.

    The seed's AVX-512 BF16 loop: each C element is one accumulator (loaded from C, stored back),
    and every pair applies ``fma(a_odd, b_odd, acc)`` then ``fma(a_even, b_even, acc)`` with the
    A elements broadcast across the 16 columns. Same operand layouts as ``float_tile_rows``.
    """
    vt = ir.VectorType(_F32, width)
    parts = _TILE // width

    def emit(builder, sig, ap, bp, cp, rows, b_off, crow):
        fma = _fma_fn(builder, vt)
        arow = [rows(r) for r in range(mr)]
        cptr = [
            [_ptr(builder, cp, builder.add(crow(r), _const(width * v)), vt) for v in range(parts)] for r in range(mr)
        ]
        acc = [[builder.load(cptr[r][v], align=4) for v in range(parts)] for r in range(mr)]
        for p in range(pairs):
            bv = _load_b_pair(builder, bp, b_off, p, vt)
            for r in range(mr):
                for j in (1, 0):  # the odd (high) element first
                    sa = _splat(builder, builder.load(_ptr(builder, ap, builder.add(arow[r], _const(2 * p + j)))), vt)
                    acc[r] = [builder.call(fma, [sa, bv[j][v], acc[r][v]]) for v in range(parts)]
        for r in range(mr):
            for v in range(parts):
                builder.store(acc[r][v], cptr[r][v], align=4)

    return _body_intrinsic(emit)


def int_tile_rows(mr: int):
    """Intrinsic ``tile(A, a_off, lda, B, b_off, C, c_off, ldc)`` for TDPB*D, ``mr`` rows x 16.

    ``A`` int8/uint8 (the 64 K values of the step at ``a_off + r*lda``), ``B`` the packed VNNI block
    (int8/uint8, ``[quad][n][4]``, 1 KiB) at ``b_off``, ``C`` int32 rows at ``c_off + r*ldc``.
    Each operand is sign- or zero-extended as its dtype says (the S/U letters of the instruction).
    """

    def emit(builder, sig, ap, bp, cp, rows, b_off, crow):
        a_ext = builder.sext if sig.args[0].dtype.signed else builder.zext
        b_ext = builder.sext if sig.args[3].dtype.signed else builder.zext
        v16b = ir.VectorType(ir.IntType(8), 16)
        v4i = ir.VectorType(_I32, 4)
        zero = ir.Constant(_V8I, [0] * 8)
        # acc[r][v]: columns 4v .. 4v+3, each as two lanes (bytes j = 0,1 and j = 2,3).
        acc = [[zero] * 4 for _ in range(mr)]
        even = ir.Constant(_V8I, list(range(0, 16, 2)))
        odd = ir.Constant(_V8I, list(range(1, 16, 2)))
        arow = [rows(r) for r in range(mr)]
        for q in range(_PAIRS):
            bv = [
                b_ext(
                    builder.load(_ptr(builder, bp, builder.add(b_off, _const(64 * q + 16 * v)), v16b), align=1), _V16I
                )
                for v in range(4)
            ]
            for r in range(mr):
                quad = builder.load(_ptr(builder, ap, builder.add(arow[r], _const(4 * q)), _I32), align=1)
                av = a_ext(builder.bitcast(_splat(builder, quad, v4i), v16b), _V16I)
                for v in range(4):
                    prod = builder.mul(av, bv[v])
                    s = builder.add(builder.shuffle_vector(prod, prod, even), builder.shuffle_vector(prod, prod, odd))
                    acc[r][v] = builder.add(acc[r][v], s)
        for r in range(mr):
            c0 = crow(r)
            for half in range(2):
                lo, hi = acc[r][2 * half], acc[r][2 * half + 1]
                cols = builder.add(builder.shuffle_vector(lo, hi, even), builder.shuffle_vector(lo, hi, odd))
                cptr = _ptr(builder, cp, builder.add(c0, _const(8 * half)), _V8I)
                builder.store(builder.add(builder.load(cptr, align=4), cols), cptr, align=4)

    return _body_intrinsic(emit)


def ir_loop(builder, trips, step, init: list) -> list:
    """Emit ``for t in range(trips): values = step(t, values)`` as one IR loop (not unrolled), so
    that a long K step compiles as a short body. ``trips`` (at least 1) is an int or an i64 IR
    value; ``t`` is an i64 IR value, ``values`` a flat list of IR values (the accumulators);
    returns their final values, the builder placed after the loop."""
    entry = builder.block
    loop = builder.append_basic_block("k.loop")
    done = builder.append_basic_block("k.done")
    builder.branch(loop)
    builder.position_at_end(loop)
    t = builder.phi(_I64)
    t.add_incoming(_const(0), entry)
    phis = [builder.phi(v.type) for v in init]
    for ph, v in zip(phis, init):
        ph.add_incoming(v, entry)
    out = step(t, list(phis))
    t1 = builder.add(t, _const(1))
    t.add_incoming(t1, builder.block)
    for ph, v in zip(phis, out):
        ph.add_incoming(v, builder.block)
    n = trips if isinstance(trips, ir.Value) else _const(trips)
    builder.cbranch(builder.icmp_unsigned("<", t1, n), loop, done)
    builder.position_at_end(done)
    return out


@intrinsic
def fetch_add(typingctx, arr, i, v):
    """``fetch_add(arr, i, v)``: atomically ``old = arr[i]; arr[i] += v``, returning ``old``
    (``arr`` an int64 array): the job counter the threads of a driver share."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None
    sig = types.int64(arr, i, v)

    def codegen(context, builder, signature, args):
        ptr = builder.gep(_data(context, builder, signature.args[0], args[0]), [args[1]])
        val = context.cast(builder, args[2], signature.args[2], types.int64)
        return builder.atomic_rmw("add", ptr, val, "seq_cst")

    return sig, codegen
