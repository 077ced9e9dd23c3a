"""Profiles that model a library's whole call rather than one instruction sequence: ``"onednn"``
(PyTorch's bf16 matmul on an AMX server, ``docs/onednn.md``), and :data:`ONEDNN_INT8`, the
profile whose bits oneDNN's int8 GEMM computes under each ``DNNL_MAX_CPU_ISA``. They run other
families' records and add none of their own."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from . import amx
from .records import Instruction, Profile, by_mnemonic

INSTRUCTIONS: tuple[Instruction, ...] = ()

PROFILES: tuple[Profile, ...] = (
    Profile(
        "onednn",
        MappingProxyType({"bf16": by_mnemonic(amx.INSTRUCTIONS)["TDPBF16PS"]}),
        summary="PyTorch's CPU bf16 matmul on an AMX server: oneDNN brgemm's K blocks of TDPBF16PS, "
        "float32 block sums, bf16 output",
        doc="docs/onednn.md",
        onednn="AVX512_CORE_AMX",
        library="tilegemm.onednn:profile_matmul",
        library_reference="tilegemm.reference.onednn:profile_matmul",
        # The recording host of tests/data/torch-bf16-amx.npz: PyTorch 2.14.1, oneDNN v3.12.0.
        parameters=MappingProxyType(
            {
                "cores": 2,
                "l1d": 48 * 1024,
                "l2": 2 * 1024 * 1024,
                "l3": 480 * 1024 * 1024,
                "l2_ways": 16,
                "line": 64,
                "isa": "avx10_1_512_amx",
            }
        ),
    ),
)

#: oneDNN's ``DNNL_MAX_CPU_ISA`` values and the profile whose bits its int8 GEMM computes there
#: (its s8 x s8 through the +128 shift with compensation; ``gemm_info.cpp``, ``gemm_driver.cpp``).
ONEDNN_INT8: Mapping[str, str] = MappingProxyType(
    {
        "AVX2": "avx2",
        "AVX512_CORE": "avx2",
        "AVX2_VNNI": "avx_vnni",
        "AVX512_CORE_VNNI": "avx512_vnni",
        "AVX512_CORE_AMX": "amx",
    }
)
