"""One tile multiply, for every AMX instruction: ``tile_multiply`` picks the body from the types.

TDPB*D (int32 C): the vector body of ``vector.int_tile_rows``. Integer sums modulo 2^32 do not
depend on their order, so one fast body is exact for every input; signedness comes from the
operand arrays' dtypes (int8 or uint8), so it serves all four instructions.

VDPBF16PS (float32 C, ``isa="avx512"``): the seed's AVX-512 BF16 baseline, on the same operand
layouts: one accumulator per C element, odd product first (docs/semantics.md, section 5). Its fast
variant rests on the same proof as TDPBF16PS's; a partial sum can be -0 here (the caller's C
may be), so the last K step runs exactly its ceil(remaining / 2) pairs, never padding pairs.

TDPBF16PS / TDPFP16PS (float32 C): both dtypes reach the kernels as exact float32 values (BF16
with DAZ already applied, FP16 widened with its denormals kept), so one kernel serves both. Two
variants of the tile multiply:

- exact (variant 0): every operation through ``exact.fma32`` / ``exact.add32``; handles denormal
  results (FTZ), overflowing products next to infinite sums, and the odd-K padded pair.
- fast (variant 1): the explicit vector FMA chains of ``vector.float_tile_rows``. Used only after
  the per-call range proof in ``tilegemm.plan.fast_path_ok`` (docs/semantics.md, section 9): all
  values are then multiples of a grid u >= 2^-126, so no result is tiny and FTZ/DAZ never act,
  and no product overflows, so a fused and an unfused multiply-add give the same bits. We chose
  the proof over setting MXCSR in worker threads because it needs no per-thread state, cannot
  leak flags to the caller, and LLVM may move float operations across an ``ldmxcsr`` it does not
  know to be a barrier. (AMX-FP8's binary32 body does use MXCSR, for one flag and within one
  call, fenced and restored: ``fp8.py``.) Under the proof a partial sum is never -0 (it starts
  at +0 and no result flushes), so running the zero pairs that pad K to a whole tile step changes
  no bit either.

Operand layouts are the contract in ``kernels/__init__.py``; the kernel B block is
``[pair][even/odd][n]`` float32 (512 values).

AMX-COMPLEX (``cfp16.py``), AMX-FP8 (``fp8.py``) and the ACE outer products (``ace.py``) register
their fast and exact bodies here (variants CFP16_*, FP8_* and ACE_*); their modules say how each
stays exact. Every body receives the
call's switch indices (``codes``); the others ignore them.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from . import isa
from .ace import (
    ACE_BF16_EXACT,
    ACE_BF16_FAST,
    ACE_MX32_FAST,
    ACE_MX32C_FAST,
    ACE_MX_EXACT,
    ACE_MX_FAST,
    ace_bf16_exact,
    ace_bf16_fast,
    ace_mx32_fast,
    ace_mx32c_fast,
    ace_mx_exact,
    ace_mx_fast,
)
from .cfp16 import CFP16_EXACT, CFP16_FAST, cfp16_exact, complex_tile_rows
from .exact import add32, fma32
from .families import variant_id
from .fp8 import FP8_EXACT, FP8_FAST, FP8C_FAST, fp8_exact, fp8_steps_rows, fp8_tile_rows, fp8c_steps_rows
from .targets import shape
from .vector import float_dot_rows, float_tile_rows, int_tile_rows

TILE = 16
_PAIRS = 16  # a full tile multiply: 16 rows of 64 bytes = 16 pairs along K
# Register blocking from the per-target table (targets.py): rows per body and vector width.
F32PAIRS, VDP, I8QUADS = shape("f32pairs"), shape("vdp"), shape("i8quads")
CF16, FP8Q, FP8C = shape("cfp16"), shape("fp8quads"), shape("fp8c")


def _vector_rows(body, mr_body, lanes=1):
    """A tile multiply from an ``mr_body``-row vector body, over the A panel's first ``mr`` rows
    rounded up to whole bodies.

    A panels are zero-padded to 16 rows, so a partial tile (mr < 16 or nc < 16) runs on a 16 x 16
    scratch copy of its C block; only the real rows and columns are copied back, and row groups
    wholly past ``mr`` are not computed (as in ``isa.py``'s tiles).
    ``lanes``: C values per output (2 for complex results: offsets and ``ldc`` count values).
    """
    width = TILE * lanes

    @njit(inline="always")
    def tile(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch):
        partial = mr < TILE or nc < TILE
        if partial:
            for mm in range(TILE):
                for n in range(width):
                    scratch[mm * width + n] = C[c_off + mm * ldc + n] if mm < mr and n < nc * lanes else 0
            tgt, t_off, t_ld = scratch, 0, width
        else:
            tgt, t_off, t_ld = C, c_off, ldc
        for mm in range(0, mr, mr_body):
            body(A, a_off + mm * lda, lda, B, b_off, tgt, t_off + mm * t_ld, t_ld)
        if partial:
            for mm in range(mr):
                for n in range(nc * lanes):
                    C[c_off + mm * ldc + n] = scratch[mm * width + n]

    return tile


_tile_fast_float = _vector_rows(float_tile_rows(F32PAIRS.rows, F32PAIRS.width), F32PAIRS.rows)
_tile_int = _vector_rows(int_tile_rows(I8QUADS.rows), I8QUADS.rows)
_dot_fast_float = _vector_rows(float_dot_rows(VDP.rows, VDP.width), VDP.rows)
_dot_fast_pair = _vector_rows(float_dot_rows(VDP.rows, VDP.width, 1), VDP.rows)
_tile_fast_cfp16 = _vector_rows(complex_tile_rows(CF16.rows, CF16.width), CF16.rows, lanes=2)
_tile_fast_fp8 = _vector_rows(fp8_tile_rows(FP8Q.rows, FP8Q.width), FP8Q.rows)
# With 32 vector registers, AMX-FP8's fast body runs a chunk of K steps in one call with C in
# registers (fp8.py), as isa.py's bodies do; a single step is a chunk of one.
fp8_steps_body = fp8_steps_rows(FP8Q.rows, FP8Q.width)
_steps_fast_fp8 = isa._rows_tile(fp8_steps_body, FP8Q.rows)
# AMX-FP8 in binary32, each step checked (fp8.py), a chunk of K steps per call; a step it redoes
# runs the binary64 body's rows at a time (fp8quads' shape, which fits the target's registers).
fp8c_body = fp8c_steps_rows(FP8C.rows, FP8C.width, FP8C.hold_c, min(FP8C.rows, FP8Q.rows))
_steps_fp8c = isa._rows_tile(fp8c_body, FP8C.rows)

# Variants of the float tile multiply (``variant`` in the kernel contract).
AMX_EXACT, AMX_FAST, AVX512_EXACT, AVX512_FAST = (
    variant_id(n) for n in ("amx_exact", "amx_fast", "avx512_exact", "avx512_fast")
)
# The other CPUs' paths (isa.py), by name for ``tilegemm.dispatch.Family.variant``.
I8SAT, I16PAIRS, F32FMA_FAST, F32FMA_EXACT, F16ACC, F16ACC_NATIVE = (
    isa.I8SAT,
    isa.I16PAIRS,
    isa.F32FMA_FAST,
    isa.F32FMA_EXACT,
    isa.F16ACC,
    isa.F16ACC_NATIVE,
)


@njit(cache=True)
def _tile_exact(A, a_off, lda, mr, npairs, B, b_off, C, c_off, ldc, nc):
    """The SDM's loop, one rounded binary32 operation at a time."""
    for mm in range(mr):
        for n in range(nc):
            e = np.float32(0.0)
            o = np.float32(0.0)
            for p in range(npairs):
                a = a_off + mm * lda + 2 * p
                e = fma32(A[a], B[b_off + p * 2 * TILE + n], e)
                o = fma32(A[a + 1], B[b_off + p * 2 * TILE + TILE + n], o)
            c = c_off + mm * ldc + n
            C[c] = add32(C[c], add32(e, o))


@njit(cache=True)
def _dot_exact(A, a_off, lda, mr, npairs, B, b_off, C, c_off, ldc, nc):
    """VDPBF16PS, one rounded binary32 operation at a time: odd product first, then even."""
    for mm in range(mr):
        for n in range(nc):
            c = c_off + mm * ldc + n
            acc = C[c]
            for p in range(npairs):
                a = a_off + mm * lda + 2 * p
                acc = fma32(A[a + 1], B[b_off + p * 2 * TILE + TILE + n], acc)
                acc = fma32(A[a], B[b_off + p * 2 * TILE + n], acc)
            C[c] = acc


@njit
def _amx_fast(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes):
    _tile_fast_float(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch)


@njit
def _amx_exact(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes):
    _tile_exact(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc)


@njit
def _avx512_fast(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes):
    if ngroups == _PAIRS:
        _dot_fast_float(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch)
    else:  # the last K step runs exactly ceil(remaining / 2) pairs, one at a time
        for p in range(ngroups):
            _dot_fast_pair(A, a_off + 2 * p, lda, mr, B, b_off + 2 * TILE * p, C, c_off, ldc, nc, scratch)


@njit
def _avx512_exact(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes):
    _dot_exact(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc)


@njit
def _cfp16_fast(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes):
    _tile_fast_cfp16(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch)


if FP8Q.hold_c:

    @njit(inline="always")
    def _fp8_one_step(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch):
        _steps_fast_fp8(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, 1, 0, 0)

else:
    _fp8_one_step = _tile_fast_fp8


@njit
def _fp8_fast(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes):
    if codes[0] == 0 and codes[1] == 0:
        _fp8_one_step(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch)
    else:  # the non-default readings of the switches: the exact body
        fp8_exact(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes)


@njit
def _fp8c_fast(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes):
    if codes[0] == 0 and codes[1] == 0:
        _steps_fp8c(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, 1, 0, 0)
    else:  # the non-default readings of the switches: the exact body (binary32 values widen exactly)
        fp8_exact(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes)


_FLOAT_BODIES = {
    AMX_FAST: _amx_fast,
    AMX_EXACT: _amx_exact,
    AVX512_FAST: _avx512_fast,
    AVX512_EXACT: _avx512_exact,
    CFP16_FAST: _cfp16_fast,
    CFP16_EXACT: cfp16_exact,
    FP8_FAST: _fp8_fast,
    FP8_EXACT: fp8_exact,
    FP8C_FAST: _fp8c_fast,
    ACE_MX_FAST: ace_mx_fast,
    ACE_MX_EXACT: ace_mx_exact,
    ACE_MX32_FAST: ace_mx32_fast,
    ACE_MX32C_FAST: ace_mx32c_fast,
    ACE_BF16_FAST: ace_bf16_fast,
    ACE_BF16_EXACT: ace_bf16_exact,
}


#: Bodies that run a chunk of K steps of one C tile in one call, by variant: each C element one
#: chain in K order (the other CPUs' paths of isa.py, and bodies that kernel modules of their own
#: register with :func:`register_steps`), with whether the body takes the tail arguments.
#: Signature ``(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, nsteps, a_step, b_step)``
#: (``isa._rows_tile``), and with ``tail`` also ``k, kb0, codes``: the true K, the chunk's first
#: step and the switch indices, so that the body can run the last step's own elements only.
STEP_BODIES: dict[int, tuple] = {v: (body, False) for v, body in isa.TILE_BODIES.items()}


def register_steps(name: str, body, tail: bool = False) -> int:
    """Register a chunk-of-steps tile body under ``name``; its variant constant (for ``_gemm``)."""
    v = variant_id(name)
    if STEP_BODIES.get(v, (body, tail)) != (body, tail) or v in _FLOAT_BODIES:
        raise ValueError(f"body variant {name!r} is registered twice")
    STEP_BODIES[v] = (body, tail)
    return v


def variant(name: str) -> int:
    """The variant constant of a registered body (``KeyError`` for an unknown name)."""
    v = variant_id(name)
    if v not in STEP_BODIES and v not in _FLOAT_BODIES:
        raise KeyError(f"no tile body {name!r}")
    return v


def tile_multiply(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, variant, codes):
    """``C[mr x nc] += A[mr x k_step] @ B-block``; resolved at compile time by C's dtype.
    ``codes``: the call's switch indices (a tuple, empty for instructions without switches)."""
    raise NotImplementedError("only callable from compiled code")


@overload(tile_multiply, inline="always", prefer_literal=True)
def _tile_multiply(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, variant, codes):
    other, tail = STEP_BODIES.get(getattr(variant, "literal_value", None), (None, False))
    if other is not None and tail:  # one step of a registered body: its own K elements

        def impl(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, variant, codes):
            other(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, 1, 0, 0, ngroups * (lda // TILE), 0, codes)

        return impl
    if other is not None:  # the other CPUs' paths (isa.py), whatever C's type

        def impl(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, variant, codes):
            other(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, 1, 0, 0)

        return impl
    if isinstance(C.dtype, types.Integer):

        def impl(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, variant, codes):
            _tile_int(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch)

        return impl
    # Every caller passes the variant as a compile-time constant, so each entry point compiles
    # (and caches) only the arithmetic it runs.
    body = _FLOAT_BODIES.get(getattr(variant, "literal_value", None))
    if body is None:
        raise TypeError(f"tile_multiply needs a constant variant of {sorted(_FLOAT_BODIES)}, got {variant}")

    def impl(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, variant, codes):
        body(A, a_off, lda, mr, ngroups, B, b_off, C, c_off, ldc, nc, scratch, codes)

    return impl


def tile_steps(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, variant, codes, k, group, kb0, kb1, b_step):
    """K steps ``kb0 .. kb1 - 1`` of one C tile: ``tile_multiply`` step after step, A panels
    ``16 * lda`` and B blocks ``b_step`` elements apart from those of step ``kb0`` at ``a_off`` and
    ``b_off``. A panels are dense (16 rows of one K step), so ``lda`` is also the number of K
    elements per step, which the tail rule of the last step counts with. The other CPUs' paths
    (isa.py) run all the steps in one call with C in registers: each C element there is one chain
    in K order, which the steps continue. So does AMX-FP8's fast body where it holds C in
    registers (``FP8Q.hold_c``), rounding into C after each step."""
    raise NotImplementedError("only callable from compiled code")


@overload(tile_steps, prefer_literal=True)
def _tile_steps(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, variant, codes, k, group, kb0, kb1, b_step):
    other, tail = STEP_BODIES.get(getattr(variant, "literal_value", None), (None, False))
    if other is not None and tail:

        def impl(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, variant, codes, k, group, kb0, kb1, b_step):
            other(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, kb1 - kb0, TILE * lda, b_step, k, kb0, codes)

        return impl
    if other is not None:

        def impl(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, variant, codes, k, group, kb0, kb1, b_step):
            other(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, kb1 - kb0, TILE * lda, b_step)

        return impl

    if getattr(variant, "literal_value", None) == FP8_FAST and FP8Q.hold_c:  # C in registers across the steps

        def impl(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, variant, codes, k, group, kb0, kb1, b_step):
            if codes[0] == 0 and codes[1] == 0:
                _steps_fast_fp8(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, kb1 - kb0, TILE * lda, b_step)
            else:  # the non-default readings of the switches: the exact body, step by step
                _each_step(
                    A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, variant, codes, k, group, kb0, kb1, b_step
                )

        return impl

    def impl(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, variant, codes, k, group, kb0, kb1, b_step):
        _each_step(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, variant, codes, k, group, kb0, kb1, b_step)

    return impl


@njit
def step_groups(k, kb, lda, group):
    """Groups of ``group`` K elements that K step ``kb`` (of ``lda`` elements) runs: 16, and in the
    last step ceil(remaining / group) (the tail rule, docs/semantics.md, section 6)."""
    return min(TILE, (k - kb * lda + group - 1) // group)


@njit
def _each_step(A, a_off, lda, mr, B, b_off, C, c_off, ldc, nc, scratch, variant, codes, k, group, kb0, kb1, b_step):
    """``tile_steps`` as one ``tile_multiply`` per K step."""
    for kb in range(kb0, kb1):
        ngroups = step_groups(k, kb, lda, group)
        t = kb - kb0
        tile_multiply(
            A,
            a_off + t * TILE * lda,
            lda,
            mr,
            ngroups,
            B,
            b_off + t * b_step,
            C,
            c_off,
            ldc,
            nc,
            scratch,
            variant,
            codes,
        )
