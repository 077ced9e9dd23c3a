"""The other CPUs' paths, one operation at a time (``docs/isa-profiles.md``).

Slow on purpose, one accumulator per C element, K increasing, each step as the instruction
sequence performs it:

- :func:`vpdpbusd_gemm` (``avx512_vnni``, ``avx_vnni``): per quad, ``acc = wrap32(acc + four
  products)``.
- :func:`vpdpbusds_gemm` (``avx512_vnni_sat``, ``avx_vnni_sat``): per quad, ``acc = sat32(...)``.
- :func:`vpmaddubsw_gemm` (``avx2``): per pair from k = 0, ``w = sat16(two products)`` (VPMADDUBSW),
  then ``acc = wrap32(acc + w)`` (VPMADDWD with ones adds a column's words exactly, VPADDD wraps).
- :func:`vfmadd231ps_gemm` (``fp32_fma``): per K element, ``acc = fma32(a, b, acc)``, IEEE
  binary32, denormals kept.
- :func:`vfmadd231ph_gemm` (``avx512_fp16``): per K element, ``acc = fma16(a, b, acc)`` in binary16.

The int8 functions take A as u8 (``"u8s8"``) or as s8 (``"s8s8"``): signed activations go
through oneDNN's +128 shift, ``a' = a + 128`` (u8), and the accumulator starts at
``wrap32(C + comp[n])`` with ``comp[n] = wrap32(-128 * sum_k B[k][n])``.

Each function takes ``trace=`` (:class:`tilegemm.reference.trace.Trace`) and then records output
[0, 0]'s operations; :func:`tilegemm.explain` reads them.
"""

from __future__ import annotations

import numpy as np

from ..kernels import exact, rounding
from ..kernels import isa as _k
from ..kernels._cache import lazy_vectorize
from .amx import pad_k, wrap32

# The kernel modules the ufuncs inline: a change to one recompiles the cached code.
_DEPENDS = (_k, exact, rounding)

__all__ = [
    "vpdpbusd_gemm",
    "vpdpbusds_gemm",
    "vpmaddubsw_gemm",
    "vfmadd231ps_gemm",
    "vfmadd231ph_gemm",
    "fma32_ieee",
    "fma16",
    "sat",
]


@lazy_vectorize(["uint32(uint32, uint32, uint32)"], _DEPENDS)
def _fma32_bits(a, b, c):
    return _k.f32_to_bits(_k.fma32_ieee(_k.f32_from_bits(a), _k.f32_from_bits(b), _k.f32_from_bits(c)))


@lazy_vectorize(["uint16(uint16, uint16, uint16)"], _DEPENDS)
def _fma16_bits(a, b, c):
    return _k.f16_to_bits(_k.fma16(_k.f16_from_bits(a), _k.f16_from_bits(b), _k.f16_from_bits(c)))


def fma32_ieee(a, b, c) -> np.ndarray:
    """One IEEE binary32 fused multiply-add ``a * b + c``, RNE, denormals kept (no DAZ/FTZ),
    element-wise over float32 arrays. It works on bit patterns: the caller's MXCSR cannot act."""
    bits = [np.asarray(x, np.float32).view(np.uint32) for x in (a, b, c)]
    with np.errstate(all="ignore"):  # NaN and infinity are results here, not accidents
        return np.asarray(_fma32_bits(*bits)).view(np.float32)


def fma16(a, b, c) -> np.ndarray:
    """One IEEE binary16 fused multiply-add ``a * b + c``, RNE, subnormals kept, |x| >= 65520 to
    infinity, element-wise over float16 arrays (one rounding, never through binary32)."""
    bits = [np.asarray(x, np.float16).view(np.uint16) for x in (a, b, c)]
    with np.errstate(all="ignore"):
        return np.asarray(_fma16_bits(*bits)).view(np.float16)


def sat(x: np.ndarray, bits: int) -> np.ndarray:
    """Signed saturation of integers to ``bits`` bits (int64 out)."""
    return np.clip(np.asarray(x, np.int64), -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _int_start(instr, A, B, C, trace):
    """The u8 and s8 operands the instruction multiplies (int64, A shifted where signed), and the
    accumulator it starts from: C, or ``wrap32(C + comp)`` for signed activations."""
    a = A.astype(np.int64)
    b = B.astype(np.int64)
    acc = np.asarray(C, np.int32)
    if trace is not None:
        trace.start(acc, "i32")
    if instr.a.storage.kind == "i":  # signed activations: oneDNN's +128 shift (a XOR 0x80)
        a = a + 128
        K = b.shape[0]
        minus128 = np.full((1, 1), -128, np.int64)
        comp = wrap32(-128 * b.sum(axis=0))
        new = wrap32(acc + comp[None, :].astype(np.int64))
        if trace is not None:
            trace.int_op(
                "+128 compensation", (), "C", [minus128] * K, [b[None, k, :] for k in range(K)], acc, new, "wrap32"
            )
            trace.state(0, new)
        acc = new
    return a, b, acc


def _quads(instr, A, B, C, trace, rule, mnemonic):
    a, b, acc = _int_start(instr, A, B, C, trace)
    K = a.shape[1]
    kg = -(-K // 4) * 4
    a, b = pad_k(a, 1, kg), pad_k(b, 0, kg)
    for g in range(kg // 4):
        ks = range(4 * g, 4 * g + 4)
        dot = sum(a[:, k, None] * b[None, k, :] for k in ks)
        new = wrap32(acc + dot) if rule == "wrap32" else sat(acc + dot, 32).astype(np.int32)
        if trace is not None:
            trace.int_op(mnemonic, ks, "C", [a[:, k, None] for k in ks], [b[None, k, :] for k in ks], acc, new, rule)
            trace.state(min(4 * g + 4, K), new)
        acc = new
    return np.asarray(acc, np.int32)


def vpdpbusd_gemm(instr, A, B, C, trace=None) -> np.ndarray:
    """``C + A @ B`` through VPDPBUSD: per quad of K, ``acc = wrap32(acc + dot of four)``."""
    return _quads(instr, A, B, C, trace, "wrap32", "VPDPBUSD")


def vpdpbusds_gemm(instr, A, B, C, trace=None) -> np.ndarray:
    """``C + A @ B`` through VPDPBUSDS: per quad of K, ``acc = sat32(acc + dot of four)``."""
    return _quads(instr, A, B, C, trace, "sat32", "VPDPBUSDS")


def vpmaddubsw_gemm(instr, A, B, C, trace=None) -> np.ndarray:
    """``C + A @ B`` through VPMADDUBSW + VPMADDWD + VPADDD: per pair of K from k = 0,
    ``w = sat16(two products)``, then ``acc = wrap32(acc + w)``."""
    a, b, acc = _int_start(instr, A, B, C, trace)
    K = a.shape[1]
    kg = K + K % 2
    a, b = pad_k(a, 1, kg), pad_k(b, 0, kg)
    one = np.ones((1, 1), np.int64)
    for j in range(kg // 2):
        ks = (2 * j, 2 * j + 1)
        w = sat(a[:, ks[0], None] * b[None, ks[0], :] + a[:, ks[1], None] * b[None, ks[1], :], 16)  # VPMADDUBSW
        new = wrap32(acc + w)  # VPMADDWD (x 1) and VPADDD
        if trace is not None:
            zero = np.zeros((1, 1), np.int64)
            trace.int_op(
                "VPMADDUBSW", ks, "pair", [a[:, k, None] for k in ks], [b[None, k, :] for k in ks], zero, w, "sat16"
            )
            trace.int_op("VPMADDWD+VPADDD", ks, "C", [one], [w], acc, new, "wrap32")
            trace.state(min(2 * j + 2, K), new)
        acc = new
    return np.asarray(acc, np.int32)


def vfmadd231ps_gemm(instr, A, B, C, trace=None) -> np.ndarray:
    """``C + A @ B`` through VFMADD231PS: 16-bit floats widened exactly (denormals kept), then
    per K element ``acc = fma32(a, b, acc)``, IEEE binary32 without DAZ/FTZ."""
    a = instr.a.decode(A)
    b = instr.b.decode(B)
    acc = np.asarray(C, np.float32)
    if trace is not None:
        trace.start(acc, "f32")
    for k in range(a.shape[1]):
        new = fma32_ieee(a[:, k, None], b[None, k, :], acc)
        if trace is not None:
            ops = (a[:, k, None], b[None, k, :], acc)
            trace.float_op("VFMADD231PS", (k,), "C", ops, ops, new, "fma32")
            trace.state(k + 1, new)
        acc = new
    return acc


def vfmadd231ph_gemm(instr, A, B, C, trace=None) -> np.ndarray:
    """``C + A @ B`` through VFMADD231PH: per K element ``acc = fma16(a, b, acc)``, an FP16
    accumulator rounded (RNE, subnormals kept) after every step."""
    a = np.ascontiguousarray(A).view(np.float16)
    b = np.ascontiguousarray(B).view(np.float16)
    acc = np.asarray(C, np.float16)
    if trace is not None:
        trace.start(acc, "f16")
    for k in range(a.shape[1]):
        new = fma16(a[:, k, None], b[None, k, :], acc)
        if trace is not None:
            ops = (a[:, k, None], b[None, k, :], acc)
            trace.float_op("VFMADD231PH", (k,), "C", ops, ops, new, "fma16")
            trace.state(k + 1, new)
        acc = new
    return acc
