"""ACE's rows of ``python -m tilegemm bench --targets``: every ACE dtype, prepacked with its block
scales, one thread, against numpy float32 matmul of the same size, timed side by side.

The goals: the integer outer products at least numpy float32's speed, the MX and BF16 forms at
least half of it. MX operands carry random E8M0 scales near 1.0 (``0x78..0x87``), as a quantized
model's blocks do, so the scaled path is what is timed.
"""

from __future__ import annotations

import numpy as np

from .api import matmul
from .instructions import PROFILES
from .model_ports import ACE_ISA
from .packing import pack

__all__ = ["ACE_GOALS", "ace_operands", "add_ace_rows"]

#: Goals against numpy float32 (one thread, prepacked), by result kind.
ACE_GOALS = {"i": 1.0, "f": 0.5}


def ace_operands(dtype: str, n: int, seed: int = 0):
    """``a``, ``b`` and ``scales`` (None for the dtypes without block scales) of an n^3 product in
    ``dtype``: A as its callers hold it (the 8-bit float types, int8 codes, BF16)."""
    instr = PROFILES[ACE_ISA].instruction(dtype)
    rng = np.random.default_rng([seed, n])
    a, b = instr.sample(n, n, n, rng)  # the MX FP8 dtypes' as 8-bit floats
    scales = None
    if instr.scale_block:
        blocks = -(-n // instr.scale_block)
        scales = (
            rng.integers(0x78, 0x88, (n, blocks)).astype(np.uint8),
            rng.integers(0x78, 0x88, (blocks, n)).astype(np.uint8),
        )
    return a, b, scales


def add_ace_rows(add, median_ratio, n: int = 1024, repeats: int = 7) -> None:
    """One row per ACE dtype: ``matmul(a, packed, isa="ace", scales=...)`` at n^3 on one thread
    against numpy float32, through ``add(what, ratio, goal, met, samples)``. Call under a
    one-thread BLAS limit."""
    rng = np.random.default_rng([n, 7])
    a32 = rng.standard_normal((n, n)).astype(np.float32)
    b32 = rng.standard_normal((n, n)).astype(np.float32)
    for dtype, instr in PROFILES[ACE_ISA].dtypes.items():
        a, b, scales = ace_operands(dtype, n)
        packed = pack(b, dtype, ACE_ISA, scales=None if scales is None else scales[1])
        given = None if scales is None else (scales[0], None)  # B's scales travel with the PackedB
        r, s = median_ratio(lambda: matmul(a, packed, threads=1, scales=given), lambda: a32 @ b32, repeats)
        goal = ACE_GOALS[instr.acc.kind]
        add(f"isa=ace {dtype} prepacked n={n}, 1 thread vs numpy float32", r, f">= {goal}", r >= goal, s)
