"""The native dot-product GEMMs of the other CPUs' paths (VPDPBUSD, VPDPBUSDS, VPMADDUBSW and
VFMADD231PS), compiled for every host, and run for real where the CPU has the instruction.

The silicon tests are skipped on a CPU without the instruction (it would fault); the compiled
code is checked on every host by cross-compiling it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import assert_bits

import tilegemm
from tilegemm import instructions, native
from tilegemm.native import gemm, jit, vdp

#: (isa, dtype) -> the CPU flag the instruction needs; every dot kind but VDPBF16PS's.
CASES = {
    ("avx512_vnni", "u8s8"): "avx512_vnni",
    ("avx512_vnni", "s8s8"): "avx512_vnni",
    ("avx512_vnni_sat", "u8s8"): "avx512_vnni",
    ("avx512_vnni_sat", "s8s8"): "avx512_vnni",
    ("avx2", "u8s8"): "avx2",
    ("avx2", "s8s8"): "avx2",
    ("fp32_fma", "bf16"): "fma",
    ("fp32_fma", "fp16"): "fma",
}
_AVX512 = "+avx512f,+avx512bw,+avx512vl,+avx512dq,+avx512vnni,+avx2,+fma,+f16c"
#: kind -> (CPU, features, the instructions the loop must contain)
COMPILED = {
    "vpdpbusd": ("znver4", _AVX512, ("vpdpbusd",)),
    "vpdpbusds": ("znver4", _AVX512, ("vpdpbusds",)),
    "pmaddubsw": ("haswell", "+avx2,+fma,+f16c", ("vpmaddubsw", "vpmaddwd")),
    "fma_bf16": ("haswell", "+avx2,+fma,+f16c", ("vfmadd",)),
    "fma_fp16": ("haswell", "+avx2,+fma,+f16c", ("vfmadd", "vcvtph2ps")),
}


def _instr(isa, dtype):
    return instructions.resolve(isa, dtype)[2]


def test_every_case_has_a_dot_program():
    kinds = {vdp.kind(_instr(*case)) for case in CASES}
    assert kinds == set(COMPILED) and all(gemm.generator(_instr(*c)) == "dot" for c in CASES)
    assert vdp.kind(_instr("avx512", "bf16")) == "dpbf16ps"
    assert vdp.kind(_instr("avx512_fp16", "fp16")) is None  # VFMADD231PH: no program yet


@pytest.mark.parametrize("kind", sorted(COMPILED))
def test_the_loop_is_the_instruction(kind):
    """Cross-compiled (never run): the loop's arithmetic is the instruction itself."""
    cpu, features, mnemonics = COMPILED[kind]
    text = jit.assembly(vdp.dot_ir("f", kind), cpu, features)
    for m in mnemonics:
        assert len(re.findall(rf"\b{m}", text)) >= 2, (kind, m)
    if not kind.startswith("fma"):
        assert "vfmadd" not in text


def _skip_unless(flag):
    if flag not in native.this_host().flags:
        pytest.skip(f"this CPU has no {flag}: the instruction would fault")


def _both(a, b, isa, dtype, c):
    got, want = c.copy(), c.copy()
    tilegemm.matmul(a, b, dtype, isa=isa, out=want, accumulate=True)
    tilegemm.matmul(a, b, dtype, isa=isa, out=got, accumulate=True, backend="native")
    return got, want


@pytest.mark.parametrize("isa, dtype", sorted(CASES))
@pytest.mark.parametrize("M, K, N", [(1, 1, 1), (5, 7, 3), (37, 65, 45), (21, 131, 17)])
def test_matches_emulation(isa, dtype, M, K, N):
    _skip_unless(CASES[(isa, dtype)])
    rng = np.random.default_rng([M, K, N, len(isa)])
    if dtype in ("bf16", "fp16"):
        a, b = rng.standard_normal((2, M, K)), rng.standard_normal((K, N))
        c = rng.standard_normal((2, M, N)).astype(np.float32)
    else:
        a = rng.integers(-128 if dtype[0] == "s" else 0, 128 if dtype[0] == "s" else 256, (2, M, K))
        b = rng.integers(-128, 128, (K, N))
        c = rng.integers(-(2**31), 2**31, (2, M, N)).astype(np.int32)  # near both ends: wraps, saturates
    got, want = _both(a, b, isa, dtype, c)
    assert_bits(got, want, f"native {isa} {dtype} M x N x K = {M} x {N} x {K}")


def test_vpdpbusds_saturates_and_vpdpbusd_wraps():
    """Silicon against values worked out by hand: C = 2^31 - 100 plus 4 x 255 x 127 = 129,540."""
    _skip_unless("avx512_vnni")
    a, b = np.full((1, 4), 255), np.full((4, 1), 127)
    c = np.full((1, 1), 2**31 - 100, np.int32)
    for isa, want in (("avx512_vnni_sat", 2**31 - 1), ("avx512_vnni", 2**31 - 100 + 129540 - 2**32)):
        got, emulated = _both(a, b, isa, "u8s8", c)
        assert got[0, 0] == want and emulated[0, 0] == want, isa


def test_vpmaddubsw_saturates_each_pair_to_int16():
    """255 x 127 + 255 x 127 = 64,770 saturates to 32,767 per pair: a quad gives 65,534, where
    VPDPBUSD's exact sum is 129,540. Signed activations: -128 shifted to 0 plus compensation."""
    _skip_unless("avx2")
    a, b = np.full((1, 4), 255), np.full((4, 1), 127)
    got, _ = _both(a, b, "avx2", "u8s8", np.zeros((1, 1), np.int32))
    assert got[0, 0] == 2 * 32767
    got, want = _both(np.full((1, 4), -128), b, "avx2", "s8s8", np.zeros((1, 1), np.int32))
    assert got[0, 0] == want[0, 0] == 4 * -128 * 127


def test_fma_runs_k_elements_not_the_padding():
    """K = 1 and C = -0: -1 x 0 = -0, and -0 + -0 = -0. Running the padding element too would add
    fma(+0, +0, -0) = +0."""
    _skip_unless("fma")
    for dtype in ("bf16", "fp16"):
        got, want = _both(np.array([[-1.0]]), np.array([[0.0]]), "fp32_fma", dtype, np.full((1, 1), -0.0, np.float32))
        assert got.view(np.uint32)[0, 0] == want.view(np.uint32)[0, 0] == 0x80000000, dtype
