"""Read what the kernels compile to: LLVM IR, assembly, a vectorization report, and real AMX code.

- :func:`llvm_ir` / :func:`asm`: the optimized IR and assembly of the hot loop that
  :func:`tilegemm.matmul` runs for ``(dtype, tiling, isa)``: the blocked kernel's fast body over
  a loop of K steps (the body the per-target table gives the target), or one K step of one
  superblock of the superblock loop, compiled afresh (Numba does not let cached code be
  inspected). The other CPUs' bodies (``isa=`` profiles) run a chunk of K steps per call with C
  in registers; the probe shows one step of that loop. ``avx512_vnni_sat`` shows its saturating
  chain, which ``matmul`` runs only where the call's bound allows saturation
  (``tilegemm.plan.saturation_free``; elsewhere it runs ``avx512_vnni``'s kernel).
- :func:`vector_report`: what that hot loop is made of, for this host or (``cpu=``) another target,
  compiled in a subprocess with ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` and never run.
- :func:`amx_asm`: the seed's loop for a tiling as an AMX core would execute it (``ldtilecfg``,
  ``tileloadd``, ``tdpbf16ps %tmm6, %tmm4, %tmm0`` ...; Granite Rapids for BF16/FP16/INT8,
  Granite Rapids-D for AMX-COMPLEX, Diamond Rapids for AMX-FP8), produced by LLVM through
  llvmlite from the AMX intrinsics, compile-only.
- :func:`native_ir` / :func:`native_asm`: the whole GEMM ``backend="native"`` runs
  (``tilegemm.native``), for Granite Rapids or another named CPU, compile-only.

The kernel a call uses is found through ``tilegemm.dispatch`` like ``matmul`` finds it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, replace

from . import dispatch, layouts
from .instructions import resolve

__all__ = [
    "VectorReport",
    "llvm_ir",
    "asm",
    "vector_report",
    "vector_reports",
    "loop_spills",
    "amx_ir",
    "amx_asm",
    "native_ir",
    "native_asm",
    "TARGETS",
    "TRIPLES",
]

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
    "graniterapids-d": _SPR + ",+amx-fp16,+amx-complex",
    "diamondrapids": _SPR + ",+amx-fp16,+amx-complex,+amx-fp8",
    "neoverse-v1": "+neon,+fp-armv8,+fullfp16,+bf16,+dotprod,+i8mm",
    "neoverse-v2": "+neon,+fp-armv8,+fullfp16,+bf16,+dotprod,+i8mm",
    "apple-m1": "+neon,+fp-armv8,+fullfp16,+dotprod",
}
#: The LLVM target triple of the :data:`TARGETS` that are not x86-64. Numba compiles for the
#: architecture it runs on only, so elsewhere such a CPU's kernels are built by Numba with its
#: features (which pick its table row and keep x86 intrinsics out: ``targets.target_arch``),
#: then Numba's optimized IR is retargeted to the triple and compiled by LLVM's backend for the
#: CPU (:func:`_foreign_asm`).
TRIPLES = {"neoverse-v1": "aarch64-unknown-linux-gnu", "neoverse-v2": "aarch64-unknown-linux-gnu"}
TRIPLES["apple-m1"] = "aarch64-unknown-linux-gnu"  # its registers and scheduling; the OS plays no part


def _kernel(isa, dtype, tiling, family=None):
    """The kernel ``dispatch`` names, or with ``family`` the same entry run by that family (the
    one a call runs where the first's proof fails, ``dispatch.Family.fallback``)."""
    kern = dispatch.lookup(isa, dtype, tiling)
    return kern if family is None else replace(kern, family=dispatch.FAMILIES[family])


def _engine(engine):
    """Inside the block, the blocked kernels run on ``engine`` (None: the target's choice)."""
    from .plan import forced_engine

    return forced_engine(engine)


@functools.lru_cache(maxsize=None)
def _probe(isa, dtype, tiling, family=None, engine=None):
    """The hot loop of the kernel ``dispatch`` names for (isa, dtype, tiling) as a small
    non-cached function, compiled for arguments typed as ``matmul`` types them: the blocked
    kernel's fast body over a loop of K steps (its table row's shape), or one K step of one
    superblock through the superblock loop's body."""
    import numpy as np
    from numba import typeof

    with _engine(engine):
        kern = _kernel(isa, dtype, tiling, family)
        if kern.blocked_name is not None:
            return _body_probe(kern)
    instr, fam = kern.instruction, kern.family
    lanes = instr.a.lanes  # values per element: a complex element is two
    step = fam.superblock_step(kern.rows, kern.cols, instr.lanes, tuple(0 for _ in instr.switches))
    k = instr.k_block * lanes
    la, lb = layouts.get(fam.a_layout), layouts.get(fam.b_layout)
    A = np.zeros(kern.rows * 16 * k, la.dtype or instr.a.storage)
    B = np.zeros(kern.cols * 16 * k, lb.dtype or instr.b.storage)
    C = np.zeros(kern.rows * kern.cols * 256 * instr.lanes, fam.c_view or instr.kernel_acc)
    scratch = np.zeros(256 * instr.lanes, C.dtype)
    step.compile(tuple(typeof(x) for x in (A, B, C, scratch)))
    return step, step.signatures[-1]


def _body_probe(kern):
    """``probe(A, B, C, lda, b_tile, b_step, ldc, nsteps)``: the blocked kernel's fast body for
    ``nsteps`` K steps (``tilegemm.kernels.blocked.fast_body``), compiled for its operand types."""
    import numpy as np
    from numba import njit, typeof

    from .kernels import blocked

    name = kern.blocked_name
    body, fn, kind = blocked.fast_body(blocked.ENTRY_BODIES[name], blocked.ENTRY_ENGINES[name])
    if kind == "int":
        a_type = np.uint8 if blocked.PLAN.int_kind == "vnni" else np.int16
        A, B, C = np.zeros(64, a_type), np.zeros(64, np.uint8), np.zeros(64, np.int32)

        def probe(A, B, C, lda, b_tile, b_step, ldc, nsteps):
            fn(A, 0, lda, B, 0, b_tile, b_step, C, 0, ldc, nsteps)

    else:
        a_type = np.uint32 if kind == "chain" else np.float32  # chain dwords, or binary32 values
        A, B, C = np.zeros(64, a_type), np.zeros(64, np.uint32), np.zeros(64, np.float32)

        def probe(A, B, C, lda, b_tile, b_step, ldc, nsteps):
            fn(A, 0, lda, B, 0, b_tile, b_step, C, 0, ldc, nsteps, 16)

    jitted = njit(probe)
    jitted.compile(tuple(typeof(x) for x in (A, B, C)) + (typeof(1),) * 5)
    return jitted, jitted.signatures[-1]


def _check(dtype, tiling, isa, family=None, engine=None):
    from .kernels import blocked

    if engine is not None and engine not in blocked.ENGINES:
        raise ValueError(f"engine {engine!r} is not one of {', '.join(map(repr, blocked.ENGINES))}")
    if tiling != "auto":
        _kernel(isa, dtype, tiling, family)  # validates all of them
    return resolve(isa, dtype)[2]


def _tiling(tiling):
    return "2x2" if tiling == "auto" else tiling


def _host_texts(dtype, tiling, isa, family=None, engine=None) -> dict:
    """IR, assembly, target and body of the hot loop, compiled in this process (for its target;
    ``engine``: the blocked kernels' engine, None for the target's choice)."""
    import llvmlite.binding as llvm
    from numba.core import config

    fn, sig = _probe(isa, dtype, _tiling(tiling), family, engine)
    cpu = config.CPU_NAME or llvm.get_host_cpu_name()
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else llvm.get_host_cpu_features().flatten()
    with _engine(engine):
        kern = _kernel(isa, dtype, _tiling(tiling), family)
        body, name, blocked_name = kern.body, kern.name, kern.blocked_name
    budget = getattr(body, "spills", None)
    return {
        "ir": fn.inspect_llvm(sig),
        "asm": fn.inspect_asm(sig),
        "cpu": cpu,
        "features": features,
        "body": f"{name} ({'blocked' if blocked_name else 'superblock loop'})",
        "budget": budget,
    }


def _foreign_asm(ir_text: str, triple: str, cpu: str, features: str) -> str:
    """Assembly of Numba's optimized IR (``ir_text``, built on another architecture) for
    ``triple`` and ``cpu``: the module gets the triple's data layout, loses what names the build
    machine's target, is optimized again at O3 for the CPU (so that its cost model, not the build
    machine's, shapes the loops) and compiled by LLVM's backend."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    tm = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=3)
    text = re.sub(r"^target (?:datalayout|triple) = .*$", "", ir_text, flags=re.M)
    text = re.sub(r'"target-(?:cpu|features)"="[^"]*"', "", text)
    # Numba's IR is read after its JIT compiled it, and the build machine's code generator has
    # rewritten some of it in place (x86 forms atomic read-modify-writes of the reference count
    # functions into llvm.x86.atomic.*): a function that calls an x86 intrinsic is none of the
    # kernel's (its bodies name none on this target) and keeps only its signature.
    text = re.sub(
        r"^(define [^\n]*\{)\n.*?^\}$",
        lambda m: m.group(1) + "\n  unreachable\n}" if "@llvm.x86." in m.group(0) else m.group(0),
        text,
        flags=re.M | re.S,
    )
    text = re.sub(r"^declare [^\n]*@llvm\.x86\.[^\n]*$", "", text, flags=re.M)
    mod = llvm.parse_assembly(text)
    mod.triple = triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return str(tm.emit_assembly(mod))


def _many_texts(cases) -> list:
    """:func:`_host_texts` of several (dtype, tiling, isa[, family[, engine]]) in this process."""
    return [_host_texts(*c) for c in cases]


@functools.lru_cache(maxsize=None)
def _texts(dtype, tiling, isa, cpu, engine=None) -> dict:
    """:func:`_host_texts` for this host (``cpu=None``), or for a named target, compiled (never
    run) in a subprocess with ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` set."""
    _check(dtype, tiling, isa, None, engine)
    if cpu is None:
        return _host_texts(dtype, tiling, isa, None, engine)
    return _cross(((dtype, tiling, isa, None, engine),), cpu)[0]


def _cross(cases, cpu) -> list:
    """:func:`_host_texts` of each case, compiled for ``cpu`` in one subprocess (never run)."""
    if cpu not in TARGETS:
        raise ValueError(f"unknown cpu {cpu!r}; known targets are {', '.join(TARGETS)}")
    import llvmlite.binding as llvm

    triple = TRIPLES.get(cpu)
    foreign = triple is not None and triple.split("-")[0] != llvm.get_process_triple().split("-")[0]
    # For another architecture's CPU Numba builds for this one's baseline CPU: it knows no other
    # triple, and LLVM refuses a CPU name its target does not know. The features are the foreign
    # CPU's, which pick its table row (LLVM ignores them here), and on x86-64 F16C, so that the
    # JIT links binary16 conversions without libgcc's helpers (the IR keeps ``fpext half``).
    name, features = cpu, TARGETS[cpu]
    if foreign:
        name = llvm.get_process_triple().split("-")[0].replace("_", "-")
        features += ",+f16c" if name == "x86-64" else ""
    env = dict(os.environ, NUMBA_CPU_NAME=name, NUMBA_CPU_FEATURES=features)
    code = f"import json; from tilegemm.inspect import _many_texts; print(json.dumps(_many_texts({tuple(cases)!r})))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"compiling for {cpu} failed:\n{done.stderr[-2000:]}")
    texts = json.loads(done.stdout.strip().splitlines()[-1])
    if foreign:
        for t in texts:
            t.update(asm=_foreign_asm(t["ir"], str(triple), cpu, TARGETS[cpu]), cpu=cpu, features=TARGETS[cpu])
    return texts


def llvm_ir(dtype="bf16", tiling="2x2", isa="amx", cpu=None, engine=None) -> str:
    """Optimized LLVM IR of the hot loop ``matmul`` runs for these arguments (see the module
    docstring: the blocked body over its K loop, or one K step of one superblock of the tiling's
    C tiles; ``auto`` shows 2x2), for this host or ``cpu``; ``engine``: the blocked body's engine
    (``tilegemm.plan.forced_engine``; None: the one the target picks, VDPBF16PS for BF16 where it
    has AVX512_BF16)."""
    return str(_texts(dtype, tiling, isa, cpu, engine)["ir"])


def asm(dtype="bf16", tiling="2x2", isa="amx", cpu=None, engine=None) -> str:
    """Assembly (AT&T syntax) of the same hot loop, for this host or ``cpu`` (a name in
    :data:`TARGETS`, compiled for and never run), on ``engine`` as for :func:`llvm_ir`."""
    return str(_texts(dtype, tiling, isa, cpu, engine)["asm"])


@dataclass(frozen=True)
class VectorReport:
    """What the hot loop of a microkernel compiled to.

    ``vectorized`` is True when all of these hold: no scalar FMA (``vfmadd...ss/sd``) appears;
    the work instructions are vector ones (float: at least one packed FMA ``vfmadd...ps`` or, on
    the VDPBF16PS engine, ``vdpbf16ps``; int8: at least one integer dot product, ``vpmaddwd``,
    ``vpdpwssd`` or ``vpdpbusd``; ``int_dot`` counts these dot products); and the widest
    vector type in the IR is at least 128 bits. ``spills`` counts vector registers stored to the
    stack anywhere in the function (``vmov... %xmm/ymm/zmm, ...(%rsp)``); ``loop_spills`` the
    vector registers stored to or reloaded from the stack inside the inner loop (the basic blocks
    holding the body's FMAs or dot products), which the per-target table bounds by
    ``spill_budget`` (``tilegemm.kernels.targets.Body.spills``; None for the superblock loop).
    ``body`` names the kernel and whether it is the blocked driver's body. On AArch64 the same
    counts read FMLA/FMLS on ``v`` registers (vector FMAs), FMADD on ``s``/``d``/``h`` registers
    (scalar), SMULL/SMLAL/SDOT and their unsigned forms (integer dot products), and ``q``
    registers stored to or loaded from ``[sp]`` or ``[x29]`` (spills; STP/LDP move two).
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
    loop_spills: int = 0
    spill_budget: int | None = None
    body: str = ""

    def __str__(self):
        return "\n".join(f"{k:14} {v}" for k, v in asdict(self).items())


_VEC = re.compile(r"<(\d+) x (half|bfloat|float|double|i8|i16|i32|i64)>")
_BITS = {"half": 16, "bfloat": 16, "float": 32, "double": 64, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
# x86-64 (AT&T syntax) and AArch64: vector FMAs (VFMADD..PS; FMLA/FMLS on v registers), scalar
# FMAs (VFMADD..SS; FMADD on s/d/h registers), integer dot products (VPMADDWD, VPDPBUSD...; SMULL,
# SMLAL, SDOT and their unsigned forms) and vector registers stored to or reloaded from the stack
# (a q register pair stored or loaded by STP/LDP counts twice).
_VFMA = re.compile(r"\bvfn?m(?:add|sub)\w*p[hsd]\b|\bfml[as]\s+v\d+\.\d*[hsd]\b")
_SFMA = re.compile(r"\bvfn?m(?:add|sub)\w*s[hsd]\b|\bfn?m(?:add|sub)\s+[hsd]\d+,")
_IDOT = re.compile(r"\b(?:vpmaddwd|vpdpwssds?|vpdpbusds?|vdpbf16ps)\b|\b(?:[su]mull2?|[su]mlal2?|[su]dot)\s+v\d+")
_WORK = re.compile(_VFMA.pattern + "|" + _IDOT.pattern)
_SPILL = re.compile(
    r"\bvmov\w+\s+%[xyz]mm\d+, -?\d*\(%rsp\)|\bstr\s+q\d+, \[(?:sp|x29)\b|\bstp\s+q\d+, (q)\d+, \[(?:sp|x29)\b"
)
_RELOAD = re.compile(
    r"\bv\w+\s+-?\d*\(%rsp\)(?:\{1to\d+\})?, %[xyz]mm|\bldr\s+q\d+, \[(?:sp|x29)\b|\bldp\s+q\d+, (q)\d+, \[(?:sp|x29)\b"
)


def _count(pattern: re.Pattern, text: str) -> int:
    """Matches of ``pattern``, one more for each that names a second register (STP/LDP)."""
    return sum(1 + bool(m.group(1)) for m in pattern.finditer(text))


def _blocks(asm_text: str):
    """The assembly's basic blocks: (label, lines)."""
    name, lines = "entry", list[str]()
    for line in asm_text.splitlines():
        m = re.match(r"^(\.?[\w$.]+):", line)
        if m:
            yield name, lines
            name, lines = m.group(1), []
        else:
            lines.append(line)
    yield name, lines


def loop_spills(asm_text: str, min_work: int = 8) -> int:
    """Vector registers stored to or reloaded from the stack inside the basic blocks that hold at
    least ``min_work`` FMAs or dot products (the body's loop)."""
    total = 0
    for _, lines in _blocks(asm_text):
        text = "\n".join(lines)
        if len(_WORK.findall(text)) >= min_work:
            total += _count(_SPILL, text) + _count(_RELOAD, text)
    return total


def _report(ir_text: str, asm_text: str, cpu: str, features: str, budget=None, body="") -> VectorReport:
    widest, bits = "none", 0
    for n, t in _VEC.findall(ir_text):
        b = int(n) * _BITS[t]
        if b > bits:
            widest, bits = f"<{n} x {t}>", b
    vfma = len(_VFMA.findall(asm_text))
    sfma = len(_SFMA.findall(asm_text))
    idot = len(_IDOT.findall(asm_text))
    spills = _count(_SPILL, asm_text)
    vectorized = sfma == 0 and (vfma > 0 or idot > 0) and bits >= 128
    return VectorReport(
        cpu, features, widest, bits, vfma, sfma, idot, spills, vectorized, loop_spills(asm_text), budget, body
    )


def _report_of(t: dict) -> VectorReport:
    return _report(t["ir"], t["asm"], t["cpu"], t["features"], t.get("budget"), t.get("body", ""))


def vector_report(dtype="bf16", tiling="2x2", isa="amx", cpu=None) -> VectorReport:
    """A :class:`VectorReport` for this host, or for ``cpu`` (a name in :data:`TARGETS`), which is
    compiled for, never run, in a subprocess."""
    return _report_of(_texts(dtype, tiling, isa, cpu))


def vector_reports(cases, cpu=None) -> list[VectorReport]:
    """:func:`vector_report` of each ``(dtype, tiling, isa)`` in ``cases``, all compiled for ``cpu``
    in one subprocess (or in this process for the host). A case may name a kernel family fourth:
    the entry as that family runs it (a fallback, which no dtype names first; None for the
    dtype's own), and an engine fifth (``tilegemm.plan.forced_engine``: the blocked body on
    ``"fma"`` where the target would pick VDPBF16PS)."""
    cases = tuple(tuple(c) for c in cases)
    for c in cases:
        _check(*c)
    texts = _many_texts(cases) if cpu is None else _cross(cases, cpu)
    return [_report_of(t) for t in texts]


# --------------------------------------------------------------------------------------------
# Real AMX code for the seed's loops
# --------------------------------------------------------------------------------------------


def _tile_instructions(dtype, isa):
    """The tile instructions a dtype runs: the record itself, or its parts (complex: RL, IM)."""
    from .instructions import INSTRUCTIONS

    instr = resolve(isa, dtype)[2]
    tiles = [INSTRUCTIONS[p] for p in instr.parts] or [instr]
    if any(t.tile_method is None for t in tiles):
        raise ValueError(
            f"{instr.mnemonic} (isa={isa!r}, dtype={dtype!r}) is not a tile instruction; amx_asm needs one"
        )
    return tiles


def amx_ir(dtype="bf16", tiling="2x2", isa="amx") -> str:
    """LLVM IR of the seed-style inner loop of one superblock with the AMX intrinsics.

    ``void kernel(ptr cfg, ptr A, i64 lda, ptr B, ptr C, i64 ldc, i64 ksteps)``: A row-major
    (row block r at A + 16*r*lda), B packed as the seed packs it (the superblock's C column
    blocks 1 KiB apart, the next K step C KiB on), C row-major. ``tiling``: any of
    :data:`tilegemm.TILINGS` (tile numbers: ``tilegemm.native.program.seed_steps``). The K step
    is emitted by the same code as the native kernels' (``tilegemm.native.program``). A dtype
    that runs several instructions (``"cfp16"``) gets one such function per instruction, each a
    pass over K into its own FP32 C (real parts through TCMMRLFP16PS, imaginary parts through
    TCMMIMFP16PS), so that every tiling keeps its register plan.
    """
    from .native import program

    tiles = _tile_instructions(dtype, isa)
    if tiling not in dispatch.TILINGS:
        raise ValueError(dispatch._tiling_error(tiling))
    rows, cols = dispatch.parse_tiling(tiling)
    steps = program.seed_steps(tiling)
    accs = sorted({s[1] for s in steps if s[0] == "dp"})
    seed = program.Program(rows, cols, (), (), (), tuple(steps))
    em = program.Emitter(lambda n: n)
    params = "ptr %cfg, ptr %A, i64 %lda, ptr %B, ptr %C, i64 %ldc, i64 %ksteps"
    for instr in tiles:
        em(f"define void @seed_{instr.tile_method}_{tiling}({params}) {{")
        em("entry:")
        em.call("llvm.x86.ldtilecfg", "ptr %cfg")
        for t in accs:
            em.call("llvm.x86.tilezero", f"i8 {t}")
        arow = [em.val("ar", f"mul i64 %lda, {16 * r}") for r in range(rows)]
        em("br label %loop")
        em("loop:")
        em("%k = phi i64 [ 0, %entry ], [ %k1, %loop ]")
        pa = em.gep("%A", em.val("aoff", "mul i64 %k, 64"))
        pb = em.gep("%B", em.val("boff", f"mul i64 %k, {1024 * cols}"))
        program.emit_step(em, seed, instr.llvm, pa, pb, "%lda", arow)
        em("%k1 = add i64 %k, 1")
        em("%more = icmp ult i64 %k1, %ksteps")
        em("br i1 %more, label %loop, label %done")
        em("done:")
        for t in accs:
            r, c = divmod(t, cols)
            off = em.val("co", f"mul i64 %ldc, {16 * r}")
            ptr = em.gep(em.gep("%C", off), 64 * c)
            em.call("llvm.x86.tilestored64", f"i8 {t}", f"ptr {ptr}", "i64 %ldc")
        em.call("llvm.x86.tilerelease")
        em("ret void")
        em("}")
    lines = ['target triple = "x86_64-unknown-linux-gnu"'] + program.declarations(tiles[0].llvm, lambda n: n)
    lines += [f"declare void @{t.llvm}(i8 immarg, i8 immarg, i8 immarg)" for t in tiles[1:]]
    return "\n".join(lines + em.lines) + "\n"


def amx_asm(dtype="bf16", tiling="2x2", isa="amx") -> str:
    """Assembly of :func:`amx_ir` for the CPU the instruction record names (``llvm_cpu``):
    Granite Rapids, the seed's CPU, for AMX-BF16/INT8/FP16 (Sapphire Rapids lacks AMX-FP16);
    Granite Rapids-D for AMX-COMPLEX; Diamond Rapids for AMX-FP8. Compiled by the LLVM inside
    llvmlite (which knows all of these intrinsics) and never run."""
    from .native import jit

    tiles = _tile_instructions(dtype, isa)
    cpu = tiles[0].llvm_cpu
    return jit.assembly(amx_ir(dtype, tiling, isa), cpu, TARGETS[cpu])


def native_ir(dtype="bf16", tiling="2x2", isa="amx") -> str:
    """LLVM IR of the GEMM ``matmul(..., backend="native")`` runs for these arguments."""
    from .native import gemm, program, vdp

    kern = dispatch.lookup(isa, dtype, _tiling(tiling))
    instr = kern.instruction
    kind = gemm.generator(instr)
    if kind is None:
        raise ValueError(f"{instr.mnemonic} has no native program")
    name = f"tilegemm_{instr.mnemonic.lower()}_{kern.tiling}"
    if kind == "dot":
        return vdp.dot_ir(name, vdp.kind(instr))  # type: ignore[arg-type]
    return program.gemm_ir(instr, program.plan(kern.rows, kern.cols), name)


def native_asm(dtype="bf16", tiling="2x2", isa="amx", cpu=None) -> str:
    """Assembly of :func:`native_ir` for ``cpu`` (a name in :data:`TARGETS`; default: the first
    CPU with the instruction, the record's ``llvm_cpu``), compiled, never run."""
    from .native import jit

    instr = resolve(isa, dtype)[2]
    cpu = instr.llvm_cpu if cpu is None else cpu
    if cpu not in TARGETS:
        raise ValueError(f"unknown cpu {cpu!r}; known targets are {', '.join(TARGETS)}")
    amx = instr.cpu_flag is not None and instr.cpu_flag.startswith("amx_")
    feature = f"+{str(instr.cpu_flag).replace('_', '-')}" if amx else None
    # LLVM aborts the whole process on an intrinsic its target lacks: refuse first.
    if feature is not None and feature not in TARGETS[cpu].split(","):
        raise ValueError(f"{cpu} lacks {instr.cpu_flag}, which {instr.mnemonic} needs; try cpu={instr.llvm_cpu!r}")
    return jit.assembly(native_ir(dtype, tiling, isa), cpu, TARGETS[cpu])
