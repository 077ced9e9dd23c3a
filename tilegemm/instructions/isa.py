"""The other CPUs' paths (``docs/isa-profiles.md``): the int8 sequences of AVX512_VNNI / AVX-VNNI
(VPDPBUSD, VPDPBUSDS) and AVX2 (VPMADDUBSW + VPMADDWD + VPADDD), the float FMA paths (FP32 FMA on
widened BF16/FP16, AVX512-FP16's VFMADD231PH), and their profiles, some of them another encoding
of one listed before (``same_as``)."""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from ..formats import BF16, FP16, S8, U8, NumberFormat
from .records import _F32, _I32, Instruction, Profile, by_mnemonic


def _isa_int(mnemonic: str, a: NumberFormat, kernel: str, reference: str, llvm: str, flag: str, summary: str):
    """An int8 path of another CPU: A (u8, or s8 shifted by +128) x B (s8) into int32, in quads."""
    return Instruction(
        mnemonic,
        a,
        S8,
        group=4,
        k_step=64,
        acc=_I32,
        reference=f"tilegemm.reference.isa:{reference}",
        kernel=kernel,
        doc="docs/isa-profiles.md",
        summary=summary,
        llvm=llvm,
        cpu_flag=flag,
    )


def _isa_fma(
    mnemonic: str, fmt: NumberFormat, acc: np.dtype, kernel: str, reference: str, llvm: str, flag: str, summary
):
    """A float path of another CPU: one fused multiply-add per K element into one accumulator.
    ``group``/``k_step`` are only the B layout (pairs, 32 per K step), the one the BF16/FP16 tile
    instructions read, so a packed B serves both."""
    return Instruction(
        mnemonic,
        fmt,
        fmt,
        group=2,
        k_step=32,
        acc=acc,
        reference=f"tilegemm.reference.isa:{reference}",
        kernel=kernel,
        doc="docs/isa-profiles.md",
        summary=summary,
        llvm=llvm,
        cpu_flag=flag,
    )


_SHIFTED = "s8 activations shifted by +128 to u8, compensated in C (oneDNN's s8s8)"

INSTRUCTIONS: tuple[Instruction, ...] = (
    # ".S8": the same sequence on signed activations through the +128 shift with compensation.
    _isa_int(
        "VPDPBUSD",
        U8,
        "i8quads",
        "vpdpbusd_gemm",
        "llvm.x86.avx512.vpdpbusd.512",
        "avx512_vnni",
        "AVX512_VNNI / AVX-VNNI u8 x s8 quads into int32, wrapping",
    ),
    _isa_int(
        "VPDPBUSD.S8",
        S8,
        "i8quads",
        "vpdpbusd_gemm",
        "llvm.x86.avx512.vpdpbusd.512",
        "avx512_vnni",
        f"VPDPBUSD on {_SHIFTED}",
    ),
    _isa_int(
        "VPDPBUSDS",
        U8,
        "i8sat",
        "vpdpbusds_gemm",
        "llvm.x86.avx512.vpdpbusds.512",
        "avx512_vnni",
        "AVX512_VNNI / AVX-VNNI u8 x s8 quads into int32, saturating",
    ),
    _isa_int(
        "VPDPBUSDS.S8",
        S8,
        "i8sat",
        "vpdpbusds_gemm",
        "llvm.x86.avx512.vpdpbusds.512",
        "avx512_vnni",
        f"VPDPBUSDS on {_SHIFTED}",
    ),
    _isa_int(
        "VPMADDUBSW",
        U8,
        "i16pairs",
        "vpmaddubsw_gemm",
        "llvm.x86.avx2.pmadd.ub.sw",
        "avx2",
        "AVX2 u8 x s8 pairs saturated to int16 (VPMADDUBSW), then VPMADDWD and VPADDD into int32",
    ),
    _isa_int(
        "VPMADDUBSW.S8",
        S8,
        "i16pairs",
        "vpmaddubsw_gemm",
        "llvm.x86.avx2.pmadd.ub.sw",
        "avx2",
        f"VPMADDUBSW, VPMADDWD, VPADDD on {_SHIFTED}",
    ),
    _isa_fma(
        "VFMADD231PS.BF16",
        BF16,
        _F32,
        "f32fma",
        "vfmadd231ps_gemm",
        "llvm.fma.v16f32",
        "fma",
        "BF16 widened to FP32, one FMA per K element, denormals kept",
    ),
    _isa_fma(
        "VFMADD231PS.FP16",
        FP16,
        _F32,
        "f32fma",
        "vfmadd231ps_gemm",
        "llvm.fma.v16f32",
        "fma",
        "FP16 widened to FP32 (VCVTPH2PS), one FMA per K element, denormals kept",
    ),
    _isa_fma(
        "VFMADD231PH",
        FP16,
        np.dtype(np.float16),
        "f16acc",
        "vfmadd231ph_gemm",
        "llvm.fma.v32f16",
        "avx512_fp16",
        "AVX512-FP16 FMA per K element into an FP16 accumulator",
    ),
)

_I = by_mnemonic(INSTRUCTIONS)


def _isa_profile(name: str, dtypes: dict, summary: str, onednn: str | None = None) -> Profile:
    ints = "s8s8" in dtypes
    return Profile(
        name,
        MappingProxyType({d: _I[m] for d, m in dtypes.items()}),
        summary=summary,
        doc="docs/isa-profiles.md",
        tiled=False,
        aliases=MappingProxyType({"int8": "s8s8"} if ints else {}),
        onednn=onednn,
    )


def _same_bits(name: str, of: Profile, summary: str, onednn: str | None = None) -> Profile:
    """A profile that is another encoding of ``of``'s instructions: the same records, other name."""
    return Profile(name, of.dtypes, summary, of.doc, of.tiled, of.aliases, onednn, same_as=of.name)


_VNNI = _isa_profile(
    "avx512_vnni",
    {"u8s8": "VPDPBUSD", "s8s8": "VPDPBUSD.S8"},
    "AVX512_VNNI VPDPBUSD: int8 quads into int32, wrapping (Cascade Lake and later, Zen 4)",
    "AVX512_CORE_VNNI",
)
_VNNI_SAT = _isa_profile(
    "avx512_vnni_sat",
    {"u8s8": "VPDPBUSDS", "s8s8": "VPDPBUSDS.S8"},
    "AVX512_VNNI VPDPBUSDS: int8 quads into int32, saturating (MLAS / ONNX Runtime)",
)
PROFILES: tuple[Profile, ...] = (
    _VNNI,
    _same_bits(
        "avx_vnni", _VNNI, "AVX-VNNI (VEX) VPDPBUSD: the bits of avx512_vnni (Alder Lake and later)", "AVX2_VNNI"
    ),
    _VNNI_SAT,
    _same_bits("avx_vnni_sat", _VNNI_SAT, "AVX-VNNI (VEX) VPDPBUSDS: the bits of avx512_vnni_sat"),
    _isa_profile(
        "avx2",
        {"u8s8": "VPMADDUBSW", "s8s8": "VPMADDUBSW.S8"},
        "AVX2 VPMADDUBSW + VPMADDWD + VPADDD: int8 pairs saturate to int16 (Haswell .. Skylake, Zen 1-3)",
        "AVX2",
    ),
    _isa_profile(
        "fp32_fma",
        {"bf16": "VFMADD231PS.BF16", "fp16": "VFMADD231PS.FP16"},
        "AVX2/AVX-512F: 16-bit floats widened, one FP32 FMA per K element, denormals kept",
    ),
    _isa_profile(
        "avx512_fp16",
        {"fp16": "VFMADD231PH"},
        "AVX512-FP16 VFMADD231PH: an FP16 accumulator, FP16 result (Sapphire Rapids and later)",
    ),
)
