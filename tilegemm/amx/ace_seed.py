"""The seed's 2x2 kernel ported to ACE, and the excerpt's 32 x 64 ACE block, on ``tilegemm.amx``.

The seed's 2x2 keeps four C tiles (TMM0..TMM3) and, per K step, loads two A row blocks and two
B column blocks into tile registers. With ACE the accumulators stay tiles (palette 2: all eight
tiles are 16 x 64-byte accumulators) but A and B come from zmm registers: per outer-product step
(4 K elements; 2 for BF16) the kernel loads one zmm per A row block (``zA.dword[i]`` = row i's K
slice) and one per B column block (``zB.dword[j]`` = column j's, one row of the seed's packed B
block), then issues ``R x C`` outer products. :func:`gemm_blocked` runs any ``R x C`` with
``R * C <= 8``: :func:`gemm_2x2` is the seed's shape, :func:`gemm_2x4` the excerpt's 32 x 64 block
("ACE ... allows for a larger 32 x 64 element output").

tilegemm's arrangement, where the article has no ACE code:

- A is packed once into zmm panels (per 16-row block and step, the 16 dwords a zA load reads),
  as B is packed into the seed's VNNI blocks (whose 64-byte rows are zB loads); both packings are
  outside the kernel, as in the seed. Every load the kernel makes goes through
  ``_mm512_loadu_si512`` and is counted.
- MX block scales: each tile row i reads byte ``4i + g`` of bsr0's A half and each column j byte
  ``4j + g'`` of the B half, with g, g' from imm8. The kernel packs, per superblock and group of
  ``nk = 4 // max(R, C)`` consecutive 32-element blocks, one A half (group ``r * nk + b`` holds
  row block r's scales for block b) and one B half, loads both with one BSRMOVF every ``nk``
  blocks, and gives each outer product the imm8 that selects its row block's and column block's
  group. The bits are those of ``tilegemm.matmul`` (which places scales its own way): a scale's
  position changes no bit.
- Edge blocks use the same code: rows and columns past M and N are zero in the packed operands
  and are not stored. C starts at zero (TILEZERO) and is stored row by row through TILEMOVROW.
"""

from __future__ import annotations

import numpy as np

from ..ace import check_operand, check_scales
from ..instructions import resolve
from ..reference.ace import imm8_for
from . import intrinsics as amx
from .config import TileConfig

__all__ = ["gemm_blocked", "gemm_2x2", "gemm_2x4", "pack_a_zmm", "count"]

TILE = 16
ISA = "ace"


def pack_a_zmm(a_codes: np.ndarray, group: int) -> np.ndarray:
    """A (M x K codes) as zmm panels: ``[row block][step]`` 64 bytes, dword i = row i's ``group``
    elements of the step (zero-padded past M and K). Returns a flat uint8 buffer."""
    M, K = a_codes.shape
    mb, steps = -(-M // TILE), -(-K // group)
    padded = np.zeros((mb * TILE, steps * group), a_codes.dtype)
    padded[:M, :K] = a_codes
    panels = padded.reshape(mb, TILE, steps, group).transpose(0, 2, 1, 3)  # [block][step][row][elem]
    return np.ascontiguousarray(panels).view(np.uint8).reshape(-1)


def _pack_b_rows(b_codes: np.ndarray, group: int) -> np.ndarray:
    """B (K x N codes) as 64-byte zB rows ``[column block][step]``: dword j = column j's elements
    of the step (the rows of the seed's VNNI blocks, column panel first)."""
    K, N = b_codes.shape
    nb, steps = -(-N // TILE), -(-K // group)
    padded = np.zeros((steps * group, nb * TILE), b_codes.dtype)
    padded[:K, :N] = b_codes
    rows = padded.reshape(steps, group, nb, TILE).transpose(2, 0, 3, 1)  # [block][step][col][elem]
    return np.ascontiguousarray(rows).view(np.uint8).reshape(-1)


def _scale_halves(codes: np.ndarray, count: int, nk: int, blocks: int) -> np.ndarray:
    """BSR halves for every superblock row (or column) group and group of ``nk`` blocks:
    ``[superblock][block group]`` 64 bytes, byte ``4i + r*nk + b`` = the scale of row ``i`` of
    row block ``r`` for block ``b`` of the group (0x7F where there is none). ``codes``: (rows or
    columns, blocks)."""
    rows = codes.shape[0]
    supers = -(-rows // (TILE * count))
    groups = -(-blocks // nk)
    out = np.full((supers, groups, TILE, 4), 0x7F, np.uint8)
    for s in range(supers):
        for r in range(count):
            for i in range(TILE):
                row = (s * count + r) * TILE + i
                if row >= rows:
                    break
                for g in range(groups):
                    for b in range(nk):
                        if g * nk + b < blocks:
                            out[s, g, i, r * nk + b] = codes[row, g * nk + b]
    return out.reshape(-1)


def gemm_blocked(a, b, dtype="mxfp8_e4m3", R=2, C=2, scales=None, **switches):
    """C = A @ B through ACE outer products with an R x C block of accumulator tiles (tmm
    ``r * C + c``); ``scales=(sa, sb)`` for the MX dtypes, as for ``tilegemm.matmul``."""
    if R * C > 8 or R < 1 or C < 1:
        raise ValueError(f"{R}x{C} needs {R * C} accumulator tiles; ACE has 8")
    _, name, instr = resolve(ISA, dtype)
    check_operand(instr, a, "a", name)
    check_operand(instr, b, "b", name)
    a_codes = instr.a.to_codes(a, "a", name)
    b_codes = instr.b.to_codes(b, "b", name)
    if a_codes.ndim != 2 or b_codes.ndim != 2 or a_codes.shape[1] != b_codes.shape[0]:
        raise ValueError(f"gemm_blocked takes 2-D operands with matching K, got {a_codes.shape} and {b_codes.shape}")
    M, K = a_codes.shape
    N = b_codes.shape[1]
    sa, sb = check_scales(instr, name, scales, a_codes.shape, b_codes.shape)
    r_elems = instr.group
    steps = -(-K // r_elems)
    A = pack_a_zmm(a_codes, r_elems)
    B = _pack_b_rows(b_codes, r_elems)
    out = np.zeros((M, N), instr.acc)
    mx = bool(instr.scale_block)
    if mx:
        nk = 4 // max(R, C)
        blocks = -(-K // instr.scale_block)
        H = _scale_halves(sa, R, nk, blocks)
        L = _scale_halves(np.ascontiguousarray(sb.T), C, nk, blocks)
        groups = -(-blocks // nk)
    op = getattr(amx, str(instr.intrinsic))
    fields = switches.get("ace_scale_imm_fields", "A=[1:0],B=[4:3]")
    a_high = switches.get("ace_bsr_a_half", "high") == "high"  # where the instruction reads A's scales
    row = np.zeros(64, np.uint8)
    amx._tile_loadconfig(TileConfig(palette=2))
    for si, i0 in enumerate(range(0, M, TILE * R)):
        for sj, j0 in enumerate(range(0, N, TILE * C)):
            rows = [r for r in range(R) if i0 + TILE * r < M]
            cols = [c for c in range(C) if j0 + TILE * c < N]
            for r in rows:
                for c in cols:
                    amx._tile_zero(r * C + c)
            for k in range(steps):
                if mx:
                    block = k * r_elems // instr.scale_block
                    if k * r_elems % (nk * instr.scale_block) == 0:  # a new group of nk blocks
                        g = block // nk
                        h = amx._mm512_loadu_si512(H, (si * groups + g) * 64)
                        l_ = amx._mm512_loadu_si512(L, (sj * groups + g) * 64)
                        amx.unit.bsrmovf(0, h, l_) if a_high else amx.unit.bsrmovf(0, l_, h)
                za = [amx._mm512_loadu_si512(A, ((i0 // TILE + r) * steps + k) * 64) for r in rows]
                zb = [amx._mm512_loadu_si512(B, ((j0 // TILE + c) * steps + k) * 64) for c in cols]
                for r in rows:
                    for c in cols:
                        if mx:
                            imm = imm8_for(r * nk + block % nk, c * nk + block % nk, fields)
                            op(r * C + c, za[r], zb[c], imm, **switches)
                        else:
                            op(r * C + c, za[r], zb[c], **switches)
            for r in rows:
                for c in cols:
                    n = min(TILE, N - j0 - TILE * c)
                    for i in range(min(TILE, M - i0 - TILE * r)):
                        amx.unit.tilemovrow(row, r * C + c, i)
                        out[i0 + TILE * r + i, j0 + TILE * c : j0 + TILE * c + n] = row.view(instr.acc)[:n]
    amx._tile_release()
    return out


def gemm_2x2(a, b, dtype="mxfp8_e4m3", scales=None, **switches):
    """The seed's 2x2 on ACE: four accumulator tiles, two zA and two zB loads per step (1 load per
    outer product, the 32 x 32 block of the model)."""
    return gemm_blocked(a, b, dtype, 2, 2, scales, **switches)


def gemm_2x4(a, b, dtype="mxfp8_e4m3", scales=None, **switches):
    """The excerpt's ACE block: 32 x 64 outputs in eight tiles, 6 zmm loads per 8 outer products."""
    return gemm_blocked(a, b, dtype, 2, 4, scales, **switches)


def count(port, m, n, k, dtype="int8", **kw):
    """Run ``port`` on random m x k and k x n inputs (scales around 1.0 for the MX dtypes) on a
    fresh default unit; return its counters."""
    _, name, instr = resolve(ISA, dtype)
    rng = np.random.default_rng(0)
    a, b = instr.sample(m, k, n, rng)
    scales = None
    if instr.scale_block:
        blocks = -(-k // instr.scale_block)
        scales = (
            rng.integers(0x78, 0x88, (m, blocks)).astype(np.uint8),
            rng.integers(0x78, 0x88, (blocks, n)).astype(np.uint8),
        )
    unit = amx.reset()
    port(a, b, name, scales=scales, **kw)
    return unit.counters
