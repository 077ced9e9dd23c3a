"""Recorded silicon results: PyTorch 2.14.1's bf16 on an AMX host (tests/data/torch-bf16-amx.npz).

The file holds, per case, the bf16 bits torch returned on a 2-core KVM guest of an AMX Xeon
(oneDNN v3.12.0, every call ``brg_matmul:avx10_1_512_amx``); its ``meta`` lists the cases. Inputs
are not stored: :func:`operand` rebuilds them bit for bit on any machine (splitmix64 over the
element index, no random-number library), exactly as the recording's own generator did.

Ops, with torch's calls (``torch.set_num_threads(threads)`` first):

- ``matmul``: ``torch.matmul(A, B)``, A = operand((M, K), *a), B = operand((K, N), *b);
- ``linear_bias``: ``F.linear(A, W, bias)``, W = operand((N, K), *b), bias = operand((N,), *bias);
- ``bmm``: ``torch.bmm(A, B)``, A = operand((2, M, K), *a), B = operand((2, K, N), *b).
"""

from __future__ import annotations

import functools
import json
import pathlib

import numpy as np
from numba import njit, prange

NPZ = pathlib.Path(__file__).resolve().parent / "data" / "torch-bf16-amx.npz"

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x):
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def operand_numpy(shape, salt, kind="normal"):
    """uint16 BF16 bit patterns, the same on every machine: the recording's generator, verbatim.

    kind "normal": random sign, exponent 2^-7 .. 2^3, 7 random mantissa bits; "wide": exponent
    2^-40 .. 2^40; "relu": like "normal", about half the values +0.
    """
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        h = _splitmix64(np.arange(n, dtype=np.uint64) + np.uint64(salt) * np.uint64(0x100000000))
    sign = (h >> np.uint64(63)).astype(np.uint16)
    mant = ((h >> np.uint64(8)) & np.uint64(0x7F)).astype(np.uint16)
    r = ((h >> np.uint64(16)) & np.uint64(0xFFFF)).astype(np.int64)
    if kind == "wide":
        exp = 127 - 40 + (r % 81)
    else:
        exp = 127 - 7 + (r % 11)
    bits = (sign << 15) | (exp.astype(np.uint16) << 7) | mant
    if kind == "relu":
        bits[(h & np.uint64(1)) == 1] = 0
    return bits.reshape(shape)


_KINDS = {"normal": 0, "wide": 1, "relu": 2}
_U = np.uint64


@njit(cache=True, parallel=True)
def _fill(out, salt, kind):
    base = _U(salt) * _U(0x100000000)
    for i in prange(out.size):
        z = _U(i) + base + _U(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U(30))) * _U(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U(27))) * _U(0x94D049BB133111EB)
        h = z ^ (z >> _U(31))
        sign = h >> _U(63)
        mant = (h >> _U(8)) & _U(0x7F)
        r = (h >> _U(16)) & _U(0xFFFF)
        exp = _U(127 - 40) + r % _U(81) if kind == 1 else _U(127 - 7) + r % _U(11)
        bits = (sign << _U(15)) | (exp << _U(7)) | mant
        if kind == 2 and (h & _U(1)) == _U(1):
            bits = _U(0)
        out[i] = np.uint16(bits)


def operand(shape, salt, kind="normal"):
    """:func:`operand_numpy`, compiled (the recorded cases need 1.3 billion elements)."""
    out = np.empty(int(np.prod(shape)), np.uint16)
    _fill(out, salt, _KINDS[kind])
    return out.reshape(shape)


@functools.cache
def recording():
    """(meta, {key: recorded uint16 bits})."""
    with np.load(NPZ) as d:
        meta = json.loads(bytes(d["meta"]))
        return meta, {k: d[k] for k in d.files if k != "meta"}


def cases() -> list[dict]:
    return recording()[0]["cases"]


def inputs(case: dict):
    """(A, B-or-W, bias-or-None) bit patterns of a recorded case, shaped as torch received them."""
    M, K, N = case["M"], case["K"], case["N"]
    if case["op"] == "bmm":
        A = operand((2, M, K), *case["a"])
        B = operand((2, K, N), *case["b"])
    else:
        A = operand((M, K), *case["a"])
        B = operand((N, K), *case["b"]) if case["op"] == "linear_bias" else operand((K, N), *case["b"])
    bias = operand((N,), *case["bias"]) if case["bias"] else None
    return A, B, bias
