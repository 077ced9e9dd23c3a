"""The one table of emulated instructions and ISA profiles. Everything else reads it.

An :class:`Instruction` record holds every fact about one emulated instruction: its operand
formats, how elements group along K, how far one instruction steps along K, the accumulator, the
readable reference, the family of compiled kernels that runs it fast, the tile-API method and C
intrinsic, the LLVM intrinsic and CPU flag of the real thing, and its documentation page. A
:class:`Profile` (``isa=`` of :func:`tilegemm.matmul`) maps the user's dtype names onto
instructions: ``"amx"`` (the default: the tile multiplies), ``"avx512"`` (the AVX-512 BF16
baseline), ``"onednn"`` (PyTorch's bf16 matmul on an AMX server: oneDNN's blocking around the
tile multiplies, ``docs/onednn.md``), and the other CPUs' paths (``"avx512_vnni"``, ``"avx2"``,
``"fp32_fma"`` ..., ``docs/isa-profiles.md``). A dtype may run more than one instruction:
``"cfp16"`` computes the real part of a complex product with TCMMRLFP16PS and the imaginary part
with TCMMIMFP16PS, and its record names both (:attr:`Instruction.parts`).

Adding a dtype is one record here, its reference, its kernels and its documentation page. No
other module compares a dtype or ISA name to a string: they look records up here and read their
fields. Functions are named by import path (``"module:function"``) and resolved on first use, so
importing this table loads nothing heavy.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

from .formats import BF8, BF16, CFP16, FP16, HF8, MXINT8, S8, TF32, U8, NumberFormat

__all__ = [
    "Switch",
    "Instruction",
    "Profile",
    "INSTRUCTIONS",
    "PROFILES",
    "ACE_TILE_SWITCHES",
    "DEFAULT_ISA",
    "DTYPES",
    "ISAS",
    "profile",
    "resolve",
    "find",
    "ONEDNN_INT8",
    "same_bits",
]

_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)


def _resolve_path(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Switch:
    """A point the sources leave open, as a keyword of :func:`tilegemm.matmul`.

    ``values[0]`` is the default, the normative reading; a call that does not name the switch
    computes it. Values are strings or booleans; a given value must be one of them, of the same
    type. Kernels receive the index of the chosen value.
    """

    name: str
    values: tuple[str | bool, ...]
    doc: str

    @property
    def default(self) -> str | bool:
        return self.values[0]

    def accepts(self, value: object) -> bool:
        """True for one of :attr:`values`, compared with its type (``0`` is not ``False``)."""
        return any(type(value) is type(v) and value == v for v in self.values)


@dataclass(frozen=True)
class Instruction:
    """One emulated instruction and how a GEMM is cut into it.

    Attributes
    ----------
    mnemonic:
        The instruction (``"TDPBF16PS"``).
    a, b:
        Operand formats (:mod:`tilegemm.formats`): A's and B's elements.
    group:
        K elements that share one 32-bit lane: 2 for 16-bit pairs, 4 for byte quads.
    k_step:
        K elements one instruction covers in tilegemm's GEMM mapping (a full tile: 32 or 64).
    acc:
        The accumulator and result dtype.
    daz_inputs:
        Denormal inputs are read as zero (BF16 into TDPBF16PS / VDPBF16PS); FP16 keeps them.
    dst_daz:
        The first add reads a denormal C as zero (so C passed with ``accumulate=True`` is); the
        framework applies it before the kernels run. Where a switch decides it (AMX-FP8's
        ``fp8_dst_daz``), this is False and the reference and the kernels apply the switch.
    reference:
        ``"module:function"`` of the readable GEMM reference, ``f(instr, a_codes, b_codes, c)``.
    kernel:
        The family of compiled kernels that runs it (a key of ``tilegemm.dispatch.FAMILIES``).
    tile_method, intrinsic:
        The :class:`tilegemm.amx.TileUnit` method and C intrinsic name (None: no tile form).
    llvm, cpu_flag:
        The LLVM intrinsic of the real instruction and the ``/proc/cpuinfo`` flag a CPU needs
        to run it (None where there is none).
    doc:
        The documentation page, relative to the repository root.
    summary:
        One line for listings.
    switches:
        The open points of this instruction's definition (:class:`Switch`), each a keyword of
        :func:`tilegemm.matmul` and :func:`tilegemm.reference.matmul`.
    exact_sum:
        The products of one instruction are summed exactly (in fixed point) and rounded once
        (AMX-FP8); ``fixed_shift`` is the scale of that sum.
    llvm_cpu:
        The CPU LLVM compiles the real instruction for (``tilegemm.inspect.amx_asm``).
    part:
        For an instruction that writes one part of a complex result: 0 (real) or 1 (imaginary),
        the lane of its kernel family's interleaved (re, im) output it is.
    parts:
        For a dtype that runs several instructions: their mnemonics, in lane order.
    outer_method:
        For an ACE outer product (two zmm registers into a palette-2 tile): the
        :class:`tilegemm.amx.TileUnit` method; ``tile_method`` is None (no tile-by-tile form).
    scale_block:
        K elements that share one OCP MX block scale (E8M0), 32 for the MX outer products; 0 for
        instructions without block scales. Such dtypes take ``scales=(sa, sb)``.
    imm8:
        The instruction takes an imm8 (the MX outer products: which scale group of each half).
    """

    mnemonic: str
    a: NumberFormat
    b: NumberFormat
    group: int
    k_step: int
    acc: np.dtype
    reference: str
    kernel: str
    doc: str
    summary: str
    daz_inputs: bool = False
    dst_daz: bool = False
    tile_method: str | None = None
    intrinsic: str | None = None
    llvm: str | None = None
    cpu_flag: str | None = None
    switches: tuple[Switch, ...] = ()
    exact_sum: bool = False
    llvm_cpu: str = "graniterapids"
    part: int | None = None
    parts: tuple[str, ...] = ()
    outer_method: str | None = None
    scale_block: int = 0
    imm8: bool = False

    @property
    def is_float(self) -> bool:
        return self.acc.kind in "fc"

    @property
    def lanes(self) -> int:
        """Values the kernels keep per output: 2 for a complex result (re, im), else 1."""
        return 2 if self.acc.kind == "c" else 1

    @property
    def kernel_acc(self) -> np.dtype:
        """The dtype the kernels see C as: a complex result as interleaved (re, im) float32."""
        return _F32 if self.acc.kind == "c" else self.acc

    @property
    def fixed_shift(self) -> int:
        """F of an exact-sum instruction: the products' exact sum is an integer times 2^-F (AMX-FP8:
        32 for E5M2 x E5M2, 25 mixed, 18 for E4M3 x E4M3; ACE's MXINT8: 12)."""
        shifts = [f.minifloat.fix_shift if f.minifloat is not None else f.fixed_point for f in (self.a, self.b)]
        if not self.exact_sum or not all(shifts):
            raise ValueError(f"{self.mnemonic} does not sum in fixed point")
        return shifts[0] + shifts[1]

    @property
    def codes_only(self) -> bool:
        """Operands are taken only as each side's 8-bit floats or their codes, never rounded into
        them: ACE's MX FP8 outer products read every code as a number (``ace.check_operand``)."""
        return bool(self.scale_block) and self.a.minifloat is not None

    def quantize(self, a, b, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        """``a`` and ``b`` rounded once into each side's elements, as a caller of a
        :attr:`codes_only` instruction does before the call."""
        return self.a.to_element(a, "a", dtype), self.b.to_element(b, "b", dtype)

    @property
    def k_block(self) -> int:
        """K elements of one packed block of B: 16 rows of ``group`` elements (1 KiB of bytes, what
        TILELOADD reads). The AMX tile multiplies step K by one block (``k_step``); an ACE outer
        product steps by one group, 16 of them per block."""
        return 16 * self.group

    @property
    def b_layout(self) -> tuple[str, int, int]:
        """What a packed B for this instruction holds: B's format, VNNI group, K per block.
        Instructions with equal layouts share packed operands."""
        return self.b.name, self.group, self.k_block

    @property
    def reference_fn(self) -> Callable[..., np.ndarray]:
        """The reference GEMM function (imported on first use)."""
        return _resolve_path(self.reference)

    def options(self, given: Mapping[str, object], dtype: str = "") -> dict[str, str | bool]:
        """Every switch of this instruction with its value: ``given`` where named, else the
        default. ``ValueError`` for a value the switch does not have, or a switch that belongs to
        other instructions only; ``TypeError`` for a name that is no switch at all."""
        mine = {s.name: s for s in self.switches}
        for name, value in given.items():
            if name not in mine:
                if name in ALL_SWITCHES:
                    valid = ", ".join(mine) or "none"
                    # the tile API names the instruction itself: no dtype to add
                    where = f" (dtype {dtype!r})" if dtype and dtype != self.mnemonic.lower() else ""
                    raise ValueError(f"switch {name!r} does not apply to {self.mnemonic}{where}; its switches: {valid}")
                raise TypeError(f"unexpected keyword argument {name!r}")
            if not mine[name].accepts(value):
                raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, mine[name].values))}")
        return {name: given.get(name, sw.default) for name, sw in mine.items()}  # type: ignore[misc]

    def option_codes(self, options: Mapping[str, str | bool]) -> tuple[int, ...]:
        """The chosen switch values as indices (what kernels receive), in :attr:`switches` order."""
        return tuple(sw.values.index(options[sw.name]) for sw in self.switches)

    def sample(self, m: int, k: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Random operands a caller would pass (m x k and k x n) in each side's format: floats
        for the formats a call rounds into, 8-bit floats for the MX outer products, which take
        their operands quantized (:attr:`codes_only`)."""
        a, b = self.a.sample((m, k), rng), self.b.sample((k, n), rng)
        return self.quantize(a, b, self.mnemonic) if self.codes_only else (a, b)


@dataclass(frozen=True)
class Profile:
    """One ``isa=`` choice: which instruction each dtype name runs.

    Attributes
    ----------
    name:
        The ``isa=`` value.
    dtypes:
        dtype name -> :class:`Instruction`, in listing order.
    aliases:
        Extra dtype names and the name each stands for (``"int8"`` -> ``"s8s8"``).
    tiled:
        True when ``tiling`` names tile registers of the instruction; otherwise a tiling only
        orders the blocks of C, which never changes a bit.
    onednn:
        The ``DNNL_MAX_CPU_ISA`` value under which oneDNN runs this path, if any
        (:data:`ONEDNN_INT8` lists every value for the int8 GEMM).
    doc, summary:
        Documentation page and one line for listings.
    library, library_reference:
        For a profile that models a library's whole call rather than one instruction sequence
        (``"onednn"``: PyTorch's bf16 matmul on an AMX server): ``"module:function"`` of the
        fast path and of the readable reference that :func:`tilegemm.matmul` and
        :func:`tilegemm.reference.matmul` hand such a call to. None: the instruction's kernels.
    parameters:
        The modelled machine's parameters for a library profile (cache sizes, cores, ISA), with
        the values of the host its recorded results come from.
    same_as:
        Another profile whose bits this one computes for every dtype (another encoding of the
        same instructions): its dtypes are that profile's records, so it runs the same kernels.
    """

    name: str
    dtypes: Mapping[str, Instruction]
    summary: str
    doc: str
    tiled: bool = True
    aliases: Mapping[str, str] = field(default_factory=dict)
    onednn: str | None = None
    library: str | None = None
    library_reference: str | None = None
    parameters: Mapping[str, object] = field(default_factory=dict)
    same_as: str | None = None

    def names(self) -> tuple[str, ...]:
        """Every dtype name this profile takes, aliases included."""
        return tuple(self.dtypes) + tuple(self.aliases)

    def instruction(self, dtype: object) -> Instruction:
        """The instruction for ``dtype``; ``ValueError`` naming the valid choices otherwise."""
        if isinstance(dtype, str) and self.aliases.get(dtype, dtype) in self.dtypes:
            return self.dtypes[self.aliases.get(dtype, dtype)]
        if isinstance(dtype, str) and dtype in DTYPES:
            raise ValueError(f"isa={self.name!r} does not take dtype {dtype!r}; it takes {', '.join(self.names())}")
        raise ValueError(f"unknown dtype {dtype!r}; valid dtypes are {', '.join(DTYPES)}")

    def canonical(self, dtype: str) -> str:
        """The dtype name an alias stands for (the name itself otherwise)."""
        return self.aliases.get(dtype, dtype)

    @property
    def library_fn(self) -> Callable[..., Any] | None:
        """The function running a whole call of a library profile (None for instruction profiles)."""
        return None if self.library is None else _resolve_path(self.library)

    @property
    def library_reference_fn(self) -> Callable[..., Any] | None:
        """The readable reference of a library profile (None for instruction profiles)."""
        return None if self.library_reference is None else _resolve_path(self.library_reference)


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


# ACE (AVX10 "AI Compute Extensions"): outer products of two zmm registers into palette-2 tiles,
# the MX forms with OCP block scales from the block-scale register. The sources (clang and GCC
# acev1intrin.h, GCC's ACE run tests, Bochs) leave points open; each is a switch whose first value
# is the reading tilegemm computes by default (docs/ace.md shows the example that tells them apart).
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
_ACE = (
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

_RL = _amx_complex("TCMMRLFP16PS", 0, "complex FP16 dwords: the real part of A x B into FP32")
_IM = _amx_complex("TCMMIMFP16PS", 1, "complex FP16 dwords: the imaginary part of A x B into FP32")


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

#: Every emulated instruction, by mnemonic.
INSTRUCTIONS: Mapping[str, Instruction] = MappingProxyType(
    {
        i.mnemonic: i
        for i in (
            _amx_float("TDPBF16PS", BF16, "tdpbf16ps", "amx_bf16", True, "BF16 pairs into FP32, even/odd chains"),
            _amx_float("TDPFP16PS", FP16, "tdpfp16ps", "amx_fp16", False, "FP16 pairs into FP32, denormals kept"),
            _amx_int("TDPBSSD", S8, S8),
            _amx_int("TDPBSUD", S8, U8),
            _amx_int("TDPBUSD", U8, S8),
            _amx_int("TDPBUUD", U8, U8),
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
            Instruction(
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
            ),
            *_ACE,
            # The other CPUs' paths (docs/isa-profiles.md). ".S8": the same sequence on signed
            # activations through the +128 shift with compensation.
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
    }
)

_I = INSTRUCTIONS
#: Every switch of every instruction, by name.
ALL_SWITCHES: Mapping[str, Switch] = MappingProxyType({s.name: s for i in INSTRUCTIONS.values() for s in i.switches})

#: Every ``isa=`` profile, by name.
PROFILES: Mapping[str, Profile] = MappingProxyType(
    {
        "amx": Profile(
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
        "avx512": Profile(
            "avx512",
            MappingProxyType({"bf16": _I["VDPBF16PS"]}),
            summary="the AVX-512 BF16 baseline: VDPBF16PS, one FP32 accumulator per element",
            doc="docs/vdpbf16ps.md",
            tiled=False,
        ),
        "onednn": Profile(
            "onednn",
            MappingProxyType({"bf16": _I["TDPBF16PS"]}),
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
        "ace": Profile(
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
    }
)


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
_ISA_PROFILES = (
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
PROFILES = MappingProxyType({**PROFILES, **{p.name: p for p in _ISA_PROFILES}})

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

#: The profile :func:`tilegemm.matmul` uses unless told otherwise.
DEFAULT_ISA = "amx"
#: Every ``isa=`` value.
ISAS: tuple[str, ...] = tuple(PROFILES)
#: Every dtype name some profile takes, in listing order (the default profile's first).
DTYPES: tuple[str, ...] = tuple(dict.fromkeys(n for p in PROFILES.values() for n in p.names()))


def profile(isa: object) -> Profile:
    """The :class:`Profile` for ``isa``; ``ValueError`` listing the valid ones otherwise."""
    if isinstance(isa, str) and isa in PROFILES:
        return PROFILES[isa]
    raise ValueError(f"unknown isa {isa!r}; valid isas are {', '.join(ISAS)}")


def resolve(isa: object, dtype: object) -> tuple[Profile, str, Instruction]:
    """``(profile, canonical dtype name, instruction)`` for an ``isa=`` / ``dtype=`` pair."""
    p = profile(isa)
    instr = p.instruction(dtype)
    return p, p.canonical(dtype), instr  # type: ignore[arg-type]


def same_bits(x: object, y: object) -> bool:
    """True when profiles ``x`` and ``y`` compute the same bits for every dtype (one is the
    other, or an encoding of it: :attr:`Profile.same_as`)."""
    px, py = profile(x), profile(y)
    return (px.same_as or px.name) == (py.same_as or py.name)


def find(instruction: Instruction) -> tuple[str, str]:
    """``(isa, dtype)`` of the first profile entry that runs ``instruction``."""
    for p in PROFILES.values():
        for name, instr in p.dtypes.items():
            if instr is instruction:
                return p.name, name
    raise KeyError(instruction.mnemonic)
