"""The one table of emulated instructions and ISA profiles. Everything else reads it.

An :class:`Instruction` record holds every fact about one emulated instruction: its operand
formats, how elements group along K, how far one instruction steps along K, the accumulator, the
readable reference, the family of compiled kernels that runs it fast, the tile-API method and C
intrinsic, the LLVM intrinsic and CPU flag of the real thing, and its documentation page. A
:class:`Profile` (``isa=`` of :func:`tilegemm.matmul`) maps the user's dtype names onto
instructions: ``"amx"`` (the default: the tile multiplies), ``"avx512"`` (the AVX-512 BF16
baseline), and the other CPUs' paths (``"avx512_vnni"``, ``"avx2"``, ``"fp32_fma"`` ...,
``docs/isa-profiles.md``).

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

from .formats import BF16, FP16, S8, U8, NumberFormat

__all__ = [
    "Switch",
    "Instruction",
    "Profile",
    "INSTRUCTIONS",
    "PROFILES",
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
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Switch:
    """A point the sources leave open, as a keyword of :func:`tilegemm.matmul`.

    ``values[0]`` is the default, the normative reading; a call that does not name the switch
    computes it. Kernels receive the index of the chosen value.
    """

    name: str
    values: tuple[str, ...]
    doc: str

    @property
    def default(self) -> str:
        return self.values[0]


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
        The first add reads a denormal C as zero (so C passed with ``accumulate=True`` is).
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

    @property
    def is_float(self) -> bool:
        return self.acc.kind == "f"

    @property
    def b_layout(self) -> tuple[str, int, int]:
        """What a packed B for this instruction holds: B's format, VNNI group, K per block.
        Instructions with equal layouts share packed operands."""
        return self.b.name, self.group, self.k_step

    @property
    def reference_fn(self) -> Callable[..., np.ndarray]:
        """The reference GEMM function (imported on first use)."""
        return _resolve_path(self.reference)

    def options(self, given: Mapping[str, object], dtype: str = "") -> dict[str, str]:
        """Every switch of this instruction with its value: ``given`` where named, else the
        default. ``ValueError`` for a value the switch does not have, or a switch that belongs to
        other instructions only; ``TypeError`` for a name that is no switch at all."""
        mine = {s.name: s for s in self.switches}
        for name, value in given.items():
            if name not in mine:
                if name in ALL_SWITCHES:
                    valid = ", ".join(mine) or "none"
                    raise ValueError(
                        f"switch {name!r} does not apply to {self.mnemonic} (dtype {dtype!r}); its switches: {valid}"
                    )
                raise TypeError(f"unexpected keyword argument {name!r}")
            if value not in mine[name].values:
                raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, mine[name].values))}")
        return {name: str(given.get(name, sw.default)) for name, sw in mine.items()}

    def option_codes(self, options: Mapping[str, str]) -> tuple[int, ...]:
        """The chosen switch values as indices (what kernels receive), in :attr:`switches` order."""
        return tuple(sw.values.index(options[sw.name]) for sw in self.switches)

    def sample(self, m: int, k: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Random operands a caller would pass (m x k and k x n) in each side's format."""
        return self.a.sample((m, k), rng), self.b.sample((k, n), rng)


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
    same_as: str | None = None

    def names(self) -> tuple[str, ...]:
        """Every dtype name this profile takes, aliases included."""
        return tuple(self.dtypes) + tuple(self.aliases)

    def instruction(self, dtype: object) -> Instruction:
        """The instruction for ``dtype``; ``ValueError`` naming the valid choices otherwise."""
        key = self.aliases.get(dtype, dtype) if isinstance(dtype, str) else None
        if key in self.dtypes:
            return self.dtypes[key]
        if isinstance(dtype, str) and dtype in DTYPES:
            raise ValueError(f"isa={self.name!r} does not take dtype {dtype!r}; it takes {', '.join(self.names())}")
        raise ValueError(f"unknown dtype {dtype!r}; valid dtypes are {', '.join(DTYPES)}")

    def canonical(self, dtype: str) -> str:
        """The dtype name an alias stands for (the name itself otherwise)."""
        return self.aliases.get(dtype, dtype)


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
                }
            ),
            summary="Intel AMX tile multiplies (Sapphire Rapids, Granite Rapids)",
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
