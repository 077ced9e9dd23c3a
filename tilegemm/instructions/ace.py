"""ACE (AVX10 "AI Compute Extensions", ``docs/ace.md``): the outer products of two zmm registers into
palette-2 tiles (TOP4BxxD int8 quads, TOP2BF16PS), the MX forms with OCP block scales
(TOP4MX...PS), :data:`ACE_TILE_SWITCHES`, and the ``"ace"`` profile. No hardware yet."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..formats import BF8, BF16, HF8, MXINT8, S8, U8, NumberFormat
from .records import _F32, _I32, Instruction, Profile, Switch, by_mnemonic

# The MX forms read their OCP block scales from the block-scale register. The sources (clang and
# GCC acev1intrin.h, GCC's ACE run tests, Bochs) leave points open; each is a switch whose first
# value is the reading tilegemm computes by default (docs/ace.md shows the example that tells them
# apart).
_ACE_NAN_SWITCHES = (
    Switch(
        "ace_e8m0_nan_result",
        ("0x7FC00000", "0xFFC00000"),
        "What an MX outer product writes where a block scale is NaN (E8M0 0xFF): the positive "
        "(Bochs) or the negative default NaN. Only a NaN's payload differs.",
    ),
    Switch(
        "ace_dst_nan",
        ("propagate", "indefinite"),
        "A NaN C in an MX outer product: comes out quieted (Bochs), or as the default NaN 0xFFC00000. "
        "Only a NaN's payload differs.",
    ),
)
_ACE_FP8_SPECIALS = Switch(
    "ace_fp8_specials",
    ("arithmetic", "ieee_like"),
    "FP8 codes in the MX outer products: every code by its formula (E4M3 0x7F = 480, E5M2 0x7C = "
    "65536; Bochs), or with AMX-FP8's NaN and infinity rules (a NaN or Inf*0 gives the default NaN).",
)
_ACE_TOP2BF16 = Switch(
    "ace_top2bf16",
    ("sde", "spec", "rs", "gcc_chain"),
    "TOP2BF16PS's arithmetic: sde (Bochs, as SDE): no DAZ, p0 = a0*b0 rounded, s = a1*b1 + p0 fused, "
    "C + s, FTZ each; spec: DAZ, both products rounded, summed, added; rs: as spec with IEEE "
    "denormals inside and the sums flushed; gcc_chain: C + a0*b0, then C + a1*b1, IEEE.",
)
#: Open points of the ACE tile API that change no GEMM bit (a kernel places each scale where the
#: hardware reads it): keywords of the :class:`tilegemm.amx.TileUnit` methods, not of matmul.
ACE_TILE_SWITCHES: Mapping[str, Switch] = MappingProxyType(
    {
        s.name: s
        for s in (
            Switch(
                "ace_scale_imm_fields",
                ("A=[1:0],B=[4:3]", "A=[5:4],B=[1:0]"),
                "Which imm8 bits of an MX outer product pick A's and B's scale group (Bochs, clang "
                "_MM_ACE_SCALE_A/B and GCC; or the other layout).",
            ),
            Switch(
                "ace_bsr_a_half",
                ("high", "low"),
                "The BSR half holding A's scales: H (Bochs, clang), or L (GCC's reference code).",
            ),
            Switch(
                "ace_tilemov_index",
                ("mask", "fault"),
                "TILEMOVROW/TILEMOVCOL with an index above 15: bits 3:0 used (Bochs), or #UD.",
            ),
            Switch(
                "ace_imm_reserved",
                ("ignore", "fault"),
                "Reserved imm8 bits of an MX outer product set: ignored (Bochs), or #UD (clang: must be zero).",
            ),
        )
    }
)


def _ace_name(mnemonic: str) -> str:
    """The C intrinsic of an ACE outer product, as clang's and GCC's acev1intrin.h spell them
    (TOP4MXHF8PS: ``_tile_op4mxhf8_ps``, TOP4BSSD: ``_tile_op4bssd_epi32``): "_tile_" + the
    mnemonic without its leading T, with an underscore before a trailing "PS", or "_epi32" after
    an integer form's."""
    stem = mnemonic.lower()[1:]
    return "_tile_" + (stem[:-2] + "_ps" if stem.endswith("ps") else stem + "_epi32")


def _ace_int(mnemonic: str, a: NumberFormat, b: NumberFormat) -> Instruction:
    return Instruction(
        mnemonic,
        a,
        b,
        group=4,
        k_step=4,
        acc=_I32,
        reference="tilegemm.reference.ace:top4_int_gemm",
        kernel="i8quads",  # the sum modulo 2^32 does not depend on its order: AMX's int8 kernels
        doc="docs/ace.md",
        summary=f"ACE outer product: {a.name} x {b.name} byte quads into int32, wrapping",
        intrinsic=_ace_name(mnemonic),
        llvm_cpu="",
        outer_method=mnemonic.lower(),
    )


def _ace_mx(mnemonic: str, a: NumberFormat, b: NumberFormat, summary: str) -> Instruction:
    return Instruction(
        mnemonic,
        a,
        b,
        group=4,
        k_step=4,
        acc=_F32,
        reference="tilegemm.reference.ace:top4mx_gemm",
        kernel="ace_mx32c" if a.minifloat is not None else "ace_mx32",  # binary32 first
        doc="docs/ace.md",
        summary=summary,
        dst_daz=True,
        exact_sum=True,
        intrinsic=_ace_name(mnemonic),
        llvm_cpu="",
        switches=((_ACE_FP8_SPECIALS,) if a.minifloat is not None else ()) + _ACE_NAN_SWITCHES,
        outer_method=mnemonic.lower(),
        scale_block=32,
        imm8=True,
    )


_MX_SUMMARY = "ACE MX outer product: {} x {} quads, block-scaled, each step rounded once into FP32"
INSTRUCTIONS: tuple[Instruction, ...] = (
    _ace_int("TOP4BSSD", S8, S8),
    _ace_int("TOP4BSUD", S8, U8),
    _ace_int("TOP4BUSD", U8, S8),
    _ace_int("TOP4BUUD", U8, U8),
    Instruction(
        "TOP2BF16PS",
        BF16,
        BF16,
        group=2,
        k_step=2,
        acc=_F32,
        reference="tilegemm.reference.ace:top2bf16_gemm",
        kernel="ace_bf16",
        doc="docs/ace.md",
        summary="ACE outer product: BF16 pairs into FP32, a0*b0 rounded, then a1*b1 + p0 fused, then C + s",
        intrinsic=_ace_name("TOP2BF16PS"),
        llvm_cpu="",
        switches=(_ACE_TOP2BF16,),
        outer_method="top2bf16ps",
    ),
    _ace_mx("TOP4MXHF8PS", HF8, HF8, _MX_SUMMARY.format("E4M3", "E4M3")),
    _ace_mx("TOP4MXBF8PS", BF8, BF8, _MX_SUMMARY.format("E5M2", "E5M2")),
    _ace_mx("TOP4MXHBF8PS", HF8, BF8, _MX_SUMMARY.format("E4M3", "E5M2")),
    _ace_mx("TOP4MXBHF8PS", BF8, HF8, _MX_SUMMARY.format("E5M2", "E4M3")),
    _ace_mx("TOP4MXBSSPS", MXINT8, MXINT8, _MX_SUMMARY.format("MXINT8", "MXINT8")),
)

_I = by_mnemonic(INSTRUCTIONS)
PROFILES: tuple[Profile, ...] = (
    Profile(
        "ace",
        MappingProxyType(
            {
                "s8s8": _I["TOP4BSSD"],
                "s8u8": _I["TOP4BSUD"],
                "u8s8": _I["TOP4BUSD"],
                "u8u8": _I["TOP4BUUD"],
                "bf16": _I["TOP2BF16PS"],
                "mxfp8_e4m3": _I["TOP4MXHF8PS"],
                "mxfp8_e5m2": _I["TOP4MXBF8PS"],
                "mxfp8_e4m3_e5m2": _I["TOP4MXHBF8PS"],
                "mxfp8_e5m2_e4m3": _I["TOP4MXBHF8PS"],
                "mxint8": _I["TOP4MXBSSPS"],
            }
        ),
        summary="AVX10 ACE outer products into palette-2 tiles: int8, BF16, and FP8/INT8 with OCP MX "
        "block scales (no hardware yet)",
        doc="docs/ace.md",
        # A tiling orders the 16 x 16 blocks of C; ACE keeps A and B in zmm registers, and its
        # register blocking (up to 8 accumulators: 32 x 64) is modelled by the tile-API ports.
        tiled=False,
        aliases=MappingProxyType({"int8": "s8s8"}),
    ),
)
