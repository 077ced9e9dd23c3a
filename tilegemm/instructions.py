"""The one table of emulated instructions and ISA profiles. Everything else reads it.

An :class:`Instruction` record holds every fact about one emulated instruction: its operand
formats, how elements group along K, how far one instruction steps along K, the accumulator, the
readable reference, the family of compiled kernels that runs it fast, the tile-API method and C
intrinsic, the LLVM intrinsic and CPU flag of the real thing, and its documentation page. A
:class:`Profile` (``isa=`` of :func:`tilegemm.matmul`) maps the user's dtype names onto
instructions: ``"amx"`` (the default: the tile multiplies), ``"avx512"`` (the AVX-512 BF16
baseline) and ``"onednn"`` (PyTorch's bf16 matmul on an AMX server: oneDNN's blocking around the
tile multiplies, ``docs/onednn.md``).

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
        The ``DNNL_MAX_CPU_ISA`` value under which oneDNN runs this path, if any.
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


def find(instruction: Instruction) -> tuple[str, str]:
    """``(isa, dtype)`` of the first profile entry that runs ``instruction``."""
    for p in PROFILES.values():
        for name, instr in p.dtypes.items():
            if instr is instruction:
                return p.name, name
    raise KeyError(instruction.mnemonic)
