"""Data traffic of a blocked GEMM, under the accounting of the ACE excerpt (seed 002).

The accounting: C = A @ B is covered by output blocks of ``tile = (rows, cols)`` elements (note:
``tile`` counts elements; a tilegemm ``tiling`` "RxC" counts 16 x 16 tiles, an output block of
16R x 16C). Each block's accumulator stays in registers for all of K, so one invocation of the
kernel loads its rows of A (rows x K) and its columns of B (K x cols) once and nothing else. With
M = N = K = 32768 and INT8 this reproduces the excerpt's figures: AVX512-VNNI 16 x 24 loads 0.1042
bytes per MAC, SME-512 32 x 32 0.0625, AMX with six accumulators 32 x 48 0.0521, ACE 32 x 64
0.0469 (the excerpt truncates these to 0.10, 0.06, 0.052, 0.046).

The lower bound (same excerpt): at least ``2 M N K / sqrt(T)`` elements must be loaded with an
accumulator of T elements, reached by a square accumulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .instructions import DEFAULT_ISA, resolve


def parse_tiling(tiling: str) -> tuple[int, int]:
    """``"RxC"`` -> (R, C)."""
    r, c = tiling.split("x")
    return int(r), int(c)


__all__ = ["Traffic", "traffic", "lower_bound", "strategies", "tiling_block", "parse_tiling", "element_bytes"]


@dataclass(frozen=True)
class Traffic:
    """What a blocked GEMM loads under the excerpt's accounting."""

    invocations: int  # kernel invocations: output blocks
    elements_loaded: int  # A and B elements, over all invocations
    bytes_loaded: int
    macs: int  # multiply-accumulates of the GEMM (M N K)
    bytes_per_mac: float


def element_bytes(dtype: str, isa: str = DEFAULT_ISA) -> int:
    """Bytes per input element of a dtype (A's format; every instruction so far has A and B of
    one size)."""
    return resolve(isa, dtype)[2].a.nbytes


def traffic(m: int, n: int, k: int, tile: tuple[int, int] = (32, 32), dtype: str = "int8") -> Traffic:
    """Loads of an ``m x k`` by ``k x n`` GEMM cut into output blocks of ``tile`` elements.

    A partial block at an edge loads only the rows of A and columns of B that exist.

    Examples
    --------
    >>> from tilegemm.model import traffic
    >>> round(traffic(32768, 32768, 32768, tile=(32, 48)).bytes_per_mac, 4)
    0.0521
    """
    tr, tc = tile
    if min(m, n, k) < 0 or tr < 1 or tc < 1:
        raise ValueError(f"traffic needs m, n, k >= 0 and a tile of at least 1 x 1, got {m, n, k} and {tile}")
    bm, bn = -(-m // tr), -(-n // tc)
    # Every block row loads its A rows once per block column, and vice versa; edge blocks load
    # only the rows/columns that exist.
    elements = k * (m * bn + n * bm)
    macs = m * n * k
    b = elements * element_bytes(dtype)
    return Traffic(bm * bn, elements, b, macs, b / macs if macs else 0.0)


def lower_bound(m: int, n: int, k: int, accumulator_elems: int, dtype: str = "int8") -> float:
    """The excerpt's bound in bytes: ``2 M N K / sqrt(T)`` elements for a T-element accumulator."""
    if accumulator_elems < 1:
        raise ValueError(f"accumulator_elems must be >= 1, got {accumulator_elems}")
    return 2 * m * n * k / math.sqrt(accumulator_elems) * element_bytes(dtype)


def strategies() -> dict[str, tuple[int, int]]:
    """The excerpt's cases, as output blocks in elements (rows x columns)."""
    return {
        "AVX512-VNNI": (16, 24),
        "SME-512": (32, 32),
        "AMX six accumulators": (32, 48),
        "AMX 2x2": (32, 32),
        "ACE": (32, 64),
    }


def tiling_block(tiling: str) -> tuple[int, int]:
    """The output block, in elements, of a tilegemm tiling ``"RxC"`` (16 x 16 C tiles)."""
    r, c = parse_tiling(tiling)
    return 16 * r, 16 * c
