"""The kernel table: which compiled kernel serves which (isa, dtype, tiling), as data.

Each instruction record (:mod:`tilegemm.instructions`) names its kernel *family*; a family is a
set of compiled entry points with the operand layouts they read and whether the fast entry needs
the proof (``tilegemm.plan``): the blocked driver in ``tilegemm.kernels.blocked`` on targets of the
per-target table (``tilegemm.kernels.targets``, which also gives the body shape), and the portable
superblock loop in ``tilegemm.kernels.gemm`` elsewhere and for families without a blocked entry.
:data:`TILINGS` are the superblock shapes every kernel runs.
``matmul``, ``inspect``, the benchmark and the CLI all look kernels up here; nothing else knows
an entry point's name.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable

from .instructions import PROFILES, Instruction, resolve
from .model import parse_tiling

__all__ = ["Family", "FAMILIES", "family_for", "Kernel", "TILINGS", "TILE_REGISTERS", "lookup", "table", "parse_tiling"]

TILE_REGISTERS = 8


def _feasible_tilings() -> tuple[str, ...]:
    """Every R x C of accumulator tiles that leaves at least one A and one B tile register."""
    out = [f"{r}x{c}" for r in range(1, 7) for c in range(1, 7) if r * c + 2 <= TILE_REGISTERS]
    return tuple(sorted(out, key=lambda t: (int(t[0]) * int(t[2]), t)))


#: Tilings: "RxC" is R accumulator tiles along M by C along N (an output block of 16R x 16C),
#: every pair with R*C + 2 <= 8 tile registers. "1x1" and "2x2" are the seed's.
TILINGS: tuple[str, ...] = _feasible_tilings()


@dataclass(frozen=True)
class Family:
    """A family of compiled kernels (entry points named as in ``tilegemm.kernels.gemm``).

    Attributes
    ----------
    name:
        The family key instruction records use.
    fast, exact:
        Entry points: ``exact`` is right for every input; ``fast`` for inputs that pass the
        per-call proof when ``needs_proof`` (otherwise it is right for every input too). A family
        with a :attr:`fallback` repeats its fast entry here and never runs it as exact.
    variant:
        The fast body's variant constant in ``tilegemm.kernels.tiles`` (for reading its code).
    tile:
        The entry point the tile API runs for one instruction (the exact arithmetic on one tile,
        serially), or None for families without a tile form.
    a_layout, b_layout:
        What the kernels read (``tilegemm.packing``): ``"f32"`` exact float32 values (a complex
        element as its two parts), ``"f64"`` exact binary64 values (the 8-bit floats),
        ``"fp8_32"`` the same as binary32,
        ``"f16"`` binary16 codes (``[k][n]`` for B, as ``"f32"`` orders values), or ``"bytes"``
        the 8-bit codes; for ACE (``tilegemm.ace``) ``"mx64"``, binary64 values times
        their MX block scales, ``"mx32"``, the same in binary32, ``"mx32c"``, those with a
        bound per K step (``tilegemm.ace``), and ``"f32keep"``, float32
        values with denormals kept.
    prepare:
        ``"module:function"`` run on the packed operands just before the kernel,
        ``f(instr, A, B, C, ib, k)``: a step of the instruction sequence that is not a tile
        multiply (the +128 compensation of signed activations) or padding the kernel relies on.
    c_view:
        The dtype the kernels see C as, where it is not the result's (binary16 C as uint16 codes).
    blocked:
        The blocked entry point in ``tilegemm.kernels.blocked``, as a template that ``{b}``
        completes with the B format's name (``"gemm_pairs_{b}"``), or None: the family runs the
        superblock loop only. It reads A as the caller gave it (codes, or float32 rounded while
        packed) and B as packed (``PackedB.data``), and decides the path per block.
    fallback:
        The family a call runs instead where this family's proof fails (its layouts, its own
        proof and entries), or None. A family with a fallback has no exact entry of its own: the
        planner answers ``"fallback"`` where its proof fails (``tilegemm.plan.make_plan``), and
        :meth:`entry` refuses ``"exact"``.
    """

    name: str
    fast: str
    exact: str
    variant: str
    a_layout: str
    b_layout: str
    needs_proof: bool
    tile: str | None = None
    prepare: str | None = None
    c_view: str | None = None
    blocked: str | None = None
    fallback: str | None = None

    def run_prepare(self, instr, A, B, C, ib, k) -> None:
        """Run :attr:`prepare`, if any (imported on first use)."""
        if self.prepare is not None:
            module, _, name = self.prepare.partition(":")
            getattr(importlib.import_module(module), name)(instr, A, B, C, ib, k)

    def kernel_c(self, C):
        """C as the kernels see it (:attr:`c_view`)."""
        return C if self.c_view is None else C.view(self.c_view)

    def entry(self, which: str) -> Callable[..., Any]:
        """The compiled entry point ``"fast"``, ``"exact"`` or ``"tile"`` (imported on first use)."""
        from .kernels import gemm

        if which == "exact" and self.fallback is not None:
            raise ValueError(
                f"family {self.name!r} has no exact entry: where its proof fails, family {self.fallback!r} runs"
            )
        return getattr(gemm, getattr(self, which))

    def superblock_step(self, rows: int, cols: int, lanes: int = 1, codes: tuple = ()) -> Callable[..., Any]:
        """A compilable function running one K step of a rows x cols superblock through the fast
        body (``tilegemm.kernels.gemm.superblock_step``), for reading its code. ``lanes``: C
        values per output; ``codes``: switch indices (the defaults: zeros)."""
        from .kernels import gemm, tiles

        return gemm.superblock_step(getattr(tiles, self.variant), rows, cols, lanes, codes)


_SHIFT = "tilegemm.profiles:compensate"
_PAD = "tilegemm.profiles:pad_identity"

#: Kernel families by name.
FAMILIES: Mapping[str, Family] = MappingProxyType(
    {
        "f32pairs": Family(
            "f32pairs",
            "gemm_amx_fast",
            "gemm_amx_exact",
            "AMX_FAST",
            "f32",
            "f32",
            True,
            "tile_amx",
            blocked="gemm_pairs_{b}",
        ),
        "vdp": Family(
            "vdp", "gemm_avx512_fast", "gemm_avx512_exact", "AVX512_FAST", "f32", "f32", True, blocked="gemm_dot_{b}"
        ),
        "i8quads": Family(
            "i8quads", "gemm_int", "gemm_int", "AMX_EXACT", "bytes", "bytes", False, "tile_amx", blocked="gemm_quads"
        ),
        "cfp16": Family("cfp16", "gemm_cfp16_fast", "gemm_cfp16_exact", "CFP16_FAST", "f32", "f32", True, "tile_cfp16"),
        "fp8quads": Family("fp8quads", "gemm_fp8_fast", "gemm_fp8_exact", "FP8_FAST", "f64", "f64", True, "tile_fp8"),
        # AMX-FP8 in binary32, a step whose chain rounded (MXCSR.PE) again in binary64, under
        # fp8quads' proof (which the binary64 steps need); else fp8quads.
        "fp8c": Family(
            "fp8c",
            "gemm_fp8c_fast",
            "gemm_fp8c_fast",
            "FP8C_FAST",
            "fp8_32",
            "fp8_32",
            True,
            "tile_fp8",
            fallback="fp8quads",
        ),
        # ACE: MX values scaled by their block scales (binary64), and BF16 as float32 without DAZ.
        "ace_mx": Family("ace_mx", "gemm_ace_mx_fast", "gemm_ace_mx_exact", "ACE_MX_FAST", "mx64", "mx64", True),
        # MXINT8 in binary32: a step's four products share one scale pair and sum exactly there
        # while the scaled values stay binary32 normals (tilegemm.plan); else ace_mx.
        "ace_mx32": Family(
            "ace_mx32",
            "gemm_ace_mx32_fast",
            "gemm_ace_mx32_fast",
            "ACE_MX32_FAST",
            "mx32",
            "mx32",
            True,
            fallback="ace_mx",
        ),
        # MX FP8 in binary32 where each step's bounds prove its sum exact there, binary64 for the
        # other steps, while the scaled values stay binary32 normals (tilegemm.plan); else ace_mx.
        "ace_mx32c": Family(
            "ace_mx32c",
            "gemm_ace_mx32c_fast",
            "gemm_ace_mx32c_fast",
            "ACE_MX32C_FAST",
            "mx32c",
            "mx32c",
            True,
            fallback="ace_mx",
        ),
        "ace_bf16": Family(
            "ace_bf16", "gemm_ace_bf16_fast", "gemm_ace_bf16_exact", "ACE_BF16_FAST", "f32keep", "f32keep", True
        ),
        # The other CPUs' paths (docs/isa-profiles.md; kernels/isa.py).
        "i8sat": Family("i8sat", "gemm_i8sat", "gemm_i8sat", "I8SAT", "bytes", "bytes", False, prepare=_SHIFT),
        "i16pairs": Family(
            "i16pairs", "gemm_i16pairs", "gemm_i16pairs", "I16PAIRS", "bytes", "bytes", False, prepare=_SHIFT
        ),
        "f32fma": Family(
            "f32fma", "gemm_f32fma_fast", "gemm_f32fma_exact", "F32FMA_FAST", "f32", "f32", True, prepare=_PAD
        ),
        "f16acc": Family(
            "f16acc", "gemm_f16acc", "gemm_f16acc", "F16ACC", "f32", "f32", False, prepare=_PAD, c_view="uint16"
        ),
        # VFMADD231PH itself on binary16 codes, where the compile target has it (targets.NATIVE).
        "f16acc_native": Family(
            "f16acc_native",
            "gemm_f16acc_native",
            "gemm_f16acc_native",
            "F16ACC_NATIVE",
            "f16",
            "f16",
            False,
            prepare=_PAD,
            c_view="uint16",
        ),
    }
)


@dataclass(frozen=True)
class Kernel:
    """One table entry: the compiled loop for (isa, dtype, tiling) and the body it runs.

    ``name`` says what it is, XNNPACK style: instruction, tiling, family, body shape (C rows x
    columns per body call) and target class, e.g. ``tdpbf16ps-2x2-f32pairs-4x16-avx512``.
    """

    isa: str
    dtype: str
    tiling: str
    instruction: Instruction
    family: Family
    rows: int
    cols: int

    @functools.cached_property
    def blocked_name(self) -> str | None:
        """The blocked entry point's name, or None where the family has none or the compile
        target has no row in the per-target table (then the superblock loop runs). The compile
        target is fixed for the process, so the answer is kept (every call asks, several times)."""
        from .kernels import blocked, targets

        if self.family.blocked is None or targets.plan() is None:
            return None
        name = self.family.blocked.format(b=self.instruction.b.name)
        return name if name in blocked.ENTRY_BODIES else None

    @property
    def blocked(self) -> Callable[..., Any] | None:
        """The compiled blocked entry point (imported on first use), or None."""
        from .kernels import blocked

        name = self.blocked_name
        return None if name is None else getattr(blocked, name)

    @property
    def table_entry(self):
        """The per-target table row the blocked entry is built from (None: superblock loop)."""
        from .kernels import targets

        return targets.plan() if self.blocked_name is not None else None

    @property
    def body(self):
        """The fast body on the compile target: a :class:`tilegemm.kernels.targets.Body` of the
        blocked driver, or the superblock loop's :class:`tilegemm.kernels.targets.Shape`."""
        from .kernels import blocked, targets

        name = self.blocked_name
        if name is not None:
            return targets.plan().body(blocked.ENTRY_BODIES[name])
        return targets.shape(self.family.name)

    @property
    def target(self) -> str:
        """The per-target table row (blocked kernels) or target class (superblock loop)."""
        from .kernels.targets import target_class

        entry = self.table_entry
        return entry.name if entry is not None else target_class()

    @property
    def name(self) -> str:
        b = self.body
        return f"{self.instruction.mnemonic.lower()}-{self.tiling}-{self.family.name}-{b.rows}x{b.cols}-{self.target}"

    @property
    def k_chunk(self) -> int:
        """K steps per pass of the superblock loop (``tilegemm.kernels.gemm``), per body call of
        AMX-FP8's own loop where its body holds C in registers, or the table's K chunk of the
        blocked driver."""
        from .kernels.gemm import FP8_K_CHUNK, K_CHUNK

        entry = self.table_entry
        if entry is not None:
            return int(entry.kc)
        return int(FP8_K_CHUNK) if getattr(self.body, "hold_c", False) else int(K_CHUNK)

    @property
    def fast(self) -> Callable[..., Any]:
        return self.family.entry("fast")

    @property
    def exact(self) -> Callable[..., Any]:
        return self.family.entry("exact")


def family_for(instr: Instruction) -> Family:
    """The family that runs ``instr`` on the compile target: its record's, or the family that runs
    the instruction itself where the target has it (``tilegemm.kernels.targets.NATIVE``)."""
    from .kernels import targets

    return FAMILIES[targets.family(instr.kernel)]


@functools.cache
def table() -> Mapping[tuple[str, str, str], Kernel]:
    """The whole table, (isa, dtype, tiling) -> :class:`Kernel`, made from the instruction records."""
    return MappingProxyType(
        {
            (p.name, dtype, t): Kernel(p.name, dtype, t, instr, family_for(instr), *parse_tiling(t))
            for p in PROFILES.values()
            for dtype, instr in p.dtypes.items()
            for t in TILINGS
        }
    )


def lookup(isa: object, dtype: object, tiling: object) -> Kernel:
    """The kernel for ``(isa, dtype, tiling)``; ``ValueError`` naming the valid choices otherwise."""
    p, name, _ = resolve(isa, dtype)
    if tiling not in TILINGS:
        raise ValueError(_tiling_error(tiling))
    return table()[(p.name, name, tiling)]


def _tiling_error(tiling: object) -> str:
    valid = f"valid tilings are {', '.join(TILINGS)} and 'auto'"
    try:
        r, c = (int(x) for x in str(tiling).split("x"))
    except ValueError:
        return f"unknown tiling {tiling!r}; {valid}"
    if r >= 1 and c >= 1:
        return (
            f"tiling {tiling!r} is infeasible: {r * c} accumulator tiles + 1 A tile + 1 B tile = "
            f"{r * c + 2} > {TILE_REGISTERS} tile registers; {valid}"
        )
    return f"unknown tiling {tiling!r}; {valid}"
