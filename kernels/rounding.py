"""The element conversions of the 16-bit float formats, on bit patterns, for compiled code.

One definition of each rule, written without branches so that the loops packing A vectorize;
``tilegemm.convert`` builds its NumPy ufuncs from these same functions:

- ``f32_to_bf16(bits)``: binary32 -> BF16 code, round to nearest even (as ``ml_dtypes.bfloat16``);
  a NaN becomes the quiet NaN of its sign.
- ``bf16_to_f32_daz(code)``: BF16 code -> binary32 bits, exact; a denormal reads as a zero of its
  sign (DAZ, as TDPBF16PS and VDPBF16PS read their inputs).
- ``f32_to_fp16(bits)``: binary32 -> binary16 code, round to nearest even (as ``numpy.float16``):
  overflow to infinity, denormals rounded in place.
- ``fp16_to_f32(code)``: binary16 code -> binary32 bits, exact, denormals kept (they are normal in
  binary32).
- ``f32_round_fp16(bits)``: binary32 -> the binary32 bits of the binary16 value ``f32_to_fp16``
  gives, in one step (``fp16_to_f32(f32_to_fp16(bits))``, which the A-packing loops need).

Everything works on integers, except the multiplication that scales an FP16 denormal's
significand by 2^-24 (both factors and the product are binary32 normals, so it is exact and no
MXCSR flag, FTZ or DAZ, can act on it) and the addition of 0.5 in ``f32_round_fp16`` (its sum is
a binary32 normal; a denormal addend, whether DAZ reads it as zero or not, gives 0.5 exactly).
Integers become floats only from signed int32: an unsigned conversion does not vectorize.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_TWO_M24 = np.float32(2.0**-24)


@intrinsic
def f32_bits(typingctx, x):
    """The bit pattern of a float32 as uint32."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(x), codegen


@intrinsic
def f64_bits(typingctx, x):
    """The bit pattern of a float64 as uint64."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.uint64(x), codegen


@intrinsic
def bits_f64(typingctx, x):
    """The float64 whose bit pattern is the integer ``x`` (64 bits)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if x.bitwidth < 64:
            v = builder.zext(v, ir.IntType(64))
        return builder.bitcast(v, ir.DoubleType())

    return types.float64(x), codegen


@intrinsic
def bits_f32(typingctx, x):
    """The float32 whose bit pattern is the low 32 bits of the integer ``x``."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if x.bitwidth > 32:
            v = builder.trunc(v, ir.IntType(32))
        elif x.bitwidth < 32:
            v = builder.zext(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())

    return types.float32(x), codegen


@njit(cache=True)
def f32_to_bf16(bits):
    """binary32 bits -> BF16 code, RNE; NaN stays a (quiet) NaN of the same sign."""
    b = np.uint32(bits)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = ((b >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7FC0)
    rounded = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return np.uint16(quiet if nan else rounded)


@njit(cache=True)
def f32_to_tf32(bits):
    """binary32 bits -> the binary32 bits of the TF32 value AMX-TF32 reads: a NaN gets its quiet
    bit (a signalling NaN is quieted, so no NaN becomes an infinity), then the low 13 significand
    bits are cleared (the magnitude truncated; denormals kept). Branch-free, so loops over it
    vectorize."""
    b = np.uint32(bits)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return (b | (np.uint32(0x00400000) if nan else np.uint32(0))) & np.uint32(0xFFFFE000)


@njit(cache=True)
def bf16_to_f32_daz(code):
    """BF16 code -> binary32 bits, exact; a denormal becomes a zero of its sign."""
    b = np.uint32(np.uint32(code) << np.uint32(16))
    return np.uint32((b & np.uint32(0x80000000)) if (b & np.uint32(0x7F800000)) == 0 else b)


@njit(cache=True)
def fp16_to_f32(code):
    """binary16 code -> binary32 bits, exact, denormals kept."""
    h = np.uint32(code)
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    e = (h >> np.uint32(10)) & np.uint32(0x1F)
    man = h & np.uint32(0x3FF)
    normal = ((h & np.uint32(0x7FFF)) << np.uint32(13)) + np.uint32(0x38000000)
    special = np.uint32(0x7F800000) | (man << np.uint32(13))
    small = f32_bits(np.float32(np.int32(man)) * _TWO_M24)  # man * 2^-24, exact (0 for man = 0)
    return np.uint32(sign | (special if e == np.uint32(0x1F) else (small if e == np.uint32(0) else normal)))


@njit(cache=True)
def f32_round_fp16(bits):
    """binary32 bits -> binary32 bits of the nearest binary16 value (RNE, overflow to infinity,
    binary16 denormals kept, a NaN the quiet NaN of its sign): ``fp16_to_f32(f32_to_fp16(bits))``
    without the trip through the 16-bit code, so that the loops calling it vectorize."""
    b = np.uint32(bits)
    sign = b & np.uint32(0x80000000)
    ax = b & np.uint32(0x7FFFFFFF)
    # a binary16 normal (|x| >= 2^-14): round the 23-bit fraction to 10 bits in place; a carry
    # into the exponent is the right result (up to 2^16, which becomes infinity below)
    normal = (ax + np.uint32(0x0FFF) + ((ax >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
    # below 2^-14 the binary16 grid is 2^-24, the spacing of binary32 in [0.5, 1): adding 0.5
    # rounds |x| to it (ties to even); q counts units of 2^-24, 0 to 1024. Clearing bit 30 keeps
    # every |x| below 2^-14 and makes every other input finite (below 2), so that no NaN meets
    # the addition and raises a flag (a select would not do: LLVM may add before selecting).
    q = f32_bits(bits_f32(ax & np.uint32(0x3FFFFFFF)) + np.float32(0.5)) - np.uint32(0x3F000000)
    small = f32_bits(np.float32(np.int32(q)) * _TWO_M24)
    out = normal if ax >= np.uint32(0x38800000) else small
    out = np.uint32(0x7F800000) if ax >= np.uint32(0x477FF000) else out  # 65520 and up: infinity
    out = np.uint32(0x7FC00000) if ax > np.uint32(0x7F800000) else out  # NaN: the quiet NaN
    return np.uint32(sign | out)


@njit(cache=True)
def f32_to_fp16(bits):
    """binary32 bits -> binary16 code, RNE, overflow to infinity, denormals rounded in place."""
    b = np.uint32(bits)
    sign = (b >> np.uint32(16)) & np.uint32(0x8000)
    ax = b & np.uint32(0x7FFFFFFF)
    # a binary16 normal: rebias the exponent, round 13 bits away (a carry may reach infinity)
    normal = (ax - np.uint32(0x38000000) + np.uint32(0x0FFF) + ((ax >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)
    # a binary16 denormal: value = mant * 2^(e - 150) = mant >> (126 - e) units of 2^-24
    e = np.int32(ax >> np.uint32(23))
    shift = np.uint32(min(max(126 - e, 1), 31))
    mant = (ax & np.uint32(0x7FFFFF)) | np.uint32(0x800000)
    r = mant >> shift
    rem = mant & ((np.uint32(1) << shift) - np.uint32(1))
    half = np.uint32(1) << (shift - np.uint32(1))
    up = (rem > half) or (rem == half and (r & np.uint32(1)) == np.uint32(1))
    small = r + np.uint32(1) if up else r
    out = normal if ax >= np.uint32(0x38800000) else (small if ax > np.uint32(0x33000000) else np.uint32(0))
    out = np.uint32(0x7C00) if ax >= np.uint32(0x477FF000) else out  # 65520 and up (ties to even): infinity
    out = np.uint32(0x7E00) if ax > np.uint32(0x7F800000) else out  # NaN: the quiet NaN
    return np.uint16(sign | out)
