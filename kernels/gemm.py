"""The one driver of the compiled GEMM entries (:func:`drive`) and those entries.

Every entry point is one worker ``w`` of ``nw`` (``tilegemm.workers`` runs them on threads) and
runs ``drive(A, B, C, ia, ib, k, rows, cols, variant, codes, lanes, w, nw)``: the family's body is
``variant``, a compile-time constant (``tiles.variant``; bodies register under their names), and
the loop order comes with it. Each worker takes a contiguous share of the jobs (:func:`share`).

- Superblocks (the default): one superblock (``rows`` x ``cols`` C tiles of 16 x 16, a tiling of
  ``tilegemm.TILINGS``) is one job, standing in for an iteration of the seed's OpenMP loop, for
  one chunk of ``K_CHUNK`` K steps after another. Inside it the tiles come in the seed's order (C00, C01, C10,
  C11 for 2x2), and each tile runs the chunk's K steps (``tiles.tile_steps``: one tile multiply
  per step, or a registered body that holds C in registers across the chunk), so its C block stays
  near the core between steps.
- Rows of superblocks (a variant registered with :func:`register_rows`: the binary64 AMX-FP8 and
  ACE MX bodies on targets with 32 vector registers, the binary32 AMX-FP8 and ACE MX FP8 bodies on
  every target): a job is a row of superblocks across N, and each group of the body's rows runs
  its K steps across the job's column tiles.

Every C element depends only on its own K steps, in order, so neither the order in which tiles
interleave nor the thread count changes a bit. Operand layouts are the contract in
``kernels/__init__.py``. Entry points of instructions with switches take the switch indices as
trailing arguments and hand them to every body (``codes``); a complex result is C viewed as
interleaved float32 (``lanes`` = 2 values per output). The tile API's entries run one tile
multiply of the exact body on the calling thread.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.extending import overload

from . import ace, cfp16, exact, families, fp8, isa, rounding, targets, tiles, vector
from ._cache import stamp_with_dependencies
from .ace import ACE_BF16_EXACT, ACE_BF16_FAST, ACE_MX32_FAST, ACE_MX_EXACT, ACE_MX_FAST
from .cfp16 import CFP16_EXACT, CFP16_FAST
from .families import variant_id
from .fp8 import FP8_EXACT, FP8_FAST
from .isa import F16ACC, F16ACC_NATIVE, F32FMA_EXACT, F32FMA_FAST, I8SAT, I16PAIRS
from .tiles import AMX_EXACT, AMX_FAST, AVX512_EXACT, AVX512_FAST, TILE, tile_multiply, tile_steps

# K steps per pass over all superblocks. Blocking K keeps the B blocks of a pass (K_CHUNK x N)
# near the core while a row of superblocks reuses them; measured at n = 2048 on one thread
# (Zen 4, 1 MiB L2): 57 GFLOP/s unblocked, 66 with 16 steps, 68 with 8, 64 with 4.
K_CHUNK = 8


@njit(inline="always")
def _superblocks(A, B, C, ia, ib, k, rows, cols, variant, codes, lanes, w, nw):
    nC, M, NL = C.shape
    N = NL // lanes
    MT, NB, KB = A.shape[1], B.shape[1], B.shape[2]
    block = B.shape[3] * B.shape[4] * B.shape[5]  # elements of one kernel B block
    k_step = A.shape[4]
    group = k_step // TILE  # K elements per VNNI group: 2 (pairs) or 4 (quads)
    Af, Bf, Cf = A.reshape(A.size), B.reshape(B.size), C.reshape(C.size)
    sm = -(-M // (TILE * rows))
    sn = -(-N // (TILE * cols))
    jobs = nC * sm * sn
    first, last = share(jobs, w, nw)
    for kc0 in range(0, KB, K_CHUNK):  # serial: every C element still sees its K steps in order
        for job in range(first, last):
            _superblock(
                Af,
                Bf,
                Cf,
                ia,
                ib,
                k,
                rows,
                cols,
                variant,
                job,
                sm,
                sn,
                M,
                N,
                MT,
                NB,
                KB,
                k_step,
                block,
                group,
                kc0,
                min(kc0 + K_CHUNK, KB),
                codes,
                lanes,
            )


@njit
def share(jobs, w, nw):
    """``(first, stop)``: worker ``w`` of ``nw``'s contiguous share of jobs ``0 .. jobs - 1`` (the
    static schedule of an OpenMP loop, and of Numba's ``prange``). A worker keeps its superblocks
    across the K chunks, so no worker waits for another between chunks."""
    return jobs * w // nw, jobs * (w + 1) // nw


@njit(cache=True)
def _superblock(
    Af,
    Bf,
    Cf,
    ia,
    ib,
    k,
    rows,
    cols,
    variant,
    job,
    sm,
    sn,
    M,
    N,
    MT,
    NB,
    KB,
    k_step,
    block,
    group,
    kb_start,
    kb_stop,
    codes,
    lanes,
):
    ci = job // (sm * sn)
    bm = (job // sn) % sm
    bn = job % sn
    ai = ia[ci]
    bi = ib[ci]
    scratch = np.empty(TILE * TILE * lanes, Cf.dtype)
    for r in range(rows):
        m0 = (bm * rows + r) * TILE
        if m0 >= M:
            break
        mr = min(TILE, M - m0)
        a_off = ((ai * MT + m0 // TILE) * KB + kb_start) * TILE * k_step  # A panel: 16 x k_step
        for c in range(cols):
            n0 = (bn * cols + c) * TILE
            if n0 >= N:
                break
            b_off = ((bi * NB + n0 // TILE) * KB + kb_start) * block  # B column panel, K-contiguous
            c_off = ((ci * M + m0) * N + n0) * lanes
            tile_steps(
                Af,
                a_off,
                k_step,
                mr,
                Bf,
                b_off,
                Cf,
                c_off,
                N * lanes,
                min(TILE, N - n0),
                scratch,
                variant,
                codes,
                k,
                group,
                kb_start,
                kb_stop,
                block,
            )


# One compiled entry point per variant: the variant is a constant in each, so each compiles
# (and is cached) with only the arithmetic it runs, and a call never re-dispatches on a value.
@njit(cache=True, nogil=True)
def gemm_amx_fast(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, AMX_FAST, (), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_amx_exact(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, AMX_EXACT, (), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_avx512_fast(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, AVX512_FAST, (), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_avx512_exact(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, AVX512_EXACT, (), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_int(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, AMX_EXACT, (), 1, w, nw)  # integer tiles have a single body


# AMX-COMPLEX: A panels hold (re, im) floats, two per K element, stepped as pairs (hence 2 * k);
# C is the complex result as interleaved float32.
@njit(cache=True, nogil=True)
def gemm_cfp16_fast(w, nw, A, B, C, ia, ib, k, rows, cols, rl_negate, im_lane_order):
    drive(A, B, C, ia, ib, 2 * k, rows, cols, CFP16_FAST, (rl_negate, im_lane_order), 2, w, nw)


@njit(cache=True, nogil=True)
def gemm_cfp16_exact(w, nw, A, B, C, ia, ib, k, rows, cols, rl_negate, im_lane_order):
    drive(A, B, C, ia, ib, 2 * k, rows, cols, CFP16_EXACT, (rl_negate, im_lane_order), 2, w, nw)


# AMX-FP8's fast path where its body holds C in registers (tiles.FP8Q.hold_c): a job is a row of
# superblocks (``rows`` C tiles high; across all of N, or part of it where the jobs would not
# keep every thread busy), and inside it, chunk by chunk along K, each group of the body's rows
# runs across the job's column tiles, one body call per chunk: fewer, longer calls than the
# superblock loop's (one per K_CHUNK steps of a tile), and the group's A rows are reused across
# N. Measured on Zen 4, one thread, prepacked n = 1024 against numpy float32 (separate processes,
# alternating, three rounds): HF8 and BF8 0.47-0.49 with chunks of 4 steps, 0.49-0.50 with 8,
# 0.49-0.51 with 16; visiting the column tiles outside the rows measured alike. In one process,
# the bare entry point: 51.8-52.9 GFLOP/s against 48.4-49.7 for the superblock loop. Every C
# element belongs to one job, which runs its K steps in order, so the bits are the superblock
# loop's.
FP8_K_CHUNK = 16
# At least this many jobs where N allows, so that hosts of up to 64 threads all get work when M is
# small (a kernel does not read the thread count: calling numba.get_num_threads in it keeps the
# entry out of the cache). Zen 4, one thread, n = 1024, HF8 and BF8: 16 and 64 measured alike
# (0.49-0.52 of numpy float32), 128 and 512 lower (0.48-0.50, 0.48-0.49).
_ROW_JOBS = 64
# Where the binary64 paths run that loop: targets with 32 vector registers, where the AMX-FP8 body
# holds C in registers (the ACE MX body there is the 8-row zmm one).
_ROWS_LOOP = tiles.FP8Q.hold_c


def _rows_of_superblocks(job, span):
    """A loop whose job is a row of superblocks (``rows`` C tiles high) across N, or across a part
    of N where the jobs would not keep every thread busy, or (``span``) would cover more than
    ``span`` column tiles: ``job(Af, Bf, Cf, ai, bi, ci, k, M, N, MT, NB, KB, k_step, block, mt0,
    mt1, t0, t1, codes)`` runs C tile rows ``mt0:mt1`` x column tiles ``t0:t1`` of result ``ci``."""

    @njit(inline="always")
    def loop(A, B, C, ia, ib, k, rows, codes, w, nw):
        nC, M, N = C.shape
        MT, NB, KB = A.shape[1], B.shape[1], B.shape[2]
        block = B.shape[3] * B.shape[4] * B.shape[5]
        k_step = A.shape[4]
        Af, Bf, Cf = A.reshape(A.size), B.reshape(B.size), C.reshape(C.size)
        sm = -(-M // (TILE * rows))
        tiles_n = -(-N // TILE)
        split = min(tiles_n, max(1, -(-_ROW_JOBS // (nC * sm)), -(-tiles_n // span)))  # column parts per row
        per = -(-tiles_n // split)
        first, last = share(nC * sm * split, w, nw)
        for i in range(first, last):
            ci = i // (sm * split)
            bm = (i // split) % sm
            t0 = (i % split) * per
            mt0, mt1 = bm * rows, min((bm + 1) * rows, MT)
            job(
                Af,
                Bf,
                Cf,
                ia[ci],
                ib[ci],
                ci,
                k,
                M,
                N,
                MT,
                NB,
                KB,
                k_step,
                block,
                mt0,
                mt1,
                t0,
                min(t0 + per, tiles_n),
                codes,
            )

    return loop


def _row_job(body_rows, chunk, full_tile):
    """A job of :func:`_rows_of_superblocks`: chunk by chunk of ``chunk`` K steps, each group of
    ``body_rows`` rows of a C tile row runs across the job's column tiles, through
    ``full_tile(Af, a_off, lda, Bf, b_off, Cf, c_off, ldc, nsteps, k, kb0, block, spare)`` for the
    chunk's steps (``spare``: 256 elements of C's type the body may use, one array per job). A
    partial tile runs the same on a 16 x 16 scratch copy of its C block (A panels and B blocks are
    zero-padded, and every C element depends on its own row and column only), of which
    only the real rows and columns go back."""

    @njit(inline="always")
    def job(Af, Bf, Cf, ai, bi, ci, k, M, N, MT, NB, KB, k_step, block, mt0, mt1, t0, t1, codes):
        scratch = np.empty(TILE * TILE, Cf.dtype)
        spare = np.empty(TILE * TILE, Cf.dtype)  # the body's own, per job (a copy of C for a redo)
        for kc0 in range(0, KB, chunk):
            ns = min(chunk, KB - kc0)
            for mt in range(mt0, mt1):
                m0 = mt * TILE
                if m0 >= M:
                    break
                mr = min(TILE, M - m0)
                a_off = ((ai * MT + mt) * KB + kc0) * TILE * k_step
                for g in range(0, mr, body_rows):
                    for nt in range(t0, t1):
                        nc = min(TILE, N - nt * TILE)
                        b_off = ((bi * NB + nt) * KB + kc0) * block
                        c_off = (ci * M + m0) * N + nt * TILE
                        if mr == TILE and nc == TILE:
                            full_tile(
                                Af,
                                a_off + g * k_step,
                                k_step,
                                Bf,
                                b_off,
                                Cf,
                                c_off + g * N,
                                N,
                                ns,
                                k,
                                kc0,
                                block,
                                spare,
                            )
                        elif g == 0:
                            for mm in range(TILE):
                                for n in range(TILE):
                                    scratch[mm * TILE + n] = Cf[c_off + mm * N + n] if mm < mr and n < nc else 0
                            for gg in range(0, TILE, body_rows):
                                full_tile(
                                    Af,
                                    a_off + gg * k_step,
                                    k_step,
                                    Bf,
                                    b_off,
                                    scratch,
                                    gg * TILE,
                                    TILE,
                                    ns,
                                    k,
                                    kc0,
                                    block,
                                    spare,
                                )
                            for mm in range(mr):
                                for n in range(nc):
                                    Cf[c_off + mm * N + n] = scratch[mm * TILE + n]

    return job


#: Variants that run in the row-of-superblocks order: variant -> that loop (:func:`register_rows`).
ROW_ORDER: dict[int, object] = {}


def register_rows(name: str, body_rows: int, chunk: int, full_tile, span: int = 1 << 30) -> int:
    """A variant whose calls of :func:`drive` run the row-of-superblocks order, each job chunk
    by chunk of ``chunk`` K steps through ``full_tile`` (:func:`_row_job`), over at most ``span``
    column tiles (so that the B blocks of one chunk stay in the core's cache while a job's rows
    run across them)."""
    v = variant_id(name)
    if v in ROW_ORDER:
        raise ValueError(f"loop variant {name!r} is registered twice")
    ROW_ORDER[v] = _rows_of_superblocks(_row_job(body_rows, chunk, full_tile), span)
    return v


def drive(A, B, C, ia, ib, k, rows, cols, variant, codes, lanes, w, nw):
    """The one driver of the compiled GEMM entries: ``C[i] += A[ia[i]] @ B[ib[i]]`` through the
    body ``variant`` names (a compile-time constant), in the loop order it was registered with:
    superblocks over C, K chunk by K chunk (``tiles.tile_steps``), or, for a variant of
    :data:`ROW_ORDER`, rows of superblocks across N; worker ``w`` of ``nw`` runs its share of
    them. ``codes``: the switch indices; ``lanes``: C values per output (2: a complex result,
    interleaved)."""
    raise NotImplementedError("only callable from compiled code")


@overload(drive, inline="always", prefer_literal=True)
def _drive(A, B, C, ia, ib, k, rows, cols, variant, codes, lanes, w, nw):
    rows_loop = ROW_ORDER.get(getattr(variant, "literal_value", None))
    if rows_loop is not None:

        def impl(A, B, C, ia, ib, k, rows, cols, variant, codes, lanes, w, nw):
            rows_loop(A, B, C, ia, ib, k, rows, codes, w, nw)

        return impl

    def impl(A, B, C, ia, ib, k, rows, cols, variant, codes, lanes, w, nw):
        _superblocks(A, B, C, ia, ib, k, rows, cols, variant, codes, lanes, w, nw)

    return impl


@njit
def _fp8_full_tile(Af, a_off, lda, Bf, b_off, Cf, c_off, ldc, nsteps, k, kb0, block, spare):
    tiles.fp8_steps_body(Af, a_off, lda, Bf, b_off, Cf, c_off, ldc, nsteps, TILE * lda, block)


FP8_ROWS = register_rows("fp8_rows", tiles.FP8Q.rows, FP8_K_CHUNK, _fp8_full_tile)

# Whether the compile target has MXCSR (x86), which the binary32 AMX-FP8 body reads.
_MXCSR = targets.has_mxcsr()


@njit
def _fp8c_full_tile(Af, a_off, lda, Bf, b_off, Cf, c_off, ldc, nsteps, k, kb0, block, spare):
    if _MXCSR:
        tiles.fp8c_body(Af, a_off, lda, Bf, b_off, Cf, c_off, ldc, nsteps, TILE * lda, block)


# ACE MX (binary64 sums) in the same loop order where the target has 32 vector registers: each
# group of body rows runs across the job's column tiles, one body call per packed block of 16
# outer products (C rounds after each, so the calls cannot merge). Measured at n = 1024 on Zen 4,
# one thread, E4M3 with unit scales: the bare entry point in one process 35.1-36.4 GFLOP/s
# against 32.3-33.6 for the superblock loop; prepacked against numpy float32 (separate processes,
# alternating, five rounds) 0.328-0.346 against 0.309-0.324.


def _per_block(body, bounds: int):
    """A ``full_tile`` of :func:`_row_job` for an ACE outer-product body: one body call per packed
    block (C rounds after every outer product, so the calls cannot merge), the last block running
    its own outer products only. ``bounds``: the floats after each A row's values (16 in layout
    "mx32c", a bound per outer product; else 0)."""

    @njit(inline="always")
    def full_tile(Af, a_off, lda, Bf, b_off, Cf, c_off, ldc, nblocks, k, kb0, block, spare):
        k_block = lda - bounds
        for t in range(nblocks):
            steps = tiles.step_groups(k, kb0 + t, k_block, k_block // TILE)
            body(Af, a_off + t * TILE * lda, lda, Bf, b_off + t * block, Cf, c_off, ldc, steps)

    return full_tile


ACE_MX_ROWS = register_rows("ace_mx_rows", ace.shape("ace_mx").rows, 1 << 30, _per_block(ace.mx_body, 0))


if _ROWS_LOOP:

    @njit(cache=True, nogil=True)
    def gemm_fp8_fast(w, nw, A, B, C, ia, ib, k, rows, cols, inf_cancel, dst_daz):
        if inf_cancel == 0 and dst_daz == 0:
            drive(A, B, C, ia, ib, k, rows, cols, FP8_ROWS, (inf_cancel, dst_daz), 1, w, nw)
        else:  # the other readings run the exact body, step by step
            drive(A, B, C, ia, ib, k, rows, cols, FP8_FAST, (inf_cancel, dst_daz), 1, w, nw)

else:

    @njit(cache=True, nogil=True)
    def gemm_fp8_fast(w, nw, A, B, C, ia, ib, k, rows, cols, inf_cancel, dst_daz):
        drive(A, B, C, ia, ib, k, rows, cols, FP8_FAST, (inf_cancel, dst_daz), 1, w, nw)


# AMX-FP8 in binary32, each step checked through MXCSR (fp8.py; layout "fp8_32"), on every x86
# target in the row-of-superblocks loop; the non-default readings of the switches run the exact
# body on the same operands (binary32 values widen exactly), and so does every call on a target
# without MXCSR, where the body cannot be built.
FP8C_ROWS = register_rows("fp8c_rows", tiles.FP8C.rows, FP8_K_CHUNK, _fp8c_full_tile)


@njit(cache=True, nogil=True)
def gemm_fp8c_fast(w, nw, A, B, C, ia, ib, k, rows, cols, inf_cancel, dst_daz):
    if _MXCSR and inf_cancel == 0 and dst_daz == 0:
        drive(A, B, C, ia, ib, k, rows, cols, FP8C_ROWS, (inf_cancel, dst_daz), 1, w, nw)
    else:
        drive(A, B, C, ia, ib, k, rows, cols, FP8_EXACT, (inf_cancel, dst_daz), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_fp8_exact(w, nw, A, B, C, ia, ib, k, rows, cols, inf_cancel, dst_daz):
    drive(A, B, C, ia, ib, k, rows, cols, FP8_EXACT, (inf_cancel, dst_daz), 1, w, nw)


# ACE outer products: a block of 16 steps per tile multiply, C rounded after each step. The MX
# entries take the switch codes of their dtype (3 for the FP8 forms, 2 for MXINT8), which change no
# compared bit in the kernels (the FP8 decoding is in the operands); TOP2BF16PS takes ace_top2bf16.
if _ROWS_LOOP:

    @njit(cache=True, nogil=True)
    def gemm_ace_mx_fast(w, nw, A, B, C, ia, ib, k, rows, cols, *codes):
        drive(A, B, C, ia, ib, k, rows, cols, ACE_MX_ROWS, codes, 1, w, nw)

else:

    @njit(cache=True, nogil=True)
    def gemm_ace_mx_fast(w, nw, A, B, C, ia, ib, k, rows, cols, *codes):
        drive(A, B, C, ia, ib, k, rows, cols, ACE_MX_FAST, codes, 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_ace_mx_exact(w, nw, A, B, C, ia, ib, k, rows, cols, *codes):
    drive(A, B, C, ia, ib, k, rows, cols, ACE_MX_EXACT, codes, 1, w, nw)


# MXINT8 in binary32 (layout "mx32"), under its own proof; elsewhere the call runs ace_mx.
@njit(cache=True, nogil=True)
def gemm_ace_mx32_fast(w, nw, A, B, C, ia, ib, k, rows, cols, *codes):
    drive(A, B, C, ia, ib, k, rows, cols, ACE_MX32_FAST, codes, 1, w, nw)


# MX FP8 in binary32 where each step's bounds allow, else binary64 (layout "mx32c", under its own
# proof; elsewhere the call runs ace_mx), on every target in the row-of-superblocks loop: a panel
# row holds K_BLOCK values then one bound per step, a B block K_BLOCK rows then a row of bounds.
# Each group of body rows runs across the job's column tiles, one body call per packed block.
ACE_MX32C_ROWS = register_rows("ace_mx32c_rows", ace.shape("ace_mx32c").rows, 1 << 30, _per_block(ace.mx32c_body, TILE))


@njit(cache=True, nogil=True)
def gemm_ace_mx32c_fast(w, nw, A, B, C, ia, ib, k, rows, cols, *codes):
    drive(A, B, C, ia, ib, k, rows, cols, ACE_MX32C_ROWS, codes, 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_ace_bf16_fast(w, nw, A, B, C, ia, ib, k, rows, cols, top2bf16):
    drive(A, B, C, ia, ib, k, rows, cols, ACE_BF16_FAST, (top2bf16,), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_ace_bf16_exact(w, nw, A, B, C, ia, ib, k, rows, cols, top2bf16):
    drive(A, B, C, ia, ib, k, rows, cols, ACE_BF16_EXACT, (top2bf16,), 1, w, nw)


# The other CPUs' paths (isa.py): VPDPBUSDS, VPMADDUBSW + VPMADDWD + VPADDD, VFMADD231PS (fast
# under the proof, exact otherwise) and VFMADD231PH (C as binary16 codes; emulated, or the
# instruction itself on binary16 A and B where the target has it).
@njit(cache=True, nogil=True)
def gemm_i8sat(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, I8SAT, (), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_i16pairs(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, I16PAIRS, (), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_f32fma_fast(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, F32FMA_FAST, (), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_f32fma_exact(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, F32FMA_EXACT, (), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_f16acc(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, F16ACC, (), 1, w, nw)


@njit(cache=True, nogil=True)
def gemm_f16acc_native(w, nw, A, B, C, ia, ib, k, rows, cols):
    drive(A, B, C, ia, ib, k, rows, cols, F16ACC_NATIVE, (), 1, w, nw)


# The tile API's entry points (``tilegemm.amx.TileUnit``): one tile multiply of the exact
# variant, on the calling thread, as the only worker (a launch of threads per instruction would
# cost more than the instruction).
# Operands as for the GEMM entries with one panel and one block; ``ia``/``ib`` are implied.
_ONE = np.zeros(1, np.int64)


@njit(cache=True)
def tile_amx(A, B, C, k):
    drive(A, B, C, _ONE, _ONE, k, 1, 1, AMX_EXACT, (), 1, 0, 1)  # TDPBF16PS/TDPFP16PS, and TDPB*D by C's type


@njit(cache=True)
def tile_cfp16(A, B, C, k, rl_negate, im_lane_order):
    drive(A, B, C, _ONE, _ONE, 2 * k, 1, 1, CFP16_EXACT, (rl_negate, im_lane_order), 2, 0, 1)


@njit(cache=True)
def tile_fp8(A, B, C, k, inf_cancel, dst_daz):
    drive(A, B, C, _ONE, _ONE, k, 1, 1, FP8_EXACT, (inf_cancel, dst_daz), 1, 0, 1)


def superblock_step(variant, rows, cols, lanes=1, codes=()):
    """One K step of one superblock (``rows`` x ``cols`` full C tiles) through a variant's body,
    compiled on demand for reading its code (``tilegemm.inspect``). Not cached: Numba shows the
    IR and assembly only of what it compiled in this process.

    ``A``: ``rows`` panels of 16 x k_step, ``B``: ``cols`` kernel blocks, ``C``: (16 rows) x
    (16 cols x ``lanes``) row-major, ``scratch``: 256 x ``lanes`` elements of C's type; ``codes``
    the switch indices the body is given (the defaults).
    """

    @njit
    def step(A, B, C, scratch):
        k_step = A.size // (rows * TILE)
        block = B.size // cols
        ldc = cols * TILE * lanes
        for r in range(rows):
            for c in range(cols):
                tile_multiply(
                    A,
                    r * TILE * k_step,
                    k_step,
                    TILE,
                    TILE,
                    B,
                    c * block,
                    C,
                    r * TILE * ldc + c * TILE * lanes,
                    ldc,
                    TILE,
                    scratch,
                    variant,
                    codes,
                )

    return step


ENTRY_POINTS = (
    gemm_amx_fast,
    gemm_amx_exact,
    gemm_avx512_fast,
    gemm_avx512_exact,
    gemm_int,
    gemm_cfp16_fast,
    gemm_cfp16_exact,
    gemm_fp8_fast,
    gemm_fp8_exact,
    gemm_fp8c_fast,
    gemm_i8sat,
    gemm_i16pairs,
    gemm_f32fma_fast,
    gemm_f32fma_exact,
    gemm_f16acc,
    gemm_f16acc_native,
    tile_amx,
    tile_cfp16,
    tile_fp8,
    gemm_ace_mx_fast,
    gemm_ace_mx_exact,
    gemm_ace_mx32_fast,
    gemm_ace_mx32c_fast,
    gemm_ace_bf16_fast,
    gemm_ace_bf16_exact,
)
DEPENDENCIES = (tiles, vector, exact, targets, families, cfp16, fp8, ace, isa, rounding)
for _fn in ENTRY_POINTS:
    stamp_with_dependencies(_fn, DEPENDENCIES)
