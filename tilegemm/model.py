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

from .formats import get_format

__all__ = ["Traffic", "traffic", "lower_bound", "strategies", "tiling_block", "ELEMENT_BYTES"]

#: Bytes per input element, by tilegemm dtype.
ELEMENT_BYTES = {"int8": 1, "s8s8": 1, "s8u8": 1, "u8s8": 1, "u8u8": 1, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class Traffic:
    """What a blocked GEMM loads under the excerpt's accounting."""

    invocations: int  # kernel invocations: output blocks
    elements_loaded: int  # A and B elements, over all invocations
    bytes_loaded: int
    macs: int  # multiply-accumulates of the GEMM (M N K)
    bytes_per_mac: float


def _bytes(dtype: str) -> int:
    get_format(dtype)  # validates the name
    return ELEMENT_BYTES[dtype]


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
    b = elements * _bytes(dtype)
    return Traffic(bm * bn, elements, b, macs, b / macs if macs else 0.0)


def lower_bound(m: int, n: int, k: int, accumulator_elems: int, dtype: str = "int8") -> float:
    """The excerpt's bound in bytes: ``2 M N K / sqrt(T)`` elements for a T-element accumulator."""
    if accumulator_elems < 1:
        raise ValueError(f"accumulator_elems must be >= 1, got {accumulator_elems}")
    return 2 * m * n * k / math.sqrt(accumulator_elems) * _bytes(dtype)


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
    r, c = (int(x) for x in tiling.split("x"))
    return 16 * r, 16 * c


def report(m=32768, n=32768, k=32768, dtype="int8", measure=1024, threads=None, out=print) -> list[dict]:
    """The model for the excerpt's strategies and every tilegemm tiling at ``m x n x k``, then each
    tiling's model at ``measure``^3 beside its measured speed there. Returns the measured rows."""
    import time

    import numpy as np

    from .api import matmul
    from .dispatch import TILINGS
    from .packing import pack

    out(f"model: M={m} N={n} K={k} {dtype} ({ELEMENT_BYTES[dtype]} byte(s) per element)")
    out(f"{'strategy':24} {'block (elements)':>16} {'invocations':>13} {'bytes loaded':>14} {'bytes/MAC':>9}")
    cases = [(name, blk) for name, blk in strategies().items()]
    cases += [(f"tilegemm {t}", tiling_block(t)) for t in TILINGS]
    for name, blk in cases:
        t = traffic(m, n, k, blk, dtype)
        out(f"{name:24} {blk[0]:>7} x {blk[1]:<6} {t.invocations:13,d} {t.bytes_loaded:14.4g} {t.bytes_per_mac:9.4f}")
    lb = lower_bound(m, n, k, 32 * 48, dtype) / (m * n * k)
    out(f"lower bound 2MNK/sqrt(T) for T = 32 x 48: {lb:.4f} bytes/MAC")
    out(
        f"\ncounted: the seed-style ports on tilegemm.amx ({dtype}, 96 x 96 x {4 * get_format(dtype).k_step}), "
        f"tile loads per tile multiply"
    )
    out(f"{'kernel':30} {'model':>6} {'counted':>8}")
    from .amx import seed

    ports = [
        ("1x1", seed.gemm_1x1, {}),
        ("2x2 (listing as printed)", seed.gemm_2x2, {}),
        ("2x2 (B tiles resident)", seed.gemm_2x2_resident, {}),
        ("2x3 (one A, one B register)", seed.gemm_single_buffered, {"R": 2, "C": 3}),
        ("3x2 (one A, one B register)", seed.gemm_single_buffered, {"R": 3, "C": 2}),
    ]
    for name, port, kw in ports:
        r, c = (kw["R"], kw["C"]) if kw else (int(name[0]), int(name[2]))
        counted = seed.count(port, 96, 96, 4 * get_format(dtype).k_step, dtype, **kw).load_to_compute
        out(f"{name:30} {(r + c) / (r * c):6.3f} {counted:8.3f}")
    out(
        "The model loads each A and B tile once per K step of a block: (R + C) / (R C) per multiply. "
        "Counted loads exceed it where a kernel reloads: the printed 2x2 listing reloads TMM6 and TMM7, "
        "and with a single A and B register every row block reloads the B tiles (2x3: 8 loads per 6 "
        "multiplies where the model counts 5)."
    )
    rows = []
    if measure:
        s = measure
        a, b = get_format(dtype).sample(s, s, s, np.random.default_rng(0))
        packed = pack(b, dtype)
        out(
            f"\nmeasured: {s} x {s} x {s} {dtype}, prepacked B. The model counts what AMX "
            f"code loads into tile registers; the emulator has no tile registers, so its speed shows "
            f"how well a superblock's A and B blocks are reused from cache instead."
        )
        out(f"{'tiling':8} {'bytes/MAC (model)':>17} {'GFLOP/s':>9}")
        for t in TILINGS:
            matmul(a, packed, tiling=t, threads=threads)
            best = min(_timed(lambda: matmul(a, packed, tiling=t, threads=threads), time) for _ in range(3))
            row = {
                "tiling": t,
                "bytes_per_mac": traffic(s, s, s, tiling_block(t), dtype).bytes_per_mac,
                "gflops": 2 * s**3 / best / 1e9,
            }
            rows.append(row)
            out(f"{t:8} {row['bytes_per_mac']:17.4f} {row['gflops']:9.1f}")
    return rows


def _timed(fn, time):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0
