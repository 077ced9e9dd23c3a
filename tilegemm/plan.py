"""Plan one call: which entry point of the kernel runs (the fast-path proof) and on how many threads.

The proof is the "prove per call that no flush can happen" design (``docs/semantics.md``, "How
the kernels stay exact"): from the exponent ranges of A, B and C, show that no partial sum can be
tiny and no product can overflow; then plain vector FMA code returns the exact bits. For the
instructions that sum exactly in fixed point (AMX-FP8) the proof is that binary64 sums stay
exact. Kernels of families that need no proof (integer sums) always run their fast entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .dispatch import TILINGS, Kernel
from .instructions import Instruction
from .model import parse_tiling, tiling_block, traffic

__all__ = ["Plan", "make_plan", "fast_path_ok", "auto_tiling", "threads_for", "SERIAL_BELOW"]

#: Multiply-accumulates below which a call runs on one thread unless told otherwise. A parallel
#: region waits for its slowest thread: on a 2-core machine a 256^3 call took 0.39 ms on one
#: thread and 0.24 ms on two when idle, but 7.7 ms on two beside one busy process. Above 2^26
#: multiply-adds one thread needs milliseconds, and the second core gains more than such a
#: wait costs (as OpenBLAS, which also runs small GEMMs on one thread).
SERIAL_BELOW = 1 << 26

Range = tuple[int, int] | None


def fast_path_ok(instr: Instruction, a_range: Range, b_range: Range, c_range: Range = None) -> bool:
    """True when plain FMA code provably returns the bits of the exact instruction sequence.

    Rule: let an input have ``p`` significant bits (BF16 8, FP16 11, C 24) so that a value with
    exponent E is a multiple of 2^(E - p + 1). Every product is a multiple of
    ``u_p = 2^(Ea_min - pa + 1 + Eb_min - pb + 1)``, every C value of ``u_c = 2^(Ec_min - 23)``,
    and sums of multiples of u rounded to binary32 stay multiples of u. If
    ``min(u_p, u_c) >= 2^-126`` no non-zero result can be tiny, so FTZ never acts (and no
    denormal ever appears for DAZ to read). If also ``Ea_max + Eb_max <= 126``, every product is
    exact in binary32, so ``fma32`` equals multiply-then-add and LLVM's optional fusion cannot
    change a bit. Infinite and NaN inputs are fine: their products are the same either way.

    Exact-sum instructions (AMX-FP8): every product is exact in binary64 and a multiple of
    ``2^-F`` (``instr.fixed_shift``), so a binary64 sum of one instruction's ``k_step`` products
    is exact while it stays below ``2^(53 - F)``: ``Ea_max + Eb_max + 2 + log2(k_step) + F <= 53``
    (values below ``2^(E+1)``). Then rounding that sum to binary32 once is the instruction's
    rounding; C does not enter (the kernels add it exactly, see ``kernels/fp8.py``).

    ACE's MX outer products (``instr.scale_block``) round every step of 4 products into C. The
    ranges are then (smallest block-scale exponent, largest unscaled value exponent) of A and B.
    The 4 scaled products sum exactly in binary64 under the same bound (with ``k_step`` = 4), and
    every step result is a multiple of ``2^(Sa_min + Sb_min - F)``, so no step result and no C
    can be tiny while that grid and C's (``c_range[0] - 23``) are at least 2^-126: the flush never
    acts, and one ``fptrunc`` and one ``fadd`` are the instruction's roundings (``kernels/ace.py``).

    A denormal operand (exponent -127 here; only paths that keep denormals have them) fails the
    proof: the caller's MXCSR.DAZ would change how vector code reads it.
    """
    if instr.scale_block:
        if a_range is None or b_range is None:
            return True  # every product is zero: each step adds +0
        terms = (instr.k_step - 1).bit_length()
        exact = a_range[1] + b_range[1] + 2 + terms + instr.fixed_shift <= 53
        grid = a_range[0] + b_range[0] - instr.fixed_shift
        if c_range is not None:
            grid = min(grid, c_range[0] - 23)
        return exact and grid >= -126
    if instr.exact_sum:
        if a_range is None or b_range is None:
            return True
        terms = (instr.k_step - 1).bit_length()
        return a_range[1] + b_range[1] + 2 + terms + instr.fixed_shift <= 53
    if not instr.is_float:
        return True
    if any(r is not None and r[0] < -126 for r in (a_range, b_range, c_range)):
        return False
    grid = []
    if a_range is not None and b_range is not None:
        if a_range[1] + b_range[1] > 126:
            return False
        grid.append(a_range[0] + b_range[0] - (instr.a.precision - 1) - (instr.b.precision - 1))
    if c_range is not None:
        grid.append(c_range[0] - 23)
    return not grid or min(grid) >= -126


@dataclass(frozen=True)
class Plan:
    """What runs: the kernel, the entry point chosen for these operands, and why."""

    kernel: Kernel
    path: str  # "fast" or "exact"
    threads: int | None

    @property
    def entry(self) -> Callable[..., Any]:
        return self.kernel.fast if self.path == "fast" else self.kernel.exact


def threads_for(macs: int, requested: int | None) -> int | None:
    """Threads a call runs on: the caller's choice, else one thread below :data:`SERIAL_BELOW`
    multiply-accumulates, else Numba's current setting (None)."""
    if requested is not None:
        return requested
    return 1 if macs < SERIAL_BELOW else None


def make_plan(kernel: Kernel, threads: int | None, a_range: Range, b_range: Range, c_range: Range) -> Plan:
    """The plan for one call of ``kernel`` on operands with these exponent ranges."""
    proven = not kernel.family.needs_proof or fast_path_ok(kernel.instruction, a_range, b_range, c_range)
    return Plan(kernel, "fast" if proven else "exact", threads)


def auto_tiling(m: int, n: int) -> str:
    """The tiling ``tiling="auto"`` picks for an M x N result.

    Rule: the feasible tiling whose output blocks load the fewest bytes per multiply-accumulate
    under :func:`tilegemm.model.traffic` (A and B loaded once per block, partial edge blocks
    loading only what exists), ties going to more accumulators and then to the seed's 2x2. So a
    skinny result gets a long strip (1x6 for M <= 16), a large square one 2x3 or 3x2. K does not
    enter: every block streams all of it.
    """

    def cost(t: str) -> tuple[float, int, bool, str]:
        r, c = parse_tiling(t)
        return (traffic(max(m, 1), max(n, 1), 1, tiling_block(t)).bytes_per_mac, -r * c, t != "2x2", t)

    return min(TILINGS, key=cost)
