"""ACE operands: OCP MX block scales (E8M0), and A and B as the ACE kernel families read them.

- :func:`scale_codes` / :func:`check_scales`: the ``scales=(sa, sb)`` of a call, validated. A
  block scale is an E8M0 code (OCP Microscaling Formats v1.0, ``ml_dtypes.float8_e8m0fnu``):
  ``2^(code - 127)`` for 0x00..0xFE, 0xFF is NaN. ``sa`` has A's shape with its K axis replaced
  by ``ceil(K / 32)`` blocks, ``sb`` B's; ``None`` stands for every scale 0x7F (1.0).
- :func:`values`: the binary64 value of every code an MX outer product reads: the 8-bit floats by
  their formula for every code (E4M3 0x7F = 480; AMX-FP8's NaN and infinity rules with
  ``ace_fp8_specials="ieee_like"``), MXINT8 as ``code * 2^-6``.
- :func:`build_a` / :func:`build_b` (the builders ``tilegemm.layouts`` names): layout ``"mx64"``,
  each value times its block scale in binary64 (exact: a power-of-two scaling of at most 8
  significant bits), a NaN scale giving NaN;
  layout ``"mx32"`` (MXINT8), the same scaled values in binary32; layout ``"mx32c"`` (MX FP8),
  those in binary32 with one bound per step after each A row and each B block (when the product
  of a step's two bounds is at most 2^24 its binary32 sum is exact: ``kernels/ace.py``); for B,
  layout ``"f32keep"``,
  BF16 as float32 with denormals kept (TOP2BF16PS reads no input as zero; its A panels are
  ``tilegemm.packing``'s float pass without DAZ). Each also returns what the fast-path proof
  (``tilegemm.plan``) needs.

This module rearranges, widens and scales exact values; it never rounds (``formats`` converts
user values to codes). The one exception is binary32 (``"mx32"``, ``"mx32c"``): a scaled value
outside binary32's normal range would round there, but its range then fails that layout's proof,
and the call runs the ``"mx64"`` family instead (``tilegemm.dispatch.Family.fallback``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from . import workers
from .formats import NumberFormat, kernel_input
from .instructions import Instruction
from .layouts import Layout

__all__ = [
    "E8M0_ONE",
    "E8M0_NAN",
    "scale_codes",
    "scale_shape",
    "check_scales",
    "scale_values",
    "values",
    "build_a",
    "build_b",
]

#: The layouts of the ACE kernel families (``tilegemm.dispatch.FAMILIES``).
E8M0_ONE = 0x7F  # 2^0
E8M0_NAN = 0xFF
_NO_EXPONENT = -32768
#: A BF16 denormal's exponent in the proof's terms: below every normal one, so that no fast path runs.
_DENORMAL = -133


def _e8m0_dtype() -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.float8_e8m0fnu)


def scale_shape(operand_shape: tuple[int, ...], block: int, side: str) -> tuple[int, ...]:
    """The shape of an operand's scales: its K axis (A's last, B's second to last, a 1-D
    operand's only one) replaced by ``ceil(K / block)``."""
    if side == "a" or len(operand_shape) == 1:
        return tuple(operand_shape[:-1]) + (-(-operand_shape[-1] // block),)
    return tuple(operand_shape[:-2]) + (-(-operand_shape[-2] // block), operand_shape[-1])


def scale_codes(x, shape: tuple[int, ...], operand: str, dtype_name: str) -> np.ndarray:
    """``x`` as E8M0 codes (uint8) of ``shape``: ``ml_dtypes.float8_e8m0fnu`` arrays as they are,
    uint8 arrays as codes; None gives every scale 0x7F. ``TypeError`` for any other element type
    (a float is not quantised to a power of two here), ``ValueError`` for another shape."""
    if x is None:
        return np.full(shape, E8M0_ONE, np.uint8)
    x = np.asarray(x)
    if x.dtype == np.uint8:
        codes = x
    elif x.dtype.type.__module__ == "ml_dtypes" and x.dtype == _e8m0_dtype():
        codes = x.view(np.uint8)
    else:
        raise TypeError(
            f"scales for {operand} have dtype {x.dtype}; dtype {dtype_name!r} takes E8M0 block scales as "
            f"ml_dtypes.float8_e8m0fnu or uint8 codes (floats are not rounded to powers of two implicitly)"
        )
    if codes.shape != tuple(shape):
        raise ValueError(
            f"scales for {operand} have shape {codes.shape}, but dtype {dtype_name!r} needs {tuple(shape)}: "
            f"{operand}'s shape with K replaced by its number of 32-element blocks"
        )
    return codes


def check_operand(instr: Instruction, x, operand: str, dtype_name: str) -> None:
    """``TypeError`` unless an MX FP8 operand is already 8-bit floats of its side's format
    (``ml_dtypes``) or uint8 codes. These instructions read every code as a number (E4M3 ``0x7F``
    is 480), so a float rounded to a NaN or infinity code would silently become a finite value;
    like the scales, operands are not quantized implicitly. Other dtypes are left to their
    format's own checks."""
    if not instr.codes_only:
        return
    fmt = instr.a if operand == "a" else instr.b
    x = np.asarray(x)
    if x.dtype == np.uint8 or x.dtype == fmt.element:
        return
    raise TypeError(
        f"operand {operand} has dtype {x.dtype}; dtype {dtype_name!r} takes {operand} as "
        f"ml_dtypes.{fmt.code} or uint8 codes (no implicit quantization: it reads every code as a "
        f"number, so a NaN, an infinity or an overflow would turn finite); quantize it first"
    )


def check_scales(
    instr: Instruction, dtype_name: str, scales, a_shape, b_shape, packed_scales=None, packed: bool = False
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The E8M0 codes ``(sa, sb)`` of a call, shaped as ``a`` and ``b`` are (``sb`` None when B
    comes packed: its scales are the PackedB's). ``ValueError`` for scales given to a dtype without
    block scales, or B's scales given beside a packed B; ``TypeError`` for anything but a pair."""
    if not instr.scale_block:
        if scales is not None:
            raise ValueError(
                f"scales are the MX block scales of the ACE MX dtypes; dtype {dtype_name!r} "
                f"({instr.mnemonic}) takes none"
            )
        if packed_scales is not None:
            raise ValueError(f"the packed B carries MX block scales; dtype {dtype_name!r} takes none")
        return None, None
    if scales is None:
        scales = (None, None)
    if not isinstance(scales, (tuple, list)) or len(scales) != 2:
        raise TypeError(f"scales must be a pair (sa, sb) of E8M0 arrays (or None), got {type(scales).__name__}")
    sa_in, sb_in = scales
    if packed and sb_in is not None:
        raise ValueError("B is packed: its scales are the ones given to tilegemm.pack; pass scales=(sa, None)")
    sa = scale_codes(sa_in, scale_shape(a_shape, instr.scale_block, "a"), "a", dtype_name)
    if packed:
        return sa, None
    sb = scale_codes(sb_in, scale_shape(b_shape, instr.scale_block, "b"), "b", dtype_name)
    return sa, sb


#: The binary64 NaN a NaN block scale makes of every value of its block (a payload no arithmetic
#: produces), so that the exact MX body tells it from a NaN the arithmetic made: a NaN scale
#: writes the ``ace_e8m0_nan_result`` switch's NaN, with C not read (``kernels/ace.py``).
SCALE_NAN_BITS = 0x7FF8_0000_0ACE_0ACE


@functools.cache
def scale_values() -> np.ndarray:
    """The binary64 value of every E8M0 code: 2^(code - 127), NaN for 0xFF (the NaN of
    :data:`SCALE_NAN_BITS`; read-only)."""
    v = np.ldexp(1.0, np.arange(256) - 127)
    v[E8M0_NAN] = np.array(SCALE_NAN_BITS, np.uint64).view(np.float64)
    v.flags.writeable = False
    return v


@functools.cache
def values(fmt: NumberFormat, ieee: bool = False) -> np.ndarray:
    """The binary64 value of every code 0..255 an MX outer product reads (read-only)."""
    from . import float8
    from .reference.fp8 import fix

    codes = np.arange(256)
    mf = fmt.minifloat
    if mf is None:  # MXINT8: the two's complement byte times 2^-6
        v = np.ldexp(codes.astype(np.uint8).view(np.int8).astype(np.float64), -fmt.fixed_point)
    elif ieee:
        v = float8.decode_table(fmt).copy()
    else:
        v = np.ldexp(fix(codes, mf, every_code=True).astype(np.float64), -mf.fix_shift)
        v[0x80] = -0.0
    v.flags.writeable = False
    return v


@functools.cache
def _exponents(fmt: NumberFormat, ieee: bool) -> np.ndarray:
    v = values(fmt, ieee)
    live = np.isfinite(v) & (v != 0)
    e = np.full(256, _NO_EXPONENT, np.int16)
    e[live] = np.frexp(v[live])[1] - 1
    e.flags.writeable = False
    return e


def _ieee(options) -> bool:
    return (options or {}).get("ace_fp8_specials") == "ieee_like"


def _scale_floor(codes: np.ndarray | None) -> int:
    """The smallest block-scale exponent in use (NaN scales skipped; 0 when there are none)."""
    if codes is None:
        return 0
    live = codes[codes != E8M0_NAN]
    return int(live.min()) - 127 if live.size else 0


@njit(cache=True, nogil=True)
def _pack_a_mx(w, nw, src, vals, exps, spow, sa, dst, k_step, scaled):
    """Worker ``w`` of ``nw``'s rows of src (nA, M, K) codes -> dst (nA, MT, KB, 16, k_step or
    more: a row's first k_step entries) values times their block scales (zero-filled beforehand;
    binary64, or binary32 for ``"mx32"`` and ``"mx32c"``, converted from the exact binary64
    product); sa (nA, M, blocks) E8M0 codes. Returns what the layouts' proofs read: the largest
    exponent of a non-zero finite value before scaling (-32768: none), and with ``scaled`` the
    smallest and largest after scaling by a scale that is not NaN (32767, -32768: none; without
    ``scaled``, as for none)."""
    nA, M, K = src.shape
    rhi, slo, shi = -32768, 32767, -32768
    for row in range(nA * M * w // nw, nA * M * (w + 1) // nw):
        a = row // M
        m = row % M
        for kb in range(-(-K // k_step)):
            out = dst[a, m // 16, kb, m % 16]
            for kin in range(min(k_step, K - kb * k_step)):
                k = kb * k_step + kin
                c = np.uint8(src[a, m, k])
                s = sa[a, m, k // 32]
                # a NaN scale's own NaN, whatever the code (a NaN code's NaN must not win)
                out[kin] = spow[s] if s == 0xFF else vals[c] * spow[s]
                e = np.int32(exps[c])
                rhi = max(rhi, e)
                if scaled and e != -32768 and s != 0xFF:
                    es = e + np.int32(s) - 127
                    slo = min(slo, es)
                    shi = max(shi, es)
    return rhi, slo, shi


def _body_rows() -> int:
    """Rows of the ``"mx32c"`` body on the compile target: the A bounds are per group of them.
    A panels are made for each call, in the process that runs the kernel, so the two agree."""
    from .kernels.targets import shape

    return shape("ace_mx32c").rows


@functools.cache
def _low_bits(fmt: NumberFormat, ieee: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per code: ``|value|`` (inf where not finite) and the exponent of the value's lowest set bit
    (``_NO_LOW`` for zero), the two things a step bound reads (read-only)."""
    v = values(fmt, ieee)
    mag = np.where(np.isfinite(v), np.abs(v), np.inf)
    return mag, _lowest_bit(v)


_NO_LOW = 1 << 20  # the lowest-bit exponent of zero: above every value's


def _lowest_bit(v: np.ndarray) -> np.ndarray:
    """The exponent of the lowest set bit of each binary64 value (``_NO_LOW`` for zero and for
    values that are not finite)."""
    live = np.isfinite(v) & (v != 0)
    f, e = np.frexp(np.where(live, v, 1.0))
    m = (np.abs(f) * 2.0**53).astype(np.int64)
    return np.where(live, e - 53 + np.frexp((m & -m).astype(np.float64))[1] - 1, _NO_LOW)


@njit(cache=True, inline="always")
def _up32(q):
    """A bound q >= 0 rounded up to 24 significant bits, so that binary32 holds it (inf stays)."""
    if q >= 2.0**24 and q < np.inf:
        ulp = math.ldexp(1.0, math.frexp(q)[1] - 24)
        q = math.ceil(q / ulp) * ulp
    return q


@njit(cache=True)
def _up32_all(bound):
    """:func:`_up32` of every element of a binary64 array, as binary32."""
    flat = bound.ravel()
    out = np.empty(flat.size, np.float32)
    for i in range(flat.size):
        out[i] = _up32(flat[i])
    return out.reshape(bound.shape)


@njit(cache=True, nogil=True)
def _a_step_bounds(w, nw, src, mag, low, dst, k_block, group):
    """Worker ``w`` of ``nw``'s panels of the A bounds of layout ``"mx32c"`` (the values are in
    place): src (nA, M, K) codes; dst ``(nA, MT, KB, 16, k_block + 16)``. Into every row's slot
    ``k_block + t`` goes the largest, over the rows of its group of ``group`` (the body's rows),
    of step t's ``sum_e |a_e|`` in units of the lowest set bit of any of its non-zero values (0
    where all are zero, inf where one is not finite), rounded up to binary32. A step's four
    values share one block scale, which the ratio does not see, so codes suffice. Every product
    of the step with B's four values of a column, and every partial sum of them, is a multiple
    of (this unit) x (B's unit of that column), and at most this bound times B's
    (:func:`_b_step_bounds`): exact in binary32 while that product of bounds is at most 2^24."""
    nA, M, K = src.shape
    MT, KB = dst.shape[1], dst.shape[2]
    for p in range(nA * MT * KB * w // nw, nA * MT * KB * (w + 1) // nw):
        ai, mt, kb = p // (MT * KB), (p // KB) % MT, p % KB
        panel = dst[ai, mt, kb]
        for g0 in range(0, 16, group):
            for t in range(k_block // 4):
                q = 0.0
                for r in range(g0, g0 + group):
                    m = mt * 16 + r
                    total, unit = 0.0, _NO_LOW
                    for e in range(4):
                        k = kb * k_block + 4 * t + e
                        if m < M and k < K:
                            c = np.uint8(src[ai, m, k])
                            total += mag[c]
                            unit = min(unit, low[c])
                    if total > 0:
                        q = max(q, math.ldexp(total, -unit))
                q = _up32(q)
                for r in range(g0, g0 + group):
                    panel[r, k_block + t] = q


def _b_step_bounds(out: np.ndarray) -> np.ndarray:
    """The B bounds of layout ``"mx32c"``: for blocks ``(..., k_block, 16)`` of scaled values
    ``[k][n]``, per block and step t the largest over the 16 columns of ``max_e |b_e|`` in units of
    the lowest set bit of any of the column's non-zero values of the step (0 where all are zero,
    inf where one is not finite), rounded up to binary32: ``(..., k_block // 4)``. With A's
    (:func:`_a_step_bounds`) it bounds a step's partial sums in units of their grid."""
    steps = out.reshape(out.shape[:-2] + (out.shape[-2] // 4, 4, out.shape[-1]))
    live = np.isfinite(steps) & (steps != 0)
    unit = _lowest_bit(steps).min(axis=-2)
    top = np.where(live, np.abs(steps), 0.0).max(axis=-2)
    with np.errstate(over="ignore"):
        bound = np.where(top == 0, 0.0, np.ldexp(top, np.where(top == 0, 0, -unit)))
    bound = np.where((~np.isfinite(steps)).any(axis=-2), np.inf, bound)
    return _up32_all(np.ascontiguousarray(bound.max(axis=-1)))


def build_a(instr: Instruction, lay: Layout, a: np.ndarray, k_blocks: int, scales=None, options=None):
    """A (nA, M, K) codes as the ACE MX panels ``(nA, M_tiles, k_blocks, 16, k_block)``, and the
    range the proof reads: for ``"mx64"`` (smallest scale exponent, largest unscaled value
    exponent), for ``"mx32"`` (smallest, largest exponent of the scaled values), for ``"mx32c"``
    both (four entries; its panels are ``k_block + 16`` wide, each row's values then one bound per
    outer product: :func:`_a_step_bounds`), None where A has no non-zero finite value.
    ``scales``: A's E8M0 codes ``(nA, M, blocks)`` or None (all 1.0).
    (``"f32keep"`` A panels are ``tilegemm.packing``'s float pass without DAZ.)"""
    nA, M, K = a.shape
    a = kernel_input(a)
    panels = (nA, -(-M // 16), k_blocks, 16, instr.k_block)
    fmt = instr.a
    if scales is None:
        scales = np.full((nA, M, -(-K // instr.scale_block)), E8M0_ONE, np.uint8)
    scales = kernel_input(scales)  # the caller's scales or all-ones alike: one compile per layout of dst
    if lay.step_bounds:  # each row: the values, then one bound per step
        panels = panels[:-1] + (instr.k_block + lay.step_bounds,)
    dst = np.zeros(panels, lay.dtype)
    shares = workers.run(
        _pack_a_mx,
        workers.count(a.size),
        a,
        values(fmt, _ieee(options)),
        _exponents(fmt, _ieee(options)),
        scale_values(),
        scales,
        dst,
        instr.k_block,
        lay.summary != "unscaled",
    )
    hi = max(s[0] for s in shares)
    lo_s, hi_s = min(s[1] for s in shares), max(s[2] for s in shares)
    if lay.step_bounds:
        bounds = (*_low_bits(fmt, _ieee(options)), dst, instr.k_block, _body_rows())
        workers.run(_a_step_bounds, workers.count(a.size), a, *bounds)
        if hi == _NO_EXPONENT:
            return dst, None
        return dst, (_scale_floor(scales), int(hi)) + ((int(lo_s), int(hi_s)) if lo_s <= hi_s else (0, 0))
    if lay.summary == "scaled":
        return dst, (None if lo_s > hi_s else (int(lo_s), int(hi_s)))
    return dst, (None if hi == _NO_EXPONENT else (_scale_floor(scales), int(hi)))


def _f32_range(codes: np.ndarray) -> tuple[int, int] | None:
    """(smallest, largest) unbiased exponent of the non-zero finite BF16 codes; a denormal counts as
    exponent -133 (so that no fast path takes it)."""
    e = (codes.astype(np.int32) >> 7) & 0xFF
    normal = (e > 0) & (e < 255)
    denormal = (e == 0) & ((codes & 0x7F) != 0)
    if not normal.any():
        return (_DENORMAL, _DENORMAL) if denormal.any() else None
    lo = _DENORMAL if denormal.any() else int(e[normal].min()) - 127
    return lo, int(e[normal].max()) - 127


def build_b(
    instr: Instruction, lay: Layout, daz: bool, el: np.ndarray, scales=None, options=None, summary: bool = True
):
    """B's packed codes ``(..., KB, NB, 16, 16, group)`` as an ACE family's kernel blocks
    ``(batch, NB, KB, 16, group, 16)`` and the proof's range (as :func:`build_a`). ``"mx64"``:
    ``[k][n]`` binary64 values times their block scales; ``"f32keep"``: ``[pair][element][n]``
    float32.
    ``"mx32"``: those values in binary32 (the range: of the scaled values, as for A).
    ``"mx32c"``: ``(batch, NB, KB, k_block + 1, 16, 1)`` binary32, each block's ``[k][n]`` rows
    then a row of one bound per outer product (:func:`_b_step_bounds`); the range: (smallest scale
    exponent, largest unscaled exponent, smallest and largest scaled exponent).
    ``scales``: B's E8M0 codes ``(..., blocks, N)`` or None. ``daz`` changes nothing: these
    instructions read their inputs without DAZ. ``summary`` is taken for the layout contract
    and changes nothing: the range comes out of the scaling pass here."""
    fmt, block = instr.b, instr.scale_block or 32
    flat = el.reshape((-1,) + el.shape[-5:])
    nB, KB, NB, R, n, g = flat.shape
    if not instr.scale_block:  # TOP2BF16PS: BF16 as float32, denormals kept
        out = (flat.swapaxes(1, 2).swapaxes(-1, -2).astype(np.uint32) << 16).view(np.float32)
        return np.ascontiguousarray(out), _f32_range(flat)
    ieee = _ieee(options)
    vals = values(fmt, ieee)[flat]  # (nB, KB, NB, 16, 16, 4)
    per_block = block // g  # VNNI rows per scale block (8)
    codes = np.full((nB, KB * R // per_block, NB * n), E8M0_ONE, np.uint8)
    if scales is not None:
        s = scales.reshape((nB,) + scales.shape[-2:])
        codes[:, : s.shape[1], : s.shape[2]] = s
    factor = scale_values()[codes].reshape(nB, KB, R // per_block, NB, n)
    wide = factor.transpose(0, 1, 3, 2, 4)[:, :, :, :, None, :, None]
    scaled = vals.reshape(nB, KB, NB, R // per_block, per_block, n, g) * wide
    # a NaN scale's own NaN, whatever the code (a NaN code's NaN must not win)
    scaled = np.where(np.isnan(wide), wide, scaled)
    out = scaled.reshape(nB, KB, NB, R, n, g).transpose(0, 2, 1, 3, 5, 4)  # [k = 4r + j][n]
    if lay.step_bounds:  # a block: k_block rows [k][n], then a row of one bound per step
        nB, NBk, KBk = out.shape[:3]
        flat_out = out.reshape(nB, NBk, KBk, -1, n)
        with np.errstate(over="ignore"):
            blocks = np.zeros((nB, NBk, KBk, flat_out.shape[3] + 1, n, 1), np.float32)
            blocks[:, :, :, :-1, :, 0] = flat_out
        bounds = _b_step_bounds(flat_out)
        blocks[:, :, :, -1, : bounds.shape[-1], 0] = bounds
        hi = int(_exponents(fmt, ieee)[flat].max()) if flat.size else _NO_EXPONENT
        if hi == _NO_EXPONENT:
            return blocks, None
        live = out[np.isfinite(out) & (out != 0)]
        e = np.frexp(live)[1] - 1
        scaled = (int(e.min()), int(e.max())) if live.size else (0, 0)
        return blocks, (_scale_floor(scales), hi) + scaled
    if lay.summary == "scaled":
        live = out[np.isfinite(out) & (out != 0)]
        e = np.frexp(live)[1] - 1
        with np.errstate(over="ignore"):  # out of binary32's range: the proof refuses the layout
            out32 = np.ascontiguousarray(out, np.float32)
        return out32, ((int(e.min()), int(e.max())) if live.size else None)
    exps = _exponents(fmt, ieee)[flat]
    hi = int(exps.max()) if exps.size else _NO_EXPONENT
    rng = None if hi == _NO_EXPONENT else (_scale_floor(scales), hi)
    return np.ascontiguousarray(out), rng
