"""The microkernel tester (XNNPACK style): one driver every kernel goes through.

For a kernel (isa, dtype, tiling) and a path (the fast entry under its proof, or the exact
entry forced), :meth:`KernelTester.run` multiplies sub-problems of one superblock of C and
compares the bits with ``tilegemm.reference``:

- K in {1, step - 1, step, step + 1, 2 step, chunk * block + 1}: below, at and above one
  instruction's K, two instructions, and past one pass of the kernel's K loop; where one packed
  block holds several instructions (ACE: 16 outer products), also around one block, and for the MX
  dtypes around one block of scales (31, 32, 33, 65), those on the superblock's corner shapes;
- for the MX dtypes, random block scales (E8M0, around 1.0, one NaN scale in A and one in B) with
  every sub-problem, the prepacked B packed with its scales;
- M x N: every m <= 16 R and n <= 16 C of the superblock for the seed's tilings; for the others
  every m with n = 16 C, every n with m = 16 R, and a seeded sample of pairs, on the fast path;
  on a forced slower path (``corners_only``) the other tilings run the superblock's corner shapes
  (the slow paths' per-element code is the one the seed's tilings run in full; what a tiling
  changes, the walk over its tiles, shows at its edges);
- in two tiers (``tier``): the default one runs those M x N at K = step + 1 (the K tail after one
  whole instruction, where a wrong tail and a wrong edge of M or N meet), and for the seed's
  tilings the corner shapes at every other K; the deep one (``pytest -m deep``, run by CI) runs
  the rest, so that the two together run every shape at every K, each once;
- A and B given as strided and transposed views, and C accumulated from a random start;
- on an ``engine`` of the blocked kernels (``tilegemm.plan.forced_engine``): TDPBF16PS's fast
  body on FMA, or on VDPBF16PS where the host has AVX512_BF16.

Values are random (seeded), the reference is computed once per K on the largest superblock and
sliced: each C element depends only on its row of A and column of B. A failure names the kernel
and M x N x K.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from conftest import SEED_TILINGS, instr, operands

import tilegemm
from tilegemm import dispatch, plan

SPAN = 96  # 16 x 6: the largest superblock side of any tiling


@functools.lru_cache(maxsize=None)
def _problem(isa, dtype, k):
    """Operands of SPAN x k and k x SPAN, their MX block scales (None for other dtypes), a start C,
    and the references from 0 and from C."""
    rng = np.random.default_rng([k, len(dtype), len(isa)])
    a, b = operands(dtype, (SPAN, k), (k, SPAN), rng, isa)
    i = instr(dtype, isa)
    sa = sb = None
    if i.scale_block:
        blocks = -(-k // i.scale_block)
        sa = rng.integers(0x70, 0x90, (SPAN, blocks)).astype(np.uint8)
        sb = rng.integers(0x70, 0x90, (blocks, SPAN)).astype(np.uint8)
        sa[3, -1] = sb[-1, 5] = 0xFF  # NaN scales: row 3 and column 5 of the last block
    c0 = (rng.standard_normal((SPAN, SPAN)) * 4).astype(i.acc)
    ref = tilegemm.reference.matmul(a, b, dtype, isa=isa, scales=_both(sa, sb))
    ref_c = tilegemm.reference.matmul(a, b, dtype, c=c0, isa=isa, scales=_both(sa, sb))
    return a, b, sa, sb, c0, ref, ref_c


def _both(sa, sb, m=None, n=None):
    """``scales=`` for the first m rows of A and n columns of B (None where there are none)."""
    if sa is None:
        return None
    return sa[:m], (None if sb is None else sb[:, :n])


def k_values(kernel: dispatch.Kernel) -> tuple[int, ...]:
    step = kernel.instruction.k_step
    return tuple(sorted({1, step - 1, step, step + 1, 2 * step, kernel.k_chunk * kernel.instruction.k_block + 1}))


def k_corners(kernel: dispatch.Kernel) -> tuple[int, ...]:
    """K values run on the corner shapes only: around one packed block where a block holds several
    instructions, and around one block of MX scales."""
    i = kernel.instruction
    ks = set()
    if i.k_block != i.k_step:
        ks |= {i.k_block - 1, i.k_block, i.k_block + 1}
    if i.scale_block:
        ks |= {i.scale_block - 1, i.scale_block, i.scale_block + 1, 2 * i.scale_block + 1}
    return tuple(sorted(ks - set(k_values(kernel))))


def mn_pairs(kernel: dispatch.Kernel) -> list[tuple[int, int]]:
    rows, cols = 16 * kernel.rows, 16 * kernel.cols
    if kernel.tiling in SEED_TILINGS:
        return [(m, n) for m in range(1, rows + 1) for n in range(1, cols + 1)]
    rng = np.random.default_rng([kernel.rows, kernel.cols])
    pairs = {(m, cols) for m in range(1, rows + 1)} | {(rows, n) for n in range(1, cols + 1)}
    pairs |= {(int(rng.integers(1, rows + 1)), int(rng.integers(1, cols + 1))) for _ in range(32)}
    return sorted(pairs)


def k_full(kernel: dispatch.Kernel) -> int:
    """The K at which the default tier runs every M x N pair: one instruction's K plus one."""
    return kernel.instruction.k_step + 1


TIERS = ("default", "deep")


class KernelTester:
    def __init__(
        self,
        isa: str,
        dtype: str,
        tiling: str,
        corners_only: bool = False,
        tier: str = "default",
        engine: str | None = None,
    ):
        if tier not in TIERS:
            raise ValueError(f"tier {tier!r}: one of {TIERS}")
        self.engine = engine
        with plan.forced_engine(engine):
            self.kernel = dispatch.lookup(isa, dtype, tiling)
            self.name = self.kernel.name
            assert engine is None or self.kernel.engine in (engine, None), (self.name, engine)
        self.corners_only = corners_only
        self.tier = tier
        self.isa, self.dtype, self.tiling = isa, dtype, tiling
        self.threads = min(2, numba.config.NUMBA_NUM_THREADS)

    def _check(self, got, want, m, n, k, what):
        d = tilegemm.bitdiff(got, want)
        assert d.identical, f"{self.name} ({what}) M x N x K = {m} x {n} x {k}: {d}"

    def corners(self) -> list[tuple[int, int]]:
        rows, cols = 16 * self.kernel.rows, 16 * self.kernel.cols
        return [(1, 1), (1, cols), (rows, 1), (rows // 2 + 1, cols // 2 + 1), (rows - 1, cols - 1), (rows, cols)]

    def cases(self) -> list[tuple[int, list[tuple[int, int]], bool]]:
        """(K, M x N pairs, whether the whole-superblock checks run at that K) of this tier."""
        corners = self.corners()
        every = [(k, corners if self.corners_only else mn_pairs(self.kernel)) for k in k_values(self.kernel)]
        every += [(k, corners) for k in k_corners(self.kernel)]
        kf = k_full(self.kernel)
        seed = self.tiling in SEED_TILINGS
        # The default tier: every pair at K = step + 1; the seed's tilings also the corner shapes
        # and the whole-superblock checks at every other K. A tiling is a parameter of the one
        # compiled kernel of its family, so the K loop the others would repeat is the seed's.
        default = [(k, pairs if k == kf else corners, True) for k, pairs in every if seed or k == kf]
        if self.tier == "default":
            return default
        ran = {k: (set(pairs), whole) for k, pairs, whole in default}
        rest = []
        for k, pairs in every:
            done, whole = ran.get(k, (set(), False))
            left = [p for p in pairs if p not in done]
            if left or not whole:
                rest.append((k, left, not whole))
        return rest

    def run(self):
        with plan.forced_engine(self.engine):
            self._run()

    def _run(self):
        rows, cols = 16 * self.kernel.rows, 16 * self.kernel.cols
        for k, pairs, whole in self.cases():
            a, b, sa, sb, c0, ref, ref_c = _problem(self.isa, self.dtype, k)
            for m, n in pairs:
                got = tilegemm.matmul(
                    a[:m], b[:, :n], self.dtype, self.tiling, isa=self.isa, scales=_both(sa, sb, m, n)
                )
                self._check(got, ref[:m, :n], m, n, k, "sub-problem")
            if not whole:  # the other tier runs them at this K
                continue
            # Strided A (every other column of a wider array) and transposed B; the prepacked B.
            wide = np.zeros((rows, 2 * k), a.dtype)
            wide[:, ::2] = a[:rows]
            bt = np.ascontiguousarray(b[:, :cols].T).T
            scales = _both(sa, sb, rows, cols)
            got = tilegemm.matmul(wide[:, ::2], bt, self.dtype, self.tiling, isa=self.isa, threads=1, scales=scales)
            self._check(got, ref[:rows, :cols], rows, cols, k, "strided A, transposed B")
            # The whole span: several superblocks, split between threads.
            packed = tilegemm.pack(b, self.dtype, self.isa, scales=sb)
            got = tilegemm.matmul(
                a, packed, tiling=self.tiling, isa=self.isa, threads=self.threads, scales=_both(sa, None)
            )
            self._check(got, ref, SPAN, SPAN, k, f"prepacked B, {self.threads} threads")
            out = c0[:rows, :cols].copy()
            tilegemm.matmul(
                a[:rows], b[:, :cols], self.dtype, self.tiling, isa=self.isa, out=out, accumulate=True, scales=scales
            )
            self._check(out, ref_c[:rows, :cols], rows, cols, k, "accumulate")
