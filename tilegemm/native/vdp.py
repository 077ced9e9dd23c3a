"""The native VDPBF16PS GEMM (AVX512_BF16): LLVM IR over the same packed operands as the tiles.

``void f(i64* args, i64 j0, i64 j1)`` runs jobs ``j0 .. j1``; a job is one 16 x 16 block of C
(fewer rows or columns at the edges). Each C element keeps one FP32 accumulator over the whole
of K, as the emulation defines the GEMM (``docs/vdpbf16ps.md``): pair ``p`` of K is one
``llvm.x86.avx512bf16.dpbf16ps.512`` on the accumulators of 16 columns, with A's pair
``(A[m, 2p], A[m, 2p + 1])`` broadcast to every 32-bit lane and B's packed row (the pair of each
column, even element in the low half of its lane, exactly the VNNI row a tile load reads).
The instruction itself applies the odd (high) product first, with DAZ/FTZ and RNE, whatever
MXCSR holds (Intel SDM, VDPBF16PS). An odd K reads the zero that pads A and B to whole pairs.

Four rows run together (four independent accumulator chains hide the instruction's latency);
C rows go through a stack copy so an edge block never touches memory past its columns.
"""

from __future__ import annotations

__all__ = ["vdp_ir", "ARGS", "JOB_FIELDS", "INTRINSIC", "ROWS"]

INTRINSIC = "llvm.x86.avx512bf16.dpbf16ps.512"
#: Fields of the ``args`` block (each an i64; pointers as addresses).
ARGS = ("A", "lda", "B", "bstep", "C", "ldc", "npairs", "jobs")
#: Fields of one job row: byte offsets into A, B, C and the block's rows and columns.
JOB_FIELDS = ("a_off", "b_off", "c_off", "rows", "cols")
ROWS = 4  # rows whose accumulators run together


def _rows_block(lines: list[str], tag: str, nrows: int) -> None:
    """IR for ``nrows`` rows starting at row ``%m`` of the job: load C, the pair loop, store C."""
    L = lines.append
    L(f"{tag}.entry:")
    for i in range(nrows):
        L(f"  %{tag}.row{i} = add i64 %m.{tag}, {i}")
        L(f"  %{tag}.coff{i} = mul i64 %{tag}.row{i}, %ldc")
        L(f"  %{tag}.cp{i} = getelementptr i8, ptr %pc, i64 %{tag}.coff{i}")
        L(f"  %{tag}.tmp{i} = getelementptr <16 x float>, ptr %tmp, i64 {i}")
        L(f"  store <16 x float> zeroinitializer, ptr %{tag}.tmp{i}, align 64")
        L(f"  call void @llvm.memcpy.p0.p0.i64(ptr %{tag}.tmp{i}, ptr %{tag}.cp{i}, i64 %cbytes, i1 false)")
        L(f"  %{tag}.c{i} = load <16 x float>, ptr %{tag}.tmp{i}, align 64")
        L(f"  %{tag}.aoff{i} = mul i64 %{tag}.row{i}, %lda")
        L(f"  %{tag}.ap{i} = getelementptr i8, ptr %pa, i64 %{tag}.aoff{i}")
    L(f"  br i1 %any.pairs, label %{tag}.loop, label %{tag}.done")
    L(f"{tag}.loop:")
    L(f"  %{tag}.p = phi i64 [ 0, %{tag}.entry ], [ %{tag}.p1, %{tag}.loop ]")
    for i in range(nrows):
        L(f"  %{tag}.acc{i} = phi <16 x float> [ %{tag}.c{i}, %{tag}.entry ], [ %{tag}.next{i}, %{tag}.loop ]")
    L(f"  %{tag}.kb = lshr i64 %{tag}.p, 4")
    L(f"  %{tag}.r = and i64 %{tag}.p, 15")
    L(f"  %{tag}.bo1 = mul i64 %{tag}.kb, %bstep")
    L(f"  %{tag}.bo2 = shl i64 %{tag}.r, 6")
    L(f"  %{tag}.bo = add i64 %{tag}.bo1, %{tag}.bo2")
    L(f"  %{tag}.bp = getelementptr i8, ptr %pb, i64 %{tag}.bo")
    L(f"  %{tag}.b = load <32 x bfloat>, ptr %{tag}.bp, align 4")
    L(f"  %{tag}.ao = shl i64 %{tag}.p, 2")
    for i in range(nrows):
        L(f"  %{tag}.aq{i} = getelementptr i8, ptr %{tag}.ap{i}, i64 %{tag}.ao")
        L(f"  %{tag}.a{i} = load i32, ptr %{tag}.aq{i}, align 2")
        L(f"  %{tag}.ai{i} = insertelement <16 x i32> poison, i32 %{tag}.a{i}, i64 0")
        L(f"  %{tag}.as{i} = shufflevector <16 x i32> %{tag}.ai{i}, <16 x i32> poison, <16 x i32> zeroinitializer")
        L(f"  %{tag}.av{i} = bitcast <16 x i32> %{tag}.as{i} to <32 x bfloat>")
        L(
            f"  %{tag}.next{i} = call <16 x float> @{INTRINSIC}(<16 x float> %{tag}.acc{i}, "
            f"<32 x bfloat> %{tag}.av{i}, <32 x bfloat> %{tag}.b)"
        )
    L(f"  %{tag}.p1 = add i64 %{tag}.p, 1")
    L(f"  %{tag}.pmore = icmp slt i64 %{tag}.p1, %npairs")
    L(f"  br i1 %{tag}.pmore, label %{tag}.loop, label %{tag}.done")
    L(f"{tag}.done:")
    for i in range(nrows):
        L(f"  %{tag}.out{i} = phi <16 x float> [ %{tag}.c{i}, %{tag}.entry ], [ %{tag}.next{i}, %{tag}.loop ]")
    for i in range(nrows):
        L(f"  store <16 x float> %{tag}.out{i}, ptr %{tag}.tmp{i}, align 64")
        L(f"  call void @llvm.memcpy.p0.p0.i64(ptr %{tag}.cp{i}, ptr %{tag}.tmp{i}, i64 %cbytes, i1 false)")


def vdp_ir(name: str) -> str:
    """LLVM IR of the native VDPBF16PS GEMM ``void name(i64* args, i64 j0, i64 j1)``."""
    lines = [
        f"declare <16 x float> @{INTRINSIC}(<16 x float>, <32 x bfloat>, <32 x bfloat>)",
        "declare void @llvm.memcpy.p0.p0.i64(ptr noalias, ptr noalias, i64, i1 immarg)",
        f"define void @{name}(ptr %args, i64 %j0, i64 %j1) {{",
        "entry:",
        f"  %tmp = alloca <16 x float>, i64 {ROWS}, align 64",
    ]
    L = lines.append
    for i, field in enumerate(ARGS):
        L(f"  %{field}.p = getelementptr i64, ptr %args, i64 {i}")
        L(f"  %{field}.i = load i64, ptr %{field}.p")
    for field in ("lda", "bstep", "ldc", "npairs"):
        L(f"  %{field} = add i64 %{field}.i, 0")
    for field in ("A", "B", "C", "jobs"):
        L(f"  %{field} = inttoptr i64 %{field}.i to ptr")
    L("  %any.pairs = icmp sgt i64 %npairs, 0")
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
    _rows_block(lines, "quad", ROWS)
    L(f"  %m.quad.next = add i64 %m.quad, {ROWS}")
    L("  br label %quad.head")
    L("one.head:")
    L("  %m.one = phi i64 [ %quads, %quad.head ], [ %m.one.next, %one.done ]")
    L("  %one.more = icmp slt i64 %m.one, %f.rows")
    L("  br i1 %one.more, label %one.entry, label %job.next")
    _rows_block(lines, "one", 1)
    L("  %m.one.next = add i64 %m.one, 1")
    L("  br label %one.head")
    L("job.next:")
    L("  %j.next = add i64 %j, 1")
    L("  br label %job.head")
    L("exit:")
    L("  ret void")
    L("}")
    return "\n".join(lines) + "\n"
