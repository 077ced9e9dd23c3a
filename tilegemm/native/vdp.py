"""The native dot-product GEMMs: one instruction per K group on 16 columns, in LLVM IR, over the
same packed operands as the tiles.

``void f(i64* args, i64 j0, i64 j1)`` runs jobs ``j0 .. j1``; a job is one 16 x 16 block of C
(fewer rows or columns at the edges). Each C element keeps one accumulator over the whole of K,
as the emulation defines these GEMMs (``docs/vdpbf16ps.md``, ``docs/isa-profiles.md``): group
``p`` of K (a pair of 16-bit floats or a quad of bytes, 4 bytes of A's row) is broadcast to every
32-bit lane, and B's packed row holds the group of each of 16 columns, exactly the VNNI row a
tile load reads. What one group does is the instruction's :data:`STEPS` entry:

- ``dpbf16ps``: VDPBF16PS, the odd (high) product first, DAZ/FTZ and RNE whatever MXCSR holds
  (Intel SDM); an odd K reads the zero that pads A and B to whole pairs, as the instruction does.
- ``vpdpbusd`` / ``vpdpbusds``: VPDPBUSD(S), A's bytes unsigned, B's signed, the four products
  and the accumulator summed wrapping (or saturated once).
- ``pmaddubsw``: AVX2's VPMADDUBSW (pairs saturated to int16), VPMADDWD by ones and VPADDD, on
  two 256-bit halves of the row.
- ``fma_bf16`` / ``fma_fp16``: the 16-bit floats widened exactly (VCVTPH2PS for FP16) and one
  VFMADD231PS per K element, even then odd, as inline assembly with A's element as src2; the
  padding element of an odd K is not run, since fma(+0, +0, -0) would turn a -0 into +0.

Four rows run together (four independent accumulator chains hide the instruction's latency);
C rows go through a stack copy so an edge block never touches memory past its columns.
"""

from __future__ import annotations

__all__ = ["vdp_ir", "dot_ir", "kind", "ARGS", "JOB_FIELDS", "INTRINSIC", "ROWS", "STEPS"]

INTRINSIC = "llvm.x86.avx512bf16.dpbf16ps.512"
#: Fields of the ``args`` block (each an i64; pointers as addresses). ``ngroups``: K's groups,
#: padding included; ``odd``: 1 where the last group is half padding (read by the FMA steps).
ARGS = ("A", "lda", "B", "bstep", "C", "ldc", "ngroups", "jobs", "odd")
#: Fields of one job row: byte offsets into A, B, C and the block's rows and columns.
JOB_FIELDS = ("a_off", "b_off", "c_off", "rows", "cols")
ROWS = 4  # rows whose accumulators run together

_I32 = "<16 x i32>"
_F32 = "<16 x float>"
_EVEN = ", ".join(f"i32 {2 * i}" for i in range(16))
_ODD = ", ".join(f"i32 {2 * i + 1}" for i in range(16))
_LO = ", ".join(f"i32 {i}" for i in range(32))
_HI = ", ".join(f"i32 {32 + i}" for i in range(32))
_ALL16 = ", ".join(f"i32 {i}" for i in range(16))
_SIXTEENS = "<" + ", ".join(["i32 16"] * 16) + ">"  # explicit vectors: older LLVM has no splat()
_ONES16 = "<" + ", ".join(["i16 1"] * 16) + ">"


def _widen_bf16(L, out: str, x: str) -> None:
    """``<16 x i16>`` BF16 codes ``x`` to their exact binary32 values ``out`` (the top half)."""
    L(f"  {out}.z = zext <16 x i16> {x} to {_I32}")
    L(f"  {out}.s = shl {_I32} {out}.z, {_SIXTEENS}")
    L(f"  {out} = bitcast {_I32} {out}.s to {_F32}")


def _widen_fp16(L, out: str, x: str) -> None:
    """``<16 x i16>`` FP16 codes ``x`` to their exact binary32 values ``out`` (VCVTPH2PS)."""
    L(f"  {out}.h = bitcast <16 x i16> {x} to <16 x half>")
    L(f"  {out} = fpext <16 x half> {out}.h to {_F32}")


def _b_dpbf16ps(L, t):
    L(f"  %{t}.bb = bitcast {_I32} %{t}.b to <32 x bfloat>")


def _row_dpbf16ps(L, t, i):
    L(f"  %{t}.av{i} = bitcast {_I32} %{t}.as{i} to <32 x bfloat>")
    L(f"  %{t}.next{i} = call {_F32} @{INTRINSIC}({_F32} %{t}.acc{i}, <32 x bfloat> %{t}.av{i}, <32 x bfloat> %{t}.bb)")


def _row_vnni(intrinsic):
    def row(L, t, i):
        L(f"  %{t}.next{i} = call {_I32} @{intrinsic}({_I32} %{t}.acc{i}, {_I32} %{t}.as{i}, {_I32} %{t}.b)")

    return row


def _b_pmaddubsw(L, t):
    L(f"  %{t}.bb = bitcast {_I32} %{t}.b to <64 x i8>")
    L(f"  %{t}.blo = shufflevector <64 x i8> %{t}.bb, <64 x i8> poison, <32 x i32> <{_LO}>")
    L(f"  %{t}.bhi = shufflevector <64 x i8> %{t}.bb, <64 x i8> poison, <32 x i32> <{_HI}>")


def _row_pmaddubsw(L, t, i):
    L(f"  %{t}.av{i} = bitcast {_I32} %{t}.as{i} to <64 x i8>")
    L(f"  %{t}.alo{i} = shufflevector <64 x i8> %{t}.av{i}, <64 x i8> poison, <32 x i32> <{_LO}>")
    for h in ("lo", "hi"):
        L(f"  %{t}.w{h}{i} = call <16 x i16> @llvm.x86.avx2.pmadd.ub.sw(<32 x i8> %{t}.alo{i}, <32 x i8> %{t}.b{h})")
        L(f"  %{t}.d{h}{i} = call <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16> %{t}.w{h}{i}, <16 x i16> {_ONES16})")
    L(f"  %{t}.d{i} = shufflevector <8 x i32> %{t}.dlo{i}, <8 x i32> %{t}.dhi{i}, <16 x i32> <{_ALL16}>")
    L(f"  %{t}.next{i} = add {_I32} %{t}.acc{i}, %{t}.d{i}")


def _b_fma(widen):
    def b(L, t):
        L(f"  %{t}.bh = bitcast {_I32} %{t}.b to <32 x i16>")
        L(f"  %{t}.bev = shufflevector <32 x i16> %{t}.bh, <32 x i16> poison, <16 x i32> <{_EVEN}>")
        L(f"  %{t}.bod = shufflevector <32 x i16> %{t}.bh, <32 x i16> poison, <16 x i32> <{_ODD}>")
        widen(L, f"%{t}.bwe", f"%{t}.bev")
        widen(L, f"%{t}.bwo", f"%{t}.bod")
        L(f"  %{t}.lastp = icmp eq i64 %{t}.p, %lastg")
        L(f"  %{t}.skip = and i1 %{t}.lastp, %odd.k")

    return b


def _row_fma(widen):
    def row(L, t, i):
        L(f"  %{t}.aev{i} = trunc {_I32} %{t}.as{i} to <16 x i16>")
        L(f"  %{t}.ash{i} = lshr {_I32} %{t}.as{i}, {_SIXTEENS}")
        L(f"  %{t}.aod{i} = trunc {_I32} %{t}.ash{i} to <16 x i16>")
        widen(L, f"%{t}.ae{i}", f"%{t}.aev{i}")
        widen(L, f"%{t}.ao{i}", f"%{t}.aod{i}")
        _vfmadd231ps(L, f"%{t}.e{i}", f"%{t}.ae{i}", f"%{t}.bwe", f"%{t}.acc{i}")
        _vfmadd231ps(L, f"%{t}.o{i}", f"%{t}.ao{i}", f"%{t}.bwo", f"%{t}.e{i}")
        L(f"  %{t}.next{i} = select i1 %{t}.skip, {_F32} %{t}.e{i}, {_F32} %{t}.o{i}")

    return row


_FMA_DECL: tuple[str, ...] = ()
_F8 = "<8 x float>"
_YMM_LO, _YMM_HI = ", ".join(f"i32 {i}" for i in range(8)), ", ".join(f"i32 {i}" for i in range(8, 16))


def _vfmadd231ps(L, out: str, a: str, b: str, acc: str) -> None:
    """``out = a * b + acc`` on 16 lanes through VFMADD231PS itself, A's element as src2 and B's as
    src3 (``dst = src2 * src3 + dst``), on two ymm halves (every target with FMA has ymm). An
    ``llvm.fma`` call would let LLVM commute the multiplicands, which decides between two NaN
    operands (docs/semantics.md, "NaN bits"): the program would not ask the silicon one question."""
    for h, idx in (("lo", _YMM_LO), ("hi", _YMM_HI)):
        for name, v in (("a", a), ("b", b), ("c", acc)):
            L(f"  {out}.{name}{h} = shufflevector {_F32} {v}, {_F32} poison, <8 x i32> <{idx}>")
        L(
            f'  {out}.{h} = call {_F8} asm "vfmadd231ps $2, $1, $0", "=x,x,x,0"'
            f"({_F8} {out}.a{h}, {_F8} {out}.b{h}, {_F8} {out}.c{h})"
        )
    L(f"  {out} = shufflevector {_F8} {out}.lo, {_F8} {out}.hi, <16 x i32> <{_ALL16}>")


_VNNI = "llvm.x86.avx512.vpdpbusd.512", "llvm.x86.avx512.vpdpbusds.512"

#: Per kind: (accumulator type, declarations, B row preparation, one row's step).
STEPS = {
    "dpbf16ps": (
        _F32,
        (f"declare {_F32} @{INTRINSIC}({_F32}, <32 x bfloat>, <32 x bfloat>)",),
        _b_dpbf16ps,
        _row_dpbf16ps,
    ),
    "vpdpbusd": (_I32, (f"declare {_I32} @{_VNNI[0]}({_I32}, {_I32}, {_I32})",), None, _row_vnni(_VNNI[0])),
    "vpdpbusds": (_I32, (f"declare {_I32} @{_VNNI[1]}({_I32}, {_I32}, {_I32})",), None, _row_vnni(_VNNI[1])),
    "pmaddubsw": (
        _I32,
        (
            "declare <16 x i16> @llvm.x86.avx2.pmadd.ub.sw(<32 x i8>, <32 x i8>)",
            "declare <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16>, <16 x i16>)",
        ),
        _b_pmaddubsw,
        _row_pmaddubsw,
    ),
    "fma_bf16": (_F32, _FMA_DECL, _b_fma(_widen_bf16), _row_fma(_widen_bf16)),
    "fma_fp16": (_F32, _FMA_DECL, _b_fma(_widen_fp16), _row_fma(_widen_fp16)),
}

#: The instruction records' ``llvm`` intrinsic -> kind (the FMA path by its operand format).
_BY_INTRINSIC = {
    INTRINSIC: "dpbf16ps",
    _VNNI[0]: "vpdpbusd",
    _VNNI[1]: "vpdpbusds",
    "llvm.x86.avx2.pmadd.ub.sw": "pmaddubsw",
}


def kind(instr) -> str | None:
    """The :data:`STEPS` kind that runs a non-tile instruction record natively, or None."""
    if instr.tile_method is not None:
        return None
    if instr.llvm == "llvm.fma.v16f32":
        from ..formats import BF16, FP16

        return {BF16: "fma_bf16", FP16: "fma_fp16"}.get(instr.a)
    return _BY_INTRINSIC.get(instr.llvm)


def _rows_block(lines: list[str], tag: str, nrows: int, step: str) -> None:
    """IR for ``nrows`` rows starting at row ``%m`` of the job: load C, the group loop, store C."""
    acc, _, prep, row = STEPS[step]
    L = lines.append
    L(f"{tag}.entry:")
    for i in range(nrows):
        L(f"  %{tag}.row{i} = add i64 %m.{tag}, {i}")
        L(f"  %{tag}.coff{i} = mul i64 %{tag}.row{i}, %ldc")
        L(f"  %{tag}.cp{i} = getelementptr i8, ptr %pc, i64 %{tag}.coff{i}")
        L(f"  %{tag}.tmp{i} = getelementptr {acc}, ptr %tmp, i64 {i}")
        L(f"  store {acc} zeroinitializer, ptr %{tag}.tmp{i}, align 64")
        L(f"  call void @llvm.memcpy.p0.p0.i64(ptr %{tag}.tmp{i}, ptr %{tag}.cp{i}, i64 %cbytes, i1 false)")
        L(f"  %{tag}.c{i} = load {acc}, ptr %{tag}.tmp{i}, align 64")
        L(f"  %{tag}.aoff{i} = mul i64 %{tag}.row{i}, %lda")
        L(f"  %{tag}.ap{i} = getelementptr i8, ptr %pa, i64 %{tag}.aoff{i}")
    L(f"  br i1 %any.groups, label %{tag}.loop, label %{tag}.done")
    L(f"{tag}.loop:")
    L(f"  %{tag}.p = phi i64 [ 0, %{tag}.entry ], [ %{tag}.p1, %{tag}.loop ]")
    for i in range(nrows):
        L(f"  %{tag}.acc{i} = phi {acc} [ %{tag}.c{i}, %{tag}.entry ], [ %{tag}.next{i}, %{tag}.loop ]")
    L(f"  %{tag}.kb = lshr i64 %{tag}.p, 4")
    L(f"  %{tag}.r = and i64 %{tag}.p, 15")
    L(f"  %{tag}.bo1 = mul i64 %{tag}.kb, %bstep")
    L(f"  %{tag}.bo2 = shl i64 %{tag}.r, 6")
    L(f"  %{tag}.bo = add i64 %{tag}.bo1, %{tag}.bo2")
    L(f"  %{tag}.bp = getelementptr i8, ptr %pb, i64 %{tag}.bo")
    L(f"  %{tag}.b = load {_I32}, ptr %{tag}.bp, align 4")
    if prep is not None:
        prep(L, tag)
    L(f"  %{tag}.ao = shl i64 %{tag}.p, 2")
    for i in range(nrows):
        L(f"  %{tag}.aq{i} = getelementptr i8, ptr %{tag}.ap{i}, i64 %{tag}.ao")
        L(f"  %{tag}.a{i} = load i32, ptr %{tag}.aq{i}, align 1")
        L(f"  %{tag}.ai{i} = insertelement {_I32} poison, i32 %{tag}.a{i}, i64 0")
        L(f"  %{tag}.as{i} = shufflevector {_I32} %{tag}.ai{i}, {_I32} poison, <16 x i32> zeroinitializer")
        row(L, tag, i)
    L(f"  %{tag}.p1 = add i64 %{tag}.p, 1")
    L(f"  %{tag}.pmore = icmp slt i64 %{tag}.p1, %ngroups")
    L(f"  br i1 %{tag}.pmore, label %{tag}.loop, label %{tag}.done")
    L(f"{tag}.done:")
    for i in range(nrows):
        L(f"  %{tag}.out{i} = phi {acc} [ %{tag}.c{i}, %{tag}.entry ], [ %{tag}.next{i}, %{tag}.loop ]")
    for i in range(nrows):
        L(f"  store {acc} %{tag}.out{i}, ptr %{tag}.tmp{i}, align 64")
        L(f"  call void @llvm.memcpy.p0.p0.i64(ptr %{tag}.cp{i}, ptr %{tag}.tmp{i}, i64 %cbytes, i1 false)")


def vdp_ir(name: str) -> str:
    """LLVM IR of the native VDPBF16PS GEMM ``void name(i64* args, i64 j0, i64 j1)``."""
    return dot_ir(name, "dpbf16ps")


def dot_ir(name: str, step: str) -> str:
    """LLVM IR of the native GEMM of kind ``step`` (:data:`STEPS`), ``void name(i64* args, i64
    j0, i64 j1)``."""
    acc, decls, _, _ = STEPS[step]
    lines = [
        *decls,
        "declare void @llvm.memcpy.p0.p0.i64(ptr noalias, ptr noalias, i64, i1 immarg)",
        f"define void @{name}(ptr %args, i64 %j0, i64 %j1) {{",
        "entry:",
        f"  %tmp = alloca {acc}, i64 {ROWS}, align 64",
    ]
    L = lines.append
    for i, field in enumerate(ARGS):
        L(f"  %{field}.p = getelementptr i64, ptr %args, i64 {i}")
        L(f"  %{field}.i = load i64, ptr %{field}.p")
    for field in ("lda", "bstep", "ldc", "ngroups", "odd"):
        L(f"  %{field} = add i64 %{field}.i, 0")
    for field in ("A", "B", "C", "jobs"):
        L(f"  %{field} = inttoptr i64 %{field}.i to ptr")
    L("  %any.groups = icmp sgt i64 %ngroups, 0")
    L("  %lastg = add i64 %ngroups, -1")
    L("  %odd.k = icmp ne i64 %odd, 0")
    L("  br label %job.head")
    L("job.head:")
    L("  %j = phi i64 [ %j0, %entry ], [ %j.next, %job.next ]")
    L("  %more.jobs = icmp slt i64 %j, %j1")
    L("  br i1 %more.jobs, label %job.body, label %exit")
    L("job.body:")
    L(f"  %row.off = mul i64 %j, {8 * len(JOB_FIELDS)}")
    L("  %row = getelementptr i8, ptr %jobs, i64 %row.off")
    for i, field in enumerate(JOB_FIELDS):
        L(f"  %f.{field}.p = getelementptr i64, ptr %row, i64 {i}")
        L(f"  %f.{field} = load i64, ptr %f.{field}.p")
    L("  %pa = getelementptr i8, ptr %A, i64 %f.a_off")
    L("  %pb = getelementptr i8, ptr %B, i64 %f.b_off")
    L("  %pc = getelementptr i8, ptr %C, i64 %f.c_off")
    L("  %cbytes = shl i64 %f.cols, 2")
    L(f"  %quads = and i64 %f.rows, {-ROWS}")
    L("  br label %quad.head")
    # Rows in blocks of ROWS, then one at a time.
    L("quad.head:")
    L("  %m.quad = phi i64 [ 0, %job.body ], [ %m.quad.next, %quad.done ]")
    L("  %quad.more = icmp slt i64 %m.quad, %quads")
    L("  br i1 %quad.more, label %quad.entry, label %one.head")
    _rows_block(lines, "quad", ROWS, step)
    L(f"  %m.quad.next = add i64 %m.quad, {ROWS}")
    L("  br label %quad.head")
    L("one.head:")
    L("  %m.one = phi i64 [ %quads, %quad.head ], [ %m.one.next, %one.done ]")
    L("  %one.more = icmp slt i64 %m.one, %f.rows")
    L("  br i1 %one.more, label %one.entry, label %job.next")
    _rows_block(lines, "one", 1, step)
    L("  %m.one.next = add i64 %m.one, 1")
    L("  br label %one.head")
    L("job.next:")
    L("  %j.next = add i64 %j, 1")
    L("  br label %job.head")
    L("exit:")
    L("  ret void")
    L("}")
    return "\n".join(lines) + "\n"
