"""The microkernel tester (XNNPACK style): one driver every kernel goes through.

For a kernel (isa, dtype, tiling) and a path (the fast entry under its proof, or the exact
entry forced), :meth:`KernelTester.run` multiplies sub-problems of one superblock of C and
compares the bits with ``tilegemm.reference``:

- K in {1, step - 1, step, step + 1, 2 step, chunk * step + 1}: below, at and above one
  instruction's K, two instructions, and past one pass of the kernel's K loop;
- M x N: every m <= 16 R and n <= 16 C of the superblock for the seed's tilings; for the others
  every m with n = 16 C, every n with m = 16 R, and a seeded sample of pairs;
- A and B given as strided and transposed views, and C accumulated from a random start.

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
from tilegemm import dispatch

SPAN = 96  # 16 x 6: the largest superblock side of any tiling


@functools.lru_cache(maxsize=None)
def _problem(isa, dtype, k):
    """Operands of SPAN x k and k x SPAN, a start C, and the references from 0 and from C."""
    rng = np.random.default_rng([k, len(dtype), len(isa)])
    a, b = operands(dtype, (SPAN, k), (k, SPAN), rng, isa)
    i = instr(dtype, isa)
    c0 = (rng.standard_normal((SPAN, SPAN)) * 4).astype(i.acc)
    ref = tilegemm.reference.matmul(a, b, dtype, isa=isa)
    ref_c = tilegemm.reference.matmul(a, b, dtype, c=c0, isa=isa)
    return a, b, c0, ref, ref_c


def k_values(kernel: dispatch.Kernel) -> tuple[int, ...]:
    step = kernel.instruction.k_step
    return tuple(sorted({1, step - 1, step, step + 1, 2 * step, kernel.k_chunk * step + 1}))


def mn_pairs(kernel: dispatch.Kernel) -> list[tuple[int, int]]:
    rows, cols = 16 * kernel.rows, 16 * kernel.cols
    if kernel.tiling in SEED_TILINGS:
        return [(m, n) for m in range(1, rows + 1) for n in range(1, cols + 1)]
    rng = np.random.default_rng([kernel.rows, kernel.cols])
    pairs = {(m, cols) for m in range(1, rows + 1)} | {(rows, n) for n in range(1, cols + 1)}
    pairs |= {(int(rng.integers(1, rows + 1)), int(rng.integers(1, cols + 1))) for _ in range(32)}
    return sorted(pairs)


class KernelTester:
    def __init__(self, isa: str, dtype: str, tiling: str):
        self.kernel = dispatch.lookup(isa, dtype, tiling)
        self.name = self.kernel.name
        self.isa, self.dtype, self.tiling = isa, dtype, tiling
        self.threads = min(2, numba.config.NUMBA_NUM_THREADS)

    def _check(self, got, want, m, n, k, what):
        d = tilegemm.bitdiff(got, want)
        assert d.identical, f"{self.name} ({what}) M x N x K = {m} x {n} x {k}: {d}"

    def run(self):
        for k in k_values(self.kernel):
            a, b, c0, ref, ref_c = _problem(self.isa, self.dtype, k)
            packed = tilegemm.pack(b, self.dtype, self.isa)
            for m, n in mn_pairs(self.kernel):
                got = tilegemm.matmul(a[:m], b[:, :n], self.dtype, self.tiling, isa=self.isa)
                self._check(got, ref[:m, :n], m, n, k, "sub-problem")
            rows, cols = 16 * self.kernel.rows, 16 * self.kernel.cols
            # Strided A (every other column of a wider array) and transposed B; the prepacked B.
            wide = np.zeros((rows, 2 * k), a.dtype)
            wide[:, ::2] = a[:rows]
            bt = np.ascontiguousarray(b[:, :cols].T).T
            got = tilegemm.matmul(wide[:, ::2], bt, self.dtype, self.tiling, isa=self.isa, threads=1)
            self._check(got, ref[:rows, :cols], rows, cols, k, "strided A, transposed B")
            # The whole span: several superblocks, split between threads.
            got = tilegemm.matmul(a, packed, tiling=self.tiling, isa=self.isa, threads=self.threads)
            self._check(got, ref, SPAN, SPAN, k, f"prepacked B, {self.threads} threads")
            out = c0[:rows, :cols].copy()
            tilegemm.matmul(a[:rows], b[:, :cols], self.dtype, self.tiling, isa=self.isa, out=out, accumulate=True)
            self._check(out, ref_c[:rows, :cols], rows, cols, k, "accumulate")
