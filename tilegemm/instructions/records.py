"""The record types of the instruction table: :class:`Switch`, :class:`Instruction`,
:class:`Profile`. The records themselves are in the family modules next to this one; the registry
(:mod:`tilegemm.instructions`) assembles them."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

from ..formats import NumberFormat

_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)

#: What the records' error messages read from the assembled tables: every switch name
#: (``"switches"``: ``ALL_SWITCHES``) and every dtype name (``"dtypes"``: ``DTYPES``). The registry
#: fills it once it has built them: the records cannot import the registry, which imports them.
TABLES: dict[str, Any] = {"switches": MappingProxyType({}), "dtypes": ()}


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
                if name in TABLES["switches"]:
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
        if isinstance(dtype, str) and dtype in TABLES["dtypes"]:
            raise ValueError(f"isa={self.name!r} does not take dtype {dtype!r}; it takes {', '.join(self.names())}")
        raise ValueError(f"unknown dtype {dtype!r}; valid dtypes are {', '.join(TABLES['dtypes'])}")

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


def by_mnemonic(records: Iterable[Instruction]) -> dict[str, Instruction]:
    """``records`` by mnemonic, in their order: how the tables and profiles look records up."""
    return {i.mnemonic: i for i in records}
