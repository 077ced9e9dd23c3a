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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable

from .instructions import INSTRUCTIONS, PROFILES, Instruction, resolve
from .kernels import families as _families
from .layouts import function_at
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


class Family:
    """Runtime access to a kernel family (``tilegemm.kernels.families.Family``, its declaration):
    its entry points, imported on first use, and the packing-side steps around them."""

    def __init__(self, decl: _families.Family) -> None:
        self.decl = decl

    def __getattr__(self, name: str) -> Any:
        return getattr(self.decl, name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Family) and other.decl == self.decl

    def __hash__(self) -> int:
        return hash(self.decl)

    def __repr__(self) -> str:
        return f"Family({self.decl.name!r})"

    def run_prepare(self, instr, A, B, C, ib, k) -> None:
        """Run the declaration's ``prepare``, if any (imported on first use)."""
        if self.decl.prepare is not None:
            function_at(self.decl.prepare)(instr, A, B, C, ib, k)

    def kernel_c(self, C):
        """C as the kernels see it (``c_view``)."""
        return C if self.decl.c_view is None else C.view(self.decl.c_view)

    def entry(self, which: str) -> Callable[..., Any]:
        """The compiled entry point ``"fast"``, ``"exact"`` or ``"tile"`` (imported on first use)."""
        d = self.decl
        if which == "exact" and d.fallback is not None:
            raise ValueError(f"family {d.name!r} has no exact entry: where its proof fails, family {d.fallback!r} runs")
        name = {"fast": d.fast, "exact": d.exact, "tile": d.tile_entry}[which]
        if name is None:
            raise ValueError(f"family {d.name!r} has no tile entry")
        return function_at(f"{_families.__package__}.{d.module}:{name}")

    def superblock_step(self, rows: int, cols: int, lanes: int = 1, codes: tuple = ()) -> Callable[..., Any]:
        """A compilable function running one K step of a rows x cols superblock through the fast
        body (``tilegemm.kernels.gemm.superblock_step``), for reading its code. ``lanes``: C
        values per output; ``codes``: switch indices (the defaults: zeros)."""
        from .kernels import gemm, tiles

        return gemm.superblock_step(tiles.variant(self.decl.variant), rows, cols, lanes, codes)


class _Families(Mapping[str, Family]):
    """Every kernel family by name: those the instruction records name (a family declared in a
    kernel module of its own is imported when first asked for) and their fallbacks."""

    def __getitem__(self, name: str) -> Family:
        return _family(name)

    def _names(self) -> list[str]:
        names = dict.fromkeys(_families.FAMILIES)
        for instr in INSTRUCTIONS.values():
            names.setdefault(instr.kernel)
        return list(names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


@functools.cache
def _family(name: str) -> Family:
    return Family(_families.get(name))


#: Kernel families by name.
FAMILIES: Mapping[str, Family] = _Families()


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
    #: The engine this kernel runs on whatever is forced or fastest, where it has it (a call that
    #: knows better for its shape: ``tilegemm.api``'s matrix-vector products pin ``"fma"``).
    pinned_engine: str | None = None

    @functools.cached_property
    def _blocked_fma(self) -> str | None:
        """The blocked entry point on the FMA engine, or None where the family has none or the
        compile target has no row in the per-target table. The compile target is fixed for the
        process, so the answer is kept (every call asks, several times)."""
        from .kernels import blocked, targets

        if self.family.blocked is None or targets.plan() is None:
            return None
        name = self.family.blocked.format(b=self.instruction.b.name)
        return name if name in blocked.ENTRY_BODIES else None

    @property
    def blocked_name(self) -> str | None:
        """The blocked entry point's name (None: the superblock loop runs): the entry of the
        engine :func:`engine_for` picks for it."""
        from .kernels import blocked

        base = self._blocked_fma
        if base is None:
            return None
        return blocked.ENGINE_ENTRIES.get((base, engine_for(base, self.pinned_engine)), base)

    @property
    def engine(self) -> str | None:
        """What the blocked kernel's fast body runs its binary32 chains on: ``"fma"`` (VFMADD231PS
        or the target's FMA) or ``"vdpbf16ps"`` (TDPBF16PS's chains through VDPBF16PS, two steps
        per instruction: ``docs/performance.md``); None for the superblock loop."""
        from .kernels import blocked

        name = self.blocked_name
        return None if name is None else blocked.ENTRY_ENGINES[name]

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
        engine = "" if self.engine in (None, "fma") else f"-{self.engine}"  # the FMA engine goes unnamed
        family = f"{self.family.name}{engine}"
        return f"{self.instruction.mnemonic.lower()}-{self.tiling}-{family}-{b.rows}x{b.cols}-{self.target}"

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


#: The engine every blocked kernel runs on where it has it, or None: each runs the fastest one the
#: compile target has. Set it with :func:`tilegemm.plan.forced_engine`.
FORCED_ENGINE: str | None = None


def engine_for(entry: str, pinned: str | None = None) -> str:
    """The engine the blocked entry point ``entry`` (its FMA engine's name) runs on: ``pinned``,
    else the forced one, where it has it, else the first of ``tilegemm.kernels.targets.engines()``
    it has (the compile target's, fastest first), else ``"fma"``."""
    from .kernels import blocked, targets

    have = [e for e in targets.engines() if (entry, e) in blocked.ENGINE_ENTRIES]
    chosen = pinned if pinned is not None else FORCED_ENGINE
    if chosen is not None:
        return chosen if chosen in have else "fma"
    return have[0] if have else "fma"


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
