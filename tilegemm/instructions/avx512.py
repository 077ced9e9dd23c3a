"""The AVX-512 BF16 baseline: VDPBF16PS, one FP32 accumulator per element, and its ``"avx512"``
profile (``docs/vdpbf16ps.md``)."""

from __future__ import annotations

from types import MappingProxyType

from ..formats import BF16
from .records import _F32, Instruction, Profile

VDPBF16PS = Instruction(
    "VDPBF16PS",
    BF16,
    BF16,
    group=2,
    k_step=32,
    acc=_F32,
    reference="tilegemm.reference.avx512:vdpbf16ps_gemm",
    kernel="vdp",
    doc="docs/vdpbf16ps.md",
    summary="AVX512_BF16 dot product: one FP32 chain per element, odd product first",
    daz_inputs=True,
    dst_daz=True,
    llvm="llvm.x86.avx512bf16.dpbf16ps.512",
    cpu_flag="avx512_bf16",
)

INSTRUCTIONS: tuple[Instruction, ...] = (VDPBF16PS,)

PROFILES: tuple[Profile, ...] = (
    Profile(
        "avx512",
        MappingProxyType({"bf16": VDPBF16PS}),
        summary="the AVX-512 BF16 baseline: VDPBF16PS, one FP32 accumulator per element",
        doc="docs/vdpbf16ps.md",
        tiled=False,
    ),
)
