"""AMX's tile multiplies of Sapphire Rapids: BF16/FP16 pairs (TDPBF16PS, TDPFP16PS) and int8 quads
(TDPBSSD, TDPBSUD, TDPBUSD, TDPBUUD), and the ``"amx"`` profile, which also runs the later AMX
extensions' records (:mod:`.amx_next`)."""

from __future__ import annotations

from types import MappingProxyType

from ..formats import BF16, FP16, S8, U8, NumberFormat
from . import amx_next
from .records import _F32, _I32, Instruction, Profile, by_mnemonic


def _amx_float(mnemonic: str, fmt: NumberFormat, method: str, flag: str, daz: bool, summary: str) -> Instruction:
    return Instruction(
        mnemonic,
        fmt,
        fmt,
        group=2,
        k_step=32,
        acc=_F32,
        reference="tilegemm.reference.amx:tdp_float_gemm",
        kernel="f32pairs",
        doc="docs/tdpbf16ps-tdpfp16ps.md",
        summary=summary,
        daz_inputs=daz,
        dst_daz=True,
        tile_method=method,
        intrinsic=f"_tile_{method[1:]}",
        llvm=f"llvm.x86.{method}",
        cpu_flag=flag,
    )


def _amx_int(mnemonic: str, a: NumberFormat, b: NumberFormat) -> Instruction:
    method = mnemonic.lower()
    return Instruction(
        mnemonic,
        a,
        b,
        group=4,
        k_step=64,
        acc=_I32,
        reference="tilegemm.reference.amx:tdp_int_gemm",
        kernel="i8quads",
        doc="docs/tdpbxxd.md",
        summary=f"{a.name} x {b.name} bytes in quads into int32, wrapping",
        tile_method=method,
        intrinsic=f"_tile_{method[1:]}",
        llvm=f"llvm.x86.{method}",
        cpu_flag="amx_int8",
    )


INSTRUCTIONS: tuple[Instruction, ...] = (
    _amx_float("TDPBF16PS", BF16, "tdpbf16ps", "amx_bf16", True, "BF16 pairs into FP32, even/odd chains"),
    _amx_float("TDPFP16PS", FP16, "tdpfp16ps", "amx_fp16", False, "FP16 pairs into FP32, denormals kept"),
    _amx_int("TDPBSSD", S8, S8),
    _amx_int("TDPBSUD", S8, U8),
    _amx_int("TDPBUSD", U8, S8),
    _amx_int("TDPBUUD", U8, U8),
)

_I = by_mnemonic(INSTRUCTIONS + amx_next.INSTRUCTIONS)
PROFILES: tuple[Profile, ...] = (
    Profile(
        "amx",
        MappingProxyType(
            {
                "bf16": _I["TDPBF16PS"],
                "fp16": _I["TDPFP16PS"],
                "s8s8": _I["TDPBSSD"],
                "s8u8": _I["TDPBSUD"],
                "u8s8": _I["TDPBUSD"],
                "u8u8": _I["TDPBUUD"],
                "cfp16": _I["TCMMRLFP16PS+TCMMIMFP16PS"],
                "bf8": _I["TDPBF8PS"],
                "bf8hf8": _I["TDPBHF8PS"],
                "hf8bf8": _I["TDPHBF8PS"],
                "hf8": _I["TDPHF8PS"],
                "tf32": _I["TMMULTF32PS"],
            }
        ),
        summary="Intel AMX tile multiplies (Sapphire Rapids, Granite Rapids; AMX-COMPLEX on Granite "
        "Rapids-D, AMX-FP8 and AMX-TF32 on Diamond Rapids)",
        doc="docs/semantics.md",
        aliases=MappingProxyType({"int8": "s8s8"}),
        onednn="AVX512_CORE_AMX",
    ),
)
