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

This package is the registry; the records live in one module per family, and the registry
concatenates each family's ``INSTRUCTIONS`` and ``PROFILES`` in the order of :data:`_FAMILIES`
(the order listings, the CLI and the docs show):

- :mod:`.records`: the record types (:class:`Switch`, :class:`Instruction`, :class:`Profile`);
- :mod:`.amx`: AMX BF16/FP16 and INT8 (Sapphire Rapids), and the ``"amx"`` profile;
- :mod:`.amx_next`: AMX-COMPLEX, AMX-FP8 and AMX-TF32;
- :mod:`.avx512`: the AVX-512 BF16 baseline (VDPBF16PS, ``"avx512"``);
- :mod:`.libraries`: library profiles (``"onednn"``) and :data:`ONEDNN_INT8`;
- :mod:`.ace`: ACE's outer products and MX forms, :data:`ACE_TILE_SWITCHES`, ``"ace"``;
- :mod:`.isa`: the other CPUs' paths (VNNI, AVX2, FMA, AVX512-FP16) and their profiles.

Adding an instruction or dtype is a record in its family's module (and a dtype name in a
profile), its reference under ``tilegemm/reference/``, its kernel body under ``kernels/``, and its
documentation page (``docs/architecture.md``, "Adding an instruction"). No other module compares
a dtype or ISA name to a string: they look records up here and read their fields. Functions are
named by import path (``"module:function"``) and resolved on first use, so importing this table
loads nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from . import ace, amx, amx_next, avx512, isa, libraries
from .ace import ACE_TILE_SWITCHES
from .libraries import ONEDNN_INT8
from .records import TABLES, Instruction, Profile, Switch, by_mnemonic

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

#: The families, in listing order: each contributes its ``INSTRUCTIONS`` and ``PROFILES`` in turn.
_FAMILIES = (amx, amx_next, avx512, libraries, ace, isa)

#: Every emulated instruction, by mnemonic.
INSTRUCTIONS: Mapping[str, Instruction] = MappingProxyType(by_mnemonic(i for f in _FAMILIES for i in f.INSTRUCTIONS))
#: Every switch of every instruction, by name.
ALL_SWITCHES: Mapping[str, Switch] = MappingProxyType({s.name: s for i in INSTRUCTIONS.values() for s in i.switches})
#: Every ``isa=`` profile, by name.
PROFILES: Mapping[str, Profile] = MappingProxyType({p.name: p for f in _FAMILIES for p in f.PROFILES})

#: The profile :func:`tilegemm.matmul` uses unless told otherwise.
DEFAULT_ISA = "amx"
#: Every ``isa=`` value.
ISAS: tuple[str, ...] = tuple(PROFILES)
#: Every dtype name some profile takes, in listing order (the default profile's first).
DTYPES: tuple[str, ...] = tuple(dict.fromkeys(n for p in PROFILES.values() for n in p.names()))
# The records' error messages list these (records.TABLES).
TABLES.update(switches=ALL_SWITCHES, dtypes=DTYPES)


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
