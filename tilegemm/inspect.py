"""Read what the kernels compile to: LLVM IR, assembly, a vectorization report, and real AMX code.

- :func:`llvm_ir` / :func:`asm`: the optimized IR and assembly of the hot loop that
  :func:`tilegemm.matmul` runs for ``(dtype, tiling, isa)``: one K step of one superblock of the
  tiling's C tiles through the kernel's fast body, compiled afresh (Numba does not let cached
  code be inspected).
- :func:`vector_report`: what that hot loop is made of, for this host or (``cpu=``) another target,
  compiled in a subprocess with ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` and never run.
- :func:`amx_asm`: the seed's loop for a tiling as a Granite Rapids core would execute it
  (``ldtilecfg``, ``tileloadd``, ``tdpbf16ps %tmm6, %tmm4, %tmm0`` ...), produced by LLVM through
  llvmlite from the AMX intrinsics, compile-only.

The kernel a call uses is found through ``tilegemm.dispatch`` like ``matmul`` finds it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass

from . import dispatch
from .instructions import resolve

__all__ = ["VectorReport", "llvm_ir", "asm", "vector_report", "amx_asm", "TARGETS"]

_BASE = "+sse4.2,+popcnt,+avx,+avx2,+fma,+f16c,+bmi,+bmi2,+movbe,+cx16"
_AVX512 = _BASE + ",+avx512f,+avx512cd,+avx512bw,+avx512dq,+avx512vl"
_ICX = _AVX512 + ",+avx512vnni,+avx512vbmi,+avx512vbmi2,+avx512bitalg,+avx512vpopcntdq,+avx512ifma"
_SPR = _ICX + ",+avx512bf16,+avx512fp16,+avxvnni,+amx-tile,+amx-int8,+amx-bf16"
#: Feature strings for targets that ``cpu=`` knows by name (Numba needs both name and features):
#: the CPUs tilegemm runs on, from AVX2-only to AMX.
TARGETS = {
    "haswell": _BASE,
    "znver1": _BASE,
    "znver3": _BASE,
    "skylake-avx512": _AVX512,
    "icelake-server": _ICX,
    "znver4": _ICX + ",+avx512bf16",
    "sapphirerapids": _SPR,
    "graniterapids": _SPR + ",+amx-fp16",
}


@functools.lru_cache(maxsize=None)
def _probe(isa, dtype, tiling):
    """The hot loop of the kernel ``dispatch`` names for (isa, dtype, tiling) as a small
    non-cached function, compiled for arguments typed as ``matmul`` types them."""
    import numpy as np
    from numba import typeof

    kern = dispatch.lookup(isa, dtype, tiling)
    instr, fam = kern.instruction, kern.family
    step = fam.superblock_step(kern.rows, kern.cols)
    k = instr.k_step
    if fam.a_layout == "f32":
        A = np.zeros(kern.rows * 16 * k, np.float32)
        B = np.zeros(kern.cols * 16 * k, np.float32)
    else:
        A = np.zeros(kern.rows * 16 * k, instr.a.storage)
        B = np.zeros(kern.cols * 16 * k, instr.b.storage)
    C = np.zeros(kern.rows * kern.cols * 256, fam.c_view or instr.acc)
    scratch = np.zeros(256, C.dtype)
    step.compile(tuple(typeof(x) for x in (A, B, C, scratch)))
    return step, step.signatures[-1]


def _check(dtype, tiling, isa):
    if tiling != "auto":
        dispatch.lookup(isa, dtype, tiling)  # validates all three
    return resolve(isa, dtype)[2]


def _tiling(tiling):
    return "2x2" if tiling == "auto" else tiling


def llvm_ir(dtype="bf16", tiling="2x2", isa="amx") -> str:
    """Optimized LLVM IR of the hot loop ``matmul`` runs for these arguments: one K step of one
    superblock of the tiling's C tiles (``auto`` shows 2x2)."""
    _check(dtype, tiling, isa)
    fn, sig = _probe(isa, dtype, _tiling(tiling))
    return fn.inspect_llvm(sig)


def asm(dtype="bf16", tiling="2x2", isa="amx") -> str:
    """Assembly (AT&T syntax) of the same hot loop, for the target Numba compiles for."""
    _check(dtype, tiling, isa)
    fn, sig = _probe(isa, dtype, _tiling(tiling))
    return fn.inspect_asm(sig)


@dataclass(frozen=True)
class VectorReport:
    """What the hot loop of a microkernel compiled to.

    ``vectorized`` is True when all of these hold: no scalar FMA (``vfmadd...ss/sd``) appears;
    the work instructions are vector ones (float: at least one packed FMA ``vfmadd...ps``; int8:
    at least one integer dot product, ``vpmaddwd``, ``vpdpwssd`` or ``vpdpbusd``); and the widest
    vector type in the IR is at least 128 bits. ``spills`` counts vector registers stored to the
    stack (``vmov... %xmm/ymm/zmm, ...(%rsp)``).
    """

    cpu: str
    features: str
    widest_vector: str
    widest_bits: int
    vector_fma: int
    scalar_fma: int
    int_dot: int
    spills: int
    vectorized: bool

    def __str__(self):
        return "\n".join(f"{k:14} {v}" for k, v in asdict(self).items())


_VEC = re.compile(r"<(\d+) x (float|double|i8|i16|i32|i64)>")
_BITS = {"float": 32, "double": 64, "i8": 8, "i16": 16, "i32": 32, "i64": 64}


def _report(ir_text: str, asm_text: str, cpu: str, features: str) -> VectorReport:
    widest, bits = "none", 0
    for n, t in _VEC.findall(ir_text):
        b = int(n) * _BITS[t]
        if b > bits:
            widest, bits = f"<{n} x {t}>", b
    vfma = len(re.findall(r"\bvfn?m(?:add|sub)\w*p[sd]\b", asm_text))
    sfma = len(re.findall(r"\bvfn?m(?:add|sub)\w*s[sd]\b", asm_text))
    idot = len(re.findall(r"\b(?:vpmaddwd|vpdpwssds?|vpdpbusds?)\b", asm_text))
    spills = len(re.findall(r"\bvmov\w+\s+%[xyz]mm\d+, -?\d*\(%rsp\)", asm_text))
    vectorized = sfma == 0 and (vfma > 0 or idot > 0) and bits >= 128
    return VectorReport(cpu, features, widest, bits, vfma, sfma, idot, spills, vectorized)


def _host_report(dtype, tiling, isa) -> VectorReport:
    import llvmlite.binding as llvm
    from numba.core import config

    cpu = config.CPU_NAME or llvm.get_host_cpu_name()
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else llvm.get_host_cpu_features().flatten()
    return _report(llvm_ir(dtype, tiling, isa), asm(dtype, tiling, isa), cpu, features)


def vector_report(dtype="bf16", tiling="2x2", isa="amx", cpu=None) -> VectorReport:
    """A :class:`VectorReport` for this host, or for ``cpu`` (a name in :data:`TARGETS`), which is
    compiled for, never run, in a subprocess."""
    _check(dtype, tiling, isa)
    if cpu is None:
        return _host_report(dtype, tiling, isa)
    if cpu not in TARGETS:
        raise ValueError(f"unknown cpu {cpu!r}; known targets are {', '.join(TARGETS)}")
    env = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=TARGETS[cpu])
    code = (
        "import json, dataclasses, sys; from tilegemm.inspect import _host_report; "
        f"print(json.dumps(dataclasses.asdict(_host_report({dtype!r}, {tiling!r}, {isa!r}))))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"compiling for {cpu} failed:\n{done.stderr[-2000:]}")
    return VectorReport(**json.loads(done.stdout.strip().splitlines()[-1]))


# --------------------------------------------------------------------------------------------
# Real AMX code for the seed's loops
# --------------------------------------------------------------------------------------------


def _seed_loop(tiling: str) -> list[tuple]:
    """The per-K-step instruction sequence of the seed-style loop for a tiling:
    ("load", tmm, "A"/"B", index) and ("dp", c, a, b).

    1x1 and 2x2 are the seed's listings (tile numbers as printed; the 2x2 listing reloads TMM6
    and TMM7). Every other tiling is the seed's style with one A and one B register (the port
    ``tilegemm.amx.seed.gemm_single_buffered``): accumulators TMM0..TMM(R*C-1), A in TMM(R*C),
    B in TMM(R*C+1).
    """
    if tiling == "1x1":
        return [("load", 1, "A", 0), ("load", 2, "B", 0), ("dp", 0, 1, 2)]
    if tiling == "2x2":  # the listing as printed in the seed
        return [
            ("load", 4, "A", 0),
            ("load", 6, "B", 0),
            ("dp", 0, 4, 6),
            ("load", 7, "B", 1),
            ("dp", 1, 4, 7),
            ("load", 5, "A", 1),
            ("load", 6, "B", 0),
            ("dp", 2, 5, 6),
            ("load", 7, "B", 1),
            ("dp", 3, 5, 7),
        ]
    rows, cols = dispatch.parse_tiling(tiling)
    ta, tb = rows * cols, rows * cols + 1
    out: list[tuple] = []
    for r in range(rows):
        out.append(("load", ta, "A", r))
        for c in range(cols):
            out += [("load", tb, "B", c), ("dp", r * cols + c, ta, tb)]
    return out


def _tile_instruction(dtype, isa):
    instr = resolve(isa, dtype)[2]
    if instr.tile_method is None:
        raise ValueError(
            f"{instr.mnemonic} (isa={isa!r}, dtype={dtype!r}) is not a tile instruction; amx_asm needs one"
        )
    return instr


def amx_ir(dtype="bf16", tiling="2x2", isa="amx") -> str:
    """LLVM IR of the seed-style inner loop of one superblock with the AMX intrinsics.

    ``void kernel(ptr cfg, ptr A, i64 lda, ptr B, ptr C, i64 ldc, i64 ksteps)``: A row-major
    (row block r at A + 16*r*lda), B packed as the seed packs it (the superblock's C column
    blocks 1 KiB apart, the next K step C KiB on), C row-major. ``tiling``: any of
    :data:`tilegemm.TILINGS` (see :func:`_seed_loop` for the tile numbers).
    """
    instr = _tile_instruction(dtype, isa)
    if tiling not in dispatch.TILINGS:
        raise ValueError(dispatch._tiling_error(tiling))
    rows, cols = dispatch.parse_tiling(tiling)
    steps = _seed_loop(tiling)
    accs = sorted({s[1] for s in steps if s[0] == "dp"})
    name = instr.tile_method
    lines = [
        'target triple = "x86_64-unknown-linux-gnu"',
        "declare void @llvm.x86.ldtilecfg(ptr)",
        "declare void @llvm.x86.tileloadd64(i8 immarg, ptr, i64)",
        "declare void @llvm.x86.tilestored64(i8 immarg, ptr, i64)",
        "declare void @llvm.x86.tilezero(i8 immarg)",
        "declare void @llvm.x86.tilerelease()",
        f"declare void @{instr.llvm}(i8 immarg, i8 immarg, i8 immarg)",
        f"define void @seed_{name}_{tiling}(ptr %cfg, ptr %A, i64 %lda, ptr %B, ptr %C, i64 %ldc, i64 %ksteps) {{",
        "entry:",
        "  call void @llvm.x86.ldtilecfg(ptr %cfg)",
    ]
    lines += [f"  call void @llvm.x86.tilezero(i8 {t})" for t in accs]
    lines += [
        "  %a16 = mul i64 %lda, 16",
        "  br label %loop",
        "loop:",
        "  %k = phi i64 [ 0, %entry ], [ %k1, %loop ]",
        "  %aoff = mul i64 %k, 64",
        f"  %boff = mul i64 %k, {1024 * cols}",
        "  %pa0 = getelementptr i8, ptr %A, i64 %aoff",
        "  %pb0 = getelementptr i8, ptr %B, i64 %boff",
    ]
    for r in range(1, rows):
        lines += [f"  %ra{r} = mul i64 %a16, {r}", f"  %pa{r} = getelementptr i8, ptr %pa0, i64 %ra{r}"]
    lines += [f"  %pb{c} = getelementptr i8, ptr %pb0, i64 {1024 * c}" for c in range(1, cols)]
    for s in steps:
        if s[0] == "load":
            _, t, which, i = s
            ptr, stride = (f"%pa{i}", "%lda") if which == "A" else (f"%pb{i}", "64")
            lines.append(f"  call void @llvm.x86.tileloadd64(i8 {t}, ptr {ptr}, i64 {stride})")
        else:
            lines.append(f"  call void @{instr.llvm}(i8 {s[1]}, i8 {s[2]}, i8 {s[3]})")
    lines += [
        "  %k1 = add i64 %k, 1",
        "  %more = icmp ult i64 %k1, %ksteps",
        "  br i1 %more, label %loop, label %done",
        "done:",
        "  %c16 = mul i64 %ldc, 16",
    ]
    for t in accs:
        r, c = divmod(t, cols)
        lines.append(f"  %rowoff{t} = mul i64 %c16, {r}")
        lines.append(f"  %pc{t}r = getelementptr i8, ptr %C, i64 %rowoff{t}")
        lines.append(f"  %pc{t} = getelementptr i8, ptr %pc{t}r, i64 {64 * c}")
        lines.append(f"  call void @llvm.x86.tilestored64(i8 {t}, ptr %pc{t}, i64 %ldc)")
    lines += ["  call void @llvm.x86.tilerelease()", "  ret void", "}"]
    return "\n".join(lines) + "\n"


def amx_asm(dtype="bf16", tiling="2x2", isa="amx") -> str:
    """Assembly of :func:`amx_ir` for Granite Rapids (the seed's CPU; Sapphire Rapids lacks
    AMX-FP16), compiled by LLVM through llvmlite and never run."""
    import llvmlite.binding as llvm

    text = amx_ir(dtype, tiling, isa)
    mod = llvm.parse_assembly(text)
    mod.verify()
    tm = llvm.Target.from_triple("x86_64-unknown-linux-gnu").create_target_machine(
        cpu="graniterapids", features="+amx-tile,+amx-int8,+amx-bf16,+amx-fp16", opt=2
    )
    out = tm.emit_assembly(mod)
    noise = re.compile(r"\s*\.(cfi_|p2align|file|type|size|section|ident|addrsig)")
    keep = [ln for ln in out.splitlines() if not noise.match(ln)]
    return "\n".join(keep) + "\n"
