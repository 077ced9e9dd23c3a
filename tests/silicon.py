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
import hashlib
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


# -- the fleet recordings: PyTorch's bf16 on the other x86 server classes ----------------------

FLEET = pathlib.Path(__file__).resolve().parent / "data" / "torch-bf16-fleet.json"


@functools.cache
def fleet() -> dict:
    """tests/data/torch-bf16-fleet.json: per server class (``avx512_core_bf16``, ``avx512_core``,
    ``avx2``) the setting it was recorded under, its cases (the recording's ``meta``) and the
    SHA-256 of every case's output bits; ``more`` holds further cases recorded the same way, and
    ``block_order`` products of :func:`block_order_operands` (both recorded with torch 2.13.0 on
    a 2-core Zen 4 of the same kind); ``edges`` the :func:`edge_cases` (``tests/data/record_edges.py``)."""
    with open(FLEET) as f:
        return json.load(f)


def fleet_cases(cls: str) -> list[dict]:
    """Every recorded case of class ``cls``, the ``more`` ones included."""
    c = fleet()["classes"][cls]
    return c["cases"] + c.get("more", {}).get("cases", [])


def fleet_digest(cls: str, key: str) -> str:
    c = fleet()["classes"][cls]
    for part in (c, c.get("more", {}), c.get("block_order", {}), c.get("edges", {})):
        if key in part.get("sha256", {}):
            return part["sha256"][key]
    raise KeyError(f"{cls} has no recorded case {key!r}")


def digest(bits) -> str:
    """SHA-256 of uint16 bf16 bits, little-endian, C order: how the fleet outputs are stored."""
    return hashlib.sha256(np.ascontiguousarray(np.asarray(bits).view(np.uint16), "<u2").tobytes()).hexdigest()


def fleet_inputs(case: dict):
    """(A, B, C-or-None) bit patterns of a fleet case, in the shapes torch received them
    (``shapes``: B is (N, K) for the ops that take a weight, C the bias or addmm's input)."""
    sh = case["shapes"]
    A = operand(tuple(sh["a"]), *case["a"])
    B = operand(tuple(sh["b"]), *case["b"])
    C = operand(tuple(sh["c"]), *case["c"]) if case["c"] else None
    return A, B, C


def block_order_operands(K: int, N: int, blk: int):
    """bf16 bits of a 1 x K A and a K x N B whose product shows the order in which K blocks of
    ``blk`` are added: A is 1 at the first k of every block and 0 elsewhere, so each block's
    chain result is B's value there; per column, two blocks hold +-2^20..2^27 and the others
    small values, which that big value absorbs or not depending on the order of the additions."""
    nb = K // blk
    h = _splitmix64(np.arange(nb * N, dtype=np.uint64)).reshape(nb, N)
    mant = 1 + 2 * (h & _U(3)).astype(np.int64)
    expo = -8 + ((h >> _U(2)) % _U(8)).astype(np.int64)
    sign = np.where((h >> _U(5)) & _U(1), -1.0, 1.0)
    v = sign * np.ldexp(mant.astype(np.float64), expo)
    cols = np.arange(N)
    i = cols % nb
    j = (cols * 7 + 3) % nb
    j = np.where(j == i, (i + 1) % nb, j)
    big = np.ldexp(1.0, 20 + cols % 8)
    v[i, cols] = big
    v[j, cols] = -big
    a = np.zeros((1, K), np.float32)
    a[0, ::blk] = 1
    b = np.zeros((K, N), np.float32)
    b[::blk] = v
    # every value is a bf16 value: its bits are the float32's top half
    return (a.view(np.uint32) >> np.uint32(16)).astype(np.uint16), (b.view(np.uint32) >> np.uint32(16)).astype(
        np.uint16
    )


#: The kinds of :func:`edge_operand`, each aimed at one way a model can part from the hardware.
EDGE_KINDS = ("tiny", "denormal", "huge", "special", "zeros")


def edge_operand(shape, salt: int, kind: str):
    """uint16 bf16 bits, the same on every machine (splitmix64 of the index, as :func:`operand`),
    with values that test the edges of binary32 arithmetic:

    - ``"tiny"``: random signs, magnitudes 2^-80 .. 2^-40: products from underflowed to normal,
      sums that reach the denormal range;
    - ``"denormal"``: a third bf16 denormals, the rest 2^-10 .. 2^40;
    - ``"huge"``: magnitudes 2^100 .. 2^127: products overflow to infinities of both signs;
    - ``"special"``: ``"normal"`` values with one in eight +-Inf, a NaN (quiet or signalling,
      either sign, random payload) or a zero of either sign;
    - ``"zeros"``: zeros of both signs and +-2^-100, whose products round to zeros of a sign.
    """
    if kind not in EDGE_KINDS:
        raise ValueError(f"unknown edge kind {kind!r}; the kinds are {', '.join(EDGE_KINDS)}")
    n = int(np.prod(shape))
    h = _splitmix64(np.arange(n, dtype=np.uint64) + np.uint64(salt) * np.uint64(0x100000000))
    sign = (h >> _U(63)).astype(np.uint16) << np.uint16(15)
    mant = ((h >> _U(8)) & _U(0x7F)).astype(np.uint16)
    r = ((h >> _U(16)) & _U(0xFFFF)).astype(np.int64)
    sel = ((h >> _U(32)) & _U(0xFF)).astype(np.int64)

    def code(exp):
        return sign | (np.asarray(exp, np.int64).astype(np.uint16) << np.uint16(7)) | mant

    if kind == "tiny":
        bits = code(127 - 80 + r % 41)
    elif kind == "denormal":
        bits = np.where(sel % 3 == 0, sign | np.maximum(mant, 1), code(127 - 10 + r % 51))
    elif kind == "huge":
        bits = code(127 + 100 + r % 28)
    elif kind == "special":
        bits = code(127 - 7 + r % 11)
        pick = sel % 64
        nan = sign | np.uint16(0x7F80) | np.maximum(mant, 1)  # bit 6 of mant: quiet or signalling
        bits = np.where(pick < 2, sign | np.uint16(0x7F80), bits)
        bits = np.where((pick >= 2) & (pick < 4), nan, bits)
        bits = np.where((pick >= 4) & (pick < 8), sign, bits)
    else:
        bits = np.where(sel % 2 == 0, sign, sign | np.uint16((127 - 100) << 7))
    return bits.astype(np.uint16).reshape(shape)


#: The edge cases recorded in tests/data/torch-bf16-fleet.json (``edges`` of each class): the ops
#: of the fleet recording, on small shapes whose K reaches every tail of every kernel.
EDGE_SHAPES = ((3, 1, 5), (3, 5, 17), (2, 17, 16), (2, 63, 5), (2, 64, 3), (3, 80, 16), (1, 130, 33), (2, 200, 16))
EDGE_OPS = ("matmul", "matmul_wt", "linear_bias", "addmm_beta", "bmm", "attn_kt")


def edge_cases() -> list[dict]:
    """Every edge case, in the fleet recording's case format (``fleet_inputs`` builds it)."""
    out = []
    salt = 3_000_000
    for kind in EDGE_KINDS:
        for M, K, N in EDGE_SHAPES:
            for op in EDGE_OPS:
                a = [M, K]
                b = [N, K] if op in ("matmul_wt", "linear_bias") else [K, N]
                c = None
                if op == "bmm":
                    a, b = [2, M, K], [2, K, N]
                elif op == "attn_kt":
                    a, b = [2, 4, M, K], [2, 4, N, K]
                elif op == "linear_bias":
                    c = [N]
                elif op == "addmm_beta":
                    c = [M, N]
                shapes = {"a": a, "b": b} | ({"c": c} if c else {})
                key = f"e{len(out):03d}"
                case = {"key": key, "op": op, "M": M, "K": K, "N": N, "threads": 1, "shapes": shapes}
                case |= {"a": [salt, kind], "b": [salt + 1, kind], "c": [salt + 2, kind] if c else None}
                out.append(case)
                salt += 3
    return out


def edge_inputs(case: dict):
    """(A, B, C-or-None) bit patterns of an edge case (:func:`edge_cases`)."""
    sh = case["shapes"]
    A = edge_operand(tuple(sh["a"]), *case["a"])
    B = edge_operand(tuple(sh["b"]), *case["b"])
    C = edge_operand(tuple(sh["c"]), *case["c"]) if case["c"] else None
    return A, B, C
