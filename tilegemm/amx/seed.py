"""The seed article's AMX kernels, ported to ``tilegemm.amx.intrinsics`` line by line.

``pack_b_vnni`` is the seed's ``pack_b_bf16_vnni`` (and its INT8 twin). ``gemm_1x1`` and
``gemm_2x2`` follow the article's listings: tile numbers as in the article (1x1: TMM0 = C, TMM1 =
A, TMM2 = B; 2x2: TMM0..3 = C, TMM4/5 = A row blocks, TMM6/7 = B column blocks). ``gemm_2x2``
issues the 2x2 listing as printed, which reloads TMM6 and TMM7 (6 loads per 4 multiplies);
``gemm_2x2_resident`` keeps both B tiles resident (4 loads). ``gemm_single_buffered(R, C)`` is the
seed style for larger blocks with one A and one B register (2x3: 8 loads per 6 multiplies).

A dtype that runs several instructions (``"cfp16"``: TCMMRLFP16PS for the real part and
TCMMIMFP16PS for the imaginary part) runs the whole port once per instruction, each pass into its
own FP32 C, and returns the parts together.

tilegemm's additions, where the article handles only whole tiles: edge blocks are configured with
fewer rows and colsb, exactly as hardware allows; the last K step is configured with
``colsb = 4 * K4`` (after storing the accumulators, since LDTILECFG clears every tile, and
loading them back); A is first copied with K padded to whole pairs (BF16/FP16) or quads (INT8)
with zeros, and B is packed with K and N padded to whole tiles, so a short tile never reads past
its data. ``gemm_single_buffered`` takes M and N in whole tiles.
"""

from __future__ import annotations

import numpy as np

from ..instructions import DEFAULT_ISA, INSTRUCTIONS, resolve
from . import intrinsics as amx
from .config import TileConfig

TILE_M = 16
TILE_N = 16


def pack_b_vnni(B: np.ndarray, N: int, K: int, group: int) -> np.ndarray:
    """The seed's pack_b_bf16_vnni (group 2) or its INT8 twin (group 4), on bit patterns.

    ``B`` is K x N row-major (uint16 bits or bytes), already padded to whole tiles. Returns the
    tile-blocked VNNI buffer as bytes: one 1 KiB block per (kb, jb), kb-major, as the seed writes it.
    """
    tile_k = 16 * group
    n_jtiles, n_ktiles = N // TILE_N, K // tile_k
    tile_elems = tile_k * TILE_N
    Bp = np.zeros(n_ktiles * n_jtiles * tile_elems, B.dtype)
    flat = B.reshape(-1)
    for kb in range(n_ktiles):
        for jb in range(n_jtiles):
            dst = (kb * n_jtiles + jb) * tile_elems
            k0, j0 = kb * tile_k, jb * TILE_N
            for kk in range(tile_k):
                pair, slot = kk // group, kk % group
                tj = np.arange(TILE_N)
                Bp[dst + pair * (TILE_N * group) + tj * group + slot] = flat[(k0 + kk) * N + j0 + tj]
    return Bp.view(np.uint8)


class _Operands:
    """A, packed B and C as the byte buffers the intrinsics address, plus the shapes."""

    def __init__(self, a, b, dtype):
        _, name, fmt = resolve(DEFAULT_ISA, dtype)
        self.fmt = fmt
        a_bits = fmt.a.to_codes(a, "a", name)
        b_bits = fmt.b.to_codes(b, "b", name)
        self.M, self.K = a_bits.shape
        self.N = b_bits.shape[1]
        g, step = fmt.group, fmt.k_step
        self.esize = a_bits.dtype.itemsize
        self.Kg = -(-self.K // g) * g  # K in whole pairs / quads (the padded pair runs: docs/semantics.md, section 6)
        A = np.zeros((self.M, self.Kg), a_bits.dtype)
        A[:, : self.K] = a_bits
        self.A = A.view(np.uint8).reshape(-1)
        self.lda = self.Kg * self.esize
        Kt, Nt = -(-max(self.K, 1) // step) * step, -(-self.N // TILE_N) * TILE_N
        Bpad = np.zeros((Kt, Nt), b_bits.dtype)
        Bpad[: self.K, : self.N] = b_bits
        self.Bp = pack_b_vnni(Bpad, Nt, Kt, g)
        self.n_jtiles = Nt // TILE_N
        self.k_steps = -(-self.K // step)
        self.C = np.zeros(self.M * self.N * 4, np.uint8)
        self.ldc = self.N * 4
        parts = [INSTRUCTIONS[p] for p in fmt.parts] or [fmt]
        self.dps = [getattr(amx, p.intrinsic) for p in parts]  # one pass per instruction
        self.dp = self.dps[0]
        self.part_acc = parts[0].acc

    def k4(self, kb):
        """VNNI groups in K step ``kb`` (16, or fewer in the last step)."""
        g = self.fmt.group
        return min(16, (self.Kg - kb * self.fmt.k_step) // g)

    def a_off(self, i, kb):
        return i * self.lda + kb * self.fmt.k_step * self.esize

    def b_off(self, kb, j):
        return ((kb * self.n_jtiles) + j // TILE_N) * 1024

    def c_off(self, i, j):
        return i * self.ldc + j * 4

    def result(self):
        return self.C.view(self.part_acc).reshape(self.M, self.N).copy()


def _config(shapes) -> TileConfig:
    rows, colsb = [0] * 8, [0] * 8
    for t, (r, c) in shapes.items():
        rows[t], colsb[t] = r, c
    return TileConfig(rows=tuple(rows), colsb=tuple(colsb))


def _run_blocks(op, R, Cn, acc, a_reg, b_reg, step):
    """The loop shared by every port: superblocks of R x Cn C tiles, K steps inside.

    ``acc(r, c)``, ``a_reg(r)``, ``b_reg(c)``: tile numbers; ``step(blocks, kb)`` issues one K
    step's loads and multiplies (the part each listing spells out differently)."""
    results = []
    for dp in op.dps:
        op.dp = dp
        op.C[...] = 0
        results.append(_run_pass(op, R, Cn, acc, a_reg, b_reg, step))
    if len(results) == 1:
        return results[0]
    out = np.empty(results[0].shape, op.fmt.acc)  # the parts of a complex result, bit for bit
    planes = out.view(results[0].dtype).reshape(out.shape + (len(results),))
    for lane, r in enumerate(results):
        planes[..., lane] = r
    return out


def _run_pass(op, R, Cn, acc, a_reg, b_reg, step):
    for i0 in range(0, op.M, TILE_M * R):
        for j0 in range(0, op.N, TILE_N * Cn):
            rows = [min(TILE_M, op.M - (i0 + TILE_M * r)) for r in range(R) if i0 + TILE_M * r < op.M]
            cols = [min(TILE_N, op.N - (j0 + TILE_N * c)) for c in range(Cn) if j0 + TILE_N * c < op.N]
            blocks = [(r, c) for r in range(len(rows)) for c in range(len(cols))]

            def shapes(k4):
                s = {acc(r, c): (rows[r], 4 * cols[c]) for r, c in blocks}
                s.update({a_reg(r): (rows[r], 4 * k4) for r in range(len(rows))})
                s.update({b_reg(c): (k4, 4 * cols[c]) for c in range(len(cols))})
                return s

            amx._tile_loadconfig(_config(shapes(op.k4(0))))
            for r, c in blocks:
                amx._tile_zero(acc(r, c))
            for kb in range(op.k_steps):
                if kb > 0 and op.k4(kb) != op.k4(kb - 1):  # the short last step: new shapes
                    for r, c in blocks:
                        amx._tile_stored(acc(r, c), op.C, op.c_off(i0 + 16 * r, j0 + 16 * c), op.ldc)
                    amx._tile_loadconfig(_config(shapes(op.k4(kb))))
                    for r, c in blocks:
                        amx._tile_loadd(acc(r, c), op.C, op.c_off(i0 + 16 * r, j0 + 16 * c), op.ldc)
                step([(i0, j0, rows, cols, blocks)], kb)
            for r, c in blocks:
                amx._tile_stored(acc(r, c), op.C, op.c_off(i0 + 16 * r, j0 + 16 * c), op.ldc)
    amx._tile_release()
    return op.result()


def gemm_1x1(a, b, dtype="bf16"):
    """The seed's 1x1: per K step, load TMM1 <- A, TMM2 <- B, TDP TMM0, TMM1, TMM2."""
    op = _Operands(a, b, dtype)

    def step(sb, kb):
        ((i0, j0, rows, cols, blocks),) = sb
        amx._tile_loadd(1, op.A, op.a_off(i0, kb), op.lda)
        amx._tile_loadd(2, op.Bp, op.b_off(kb, j0), 64)
        op.dp(0, 1, 2)

    return _run_blocks(op, 1, 1, lambda r, c: 0, lambda r: 1, lambda c: 2, step)


def _two_by_two(a, b, dtype, resident):
    op = _Operands(a, b, dtype)

    def step(sb, kb):
        ((i0, j0, rows, cols, blocks),) = sb
        have_a1, have_b1 = len(rows) > 1, len(cols) > 1

        def load_a(r):
            amx._tile_loadd(4 + r, op.A, op.a_off(i0 + 16 * r, kb), op.lda)

        def load_b(c):
            amx._tile_loadd(6 + c, op.Bp, op.b_off(kb, j0 + 16 * c), 64)

        if resident:  # both A and both B tiles loaded once per K step: 4 loads, 4 multiplies
            load_a(0)
            if have_a1:
                load_a(1)
            load_b(0)
            if have_b1:
                load_b(1)
            for r, c in blocks:
                op.dp(2 * r + c, 4 + r, 6 + c)
            return
        # The listing as printed in the seed.
        load_a(0)
        load_b(0)
        op.dp(0, 4, 6)  # C[0,0] += A0 x B0
        if have_b1:
            load_b(1)
            op.dp(1, 4, 7)  # C[0,1] += A0 x B1
        if have_a1:
            load_a(1)
            load_b(0)  # reload
            op.dp(2, 5, 6)  # C[1,0] += A1 x B0
            if have_b1:
                load_b(1)  # reload
                op.dp(3, 5, 7)  # C[1,1] += A1 x B1

    return _run_blocks(op, 2, 2, lambda r, c: 2 * r + c, lambda r: 4 + r, lambda c: 6 + c, step)


def gemm_2x2(a, b, dtype="bf16"):
    """The seed's 2x2 listing as printed: 6 tile loads per 4 multiplies (TMM6, TMM7 reloaded)."""
    return _two_by_two(a, b, dtype, resident=False)


def gemm_2x2_resident(a, b, dtype="bf16"):
    """The 2x2 the seed's text describes: 2 A and 2 B tiles per K step, 4 loads per 4 multiplies."""
    return _two_by_two(a, b, dtype, resident=True)


def gemm_single_buffered(a, b, dtype="bf16", R=2, C=3):
    """Seed-style R x C block with one A and one B register (R*C + 2 <= 8): per K step, for each
    row block load A, then for each column block load B and multiply. M and N in whole tiles."""
    if R * C + 2 > 8:
        raise ValueError(f"{R}x{C} needs {R * C + 2} tile registers, more than 8")
    op = _Operands(a, b, dtype)
    if op.M % TILE_M or op.N % TILE_N:
        raise ValueError(f"gemm_single_buffered takes M and N in whole tiles, got {op.M} x {op.N}")
    ta, tb = R * C, R * C + 1

    def step(sb, kb):
        ((i0, j0, rows, cols, blocks),) = sb
        for r in range(len(rows)):
            amx._tile_loadd(ta, op.A, op.a_off(i0 + 16 * r, kb), op.lda)
            for c in range(len(cols)):
                amx._tile_loadd(tb, op.Bp, op.b_off(kb, j0 + 16 * c), 64)
                op.dp(r * C + c, ta, tb)

    return _run_blocks(op, R, C, lambda r, c: r * C + c, lambda r: ta, lambda c: tb, step)


def count(port, m, n, k, dtype="int8", **kw):
    """Run ``port`` on random m x k and k x n inputs on a fresh default unit; return its counters."""
    _, name, instr = resolve(DEFAULT_ISA, dtype)
    a, b = instr.sample(m, k, n, np.random.default_rng(0))
    unit = amx.reset()
    port(a, b, name, **kw)
    return unit.counters
