"""The AMX extensions after Sapphire Rapids: AMX-COMPLEX (TCMMRLFP16PS, TCMMIMFP16PS, and the
complex FP16 product as one dtype; Granite Rapids-D), AMX-FP8 (TDPBF8PS, TDPBHF8PS, TDPHBF8PS,
TDPHF8PS) and AMX-TF32 (TMMULTF32PS; Diamond Rapids). The ``"amx"`` profile (:mod:`.amx`) runs them."""

from __future__ import annotations

import numpy as np

from ..formats import BF8, CFP16, HF8, TF32, NumberFormat
from .records import _F32, Instruction, Profile, Switch

# AMX-COMPLEX and AMX-FP8 leave points open that the published definitions (Intel SDM, ISE) do not
# settle; each is a switch whose first value is the reading tilegemm computes by default
# (docs/amx-complex.md, docs/amx-fp8.md show the example that tells the readings apart).
_TCMM_SWITCHES = (
    Switch(
        "tcmm_rl_negate",
        ("sdm_input_sign_flip", "product_negate"),
        "TCMMRLFP16PS's negation of A's imaginary part: the SDM flips the FP16 input's sign bit; "
        "product_negate negates the product instead. Only the sign of a NaN result differs.",
    ),
    Switch(
        "tcmm_im_lane_order",
        ("sdm", "sde"),
        "TCMMIMFP16PS's lanes: the SDM's t0 = im(a)*re(b), t1 = re(a)*im(b); sde swaps them. Only "
        "which NaN payload a result carries differs.",
    ),
)
_FP8_SWITCHES = (
    Switch(
        "fp8_inf_cancel",
        ("strict", "sde_revive"),
        "+Inf and -Inf products in one instruction: strict gives NaN; sde_revive tracks a sign "
        "state in product order that a later Inf can revive (NaN only if cancelled at a dword's end).",
    ),
    Switch(
        "fp8_dst_daz",
        (True, False),
        "Whether the final add reads a denormal dst as zero (FTZ applies either way): only the sign "
        "of a zero result from a denormal dst differs.",
    ),
)


def _amx_complex(mnemonic: str, part: int, summary: str) -> Instruction:
    method = mnemonic.lower()
    return Instruction(
        mnemonic,
        CFP16,
        CFP16,
        group=1,
        k_step=16,
        acc=_F32,
        reference="tilegemm.reference.complex:tcmm_gemm",
        kernel="cfp16",
        doc="docs/amx-complex.md",
        summary=summary,
        dst_daz=True,
        tile_method=method,
        intrinsic=f"_tile_{method[1:]}",
        llvm=f"llvm.x86.{method}",
        cpu_flag="amx_complex",
        llvm_cpu="graniterapids-d",
        switches=_TCMM_SWITCHES,
        part=part,
    )


def _amx_fp8(mnemonic: str, a: NumberFormat, b: NumberFormat) -> Instruction:
    method = mnemonic.lower()
    return Instruction(
        mnemonic,
        a,
        b,
        group=4,
        k_step=64,
        acc=_F32,
        reference="tilegemm.reference.fp8:tdpfp8_gemm",
        kernel="fp8c",  # binary32 steps checked through MXCSR; fp8quads (binary64) where its proof fails
        doc="docs/amx-fp8.md",
        summary=f"{a.name} x {b.name} in quads, all products of a tile summed exactly, rounded once into FP32",
        exact_sum=True,
        tile_method=method,
        intrinsic=f"_tile_{method[1:]}",
        llvm=f"llvm.x86.{method}",
        cpu_flag="amx_fp8",
        llvm_cpu="diamondrapids",
        switches=_FP8_SWITCHES,
    )


_RL = _amx_complex("TCMMRLFP16PS", 0, "complex FP16 dwords: the real part of A x B into FP32")
_IM = _amx_complex("TCMMIMFP16PS", 1, "complex FP16 dwords: the imaginary part of A x B into FP32")

INSTRUCTIONS: tuple[Instruction, ...] = (
    _RL,
    _IM,
    # The complex product as one dtype: both instructions over the same tiles, C as complex64.
    Instruction(
        f"{_RL.mnemonic}+{_IM.mnemonic}",
        CFP16,
        CFP16,
        group=1,
        k_step=16,
        acc=np.dtype(np.complex64),
        reference="tilegemm.reference.complex:cfp16_gemm",
        kernel="cfp16",
        doc="docs/amx-complex.md",
        summary="complex FP16: real part by TCMMRLFP16PS, imaginary part by TCMMIMFP16PS, into complex64",
        dst_daz=True,
        cpu_flag="amx_complex",
        llvm_cpu="graniterapids-d",
        switches=_TCMM_SWITCHES,
        parts=(_RL.mnemonic, _IM.mnemonic),
    ),
    _amx_fp8("TDPBF8PS", BF8, BF8),
    _amx_fp8("TDPBHF8PS", BF8, HF8),
    _amx_fp8("TDPHBF8PS", HF8, BF8),
    _amx_fp8("TDPHF8PS", HF8, HF8),
    Instruction(
        "TMMULTF32PS",
        TF32,
        TF32,
        group=1,
        k_step=16,
        acc=_F32,
        reference="tilegemm.reference.tf32:tmmultf32ps_gemm",
        kernel="tf32",
        doc="docs/amx-tf32.md",
        summary="FP32 tiles read as TF32 (truncated, denormals kept), one FP32 chain of 16 FMAs per "
        "instruction (FTZ), added to dst",
        tile_method="tmmultf32ps",
        intrinsic="_tile_mmultf32ps",
        llvm="llvm.x86.tmmultf32ps",
        cpu_flag="amx_tf32",
        llvm_cpu="diamondrapids",
        switches=(
            Switch(
                "tf32_dst_daz",
                (True, False),
                "Whether the add into dst reads a denormal dst as zero (FTZ applies either way): the "
                "results differ where dst is denormal and the sum of tmp and dst is not tiny, or is a zero.",
            ),
            Switch(
                "tf32_rounding",
                ("each_step", "single"),
                "each_step: one rounding per K element (an FP32 FMA chain from +0); single: the "
                "instruction's products summed exactly and rounded once, as a wide adder would.",
            ),
        ),
    ),
)

#: None of its own: the ``"amx"`` profile (:mod:`.amx`) runs these records.
PROFILES: tuple[Profile, ...] = ()
