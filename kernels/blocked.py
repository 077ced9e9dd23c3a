"""The blocked GEMM drivers: register-blocked bodies across tiles, B read as packed, the fast-path
proof confined to blocks.

Loop nest of one thread's job (an ``i0:i1`` x ``j0:j1`` block of one C matrix), BLIS style:

    for each K chunk of ``kc`` tile steps, in increasing K (every C element sees its steps in order)
        for each block of MC rows
            pack A's rows of the chunk into a per-thread float32 (or byte) block, rounding
            float32 input to BF16/FP16 on the way, with the smallest exponent of each body's rows
            for each column panel of the body's width
                for each group of the body's rows
                    the body over the chunk's steps, or, step by step, the path its block allows

B is read straight from ``PackedB.data`` (BF16/FP16 pairs as dwords, INT8 quads as bytes): no
copy, no widening pass. C is updated in place.

Which path a block takes (floats; ``docs/semantics.md``, "How the kernels stay exact"). With ``ea``
the smallest biased exponent of the non-zero finite A values of the body's rows in the chunk and
``eb`` that of the B blocks of the panel, every product is a multiple of 2^g with
``g = ea + eb - 254 - 2 (p - 1)`` (p: 8 significant bits for BF16, 11 for FP16):

- ``g >= -126`` and C known to be on that grid: the **fast** body (plain FMA chains);
- ``g >= -126`` but C not (a caller's C with tiny values, or an earlier step of this block that
  was not fast): TDPBF16PS/TDPFP16PS run the fast body into a zeroed buffer, whose result
  ``e + o`` cannot be tiny, and add it into C flushing a tiny sum (**fast, flushed add**);
  VDPBF16PS, whose chain runs through C, takes the next path;
- otherwise the **flag** body: FMA, flush of denormal results, and a flag on any result of
  magnitude exactly 2^-126; a flagged step is redone by the scalar **exact** code
  (``exact.py``), as is any step whose B blocks hold a BF16 denormal (the bodies read B's bits
  as they are, and such an input must be read as zero).

``force`` (tests): 1 runs every block on the flag path, 2 every step on the scalar exact path.
The counts of block-steps per path come back as the result (:data:`PATHS`).

INT8 (all four signedness forms, exact for every input: sums modulo 2^32 do not depend on their
order): with VNNI, VPDPBUSD multiplies unsigned by signed bytes, so A is stored as ``a ^ 0x80``
(``a + 128`` for signed A, ``a - 128`` for unsigned A) where A and B have the same signedness,
and C starts ``128 * colsum(B)`` lower (s8s8) or higher (u8u8), modulo 2^32. Without VNNI, A is
widened to int16 when packed and B in the body.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import bodies, exact, families, rounding, targets, vector
from ._cache import closure_jit, stamp_with_dependencies
from .bodies import BSRC_BF16, BSRC_FP16
from .exact import add32, fma32
from .rounding import bf16_to_f32_daz, bits_f32, f32_bits, f32_round_fp16, f32_to_bf16, fp16_to_f32
from .vector import fetch_add

TILE = 16  # columns of a tile
PAIRS = 16  # pairs (quads) per K step
MC = 96  # rows of A packed per block
#: Jobs per thread where a call runs on several: threads take the next job as they finish one,
#: so a thread whose core is shared with other work takes fewer (with one job per thread, such a
#: call waited for the slowed thread's half of the work: a third of the speed of one thread).
JOBS_PER_THREAD = 4
#: Chain dwords per iteration of the VDPBF16PS engine's loop over a step (of 8 per chain).
CHAIN_UNROLL = 2
#: The engines a float body can run TDPBF16PS's chains on (``_fast_bodies``).
ENGINES = ("fma", "vdpbf16ps")
#: What the counts an entry point returns stand for, in order: K steps of one body's block run
#: on each path.
PATHS = ("fast", "fast, flushed add", "flag", "exact redo", "exact")
P_FAST, P_FASTC, P_FLAG, P_REDO, P_EXACT = range(5)
#: ``force``: 0 each block takes the path its exponents allow; 1 the flag path for every block;
#: 2 the scalar exact path for every step.
FORCE_NONE, FORCE_FLAG, FORCE_EXACT = 0, 1, 2
#: Block exponent table values (besides biased exponents 1..254): no non-zero finite value in the
#: block, and a block holding a BF16 denormal or a NaN (its steps run the exact path). ``A_NAN``:
#: the ``amin`` of a group of A rows holding a NaN (the same).
NO_VALUE, DENORMAL, A_NAN = 255, -1, -2

#: The compile target's row of the per-target table (targets without a row never call these
#: entry points: they run the superblock loop of gemm.py).
PLAN = targets.plan()
_P = PLAN if PLAN is not None else targets.TABLE[0]


@njit
def _exponent(bits):
    """Biased exponent of binary32 bits, NO_VALUE for zeros, denormals and infinities, A_NAN for
    a NaN (below every exponent, so that the smallest marks the rows)."""
    e = np.int32((bits >> np.uint32(23)) & np.uint32(0xFF))
    if e == 255 and (bits & np.uint32(0x7FFFFF)) != 0:
        return np.int32(A_NAN)
    return np.int32(NO_VALUE) if (e == 0 or e == 255) else e


@njit
def _ftz(x):
    """A binary32 denormal -> a zero of its sign (on the bits; MXCSR plays no part)."""
    b = f32_bits(x)
    if (b & np.uint32(0x7FFFFFFF)) < np.uint32(0x00800000):
        return bits_f32(b & np.uint32(0x80000000))
    return x


@njit
def _b_value(d, j, fp16):
    """Element ``j`` (0 even, 1 odd) of a packed pair dword as binary32, read as the instruction
    reads it (BF16 with DAZ; FP16 exactly)."""
    if fp16:
        return bits_f32(fp16_to_f32(np.uint16((d >> np.uint32(16 * j)) & np.uint32(0xFFFF))))
    return bits_f32(bf16_to_f32_daz(np.uint16((d >> np.uint32(16 * j)) & np.uint32(0xFFFF))))


@njit(cache=True)
def pack_a_float(A, a_f32, fp16, ai, a_k0, m0, m1, nrows, k0, kn, width, lda, abits, amin, R):
    """Rows ``m0:m1`` of ``A[ai]`` (columns ``a_k0 + k0`` on, ``kn`` of them) as exact binary32
    values into ``abits`` rows of ``lda``, zero-padded to ``width`` columns and ``nrows`` rows;
    ``amin[s]``: the smallest biased exponent of the non-zero finite values of rows
    ``s*R .. s*R+R-1`` (NO_VALUE: none).

    ``A`` is uint16: BF16/FP16 codes, or (``a_f32``) float32 bit patterns as two halves each,
    rounded here (RNE) to the format. One flat loop per row over 0-based slices, so that it
    vectorizes. Rows holding a NaN get ``amin`` A_NAN: their steps run the exact path."""
    w = 2 if a_f32 else 1
    for s in range(nrows // R):
        lo = np.int32(NO_VALUE)
        for r in range(R):
            m = m0 + s * R + r
            base = (s * R + r) * lda
            n = kn if m < m1 else 0
            dst = abits[base : base + n]
            src = A[ai, m, w * (a_k0 + k0) : w * (a_k0 + k0 + n)] if n > 0 else A[ai, 0, 0:0]
            if a_f32 and fp16:
                for i in range(n):
                    v = f32_round_fp16(np.uint32(src[2 * i]) | (np.uint32(src[2 * i + 1]) << np.uint32(16)))
                    dst[i] = v
                    lo = min(lo, _exponent(v))
            elif a_f32:
                # whole vectors in vector code, the rest here
                v0 = 0
                if n >= 16:
                    lo = min(lo, bodies.round_bf16_block(A[ai, m], 2 * (a_k0 + k0), abits, base, n))
                    v0 = n - n % 16
                for i in range(v0, n):
                    v = bf16_to_f32_daz(
                        f32_to_bf16(np.uint32(src[2 * i]) | (np.uint32(src[2 * i + 1]) << np.uint32(16)))
                    )
                    dst[i] = v
                    lo = min(lo, _exponent(v))
            elif fp16:
                for i in range(n):
                    v = fp16_to_f32(src[i])
                    dst[i] = v
                    lo = min(lo, _exponent(v))
            else:
                for i in range(n):
                    v = bf16_to_f32_daz(src[i])
                    dst[i] = v
                    lo = min(lo, _exponent(v))
            abits[base + n : base + width] = 0
        amin[s] = lo


@njit(cache=True)
def pack_a_chains(abits, lda, nrows, ks, adw, ldw):
    """The chain dwords (``bodies.vdp_body``) of ``ks`` steps of ``nrows`` rows of a packed A
    block (``abits``: binary32 bits of BF16 values, rows ``lda`` apart) into ``adw`` (rows ``ldw``
    apart): ``e`` dword ``j`` of a step is ``a[4j + 2] | a[4j] << 16``, ``o`` dword ``j``
    ``a[4j + 3] | a[4j + 1] << 16``, 16-bit halves of the values as DAZ left them."""
    hi = np.uint32(0xFFFF0000)
    sh = np.uint32(16)
    for r in range(nrows):
        for s in range(ks):
            src = abits[r * lda + s * 2 * PAIRS : r * lda + (s + 1) * 2 * PAIRS]
            dst = adw[r * ldw + s * bodies.CHAIN_ROW : r * ldw + (s + 1) * bodies.CHAIN_ROW]
            for j in range(bodies.CHAIN_DWORDS):
                for c in range(2):
                    dst[bodies.CHAIN_DWORDS * c + j] = (src[4 * j + 2 + c] >> sh) | (src[4 * j + c] & hi)


@njit(cache=True)
def pack_a_pairs(abits, lda, nrows, ks, adw, ldw):
    """As :func:`pack_a_chains`, the pairs as VDPBF16PS reads them: dword ``p`` of a step is
    ``a[2p] | a[2p + 1] << 16``."""
    hi = np.uint32(0xFFFF0000)
    sh = np.uint32(16)
    for r in range(nrows):
        for s in range(ks):
            src = abits[r * lda + s * 2 * PAIRS : r * lda + (s + 1) * 2 * PAIRS]
            dst = adw[r * ldw + s * bodies.CHAIN_ROW : r * ldw + (s + 1) * bodies.CHAIN_ROW]
            for p in range(PAIRS):
                dst[p] = (src[2 * p] >> sh) | (src[2 * p + 1] & hi)


@njit(cache=True)
def exact_step(dot, fp16, abuf, a_off, lda, rows, Bf, b_off, tile_stride, ncols, C, c_off, ldc, npairs):
    """One K step of ``npairs`` pairs for ``rows`` x ``ncols`` elements, one rounded binary32
    operation at a time (``exact.fma32`` / ``add32``): TDPBF16PS/TDPFP16PS chains, or (``dot``)
    VDPBF16PS's chain through C, odd product first. B column ``n`` of the panel is in tile
    ``n // 16`` (``tile_stride`` dwords apart)."""
    for r in range(rows):
        for n in range(ncols):
            bo = b_off + (n // TILE) * tile_stride + n % TILE
            c = c_off + r * ldc + n
            ar = a_off + r * lda
            if dot:
                acc = C[c]
                for p in range(npairs):
                    d = np.uint32(Bf[bo + TILE * p])
                    acc = fma32(abuf[ar + 2 * p + 1], _b_value(d, 1, fp16), acc)
                    acc = fma32(abuf[ar + 2 * p], _b_value(d, 0, fp16), acc)
                C[c] = acc
            else:
                e = np.float32(0.0)
                o = np.float32(0.0)
                for p in range(npairs):
                    d = np.uint32(Bf[bo + TILE * p])
                    e = fma32(abuf[ar + 2 * p], _b_value(d, 0, fp16), e)
                    o = fma32(abuf[ar + 2 * p + 1], _b_value(d, 1, fp16), o)
                C[c] = add32(C[c], add32(e, o))


@njit(cache=True)
def _flush_add(C, c_off, ldc, S, lds, rows, cols):
    """``C += S`` element by element with a tiny sum flushed: ``add32`` for binary32 values that
    are never denormal (a sum of two binary32 values below 2^-126 is exact)."""
    for r in range(rows):
        for n in range(cols):
            c = c_off + r * ldc + n
            x, y = C[c], S[r * lds + n]
            s = x + y
            # C's NaN (from an exact step) wins over the step's default NaN whatever order the
            # compiler gave the add
            C[c] = exact.nan_add32(x, y) if s != s else _ftz(s)


@njit
def _split(nthr, nC, M, N, R, NR):
    """Jobs per C matrix along M and along N: one on one thread; else about :data:`JOBS_PER_THREAD`
    per thread, which the threads take as they finish (:func:`_job`). Rows are split first while
    each job keeps a block of :data:`MC` rows, then columns: a job rewrites or reads each chunk
    of B once per block of its rows, so that jobs of a few rows across all of N (256 x 2048 in 8
    strips of 32 rows) read B four times as often as jobs of 128 rows by 512 columns, and ran at
    0.7 of their speed. (The thread count is an argument: calling ``numba.get_num_threads`` here
    would keep the entry out of the cache.)"""
    if nthr <= 1 or nC >= nthr * JOBS_PER_THREAD:
        return 1, 1
    want = -(-nthr * JOBS_PER_THREAD // nC)
    strips = -(-M // R)
    panels = -(-N // NR)
    rsplit = min(strips, want, max(1, M // MC))
    csplit = min(panels, -(-want // rsplit))
    if rsplit * csplit < want:  # too few columns: smaller strips of rows after all
        rsplit = min(strips, -(-want // csplit))
    return rsplit, csplit


@njit
def _job(jb, rsplit, csplit, M, N, R, NR):
    """``(ci, i0, i1, j0, j1)``: job ``jb``'s C matrix and block of it (strips of R rows and
    panels of NR columns shared out evenly)."""
    strips = -(-M // R)
    panels = -(-N // NR)
    ci = jb // (rsplit * csplit)
    rj = (jb // csplit) % rsplit
    cj = jb % csplit
    i0 = (rj * strips // rsplit) * R
    i1 = min(M, ((rj + 1) * strips // rsplit) * R)
    j0 = (cj * panels // csplit) * NR
    j1 = min(N, ((cj + 1) * panels // csplit) * NR)
    return ci, i0, i1, j0, j1


def _fast_bodies(kind, fp16, body, engine):
    """``(fast, fast1, prep_a, prep_b, call)`` of a float job: the fast body on R and on one row,
    what the engine does to a packed block of A and to a chunk of B before their fast steps, and
    ``call(one, ops, row, s, T, t_off, ldt, n)``, which runs ``n`` fast steps from step ``s`` of
    the block's row ``row`` (one row, or R rows) into ``T``; ``ops`` is ``(abuf, lda, adw, ldw,
    Bf, b_off, b_tile, b_step, cbuf, cb_tile, cb_step)``, the panel's operands on both engines.

    ``engine`` (:data:`ENGINES`): ``"fma"`` runs the chains as binary32 FMAs on the exact A
    values and B's pairs as packed; ``"vdpbf16ps"`` (BF16, targets with AVX512_BF16) runs them
    through VDPBF16PS (``bodies.vdp_body``) on A's block once more as dwords (``adw``): for
    TDPBF16PS chain dwords, with each panel's chunk of B rewritten into ``cbuf`` for each block of
    A's rows (a few percent of the time; keeping every panel of the chunk rewritten instead would
    cost as much memory as B's chunk, per thread); for VDPBF16PS its own pairs, B as packed."""
    R, NR, W = body.rows, body.cols, body.width
    bsrc = BSRC_FP16 if fp16 else BSRC_BF16
    if engine == "vdpbf16ps":
        assert not fp16, "VDPBF16PS multiplies BF16"
        fast = bodies.vdp_body(kind, R, NR, W, CHAIN_UNROLL)
        fast1 = bodies.vdp_body(kind, 1, NR, W, CHAIN_UNROLL)
        CR = bodies.CHAIN_ROW
        chains = kind == "pairs"

        @njit(inline="always")
        def prep_a(abits, lda, nrows, ks, adw, ldw):
            if chains:
                pack_a_chains(abits, lda, nrows, ks, adw, ldw)
            else:
                pack_a_pairs(abits, lda, nrows, ks, adw, ldw)

        @njit(inline="always")
        def prep_b(Bf, b_off, b_step, cbuf, ks, ntiles):
            if chains:
                bodies.chain_pack_b(Bf, b_off, 256, b_step, cbuf, ks, ntiles)

        @njit(inline="always")
        def call(one, ops, row, s, T, t_off, ldt, n):
            _, _, adw, ldw, Bf, b_off, b_tile, b_step, cbuf, cb_tile, cb_step = ops
            a_off = row * ldw + s * CR
            if chains:  # the panel's chunk, rewritten
                B, o, bt, bs = cbuf, s * cb_step, cb_tile, cb_step
            else:  # B's pairs as packed
                B, o, bt, bs = Bf, b_off + s * b_step, b_tile, b_step
            if one:
                fast1(adw, a_off, ldw, B, o, bt, bs, T, t_off, ldt, n, 16)
            else:
                fast(adw, a_off, ldw, B, o, bt, bs, T, t_off, ldt, n, 16)

        return fast, fast1, prep_a, prep_b, call
    assert engine == "fma"
    fast = bodies.float_body(kind, R, NR, W, bsrc, "fast", body.unroll, body.layout)
    fast1 = bodies.float_body(kind, 1, NR, W, bsrc, "fast", body.unroll, body.layout)

    @njit(inline="always")
    def no_prep_a(abits, lda, nrows, ks, adw, ldw):
        pass

    @njit(inline="always")
    def no_prep_b(Bf, b_off, b_step, cbuf, ks, ntiles):
        pass

    @njit(inline="always")
    def fma_call(one, ops, row, s, T, t_off, ldt, n):
        abuf, lda, _, _, Bf, b_off, b_tile, b_step, _, _, _ = ops
        if one:
            fast1(abuf, row * lda + s * 2 * PAIRS, lda, Bf, b_off + s * b_step, b_tile, b_step, T, t_off, ldt, n, 16)
        else:
            fast(abuf, row * lda + s * 2 * PAIRS, lda, Bf, b_off + s * b_step, b_tile, b_step, T, t_off, ldt, n, 16)

    return fast, fast1, no_prep_a, no_prep_b, fma_call


def _float_job(dot, fp16, body, flag_rows, engine="fma"):
    """The per-job loop nest of a float family with the given fast body and engine (see the
    module doc and :func:`_fast_bodies`)."""
    R, NR, W = body.rows, body.cols, body.width
    NT = max(1, NR // TILE)
    kind = "dot" if dot else "pairs"
    bsrc = BSRC_FP16 if fp16 else BSRC_BF16
    _, _, prep_a, prep_b, fast_call = _fast_bodies(kind, fp16, body, engine)
    vdp = engine == "vdpbf16ps"
    flag = bodies.float_body(kind, flag_rows, NR, W, bsrc, "flag")
    FR = flag_rows
    assert R % FR == 0 and NT <= 2
    # products of the block are multiples of 2^(ea + eb - BIAS) (biased exponents; p - 1 fraction bits each)
    BIAS = 254 + 2 * ((11 if fp16 else 8) - 1)
    # Everything the closures capture: their compiled names must differ per variant (closure_jit).
    tag = f"{kind}_{'fp16' if fp16 else 'bf16'}_{R}x{NR}x{W}_u{body.unroll}_{body.layout}_f{FR}_{engine}"

    @closure_jit(tag)
    def _load(Cf, c_off, N, scratch, rows, cols):
        """C's block (``rows`` x ``cols`` at ``c_off``, row stride N) into the R x NR scratch,
        zeros around it."""
        for r in range(R):
            for n in range(NR):
                scratch[r * NR + n] = Cf[c_off + r * N + n] if (r < rows and n < cols) else 0

    @closure_jit(tag)
    def _store(Cf, c_off, N, scratch, rows, cols):
        for r in range(rows):
            for n in range(cols):
                Cf[c_off + r * N + n] = scratch[r * NR + n]

    @closure_jit(tag)
    def job(A, a_f32, ai, a_k0, Bf, bi, KBt, NB, bexp, C, ci, k, kc, i0, i1, j0, j1, force, c_dirty, one_row, st):
        M, N = C.shape[1], C.shape[2]
        Cf = C.reshape(C.size)
        lda = kc * 2 * PAIRS
        mc = R * max(1, MC // R)
        abuf = np.zeros(mc * lda, np.float32)
        abits = abuf.view(np.uint32)
        # the VDPBF16PS engine's chain dwords of A's block and of one panel's chunk of B
        ldw = kc * bodies.CHAIN_ROW
        adw = np.zeros(mc * ldw if vdp else 1, np.uint32)
        cbuf = np.empty(kc * NT * 256 if (vdp and not dot) else 1, np.uint32)
        amin = np.empty(mc // R, np.int32)
        npan = -(-(j1 - j0) // NR)
        dirty = np.empty((-(-(i1 - i0) // R), npan), np.bool_)
        dirty[:] = c_dirty
        cnan = np.zeros((-(-(i1 - i0) // R), npan), np.bool_)  # an exact step may have left a NaN
        scratch = np.zeros(R * NR, np.float32)
        sums = np.zeros(R * NR, np.float32)
        KB = -(-k // (2 * PAIRS))
        c0 = ci * M * N
        b_step = NB * 256
        for kc0 in range(0, KB, kc):
            ks = min(kc, KB - kc0)
            k0 = kc0 * 2 * PAIRS
            kn = min(ks * 2 * PAIRS, k - k0)
            # VDPBF16PS runs the pairs of a short last step exactly, never padding pairs
            ks_whole = ks if (not dot or (kc0 + ks) * 2 * PAIRS <= k) else ks - 1
            for m0 in range(i0, i1, mc):
                m1 = min(i1, m0 + mc)
                ns = -(-(m1 - m0) // R)
                pack_a_float(A, a_f32, fp16, ai, a_k0, m0, m1, ns * R, k0, kn, ks * 2 * PAIRS, lda, abits, amin, R)
                prep_a(abits, lda, ns * R, ks, adw, ldw)
                for q in range(npan):
                    n0 = j0 + q * NR
                    ncols = min(NR, j1 - n0)
                    ntiles = -(-ncols // TILE)
                    t0 = n0 // TILE
                    b_off = ((bi * KBt + kc0) * NB + t0) * 256
                    b_tile = 256 if ntiles == NT else 0  # a missing second tile re-reads the first
                    prep_b(Bf, b_off, b_step, cbuf, ks, ntiles)
                    cb_tile, cb_step = ks * 256 if ntiles == NT else 0, 256
                    # what the fast body reads for this panel, on either engine
                    ops = (abuf, lda, adw, ldw, Bf, b_off, b_tile, b_step, cbuf, cb_tile, cb_step)
                    eb = np.int32(NO_VALUE)
                    den = False
                    for s_ in range(ks):
                        for t in range(ntiles):
                            e = np.int32(bexp[bi, kc0 + s_, t0 + t])
                            den = den or e < 0
                            eb = min(eb, e) if e >= 0 else eb
                    for s in range(ns):
                        r0 = m0 + s * R
                        nrows = min(R, m1 - r0)
                        sj = (r0 - i0) // R
                        a_off = s * R * lda
                        c_off = c0 + r0 * N + n0
                        fast_ok = force == FORCE_NONE and not den and not dirty[sj, q]
                        nfast = ks_whole if (fast_ok and amin[s] + eb - BIAS >= -126) else 0
                        # where the body writes: C itself, or the scratch for a partial block
                        direct = nrows == R and ncols == NR
                        if nfast > 0 and (one_row or nrows * 2 <= R):
                            # one row at a time (few rows, or asked): the one-row body over the
                            # chunk's whole steps
                            direct = ncols == NR
                            if not direct:
                                _load(Cf, c_off, N, scratch, nrows, ncols)
                            T, t_off, ldt = (Cf, c_off, N) if direct else (scratch, 0, NR)
                            for r in range(nrows):
                                fast_call(True, ops, s * R + r, 0, T, t_off + r * ldt, ldt, nfast)
                            st[P_FAST] += nfast
                            if not direct:
                                _store(Cf, c_off, N, scratch, nrows, ncols)
                            if nfast == ks:
                                continue
                            start = nfast
                            direct = nrows == R and ncols == NR
                        else:
                            start = 0
                        if not direct:
                            _load(Cf, c_off, N, scratch, nrows, ncols)
                        T, t_off, ldt = (Cf, c_off, N) if direct else (scratch, 0, NR)
                        drt = dirty[sj, q]
                        s_ = start
                        while s_ < ks:
                            ao = a_off + s_ * 2 * PAIRS
                            bo = b_off + s_ * b_step
                            npairs = min(PAIRS, (k - (kc0 + s_) * 2 * PAIRS + 1) // 2)
                            if s_ < nfast:
                                path, n = P_FAST, nfast - s_  # the whole steps, provably fast
                            else:
                                n = 1  # one step at a time: the path its blocks allow
                                ebs = np.int32(NO_VALUE)
                                dens = False
                                for t in range(ntiles):
                                    e = np.int32(bexp[bi, kc0 + s_, t0 + t])
                                    dens = dens or e < 0
                                    ebs = min(ebs, e) if e >= 0 else ebs
                                g_ok = force == FORCE_NONE and amin[s] + ebs - BIAS >= -126
                                if force == FORCE_EXACT or dens or amin[s] == A_NAN:
                                    path = P_EXACT
                                elif g_ok and not dot and drt:
                                    path = P_FASTC
                                elif cnan[sj, q] and not dot:
                                    # C may hold an input's NaN: the flag body's add into C
                                    # could return the step's default NaN instead
                                    path = P_EXACT
                                elif g_ok and not drt and (not dot or npairs == PAIRS):
                                    path = P_FAST
                                else:
                                    path = P_FLAG
                            if path == P_FAST or path == P_FASTC:
                                if path == P_FASTC:
                                    sums[:] = 0
                                D, d_off, ldd = (sums, 0, NR) if path == P_FASTC else (T, t_off, ldt)
                                fast_call(False, ops, s * R, s_, D, d_off, ldd, n)
                                if path == P_FASTC:
                                    _flush_add(T, t_off, ldt, sums, NR, nrows, ncols)
                            elif path == P_EXACT:
                                exact_step(dot, fp16, abuf, ao, lda, nrows, Bf, bo, 256, ncols, T, t_off, ldt, npairs)
                            else:
                                for f0 in range(0, nrows, FR):
                                    fo = t_off + f0 * ldt
                                    if flag(abuf, ao + f0 * lda, lda, Bf, bo, b_tile, b_step, T, fo, ldt, 1, npairs):
                                        fr = min(FR, nrows - f0)
                                        exact_step(
                                            dot,
                                            fp16,
                                            abuf,
                                            ao + f0 * lda,
                                            lda,
                                            fr,
                                            Bf,
                                            bo,
                                            256,
                                            ncols,
                                            T,
                                            fo,
                                            ldt,
                                            npairs,
                                        )
                                        st[P_REDO] += 1
                            drt = drt or path == P_EXACT or path == P_FLAG
                            if path == P_EXACT:
                                cnan[sj, q] = True
                            st[path] += n
                            s_ += n
                        dirty[sj, q] = drt
                        if not direct:
                            _store(Cf, c_off, N, scratch, nrows, ncols)

    return job, R, NR


def _float_driver(dot, fp16, body, engine="fma"):
    job, R, NR = _float_job(dot, fp16, body, _P.flag_rows, engine)

    @njit(inline="always")
    def driver(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st):
        nC, M, N = C.shape
        KBt, NB = B.shape[1], B.shape[2]
        Bf = B.reshape(B.size)
        rsplit, csplit = _split(nw, nC, M, N, R, NR)
        njobs = nC * rsplit * csplit
        jb = fetch_add(taken, 0, 1)  # one worker of nw, taking jobs until none is left
        while jb < njobs:
            ci, i0, i1, j0, j1 = _job(jb, rsplit, csplit, M, N, R, NR)
            if i0 < i1 and j0 < j1:
                job(
                    A,
                    a_f32,
                    ia[ci],
                    a_k0,
                    Bf,
                    ib[ci],
                    KBt,
                    NB,
                    bexp,
                    C,
                    ci,
                    k,
                    kc,
                    i0,
                    i1,
                    j0,
                    j1,
                    force,
                    c_dirty,
                    one_row,
                    st[w],
                )
            jb = fetch_add(taken, 0, 1)

    return driver


_PAIRS_BF16 = _float_driver(False, False, _P.pairs_bf16)
_PAIRS_FP16 = _float_driver(False, True, _P.pairs_fp16)
_DOT_BF16 = _float_driver(True, False, _P.dot)
_PAIRS_BF16_VDP = _float_driver(False, False, _P.pairs_bf16, "vdpbf16ps")
_DOT_BF16_VDP = _float_driver(True, False, _P.dot, "vdpbf16ps")


# The entry points (contract in kernels/__init__.py). One per B format and family, each compiled
# (and cached) for one signature: A uint16 (nA, M, K or 2K), B uint32 (nB, KB, NB, 256) dwords,
# bexp int16 (nB, KB, NB), C float32 (nC, M, N). Each call is worker ``w`` of ``nw``
# (``tilegemm.workers``): the workers share ``taken``, the job counter (one int64, zero), and the
# float entries add the path counts of their blocks to their own row of ``st`` (nw x PATHS).
@njit(cache=True, nogil=True)
def gemm_pairs_bf16(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st):
    _PAIRS_BF16(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st)


@njit(cache=True, nogil=True)
def gemm_pairs_fp16(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st):
    _PAIRS_FP16(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st)


@njit(cache=True, nogil=True)
def gemm_dot_bf16(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st):
    _DOT_BF16(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st)


# TDPBF16PS and VDPBF16PS on the VDPBF16PS engine: compiled only where the target has
# AVX512_BF16 (the dispatcher never picks them elsewhere: ``tilegemm.dispatch.Kernel.engine``).
@njit(cache=True, nogil=True)
def gemm_pairs_bf16_vdp(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st):
    _PAIRS_BF16_VDP(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st)


@njit(cache=True, nogil=True)
def gemm_dot_bf16_vdp(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st):
    _DOT_BF16_VDP(w, nw, A, a_f32, a_k0, B, ia, ib, bexp, C, k, kc, force, c_dirty, one_row, taken, st)


# --------------------------------------------------------------------------------------------
# INT8
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def pack_a_bytes(A, ai, a_k0, m0, m1, nrows, k0, kn, width, lda, buf, xor):
    """Rows ``m0:m1`` of ``A[ai]`` (uint8 view of the bytes), columns ``a_k0 + k0`` on (``kn``), into
    ``buf`` rows of ``lda`` (zero-padded to ``width`` and ``nrows``), each byte xor ``xor``.
    Loops over 0-based slices, as in :func:`pack_a_float`: indexed from an offset, each access
    carried Numba's negative-index check, and the loop ran a byte at a time (1.5 ns a byte on
    Zen 4, a fifth of an INT8 call at n = 1024)."""
    x = np.uint8(xor)
    for r in range(nrows):
        m = m0 + r
        n = kn if m < m1 else 0
        dst = buf[r * lda : r * lda + width]
        if n > 0:
            src = A[ai, m, a_k0 + k0 : a_k0 + k0 + n]
            for i in range(n):
                dst[i] = src[i] ^ x
        dst[n:] = 0


@njit(cache=True)
def pack_a_words(A, ai, a_k0, m0, m1, nrows, k0, kn, width, lda, buf, signed):
    """As :func:`pack_a_bytes`, widened to int16 (sign- or zero-extended)."""
    for r in range(nrows):
        m = m0 + r
        n = kn if m < m1 else 0
        dst = buf[r * lda : r * lda + width]
        if n > 0:
            src = A[ai, m, a_k0 + k0 : a_k0 + k0 + n]
            if signed:
                for i in range(n):
                    dst[i] = np.int16(np.int8(src[i]))
            else:
                for i in range(n):
                    dst[i] = np.int16(src[i])
        dst[n:] = 0


def _int_job(body):
    R, NR, W = body.rows, body.cols, body.width
    NT = max(1, NR // TILE)
    vnni = _P.int_kind == "vnni"
    main = [bodies.int_body(_P.int_kind, R, NR, W, v) for v in (0, 1)]
    one = [bodies.int_body(_P.int_kind, 1, NR, W, v) for v in (0, 1)]
    main0, main1, one0, one1 = main[0], main[1], one[0], one[1]
    assert NT <= 2
    buf_type = np.uint8 if vnni else np.int16
    pack = pack_a_bytes if vnni else pack_a_words

    @njit(inline="always")
    def run(variant, one_row, A, a_off, lda, Bf, b_off, b_tile, b_step, T, t_off, ldt, ks):
        if variant == 0:
            if one_row:
                one0(A, a_off, lda, Bf, b_off, b_tile, b_step, T, t_off, ldt, ks)
            else:
                main0(A, a_off, lda, Bf, b_off, b_tile, b_step, T, t_off, ldt, ks)
        elif one_row:
            one1(A, a_off, lda, Bf, b_off, b_tile, b_step, T, t_off, ldt, ks)
        else:
            main1(A, a_off, lda, Bf, b_off, b_tile, b_step, T, t_off, ldt, ks)

    # A function of its own, as the float job: a job's buffers are freed when it returns, before
    # the thread takes its next job
    @closure_jit(f"int_{_P.int_kind}_{R}x{NR}x{W}")
    def job(A, a_signed, ai, a_k0, Bf, b_signed, bi, KBt, NB, colsum, C, ci, k, kc, i0, i1, j0, j1, one_row):
        M, N = C.shape[1], C.shape[2]
        Cf = C.reshape(C.size)
        lda = kc * 4 * PAIRS
        mc = R * max(1, MC // R)
        buf = np.zeros(mc * lda, buf_type)
        scratch = np.zeros(R * NR, np.int32)
        # VPDPBUSD multiplies unsigned by signed bytes: the body's variant says which operand is
        # the unsigned one; where A and B have one signedness, A is shifted by 128 (xor 0x80)
        # and C corrected by 128 x B's column sums, modulo 2^32. VPMADDWD: the variant is B's
        # extension (0 signed, 1 unsigned), A is widened when packed.
        variant = 0 if b_signed else 1
        same = a_signed == b_signed
        xor = 0x80 if (vnni and same) else 0
        # The correction, modulo 2^32, of each column of the job: added to each block of C just
        # after its last chunk, while the block is in cache (a pass over C before the chunks
        # cost a tenth of an s8s8 call at n = 1024 on Zen 4, C coming from memory twice).
        corrv = np.zeros(j1 - j0 if (vnni and same) else 0, np.int32)
        corr = -128 if a_signed else 128
        for n in range(corrv.size):
            corrv[n] = np.int32(corr * np.int64(colsum[bi, j0 + n]))
        KB = -(-k // (4 * PAIRS))
        b_step = NB * 1024
        for kc0 in range(0, KB, kc):
            ks = min(kc, KB - kc0)
            k0 = kc0 * 4 * PAIRS
            kn = min(ks * 4 * PAIRS, k - k0)
            for m0 in range(i0, i1, mc):
                m1 = min(i1, m0 + mc)
                ns = -(-(m1 - m0) // R)
                if vnni:
                    pack(A, ai, a_k0, m0, m1, ns * R, k0, kn, ks * 4 * PAIRS, lda, buf, xor)
                else:
                    pack(A, ai, a_k0, m0, m1, ns * R, k0, kn, ks * 4 * PAIRS, lda, buf, a_signed)
                for q in range(-(-(j1 - j0) // NR)):
                    n0 = j0 + q * NR
                    ncols = min(NR, j1 - n0)
                    ntiles = -(-ncols // TILE)
                    b_off = ((bi * KBt + kc0) * NB + n0 // TILE) * 1024 + 4 * (n0 % TILE)
                    b_tile = 1024 if ntiles == NT else 0
                    for s in range(ns):
                        r0 = m0 + s * R
                        nrows = min(R, m1 - r0)
                        a_off = s * R * lda
                        if one_row or nrows * 2 <= R:
                            for r in range(nrows):
                                ro = ci * M * N + (r0 + r) * N + n0
                                if ncols == NR:
                                    run(
                                        variant,
                                        True,
                                        buf,
                                        a_off + r * lda,
                                        lda,
                                        Bf,
                                        b_off,
                                        b_tile,
                                        b_step,
                                        Cf,
                                        ro,
                                        N,
                                        ks,
                                    )
                                else:
                                    scratch[:] = 0
                                    run(
                                        variant,
                                        True,
                                        buf,
                                        a_off + r * lda,
                                        lda,
                                        Bf,
                                        b_off,
                                        b_tile,
                                        b_step,
                                        scratch,
                                        0,
                                        NR,
                                        ks,
                                    )
                                    for n in range(ncols):
                                        Cf[ro + n] = np.int32(np.int64(Cf[ro + n]) + scratch[n])
                        elif nrows == R and ncols == NR:
                            run(
                                variant,
                                False,
                                buf,
                                a_off,
                                lda,
                                Bf,
                                b_off,
                                b_tile,
                                b_step,
                                Cf,
                                ci * M * N + r0 * N + n0,
                                N,
                                ks,
                            )
                        else:
                            scratch[:] = 0
                            run(variant, False, buf, a_off, lda, Bf, b_off, b_tile, b_step, scratch, 0, NR, ks)
                            for r in range(nrows):
                                for n in range(ncols):
                                    c = ci * M * N + (r0 + r) * N + n0 + n
                                    Cf[c] = np.int32(np.int64(Cf[c]) + scratch[r * NR + n])
                    if corrv.size > 0 and kc0 + ks == KB:
                        for m in range(m0, m1):
                            row = Cf[ci * M * N + m * N + n0 : ci * M * N + m * N + n0 + ncols]
                            row += corrv[n0 - j0 : n0 - j0 + ncols]

    return job, R, NR


def _int_driver(body):
    job, R, NR = _int_job(body)

    @njit(inline="always")
    def driver(w, nw, A, a_signed, a_k0, B, b_signed, ia, ib, colsum, C, k, kc, one_row, taken):
        nC, M, N = C.shape
        KBt, NB = B.shape[1], B.shape[2]
        Bf = B.reshape(B.size)
        rsplit, csplit = _split(nw, nC, M, N, R, NR)
        njobs = nC * rsplit * csplit
        jb = fetch_add(taken, 0, 1)  # as the float driver
        while jb < njobs:
            ci, i0, i1, j0, j1 = _job(jb, rsplit, csplit, M, N, R, NR)
            if i0 < i1 and j0 < j1:
                job(
                    A,
                    a_signed,
                    ia[ci],
                    a_k0,
                    Bf,
                    b_signed,
                    ib[ci],
                    KBt,
                    NB,
                    colsum,
                    C,
                    ci,
                    k,
                    kc,
                    i0,
                    i1,
                    j0,
                    j1,
                    one_row,
                )
            jb = fetch_add(taken, 0, 1)

    return driver


_QUADS = _int_driver(_P.quads)


@njit(cache=True, nogil=True)
def gemm_quads(w, nw, A, a_signed, a_k0, B, b_signed, ia, ib, colsum, C, k, kc, one_row, taken):
    _QUADS(w, nw, A, a_signed, a_k0, B, b_signed, ia, ib, colsum, C, k, kc, one_row, taken)


#: Entry point -> the field of the target table's row that gives its body.
ENTRY_BODIES = {
    "gemm_pairs_bf16": "pairs_bf16",
    "gemm_pairs_fp16": "pairs_fp16",
    "gemm_dot_bf16": "dot",
    "gemm_quads": "quads",
    "gemm_pairs_bf16_vdp": "pairs_bf16",
    "gemm_dot_bf16_vdp": "dot",
}
#: Entry point -> the engine its fast body runs the chains on.
ENTRY_ENGINES = {name: "vdpbf16ps" if name.endswith("_vdp") else "fma" for name in ENTRY_BODIES}
#: Entry point on the FMA engine -> the same entry on another engine.
ENGINE_ENTRIES = {
    ("gemm_pairs_bf16", "vdpbf16ps"): "gemm_pairs_bf16_vdp",
    ("gemm_dot_bf16", "vdpbf16ps"): "gemm_dot_bf16_vdp",
}


def work_bytes(name: str, nC: int, M: int, N: int, kc: int, nthr: int, engine: str = "fma") -> int:
    """An upper bound of the bytes an entry point allocates itself (per job: the packed A block,
    its exponents, the dirty flags of its blocks of C, two scratch blocks; the VDPBF16PS engine
    also A's block as chain dwords and one panel's chunk of B), for ``nC`` results of M x N on
    ``nthr`` threads with chunks of ``kc`` steps. Everything else a call holds is allocated by
    its caller (``tilegemm.api``)."""
    body = _P.body(name)
    R, NR = body.rows, body.cols
    rsplit, csplit = _split(nthr, nC, M, N, R, NR)
    jobs = nC * rsplit * csplit
    rows = R * max(1, MC // R)
    a_block = rows * kc * 4 * PAIRS * (2 if name == "quads" and _P.int_kind != "vnni" else 1)
    if name != "quads":
        a_block = rows * kc * 2 * PAIRS * 4
    fixed = a_block + 4 * (rows // R) + 2 * 4 * R * NR
    if engine == "vdpbf16ps":
        fixed += 4 * (rows * kc * bodies.CHAIN_ROW + kc * max(1, NR // TILE) * 256)
    dirty = nC * (-(-M // R) + rsplit) * (-(-N // NR) + csplit)
    # a thread holds one job's buffers at a time (a job frees them when it returns)
    return min(jobs, max(1, nthr)) * fixed + dirty


def fast_body(name: str, engine: str = "fma"):
    """``(Body, intrinsic, kind)`` of the fast body an entry point's row of the table gives
    (``name``: a value of :data:`ENTRY_BODIES`; ``engine``: one of :data:`ENGINES`), built
    afresh for reading its code or timing it alone; ``kind`` is ``"float"`` (``body(A, a_off,
    lda, B, b_off, b_tile, b_step, C, c_off, ldc, nsteps, npairs)``), ``"chain"`` (the same with A
    and B as uint32 dwords: ``bodies.vdp_body``) or ``"int"`` (no ``npairs``)."""
    body = _P.body(name)
    if engine == "vdpbf16ps":
        assert name in ("pairs_bf16", "dot"), name
        kind = "dot" if name == "dot" else "pairs"
        return body, bodies.vdp_body(kind, body.rows, body.cols, body.width, CHAIN_UNROLL), "chain"
    if name == "quads":
        return body, bodies.int_body(_P.int_kind, body.rows, body.cols, body.width, 0), "int"
    kind = "dot" if name == "dot" else "pairs"
    bsrc = BSRC_FP16 if name == "pairs_fp16" else BSRC_BF16
    fast = bodies.float_body(kind, body.rows, body.cols, body.width, bsrc, "fast", body.unroll, body.layout)
    return body, fast, "float"


ENTRY_POINTS = (gemm_pairs_bf16, gemm_pairs_fp16, gemm_dot_bf16, gemm_quads, gemm_pairs_bf16_vdp, gemm_dot_bf16_vdp)
DEPENDENCIES = (bodies, exact, rounding, targets, families, vector)
for _fn in ENTRY_POINTS + (
    pack_a_float,
    pack_a_chains,
    pack_a_pairs,
    exact_step,
    _flush_add,
    pack_a_bytes,
    pack_a_words,
):
    stamp_with_dependencies(_fn, DEPENDENCIES)
