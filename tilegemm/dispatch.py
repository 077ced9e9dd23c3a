"""The one table that says which compiled kernel serves which (isa, dtype, tiling).

Nothing else in tilegemm knows kernel names: ``matmul``, ``inspect`` and the benchmark CLI all
ask :func:`lookup`. Also here: the per-call proof that lets a float kernel take its fast path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .formats import FORMATS, Format, get_format

__all__ = ["Kernel", "TILINGS", "ISAS", "lookup", "fast_path_ok", "exponent_range"]

TILE_REGISTERS = 8


def _feasible_tilings() -> tuple[str, ...]:
    """Every R x C of accumulator tiles that leaves at least one A and one B tile register."""
    out = [f"{r}x{c}" for r in range(1, 7) for c in range(1, 7) if r * c + 2 <= TILE_REGISTERS]
    return tuple(sorted(out, key=lambda t: (int(t[0]) * int(t[2]), t)))


#: Tilings: "RxC" is R accumulator tiles along M by C along N (an output block of 16R x 16C),
#: every pair with R*C + 2 <= 8 tile registers. "1x1" and "2x2" are the seed's.
TILINGS: tuple[str, ...] = _feasible_tilings()
ISAS: tuple[str, ...] = ("amx", "avx512")


@dataclass(frozen=True)
class Kernel:
    """One table entry: the compiled loop and the tiling it is run with."""

    name: str
    exact: Callable  # the compiled loop for any input
    fast: Callable  # the compiled loop for inputs that pass ``fast_path_ok``
    rows: int
    cols: int


def _build_table() -> dict[tuple[str, str, str], Kernel]:
    from .kernels import gemm as g

    table = {}
    for tiling in TILINGS:
        r, c = (int(x) for x in tiling.split("x"))
        for name, fmt in FORMATS.items():
            if fmt.is_float:
                k = Kernel(f"gemm_fp32fma_{tiling}", g.gemm_amx_exact, g.gemm_amx_fast, r, c)
            else:
                k = Kernel(f"gemm_i8dot_{tiling}", g.gemm_int, g.gemm_int, r, c)
            table[("amx", name, tiling)] = k
        # VDPBF16PS has no tile registers: the tiling only orders the C blocks (bits unaffected).
        table[("avx512", "bf16", tiling)] = Kernel(
            f"gemm_vdpbf16ps_{tiling}", g.gemm_avx512_exact, g.gemm_avx512_fast, r, c
        )
    return table


_TABLE: dict[tuple[str, str, str], Kernel] | None = None


def lookup(isa: str, dtype: object, tiling: object) -> Kernel:
    """The kernel for ``(isa, dtype, tiling)``; ``ValueError`` naming the valid choices otherwise."""
    global _TABLE
    fmt = get_format(dtype)
    if isa not in ISAS:
        raise ValueError(f"unknown isa {isa!r}; valid isas are {', '.join(ISAS)}")
    if tiling not in TILINGS:
        raise ValueError(_tiling_error(tiling))
    if _TABLE is None:
        _TABLE = _build_table()
    key = (isa, fmt.name, tiling)
    if key not in _TABLE:
        have = sorted({d for i, d, _ in _TABLE if i == isa})
        raise ValueError(f"isa={isa!r} does not take dtype {fmt.name!r}; it takes {', '.join(have)}")
    return _TABLE[key]


def _tiling_error(tiling) -> str:
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


def auto_tiling(m: int, n: int) -> str:
    """The tiling ``tiling="auto"`` picks for an M x N result.

    Rule: the feasible tiling whose output blocks load the fewest bytes per multiply-accumulate
    under :func:`tilegemm.model.traffic` (A and B loaded once per block, partial edge blocks
    loading only what exists), ties going to more accumulators and then to the seed's 2x2. So a
    skinny result gets a long strip (1x6 for M <= 16), a large square one 2x3 or 3x2. K does not
    enter: every block streams all of it.
    """
    from .model import tiling_block, traffic

    def cost(t):
        r, c = (int(x) for x in t.split("x"))
        return (traffic(max(m, 1), max(n, 1), 1, tiling_block(t)).bytes_per_mac, -r * c, t != "2x2", t)

    return min(TILINGS, key=cost)


# --------------------------------------------------------------------------------------------
# The fast-path proof (PERF-NOTES.md, "Prove per call that no flush can happen")
# --------------------------------------------------------------------------------------------


def exponent_range(x: np.ndarray) -> tuple[int, int] | None:
    """Smallest and largest unbiased binary32 exponent of the non-zero finite values, or None.

    Denormals must already have been read as zero (they are, for the kernels' operands).
    """
    from .convert import exponent_bounds

    if x.size == 0:
        return None
    lo, hi = exponent_bounds(np.ascontiguousarray(x).view(np.uint32).reshape(-1))
    return None if lo > hi else (int(lo) - 127, int(hi) - 127)


def fast_path_ok(fmt: Format, a_range, b_range, c_range=None) -> bool:
    """True when plain FMA code provably returns the bits of the exact instruction sequence.

    Rule: let an input have ``p`` significant bits (BF16 8, FP16 11, C 24) so that a value with
    exponent E is a multiple of 2^(E - p + 1). Every product is a multiple of
    ``u_p = 2^(Ea_min - pa + 1 + Eb_min - pb + 1)``, every C value of ``u_c = 2^(Ec_min - 23)``,
    and sums of multiples of u rounded to binary32 stay multiples of u. If
    ``min(u_p, u_c) >= 2^-126`` no non-zero result can be tiny, so FTZ never acts (and no
    denormal ever appears for DAZ to read). If also ``Ea_max + Eb_max <= 126``, every product is
    exact in binary32, so ``fma32`` equals multiply-then-add and LLVM's optional fusion cannot
    change a bit. Infinite and NaN inputs are fine: their products are the same either way.
    """
    if not fmt.is_float:
        return True
    p = 8 if fmt.name == "bf16" else 11
    grid = []
    if a_range is not None and b_range is not None:
        if a_range[1] + b_range[1] > 126:
            return False
        grid.append(a_range[0] + b_range[0] - 2 * (p - 1))
    if c_range is not None:
        grid.append(c_range[0] - 23)
    return not grid or min(grid) >= -126
