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

#: Tilings: C tiles per superblock along M x along N.
TILINGS: tuple[str, ...] = ("1x1", "2x2")
ISAS: tuple[str, ...] = ("amx", "avx512")


@dataclass(frozen=True)
class Kernel:
    """One table entry: the compiled loop and the tiling it is run with."""

    name: str
    fn: Callable
    rows: int
    cols: int
    variants: tuple[int, int] = (0, 1)  # the kernel's ``variant`` for (exact, fast)

    @property
    def superblock(self) -> tuple[int, int]:
        """Output elements per superblock (one ``prange`` iteration): rows x columns."""
        return 16 * self.rows, 16 * self.cols


def _build_table() -> dict[tuple[str, str, str], Kernel]:
    from .kernels.gemm import gemm
    from .kernels.tiles import AMX_EXACT, AMX_FAST, AVX512_EXACT, AVX512_FAST

    table = {}
    for tiling in TILINGS:
        r, c = (int(x) for x in tiling.split("x"))
        for name, fmt in FORMATS.items():
            body = "fp32fma" if fmt.is_float else "i8dot"
            table[("amx", name, tiling)] = Kernel(f"gemm_{body}_{tiling}", gemm, r, c, (AMX_EXACT, AMX_FAST))
        # VDPBF16PS has no tile registers: the tiling only orders the C blocks (bits unaffected).
        table[("avx512", "bf16", tiling)] = Kernel(f"gemm_vdpbf16ps_{tiling}", gemm, r, c,
                                                   (AVX512_EXACT, AVX512_FAST))
    return table


_TABLE: dict[tuple[str, str, str], Kernel] | None = None


def lookup(isa: str, dtype: object, tiling: object) -> Kernel:
    """The kernel for ``(isa, dtype, tiling)``; ``ValueError`` naming the valid choices otherwise."""
    global _TABLE
    fmt = get_format(dtype)
    if isa not in ISAS:
        raise ValueError(f"unknown isa {isa!r}; valid isas are {', '.join(ISAS)}")
    if tiling not in TILINGS:
        raise ValueError(f"unknown tiling {tiling!r}; valid tilings are {', '.join(TILINGS)}")
    if _TABLE is None:
        _TABLE = _build_table()
    key = (isa, fmt.name, tiling)
    if key not in _TABLE:
        have = sorted({d for i, d, _ in _TABLE if i == isa})
        raise ValueError(f"isa={isa!r} does not take dtype {fmt.name!r}; it takes {', '.join(have)}")
    return _TABLE[key]


# --------------------------------------------------------------------------------------------
# The fast-path proof (PERF-NOTES.md, "Prove per call that no flush can happen")
# --------------------------------------------------------------------------------------------

def exponent_range(x: np.ndarray) -> tuple[int, int] | None:
    """Smallest and largest unbiased binary32 exponent of the non-zero finite values, or None.

    Denormals must already have been read as zero (they are, for the kernels' operands).
    """
    if x.size == 0:
        return None
    e = ((x.view(np.uint32) >> 23) & 0xFF).astype(np.uint8).ravel()
    live = e[(e != 0) & (e != 0xFF)]
    if live.size == 0:
        return None
    return int(live.min()) - 127, int(live.max()) - 127


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
