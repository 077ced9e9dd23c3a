"""Every shipped microkernel vectorizes; cross-target compiles give AVX-512; AMX code is real."""

from __future__ import annotations

import pytest

from tilegemm import inspect
from tilegemm.kernels.targets import shape

# The stated spill budget: vector registers stored to the stack by one tile multiply's code.
SPILL_BUDGET = 32
KERNELS = [
    ("bf16", "amx"),
    ("fp16", "amx"),
    ("bf16", "avx512"),
    ("s8s8", "amx"),
    ("s8u8", "amx"),
    ("u8s8", "amx"),
    ("u8u8", "amx"),
]


@pytest.mark.parametrize("dtype,isa", KERNELS)
def test_host_microkernels_vectorize(dtype, isa):
    r = inspect.vector_report(dtype, "2x2", isa)
    assert r.vectorized, r
    assert r.scalar_fma == 0
    assert r.spills <= SPILL_BUDGET, r
    if dtype in ("bf16", "fp16"):
        assert r.widest_vector == f"<{shape('f32pairs').width} x float>"
        assert r.vector_fma >= 128  # 16 pairs x (even, odd) x 4 rows of 16 columns, at least
    else:
        assert r.int_dot > 0


@pytest.mark.parametrize("dtype,vector,per_trip", [("cfp16", "float", 4 * 4), ("hf8", "double", 2 * 4)])
def test_complex_and_fp8_microkernels_vectorize(dtype, vector, per_trip):
    # The bodies loop over K in IR (4 elements per trip): every row's accumulators take one FMA
    # per element, 4 per complex element (RL and IM, two lanes each), 2 for FP8 (16 columns of
    # binary64 in two zmm).
    body = shape("cfp16" if dtype == "cfp16" else "fp8quads")
    r = inspect.vector_report(dtype, "2x2")
    assert r.vectorized and r.scalar_fma == 0 and r.spills <= SPILL_BUDGET, r
    assert r.widest_vector == f"<{body.width} x {vector}>"
    assert r.vector_fma >= body.rows * per_trip
    h = inspect.vector_report(dtype, cpu="haswell")
    assert h.vectorized and h.widest_bits == 256 and h.spills <= SPILL_BUDGET, h


def test_cross_target_gives_avx512_and_avx2():
    r = inspect.vector_report("bf16", cpu="skylake-avx512")
    assert r.widest_bits == 512 and r.vectorized and r.spills <= SPILL_BUDGET
    r = inspect.vector_report("s8s8", cpu="haswell")
    assert r.vectorized and r.spills <= SPILL_BUDGET
    r = inspect.vector_report("bf16", cpu="haswell")
    assert r.widest_vector == "<8 x float>" and r.vectorized and r.spills <= SPILL_BUDGET
    with pytest.raises(ValueError, match="unknown cpu 'pentium'"):
        inspect.vector_report(cpu="pentium")


def test_ir_and_asm_are_the_vector_code():
    ir = inspect.llvm_ir("bf16")
    assert "llvm.fma.v" in ir
    text = inspect.asm("bf16")
    assert "vfmadd" in text


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
