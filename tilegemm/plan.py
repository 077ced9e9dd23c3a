"""Plan one call: which entry point of the kernel runs, on how many threads, in which K chunks.

Blocked kernels (``tilegemm.kernels.blocked``, the families with a ``blocked`` entry on a target
of the per-target table) decide per block: the fast-path rule of :func:`fast_path_ok` is applied
inside the kernel to each block's exponents (``docs/semantics.md``, "How the kernels stay
exact"), so one tiny value costs its own block, not the call. Kernels of the superblock loop
(other families, and targets without a table row) take the rule per call: from the exponent
ranges of A, B and C, show that no partial sum can be tiny and no product can overflow; then
plain vector FMA code returns the exact bits, else the exact entry runs. For the instructions
that sum exactly in fixed point (AMX-FP8) the proof is that binary64 sums stay exact. Kernels of
families that need no proof (integer sums) always run their fast entry.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from . import dispatch, layouts
from .dispatch import TILINGS, Kernel
from .instructions import Instruction
from .kernels import families as _families
from .model import parse_tiling, tiling_block, traffic

__all__ = [
    "Plan",
    "make_plan",
    "fast_path_ok",
    "float_proof",
    "fixed_sum_proof",
    "mx_proof",
    "mx32_proof",
    "mx32c_proof",
    "no_proof",
    "auto_tiling",
    "threads_for",
    "k_chunk",
    "one_row_body",
    "slab_steps",
    "forced_path",
    "forced_engine",
    "SERIAL_BELOW",
    "SERIAL_BELOW_BUSY",
    "free_cores",
    "FORCED_PATH",
    "WRAPPING_TWIN",
    "saturation_free",
    "BLOCK_PATHS",
    "PATH_NAMES",
    "recording",
    "Recorder",
]

#: Multiply-accumulates below which a call runs on one thread unless told otherwise. A parallel
#: region waits for its slowest thread: on a 2-core machine a 256^3 call took 0.39 ms on one
#: thread and 0.24 ms on two when idle, but 7.7 ms on two beside one busy process. Above 2^26
#: multiply-adds one thread needs milliseconds, and the second core gains more than such a
#: wait costs (as OpenBLAS, which also runs small GEMMs on one thread).
SERIAL_BELOW = 1 << 26
#: The same threshold while the machine is busy (load average at least the number of cores):
#: then every call that waits for a second thread pays about one scheduler time slice (measured:
#: 11 ms per 2-thread call beside a busy process), which only calls of a second or so of work
#: (about 2^29 multiply-adds, 800^3) win back.
SERIAL_BELOW_BUSY = 1 << 29

Range = layouts.Range

#: The paths a blocked kernel can run every block on (tests force one; see :func:`forced_path`):
#: ``"flag"``, the vector code that is exact for any input (FMA, flush of denormal results, a flag
#: and a scalar redo where a result reaches 2^-126), and ``"exact"``, the scalar code.
BLOCK_PATHS = ("flag", "exact")
#: The path every block of a blocked kernel runs on, or None: each block runs the cheapest path
#: its exponents allow. Set it with :func:`forced_path`.
FORCED_PATH: str | None = None


def fast_path_ok(
    instr: Instruction, a_range: Range, b_range: Range, c_range: Range = None, layout: str | None = None
) -> bool:
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

    MXINT8 in binary32 (``layout="mx32"``, ``kernels/ace.py``) takes the exponent ranges of the
    scaled values themselves. A step's four products share one scale pair, so their sum is an
    integer of at most 17 bits (``|a|, |b| <= 2^7``) times ``2^(sa + sb - 266)``: exact in binary32
    while nothing leaves its normal range. So: every scaled value normal (``E >= -126``, which
    also keeps the caller's DAZ away) and finite (``E <= 127``); every partial sum below 2^128
    (``Ea_max + Eb_max + 2 + log2(4) <= 127``); and, as above, the grid of the products
    (``2^(Ea_min - 7 + Eb_min - 7)``: a value of exponent E is a multiple of ``2^(E - 7)``) and of
    C at least 2^-126, so no result is tiny. Then ``C + (a0*b0 + a1*b1 + a2*b2 + a3*b3)`` in
    binary32, in any order, is the instruction's exact sum, its one rounding and its add. Where one
    side has no non-zero finite value, the other's must still be finite in binary32 (0 times its
    infinity would be NaN where the instruction's product is 0).

    The MX FP8 forms in binary32 with a bound per step (``layout="mx32c"``) read four exponents a
    side: (smallest block-scale exponent, largest unscaled value exponent), as the MX rule above,
    then (smallest, largest) exponent of the scaled values, as MXINT8's. The kernel runs a step in
    binary32 only where its bounds prove the partial sums exact there, else in binary64: so the
    call needs the MX rule (binary64 steps exact, no result tiny) and MXINT8's range conditions on
    the scaled values (normal, finite, partial sums below 2^128), not its 17-bit sum.

    A denormal operand (exponent -127 here; only paths that keep denormals have them) fails the
    proof: the caller's MXCSR.DAZ would change how vector code reads it.
    """
    name = layout if layout is not None else _families.get(instr.kernel).a_layout
    return layouts.get(name).proven(instr, a_range, b_range, c_range)


def no_proof(instr: Instruction, a_range: Range, b_range: Range, c_range: Range = None) -> bool:
    """The rule of layouts whose families need none (codes: integer sums, binary16 chains)."""
    return True


def mx32c_proof(instr: Instruction, a_range: Range, b_range: Range, c_range: Range = None) -> bool:
    """The MX FP8 forms in binary32 with a bound per step (:func:`fast_path_ok`)."""
    if a_range is None or b_range is None:
        # As for "mx32": every product is zero (or NaN, under a NaN scale), unless the other
        # side holds a value binary32 cannot (its scaled range last). Nothing is tiny: a step
        # of zeros adds +0, C comes read with DAZ, and a non-finite value's bound sends its
        # step to binary64, which widens the values exactly.
        other = b_range if a_range is None else a_range
        return other is None or other[3] <= 127
    terms = (instr.k_step - 1).bit_length()
    (_, _, a_lo, a_hi), (_, _, b_lo, b_hi) = a_range, b_range
    binary32 = min(a_lo, b_lo) >= -126 and max(a_hi, b_hi) <= 127 and a_hi + b_hi + 2 + terms <= 127
    return binary32 and mx_proof(instr, a_range[:2], b_range[:2], c_range)


def mx32_proof(instr: Instruction, a_range: Range, b_range: Range, c_range: Range = None) -> bool:
    """MXINT8 in binary32 (:func:`fast_path_ok`)."""
    if a_range is None or b_range is None:
        # Every product is zero, unless the other side holds a value binary32 cannot: 0 times
        # its infinity would be NaN where the instruction's product is 0.
        other = b_range if a_range is None else a_range
        return other is None or other[1] <= 127
    bits = 8 * instr.a.storage.itemsize  # the integers' width: |a| <= 2^(bits - 1)
    terms = (instr.k_step - 1).bit_length()
    assert instr.a.minifloat is None and 2 * bits + terms <= 24, instr.mnemonic  # a step's sum is exact
    normal = min(a_range[0], b_range[0]) >= -126 and max(a_range[1], b_range[1]) <= 127
    below = a_range[1] + b_range[1] + 2 + terms <= 127
    grid = a_range[0] + b_range[0] - 2 * (bits - 1)
    if c_range is not None:
        grid = min(grid, c_range[0] - 23)
    return normal and below and grid >= -126


def mx_proof(instr: Instruction, a_range: Range, b_range: Range, c_range: Range = None) -> bool:
    """ACE's MX outer products in binary64 (:func:`fast_path_ok`)."""
    if a_range is None or b_range is None:
        return True  # every product is zero: each step adds +0
    terms = (instr.k_step - 1).bit_length()
    exact = a_range[1] + b_range[1] + 2 + terms + instr.fixed_shift <= 53
    grid = a_range[0] + b_range[0] - instr.fixed_shift
    if c_range is not None:
        grid = min(grid, c_range[0] - 23)
    return exact and grid >= -126


def fixed_sum_proof(instr: Instruction, a_range: Range, b_range: Range, c_range: Range = None) -> bool:
    """The instructions that sum in fixed point, AMX-FP8 (:func:`fast_path_ok`)."""
    if a_range is None or b_range is None:
        return True
    terms = (instr.k_step - 1).bit_length()
    return a_range[1] + b_range[1] + 2 + terms + instr.fixed_shift <= 53


def float_proof(instr: Instruction, a_range: Range, b_range: Range, c_range: Range = None) -> bool:
    """binary32 chains of exact products (:func:`fast_path_ok`)."""
    if not instr.is_float:
        return True
    if any(r is not None and r[0] < -126 for r in (a_range, b_range, c_range)):
        return False
    grids: list[int] = []
    if a_range is not None and b_range is not None:
        if a_range[1] + b_range[1] > 126:
            return False
        grids.append(a_range[0] + b_range[0] - (instr.a.precision - 1) - (instr.b.precision - 1))
    if c_range is not None:
        grids.append(c_range[0] - 23)
    return not grids or min(grids) >= -126


#: The saturating int8 instructions (VPDPBUSDS) and the wrapping ones (VPDPBUSD) whose bits they
#: have wherever :func:`saturation_free` holds.
WRAPPING_TWIN = {"VPDPBUSDS": "VPDPBUSD", "VPDPBUSDS.S8": "VPDPBUSD.S8"}
_INT32_MAX = 2**31 - 1


def saturation_free(instr: Instruction, a_max: int, b_absmax: int, c_absmax: int, k: int) -> bool:
    """True when no running sum of a saturating int8 chain can leave int32 for these operands, so
    that ``sat32`` never acts and the chain equals the wrapping one (:data:`WRAPPING_TWIN`), whose
    sum does not depend on its order (the fast int8 kernels).

    ``a_max`` is the largest ``|a|``, ``b_absmax`` the largest ``|b|``, ``c_absmax`` the largest
    ``|C|`` the call continues from (0 without ``accumulate``).

    - u8 activations: after any ``j`` of the K products the running sum lies within
      ``|C| + j * a_max * b_absmax`` of zero.
    - s8 activations run shifted by +128 from ``C - 128 * (B's column sum)`` (the compensation), so
      after ``j`` products the running sum is ``C + sum_{i<j} a_i b_i - 128 * sum_{i>=j} b_i``:
      each of the K terms is at most ``128 * b_absmax`` in size (``|a| <= 128``), and the start
      itself is one of these sums (``j = 0``).

    While that bound, ``|C|`` plus K terms, is at most 2^31 - 1, nothing saturates and the
    compensation does not wrap, so the result is ``C + A @ B`` exactly: the wrapping sum.

    Under a forced path (:func:`forced_path`, for tests) it is False: the chain runs.
    """
    if FORCED_PATH is not None:
        return False
    term = 128 * b_absmax if instr.a.storage.kind == "i" else a_max * b_absmax
    return c_absmax + k * term <= _INT32_MAX


@contextmanager
def forced_path(path: str | None) -> Iterator[None]:
    """Run every block of the blocked kernels on ``path`` (one of :data:`BLOCK_PATHS`) inside the
    block, every superblock-loop kernel of a family that needs the proof on its exact entry, and
    the saturating int8 chains even where :func:`saturation_free` would hold: for tests, which
    check each path against the reference."""
    global FORCED_PATH
    if path is not None and path not in BLOCK_PATHS:
        raise ValueError(f"path {path!r} is not one of {', '.join(map(repr, BLOCK_PATHS))}")
    previous = FORCED_PATH
    FORCED_PATH = path
    try:
        yield
    finally:
        FORCED_PATH = previous


@contextmanager
def forced_engine(engine: str | None) -> Iterator[None]:
    """Run every blocked kernel that has ``engine`` on it inside the block (``"fma"``: the
    binary32 FMA bodies everywhere; ``"vdpbf16ps"``: TDPBF16PS through VDPBF16PS, which only a
    target with AVX512_BF16 has), the others on FMA; None: each kernel on the fastest engine the
    target has (the default). For tests and benchmarks, which run and time both."""
    from .kernels import blocked, targets

    if engine is not None and engine not in blocked.ENGINES:
        raise ValueError(f"engine {engine!r} is not one of {', '.join(map(repr, blocked.ENGINES))}")
    if engine is not None and engine != "fma" and engine not in targets.engines():
        missing = sorted(targets.ENGINE_NEEDS[engine] - targets.target_features())
        raise ValueError(
            f"engine {engine!r} needs {', '.join(missing) or 'a 16-lane table row'}, which this target lacks"
        )
    previous = dispatch.FORCED_ENGINE
    dispatch.FORCED_ENGINE = engine
    try:
        yield
    finally:
        dispatch.FORCED_ENGINE = previous


@dataclass(frozen=True)
class Plan:
    """What runs: the kernel, the entry point chosen for these operands, and why.

    ``path``: ``"fast"`` or ``"exact"`` (the superblock loop's entry points), ``"fallback"``
    (the proof failed for a family with a fallback: the call runs that family instead), or
    ``"blocks"`` (a blocked kernel: each block its own path), ``"flag"`` / ``"exact"`` forced for
    every block of a blocked kernel."""

    kernel: Kernel
    path: str
    threads: int | None

    @property
    def entry(self) -> Callable[..., Any]:
        if self.kernel.blocked is not None:
            return self.kernel.blocked
        if self.path == "fallback":
            raise RuntimeError(f"{self.kernel.name}: the proof failed; run family {self.kernel.family.fallback!r}")
        return self.kernel.fast if self.path == "fast" else self.kernel.exact

    @property
    def force(self) -> int:
        """The ``force`` argument of a blocked entry point (0: per block, 1: flag, 2: exact)."""
        return {"blocks": 0, "flag": 1, "exact": 2}[self.path]


def _busy() -> bool:
    """The load average of the last minute is at least the number of cores."""
    try:
        return os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        return False


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _own_running() -> int:
    """This process's threads in state ``R`` (``/proc/self/task/*/stat``)."""
    own = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as f:
                own += f.read().rsplit(")", 1)[1].split()[0] == "R"
        except OSError:  # the thread ended meanwhile
            pass
    return own


def _others_running() -> int | None:
    """Threads of other processes that are running or ready to run now: the system's (the fourth
    field of ``/proc/loadavg``, ``running/total``) less this process's own (this thread, and
    Numba's workers while they spin after a parallel region), read twice. A thread of ours counts
    as ours if either count of them before and after the system's saw it running (it may stop
    in between), and another process's thread only if both readings saw it (a spinning process
    does; a thread that runs for a moment seldom). None where Linux's ``/proc`` is not there."""
    try:
        seen = []
        for _ in range(2):
            before = _own_running()
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
            seen.append(max(0, running - max(before, _own_running())))
    except (OSError, ValueError, IndexError):
        return None
    return min(seen)


#: Seconds a count of :func:`free_cores` is kept: reading it costs about 0.1 ms, which back-to-back
#: calls of a few milliseconds would pay each time.
FREE_CORES_TTL = 0.05
_free_seen: tuple[float, int] = (-1.0, 0)


def free_cores() -> int:
    """Cores not taken by other processes' running threads (at least 1; all of them where that
    cannot be read), as read at most :data:`FREE_CORES_TTL` seconds ago."""
    global _free_seen
    now = time.monotonic()
    if now - _free_seen[0] > FREE_CORES_TTL:
        others = _others_running()
        cores = _cores()
        _free_seen = (now, cores if others is None else max(1, cores - others))
    return _free_seen[1]


def threads_for(macs: int, requested: int | None) -> int | None:
    """Threads a call runs on: the caller's choice, else one thread below :data:`SERIAL_BELOW`
    multiply-accumulates (:data:`SERIAL_BELOW_BUSY` while the machine is busy), else no more
    than the cores other processes leave free right now (:func:`free_cores`), else Numba's
    current setting (None).

    Beside another process's busy thread, a call on every core puts two threads on one core: a
    2-thread BF16 call at n = 1024 on a 2-core Zen 4 beside one spinning process ran at 0.34 to
    1.5 times the speed of one thread (median 0.58), so it runs on the free cores instead."""
    if requested is not None:
        return requested
    if macs < SERIAL_BELOW or (macs < SERIAL_BELOW_BUSY and _busy()):
        return 1
    import numba

    free = min(free_cores(), numba.get_num_threads())
    return free if free < numba.get_num_threads() else None


def make_plan(
    kernel: Kernel,
    threads: int | None,
    a_range: Range,
    b_range: Range,
    c_range: Range,
    codes: tuple[int, ...] = (),
    nan_inputs: bool = False,
) -> Plan:
    """The plan for one call of ``kernel`` on operands with these exponent ranges (a blocked
    kernel needs none: it applies the rule per block), with the switches' ``codes`` (0: the
    default reading; a family without :attr:`~tilegemm.kernels.families.Family.fast_switches`
    runs any other on its exact entry).

    ``nan_inputs``: an operand (or a block scale) holds a NaN. A fast body's hardware FMA and add
    return whichever NaN operand the compiler placed first (LLVM treats both as commutative), so
    such a call runs the exact entry, which takes each NaN from the rule (``exact.nan_fma32``),
    unless the family's fast body applies the rule itself (:attr:`Family.nans`). Without a NaN
    input, every NaN in flight is the default NaN an invalid operation made, and the order
    cannot show."""
    family = kernel.family
    nan_exact = nan_inputs and family.nans == "exact"
    if kernel.blocked is not None:
        return Plan(kernel, FORCED_PATH or ("exact" if nan_exact else "blocks"), threads)
    unproven = "fallback" if family.fallback is not None else "exact"
    if (
        (FORCED_PATH is not None and family.needs_proof)
        or (not family.fast_switches and any(codes))
        or (nan_exact and family.needs_proof)
    ):
        return Plan(kernel, unproven, threads)
    proven = not family.needs_proof or fast_path_ok(kernel.instruction, a_range, b_range, c_range, family.a_layout)
    return Plan(kernel, "fast" if proven else unproven, threads)


#: The paths a blocked kernel counts, in the order of its counts (K steps of one body's block).
PATH_NAMES: tuple[str, ...] = ("fast", "fast, flushed add", "flag", "exact redo", "exact")


class Recorder:
    """What ran in the calls made inside :func:`recording`: per call the kernel's name, the plan's
    path, for blocked kernels the K steps of body blocks run on each of :data:`PATH_NAMES`, and
    (:attr:`threads`) the threads it ran on."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, int]]] = []
        self.threads: list[int] = []

    def counts(self) -> dict[str, int]:
        """The block counts of every recorded call, summed."""
        out = dict.fromkeys(PATH_NAMES, 0)
        for _, _, c in self.calls:
            for k, v in c.items():
                out[k] += v
        return out

    def describe(self) -> str:
        """One line: the kernels and the share of block steps on each path."""
        names = ", ".join(dict.fromkeys(n for n, _, _ in self.calls)) or "no call"
        total = sum(self.counts().values())
        paths = dict.fromkeys(p for _, p, _ in self.calls)
        if not total:
            return f"{names}: {'/'.join(paths) or 'nothing'}"
        shares = ", ".join(f"{k} {v / total:.1%}" for k, v in self.counts().items() if v)
        return f"{names}: {shares}"


_RECORDERS: list[Recorder] = []


@contextmanager
def recording() -> Iterator[Recorder]:
    """Record what the calls inside run (kernel, path, blocks per path), for tests and ``bench``.

    Examples
    --------
    >>> import numpy as np, tilegemm
    >>> with tilegemm.plan.recording() as r:
    ...     _ = tilegemm.matmul(np.ones((4, 4)), np.ones((4, 4)))
    >>> len(r.calls)
    1
    """
    r = Recorder()
    _RECORDERS.append(r)
    try:
        yield r
    finally:
        _RECORDERS.remove(r)


def record(kernel: Kernel, path: str, counts, threads: int = 1) -> None:
    """Hand one call's plan, block counts and thread count to the active recorders."""
    if _RECORDERS:
        c = {k: int(v) for k, v in zip(PATH_NAMES, counts)} if counts is not None else {}
        for r in _RECORDERS:
            r.calls.append((kernel.name, path, c))
            r.threads.append(int(threads))


def k_chunk(kernel: Kernel, m: int) -> int:
    """K steps per chunk of a blocked kernel's loop for a result of ``m`` rows: the table's, or 1
    where one group of body rows covers M (a matrix-vector product: B is then read once, in
    memory order, one step of every column panel after the other)."""
    body = kernel.body
    entry = kernel.table_entry
    if body is None or entry is None:
        return 1
    return 1 if m <= body.rows else entry.kc


def one_row_body(kernel: Kernel) -> bool:
    """Whether a blocked kernel runs its one-row body everywhere: for the 1x1 tiling.

    The seed's 1x1 kernel keeps one accumulator tile, so every tile multiply loads its A and B
    tiles afresh; larger tilings reuse each loaded tile for several multiplies, which is why 2x2
    is faster on AMX. The blocked kernels model that: 1x1 runs the body with one row of C (each
    B vector loaded feeds the two FMAs of one row), every larger tiling the table's body, whose
    rows and tile columns share each load. The bits are the same either way."""
    return kernel.rows * kernel.cols == 1


#: Bytes of packed B per K slab of a call whose B is not packed yet: such a call packs B in slabs
#: of whole K steps, each run before the next is packed, so that its memory stays near this, or
#: near B's own size where :data:`MIN_SLAB_K` asks for deeper slabs (a (1 x 10^7) @ (10^7 x 1)
#: call would otherwise pack 320 MB of B, 16 columns padded for 1).
SLAB_BYTES = 1 << 20
#: K values a slab covers at least, whatever its bytes: each slab makes passes over the whole of C
#: (its blocks' paths restart from C's exponents, and C is read and written again), which cost
#: about as much as a few hundred K values of multiply-adds, so a slab this deep keeps them to a
#: few percent of the call. Its memory stays within B's own: K is at least this deep wherever a
#: slab is not the whole of B.
MIN_SLAB_K = 1024


def slab_steps(nbatch: int, n: int, k_step: int, step_bytes_per_tile: int = 1024) -> int:
    """K steps per slab of B for ``nbatch`` matrices of ``n`` columns (at least one): as many as
    :data:`SLAB_BYTES` holds, and at least :data:`MIN_SLAB_K` K values of ``k_step`` each."""
    per_step = max(1, nbatch) * -(-max(n, 1) // 16) * step_bytes_per_tile
    return max(1, SLAB_BYTES // per_step, -(-MIN_SLAB_K // k_step))


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
