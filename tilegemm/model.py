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

from .instructions import DEFAULT_ISA, PROFILES, resolve


def parse_tiling(tiling: str) -> tuple[int, int]:
    """``"RxC"`` -> (R, C)."""
    r, c = tiling.split("x")
    return int(r), int(c)


__all__ = [
    "Traffic",
    "traffic",
    "lower_bound",
    "strategies",
    "tiling_block",
    "parse_tiling",
    "element_bytes",
    "Port",
    "ports",
    "ace_counterpart",
]


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


#: The profile of the outer-product kernels (``tilegemm.amx.ace_seed``).
ACE_ISA = "ace"


def ace_counterpart(dtype: str) -> str | None:
    """The ACE dtype that multiplies what AMX's ``dtype`` multiplies (the same A and B formats;
    the MX forms with every scale 1.0), or None (FP16, complex FP16 pairs)."""
    instr = resolve(DEFAULT_ISA, dtype)[2]
    ace = PROFILES[ACE_ISA]
    if dtype in ace.names():
        return resolve(ACE_ISA, dtype)[1]
    for name, other in ace.dtypes.items():
        if other.a == instr.a and other.b == instr.b:
            return name
    return None


@dataclass(frozen=True)
class Port:
    """One ported kernel side by side with the model: its output block, the modelled bytes per
    MAC of the whole GEMM, and what running the port on ``tilegemm.amx`` counted."""

    kernel: str
    isa: str
    dtype: str
    block: tuple[int, int]  # output elements per block (rows, columns)
    modelled: float  # bytes per MAC of the m x n x k GEMM under the excerpt's accounting
    counted: float  # bytes loaded per MAC, counted on the port's run
    loads: int  # tile loads (AMX) or zmm loads (ACE, BSRMOVF's two included)
    ops: int  # tile multiplies (AMX) or outer products (ACE)
    size: tuple[int, int, int]  # the port's run, m x n x k


def ports(m: int, n: int, k: int, dtype: str = "int8", size: tuple[int, int, int] | None = None) -> list[Port]:
    """AMX 2x2, AMX with six accumulators and ACE (2x2 and the excerpt's 32 x 64), each modelled
    at ``m x n x k`` and counted on a run of its port (``tilegemm.amx.seed``,
    ``tilegemm.amx.ace_seed``) of ``size`` (default 96 x 192 x four AMX K steps, whole blocks for
    every kernel). ``dtype`` is an AMX dtype; ACE runs its counterpart (:func:`ace_counterpart`),
    and has no rows where there is none.

    The AMX six-accumulator port is the seed style with one A and one B tile register, so it
    reloads the B tiles for each row block and counts more than the model (8 loads per 6
    multiplies where the model has 5); the ACE ports keep every zmm they load for all outer
    products of a step, as the model assumes, plus the block scales of the MX forms.
    """
    from .amx import ace_seed, seed

    instr = resolve(DEFAULT_ISA, dtype)[2]
    if size is None:
        size = (96, 192, 4 * instr.k_step)
    sm, sn, sk = size
    cases = [
        ("AMX 2x2", DEFAULT_ISA, dtype, seed.gemm_2x2_resident, (2, 2), {}),
        ("AMX six accumulators (2x3)", DEFAULT_ISA, dtype, seed.gemm_single_buffered, (2, 3), {"R": 2, "C": 3}),
    ]
    ace = ace_counterpart(dtype)
    if ace is not None:
        cases += [
            ("ACE 2x2", ACE_ISA, ace, ace_seed.gemm_2x2, (2, 2), {}),
            ("ACE 2x4 (32 x 64)", ACE_ISA, ace, ace_seed.gemm_2x4, (2, 4), {}),
        ]
    out = []
    for label, isa, name, port, (r, c), kw in cases:
        counter = seed.count if isa == DEFAULT_ISA else ace_seed.count
        got = counter(port, sm, sn, sk, name, **kw)
        block = (16 * r, 16 * c)
        if isa == DEFAULT_ISA:
            loads, ops = got.tile_loads, got.multiplies
        else:
            loads, ops = got.vector_loads, got.outer_products
        modelled = traffic(m, n, k, block, dtype).bytes_per_mac
        out.append(Port(label, isa, name, block, modelled, got.bytes_loaded / got.macs, loads, ops, size))
    return out
