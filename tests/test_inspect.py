"""Every shipped microkernel vectorizes and its inner loop stays in registers, on this host and
on every CPU the per-target table names (cross-target compiles, never run); AMX code is real."""

from __future__ import annotations

import re
import warnings

import llvmlite.binding as llvm
import pytest
from conftest import CROSS_CPUS as CROSS

from tilegemm import dispatch, inspect
from tilegemm.kernels import blocked, targets

KERNELS = [
    ("bf16", "amx"),
    ("fp16", "amx"),
    ("bf16", "avx512"),
    ("s8s8", "amx"),
    ("s8u8", "amx"),
    ("u8s8", "amx"),
    ("u8u8", "amx"),
]
#: The LLVM major version every spill count this module holds a loop to was measured with: the
#: table's budgets (``Body.spills`` in kernels/targets.py, 0 for every body), :data:`MX_SPILLS`
#: and the zero spills of the binary32 bodies and of VFMADD231PH's loop, all measured on the CPUs
#: of :data:`CROSS` with llvmlite 0.50.0, which links LLVM 22.1. Register allocation and
#: instruction scheduling change between LLVM versions and between CPUs, so a count is exact only
#: for that version and those CPUs.
MEASURED_LLVM = 22
#: Elsewhere (another LLVM major version, or a host CPU not in :data:`CROSS`): how many vector
#: register stores and reloads an inner loop may have beyond its measured count before the test
#: fails; an excess within it is reported as a :class:`SpillDrift` warning. A register spilled in
#: the loop is one store and one reload, so this lets another scheduler move two registers out;
#: a shape that does not fit the register file spills far more (3 x 16 BF16 pairs, one row more
#: than the avx2 row's, stores and reloads 16 in haswell's inner loop with LLVM 22).
UNMEASURED_ALLOWANCE = 4
#: The LLVM inside llvmlite, which Numba compiles the kernels with.
LLVM_VERSION = llvm.llvm_version_info


class SpillDrift(UserWarning):
    """An inner loop spills more than it did where its count was measured, within the allowance."""


def check_spills(spills: int, budget: int, what: str, cpu: str, llvm_major: int = LLVM_VERSION[0]) -> None:
    """Hold an inner loop's vector register stores and reloads (``spills``) to ``budget``, the
    count measured for ``cpu`` with LLVM :data:`MEASURED_LLVM`: exactly where both apply; on
    another LLVM or CPU, to ``budget`` plus :data:`UNMEASURED_ALLOWANCE`, with any excess within
    that reported rather than failed."""
    where = f"{what} for {cpu}, LLVM {llvm_major}"
    if llvm_major == MEASURED_LLVM and cpu in CROSS:
        assert spills <= budget, f"{where}: {spills} vector register spills in the inner loop, budget {budget}"
        return
    limit = budget + UNMEASURED_ALLOWANCE
    assert spills <= limit, (
        f"{where}: {spills} vector register spills in the inner loop, more than the budget {budget} "
        f"(measured with LLVM {MEASURED_LLVM} on {', '.join(CROSS)}) + {UNMEASURED_ALLOWANCE}"
    )
    if spills > budget:
        warnings.warn(
            SpillDrift(
                f"{where}: {spills} vector register spills in the inner loop, {spills - budget} more than "
                f"the budget {budget} measured with LLVM {MEASURED_LLVM} on {', '.join(CROSS)}"
            ),
            stacklevel=2,
        )


def _check_budget(r: inspect.VectorReport) -> None:
    """The inner loop spills no more than the table row allows (:func:`check_spills`). A host
    without a row (no AVX2: none of the CPUs of :data:`CROSS`) runs the portable superblock loop,
    whose shapes no row vouches for: only its vectorization is checked."""
    if r.spill_budget is not None:
        check_spills(r.loop_spills, r.spill_budget, r.body, r.cpu)


@pytest.mark.parametrize("dtype,isa", KERNELS)
def test_host_microkernels_vectorize(dtype, isa):
    r = inspect.vector_report(dtype, "2x2", isa)
    assert r.vectorized, r
    assert r.scalar_fma == 0
    _check_budget(r)
    kern = dispatch.lookup(isa, dtype, "2x2")
    body = kern.body
    assert kern.name in r.body
    if kern.engine == "vdpbf16ps":  # dwords of each chain per iteration, each a VDPBF16PS
        assert r.widest_bits == 32 * body.width and r.vector_fma == 0, r
        assert r.int_dot >= blocked.CHAIN_UNROLL * 2 * body.rows * body.cols // body.width, r
    elif dtype in ("bf16", "fp16"):
        assert r.widest_vector == f"<{body.width} x float>"
        unroll = getattr(body, "unroll", 16)  # pairs per iteration of the body's loop
        assert r.vector_fma >= unroll * 2 * body.rows * body.cols // body.width
    else:
        assert r.int_dot > 0


@pytest.mark.parametrize(
    "dtype,family,vector,per_trip", [("cfp16", None, "float", 4 * 4), ("hf8", "fp8quads", "double", 2 * 4)]
)
def test_complex_and_fp8_microkernels_vectorize(dtype, family, vector, per_trip):
    # The bodies loop over K in IR (4 elements per trip): every row's accumulators take one FMA
    # per element, 4 per complex element (RL and IM, two lanes each), 2 for FP8 in binary64 (16
    # columns of binary64 in two zmm; the fallback of the binary32 body, below). An FP8 body that
    # holds C in registers joins two rounded vectors into one C register, which LLVM 22
    # (MEASURED_LLVM) writes as one rounding of a vector twice as wide; whether it does is LLVM's
    # choice, so another LLVM version is held to vectors of the row's width only.
    case = (dtype, "2x2", "amx") + ((family,) if family else ())
    body = dispatch.lookup("amx", dtype, "2x2").body if family is None else targets.shape(family)
    (r,) = inspect.vector_reports([case])
    assert r.vectorized and r.scalar_fma == 0, r
    _check_budget(r)
    if LLVM_VERSION[0] == MEASURED_LLVM:
        assert r.widest_vector == f"<{body.width * (2 if body.hold_c else 1)} x {vector}>"
    else:
        assert r.widest_bits >= body.width * {"float": 32, "double": 64}[vector], r.widest_vector
    assert r.vector_fma >= body.rows * per_trip
    (h,) = inspect.vector_reports([case], cpu="haswell")
    assert h.vectorized and h.widest_bits == 256, h
    _check_budget(h)


@pytest.mark.parametrize("cpu", [None, "haswell"])
def test_fp8_binary32_body_vectorizes_without_spills(cpu):
    """AMX-FP8's binary32 body (fp8c): one FMA per row and vector of 16 columns per element (4 per
    trip of its loop), binary32 vectors of the row's width, and its inner loops (the binary32
    chains, and the binary64 step it calls where a chain rounded) keep everything in registers:
    for the host and for haswell's 16 ymm (all six table CPUs: the cross-target test below)."""
    (r,) = inspect.vector_reports([("hf8", "2x2", "amx")], cpu=cpu)
    shp = targets.shape("fp8c", None if cpu is None else frozenset(inspect.TARGETS[cpu].split(",")))
    assert "-fp8c-" in r.body, r.body
    assert r.vectorized and r.scalar_fma == 0, r
    check_spills(r.loop_spills, 0, r.body, r.cpu)
    assert r.vector_fma >= shp.rows * (16 // shp.width) * 4, r
    assert f"<{shp.width} x float>" in inspect.llvm_ir("hf8", cpu=cpu)


#: ACE MX's body (a function of its own, kernels/ace.py): the vector registers its inner loop
#: stores and reloads with LLVM :data:`MEASURED_LLVM`: none with 32 zmm, a few with 16 ymm. On
#: AArch64 the ACE bodies run the superblock loop's "generic" shapes (kernels/families.py), which
#: no table row tunes: 16 columns of binary64 are eight q registers per row, and the counts
#: below are what those shapes spill there (recorded so that a change shows, not chosen).
MX_SPILLS = {"haswell": 6, "znver3": 4, "neoverse-v1": 48, "neoverse-v2": 40, "apple-m1": 38}
#: The same for ACE MX FP8's binary32 body on AArch64 (the binary32 bodies spill nothing on x86).
MX32_SPILLS = {"neoverse-v1": 16, "neoverse-v2": 16, "apple-m1": 16}


#: The CPUs whose spill check the default tier runs, one per register file (16 ymm; 32 zmm on
#: Intel and on AMD); the others, compiled for about 15 s each, in the deep tier (pytest -m deep).
DEFAULT_SPILL_CPUS = ("haswell", "icelake-server", "znver4")


@pytest.mark.parametrize(
    "cpu", [c if c in DEFAULT_SPILL_CPUS else pytest.param(c, marks=pytest.mark.deep) for c in CROSS]
)
def test_cross_target_bodies_stay_in_registers(cpu):
    """Each kernel's body for ``cpu`` is the one its table row names, vectorized at the row's
    width, and its inner loop stores and reloads no more vector registers than the row allows
    (``Body.spills``, none for every row). ACE MX's binary64 body (the fallback of the MX FP8
    forms) spills no more than :data:`MX_SPILLS` records, the binary32 bodies (MX FP8 with its
    binary64 steps outlined, MXINT8, TOP2BF16PS, and AMX-FP8 with its binary64 steps outlined)
    none. Each count as :func:`check_spills` holds it: exactly with LLVM :data:`MEASURED_LLVM`."""
    entry = targets.entry_for(cpu, frozenset(inspect.TARGETS[cpu].split(",")))
    assert entry is not None and cpu in entry.cpus
    ace = [
        ("mxfp8_e4m3", "2x2", "ace", "ace_mx"),
        ("mxfp8_e4m3", "2x2", "ace"),
        ("mxint8", "2x2", "ace"),
        ("bf16", "2x2", "ace"),
    ]
    if cpu not in inspect.TRIPLES:  # AMX-FP8's binary32 body reads MXCSR: x86 only
        ace.append(("hf8", "2x2", "amx"))
    # where the CPU has an engine beyond FMA for the BF16 body, the FMA body too (tests force it)
    fma = [("bf16", "2x2", isa, None, "fma") for isa in ("amx", "avx512")]
    fma = fma if targets.engines(frozenset(inspect.TARGETS[cpu].split(","))) else []
    reports = inspect.vector_reports([(d, "2x2", i) for d, i in KERNELS] + fma + ace, cpu=cpu)
    fma_reports = reports[len(KERNELS) : len(KERNELS) + len(fma)]
    mx, *binary32 = reports[len(KERNELS) + len(fma) :]
    del reports[len(KERNELS) :]
    for r, want in zip(fma_reports, (f"tdpbf16ps-2x2-f32pairs-{entry.pairs_bf16}", f"vdpbf16ps-2x2-vdp-{entry.dot}")):
        assert f"{want}-{entry.name} (blocked)" in r.body, r.body
        assert r.vectorized and r.vector_fma > 0 and r.int_dot == 0, r
        check_spills(r.loop_spills, r.spill_budget, r.body, cpu)
    assert "-ace_mx-" in mx.body and "-ace_mx32c-" in binary32[0].body, (mx.body, binary32[0].body)
    assert mx.vectorized and mx.scalar_fma == 0 and mx.widest_bits >= 32 * entry.pairs_bf16.width, mx
    check_spills(mx.loop_spills, MX_SPILLS.get(cpu, 0), mx.body, cpu)
    for r in binary32:  # in binary32: one element's B vectors live at a time
        assert r.vectorized and r.scalar_fma == 0 and r.widest_bits >= 32 * entry.pairs_bf16.width, r
        check_spills(r.loop_spills, MX32_SPILLS.get(cpu, 0) if "-ace_mx32c-" in r.body else 0, r.body, cpu)
    for (dtype, isa), r in zip(KERNELS, reports):
        assert r.cpu == cpu and f"-{entry.name} (blocked)" in r.body, r.body
        assert r.vectorized and r.scalar_fma == 0, (dtype, isa, r)
        if dtype == "bf16":  # the engine the CPU has: TDPBF16PS and VDPBF16PS on VDPBF16PS
            assert ("-vdpbf16ps-" in r.body) == bool(fma), r.body
            assert (r.int_dot > 0 and r.vector_fma == 0) == bool(fma), r
        assert r.spill_budget is not None, (dtype, isa, r.body)
        check_spills(r.loop_spills, r.spill_budget, r.body, cpu)
        width = entry.pairs_bf16.width if dtype in ("bf16", "fp16") else entry.quads.width
        bits = 32 * width
        assert r.widest_bits >= bits, (dtype, isa, r.widest_vector)


def test_an_aarch64_cpu_compiles_with_aarch64_code_on_any_host():
    """The default tier's AArch64 check (the deep tier runs the whole cross-target test for each
    AArch64 CPU): the neon row's BF16 and INT8 bodies for Neoverse V2 are AArch64 code (FMLA;
    SMULL/SMLAL, VPMADDWD's sums in portable IR), with no spill in their inner loops."""
    bf16, s8 = inspect.vector_reports([("bf16", "2x2", "amx"), ("s8s8", "2x2", "amx")], cpu="neoverse-v2")
    for r in (bf16, s8):
        assert r.cpu == "neoverse-v2" and "-neon (blocked)" in r.body, r
        assert r.vectorized and r.scalar_fma == 0, r
        check_spills(r.loop_spills, 0, r.body, r.cpu)
    assert bf16.vector_fma > 0 and bf16.int_dot == 0 and s8.int_dot > 0 and s8.vector_fma == 0
    text = inspect.asm("s8s8", cpu="neoverse-v2")
    assert "smlal" in text and "%xmm" not in text and "%ymm" not in text


def test_every_table_row_names_a_checked_cpu():
    """A row the cross-target test does not compile would be a shape tuned on no machine."""
    for e in targets.TABLE:
        assert any(c in e.cpus for c in CROSS), e.name
        for body in (e.pairs_bf16, e.pairs_fp16, e.dot):
            assert body.rows % e.flag_rows == 0 and body.cols in (16, 32), (e.name, body)


def test_spill_budgets_are_exact_only_where_they_were_measured():
    """With LLVM :data:`MEASURED_LLVM` on a CPU of :data:`CROSS` one spill over the budget fails;
    on another LLVM version, or a CPU the budgets were not measured for, an excess up to
    :data:`UNMEASURED_ALLOWANCE` is reported as a warning and one beyond it fails."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # within the budget: nothing to report anywhere
        check_spills(6, 6, "body", "haswell", MEASURED_LLVM)
        check_spills(0, 0, "body", "haswell", MEASURED_LLVM + 1)
        check_spills(0, 0, "body", "znver5", MEASURED_LLVM)
    with pytest.raises(AssertionError, match="7 vector register spills in the inner loop, budget 6"):
        check_spills(7, 6, "body", "haswell", MEASURED_LLVM)
    for cpu, major in (("haswell", MEASURED_LLVM - 1), ("znver5", MEASURED_LLVM)):
        with pytest.warns(SpillDrift, match=f"LLVM {major}: 7 vector register spills in the inner loop, 1 more"):
            check_spills(7, 6, "body", cpu, major)
        with pytest.warns(SpillDrift):
            check_spills(6 + UNMEASURED_ALLOWANCE, 6, "body", cpu, major)
        with pytest.raises(AssertionError, match=rf"more than the budget 6 .* \+ {UNMEASURED_ALLOWANCE}"):
            check_spills(7 + UNMEASURED_ALLOWANCE, 6, "body", cpu, major)


def test_the_loop_spill_count_sees_spills():
    asm = (
        """.LBB0_1:
\tvfmadd231ps\t%zmm1, %zmm2, %zmm3
"""
        + "\tvfmadd231ps\t%zmm1, %zmm2, %zmm4\n" * 8
        + """\tvmovups\t%zmm5, 64(%rsp)
\tvmovups\t-128(%rsp), %zmm6
\tvaddps\t(%rsp){1to16}, %zmm1, %zmm1
\tjne\t.LBB0_1
.LBB0_2:
\tvmovups\t%zmm5, 64(%rsp)
"""
    )
    assert inspect.loop_spills(asm) == 3  # the spill after the loop does not count


def test_cross_target_gives_avx512_and_avx2():
    r = inspect.vector_report("bf16", cpu="skylake-avx512")
    assert r.widest_bits == 512 and r.vectorized
    _check_budget(r)
    r = inspect.vector_report("s8s8", cpu="haswell")
    assert r.vectorized
    _check_budget(r)
    r = inspect.vector_report("bf16", cpu="haswell")
    assert r.widest_vector == "<8 x float>" and r.vectorized
    _check_budget(r)
    with pytest.raises(ValueError, match="unknown cpu 'pentium'"):
        inspect.vector_report(cpu="pentium")


def test_avx512_fp16_runs_vfmadd231ph_where_the_cpu_has_it():
    """Where the target has AVX512-FP16 the table runs the instruction itself (``f16acc_native``):
    for sapphirerapids its loop is VFMADD231PH on ymm, 8 rows x 32 K elements of them per
    iteration, each reading its A element as an embedded broadcast, with no library call and
    nothing spilled. Without AVX512-FP16 (Zen 4) the emulation runs."""
    spr = frozenset(inspect.TARGETS["sapphirerapids"].split(","))
    assert targets.family("f16acc", spr) == "f16acc_native"
    assert targets.family("f16acc", frozenset(inspect.TARGETS["znver4"].split(","))) == "f16acc"
    assert targets.family("f32fma", spr) == "f32fma"
    assert targets.native_missing("f16acc", spr) == () == targets.native_missing("f32fma")
    assert targets.native_missing("f16acc", frozenset(inspect.TARGETS["icelake-server"].split(","))) == ("+avx512fp16",)
    text = inspect.asm("fp16", "2x2", "avx512_fp16", cpu="sapphirerapids")
    fmas = re.findall(r"\bvfmadd\d{3}ph\s+(.*)", text)
    rows = targets.shape("f16acc_native", spr).rows
    assert len(fmas) >= rows * 32 and all("%ymm" in f for f in fmas)
    assert sum("{1to16}" in f for f in fmas) >= rows * 31, fmas[:4]
    assert not re.search(r"\bv(?:cvtph2ps|cvtps2ph|cvtsh2s[sd]|fn?m(?:add|sub)\w*[ps][sd])\b", text)  # no widening
    assert "hf2" not in text and "fma@" not in text
    check_spills(inspect.loop_spills(text), 0, "VFMADD231PH's loop", "sapphirerapids")


def test_ir_and_asm_are_the_vector_code():
    """The host's BF16 body on each engine: FMA (``llvm.fma``, VFMADD231PS) or, where the host has
    AVX512_BF16, VDPBF16PS, which the host's default body is then."""
    ir = inspect.llvm_ir("bf16", engine="fma")
    assert "llvm.fma.v" in ir
    text = inspect.asm("bf16", engine="fma")
    assert "vfmadd" in text and "vdpbf16ps" not in text
    if "vdpbf16ps" in targets.engines():
        for engine in ("vdpbf16ps", None):
            assert "llvm.x86.avx512bf16.dpbf16ps.512" in inspect.llvm_ir("bf16", engine=engine)
            text = inspect.asm("bf16", engine=engine)
            assert re.search(r"vdpbf16ps\s+-?\d*\(%\w+(,%\w+)?\)\{1to16\}, %zmm", text), "A's broadcast folded"
            assert "vfmadd" not in text
    else:
        with pytest.raises(ValueError, match="engine 'vdpbf16ps' needs"):
            inspect.asm("bf16", engine="vdpbf16ps")


@pytest.mark.parametrize(
    "dtype,instr",
    [
        ("bf16", "tdpbf16ps"),
        ("fp16", "tdpfp16ps"),
        ("s8s8", "tdpbssd"),
        ("s8u8", "tdpbsud"),
        ("u8s8", "tdpbusd"),
        ("u8u8", "tdpbuud"),
        ("bf8", "tdpbf8ps"),
        ("bf8hf8", "tdpbhf8ps"),
        ("hf8bf8", "tdphbf8ps"),
        ("hf8", "tdphf8ps"),
    ],
)
def test_amx_asm(dtype, instr):
    two = inspect.amx_asm(dtype, "2x2")
    assert "ldtilecfg" in two and "tilerelease" in two
    assert two.count("tileloadd") == 6  # the listing as printed reloads TMM6 and TMM7
    assert f"{instr}\t%tmm6, %tmm4, %tmm0" in two and f"{instr}\t%tmm7, %tmm5, %tmm3" in two
    assert two.count("tilestored") == 4
    one = inspect.amx_asm(dtype, "1x1")
    assert one.count("tileloadd") == 2 and f"{instr}\t%tmm2, %tmm1, %tmm0" in one
    # Other tilings: the seed's style with one A (TMM6) and one B (TMM7) register.
    six = inspect.amx_asm(dtype, "2x3")
    assert six.count("tileloadd") == 2 + 6 and six.count("tilestored") == 6
    assert f"{instr}\t%tmm7, %tmm6, %tmm5" in six
    with pytest.raises(ValueError, match="infeasible"):
        inspect.amx_asm(dtype, "3x3")


def test_amx_asm_complex_runs_one_pass_per_instruction():
    # cfp16: TCMMRLFP16PS into the real parts, then TCMMIMFP16PS into the imaginary parts, each
    # the seed's loop for the tiling (Granite Rapids-D has AMX-COMPLEX).
    two = inspect.amx_asm("cfp16", "2x2")
    assert two.count("ldtilecfg") == 2 and two.count("tilestored") == 8
    assert "tcmmrlfp16ps\t%tmm6, %tmm4, %tmm0" in two and "tcmmimfp16ps\t%tmm7, %tmm5, %tmm3" in two
    assert two.index("seed_tcmmrlfp16ps_2x2") < two.index("seed_tcmmimfp16ps_2x2")
    ir = inspect.amx_ir("cfp16", "1x1")
    assert "declare void @llvm.x86.tcmmrlfp16ps" in ir and "declare void @llvm.x86.tcmmimfp16ps" in ir
