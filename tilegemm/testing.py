"""Helpers for users' test suites: check a result's bits against a profile, and find the outputs
the AVX2 int8 path would saturate.

- :func:`assert_matches`: ``AssertionError`` unless ``result`` has exactly the bits of
  ``matmul(a, b, dtype, isa=isa)``; the message names the first differing element, which
  profile's bits the result has there (if any), and :func:`tilegemm.explain`'s verdict.
- :func:`saturation_risk`: for int8 operands, which outputs of the ``avx2`` path have a VPMADDUBSW
  pair that leaves int16, in one compiled pass over the pairs (no GEMM is run).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from . import instructions, workers
from .api import matmul
from .compare import bitdiff
from .formats import exact_start

__all__ = ["assert_matches", "saturation_risk", "SaturationRisk"]


def assert_matches(result, a, b, dtype=None, isa=None, *, c=None, **switches) -> None:
    """Assert that ``result`` has the bits of ``tilegemm.matmul(a, b, dtype, isa=isa)``.

    Parameters
    ----------
    result : array_like
        What the code under test returned (the profile's result dtype: int32, float32, or
        float16 for ``avx512_fp16``).
    a, b : array_like
        The operands it multiplied (2-D, or stacks as :func:`tilegemm.matmul` takes them).
    dtype, isa : str, optional
        The dtype and profile it should match (defaults as :func:`tilegemm.matmul`'s).
    c : array_like, optional
        The C it accumulated into (``out=`` with ``accumulate=True``).
    **switches
        The instruction's switches.

    Raises
    ------
    AssertionError
        With the first differing element, both values and their bits, the profiles whose bits
        the result has there, and the verdict of :func:`tilegemm.explain` on that element.

    Examples
    --------
    >>> import numpy as np, tilegemm
    >>> from tilegemm.testing import assert_matches
    >>> a, b = np.uint8([[255, 255]]), np.int8([[127], [127]])
    >>> assert_matches(np.int32([[64770]]), a, b, "u8s8", isa="avx512_vnni")
    >>> try:
    ...     assert_matches(np.int32([[32767]]), a, b, "u8s8", isa="avx512_vnni")
    ... except AssertionError as e:
    ...     print(str(e).splitlines()[0])
    result differs from isa='avx512_vnni' dtype='u8s8' in 1 of 1 elements (100.00%)
    """
    isa = instructions.DEFAULT_ISA if isa is None else isa
    prof, name, instr = instructions.resolve(isa, "bf16" if dtype is None else dtype)
    want = _run(a, b, name, prof.name, c, instr.acc, switches)
    result = np.asarray(result)
    if result.shape != want.shape:
        raise AssertionError(
            f"result has shape {result.shape}, but isa={prof.name!r} dtype={name!r} gives {want.shape}"
        )
    if result.dtype != want.dtype:
        raise AssertionError(
            f"result has dtype {result.dtype}, but isa={prof.name!r} dtype={name!r} returns {want.dtype}"
        )
    d = bitdiff(result, want)
    if d.identical:
        return
    i = d.first
    assert i is not None  # d differs, so it has a first differing element
    lines = [
        f"result differs from isa={prof.name!r} dtype={name!r} in {d.count} of {d.total} elements ({d.share:.2%})",
        f"first at {list(i)}: got {_show(result[i])}, expected {_show(want[i])}",
    ]
    others = []
    for p in instructions.PROFILES.values():
        if p.same_as is not None or p.name == prof.name or name not in p.names():
            continue
        other = _run(a, b, name, p.name, c, p.instruction(name).acc, switches)
        if other.shape != result.shape:
            continue
        same_here = _same_bits(np.asarray(other[i]), result[i])
        everywhere = other.dtype == result.dtype and bitdiff(other, result).identical
        if same_here:
            others.append((p.name, everywhere))
    if others:
        lines.append(
            "the result has the bits of "
            + ", ".join(f"isa={n!r}" + (" (every element)" if every else " (at this element)") for n, every in others)
        )
        verdict = _verdict(a, b, name, prof.name, others[0][0], i, c, switches)
        if verdict:
            lines.append(f"explain(isa=({prof.name!r}, {others[0][0]!r})): {verdict}")
    else:
        lines.append("no profile gives these bits at this element")
    raise AssertionError("\n".join(lines))


def _run(a, b, dtype, isa, c, acc, switches):
    if c is None:
        return matmul(a, b, dtype, isa=isa, **switches)
    out = exact_start(c, acc)  # matmul checks its shape
    return matmul(a, b, dtype, isa=isa, out=out, accumulate=True, **switches)


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype != y.dtype:
        if x.dtype.kind != "f" or y.dtype.kind != "f":
            return False
        x, y = x.astype(np.float32), y.astype(np.float32)
    return bitdiff(x.reshape(1), y.reshape(1)).identical


def _show(v) -> str:
    v = np.asarray(v)
    if v.dtype.kind == "f":
        bits = v.view(np.uint16 if v.dtype.itemsize == 2 else np.uint32)
        return f"{float(v)!r} (0x{int(bits):0{2 * v.dtype.itemsize}x})"
    return f"{int(v)}"


def _verdict(a, b, dtype, x, y, index, c, switches):
    """explain's verdict for one element (batched operands: the matrix it lies in)."""
    from .explain import explain

    a, b = np.asarray(a), np.asarray(b)
    if a.ndim == 1:
        a = a[None, :]
    if b.ndim == 1:
        b = b[:, None]
    *batch, m, n = index if len(index) >= 2 else (*index, 0)
    if a.ndim > 2 or b.ndim > 2:
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = np.broadcast_to(a, tuple(shape) + a.shape[-2:])[tuple(batch)]
        b = np.broadcast_to(b, tuple(shape) + b.shape[-2:])[tuple(batch)]
        if c is not None:
            c = np.asarray(c)[tuple(batch)]
    if c is not None:
        c = np.asarray(c).reshape(a.shape[0], b.shape[1])
    try:
        e = explain(a, b, dtype, isa=(x, y), index=(int(m), int(n)), c=c, reproduce=False, **switches)
    except ValueError:  # e.g. a C that is not exact in both result formats
        return None
    return e.verdict


# -- saturation risk on the AVX2 int8 path ---------------------------------------------------


@dataclass(frozen=True)
class SaturationRisk:
    """Outputs of the ``avx2`` path whose VPMADDUBSW pairs leave int16.

    Attributes
    ----------
    pairs : numpy.ndarray
        (M, N) int32: saturating pairs per output.
    first_k : numpy.ndarray
        (M, N) int32: the K index of each output's first saturating pair (-1: none).
    """

    pairs: np.ndarray
    first_k: np.ndarray

    @property
    def mask(self) -> np.ndarray:
        """Outputs with at least one saturating pair: where ``avx2`` can differ from the exact sum."""
        return self.pairs > 0

    @property
    def count(self) -> int:
        return int(self.mask.sum())

    @property
    def share(self) -> float:
        return self.count / self.pairs.size if self.pairs.size else 0.0

    def __str__(self) -> str:
        if not self.count:
            return f"no VPMADDUBSW pair saturates ({self.pairs.size} outputs)"
        m, n = (int(i) for i in np.argwhere(self.mask)[0])
        return (
            f"{self.count} of {self.pairs.size} outputs ({self.share:.2%}) have a saturating VPMADDUBSW pair, "
            f"{int(self.pairs.sum())} pairs in all; first output C[{m}, {n}] at K index {int(self.first_k[m, n])}"
        )


@njit(cache=True, nogil=True)
def _pair_scan(w, nw, a, b, pairs, first_k):
    """a: (M, K) int32 u8 values (K even), b: (K, N) int32 s8 values; ``first_k`` starts at K.
    Worker ``w`` of ``nw`` scans its share of the rows."""
    M, K = a.shape
    N = b.shape[1]
    for m in range(M * w // nw, M * (w + 1) // nw):
        cnt = pairs[m]
        first = first_k[m]
        for j in range(K // 2):
            a0 = a[m, 2 * j]
            a1 = a[m, 2 * j + 1]
            if (a0 + a1) * 128 <= 32768:  # |b| <= 128: this pair cannot leave int16 for any weights
                continue
            b0 = b[2 * j]
            b1 = b[2 * j + 1]
            for n in range(N):  # branch-free, so that it vectorizes
                s = a0 * b0[n] + a1 * b1[n]
                hit = np.int32((s > 32767) | (s < -32768))
                cnt[n] += hit
                first[n] = min(first[n], 2 * j if hit else K)


def saturation_risk(a, b, dtype="u8s8") -> SaturationRisk:
    """Which outputs of ``a @ b`` on the ``avx2`` path have a VPMADDUBSW pair that saturates.

    The pairs are K indices (0, 1), (2, 3) ... as the path forms them; signed activations
    (``"s8s8"``/``"int8"``) are shifted by +128 first, as oneDNN does. One compiled pass over the
    pairs (rows whose two activations cannot reach the int16 limits with any weights are
    skipped), no GEMM: an output is at risk exactly when ``avx2`` and the exact sum can part.

    Examples
    --------
    >>> import numpy as np
    >>> from tilegemm.testing import saturation_risk
    >>> r = saturation_risk(np.uint8([[255, 255, 1, 1]]), np.int8([[127, 1], [127, 1], [0, 0], [0, 0]]))
    >>> r.mask.tolist(), r.first_k.tolist()
    ([[True, False]], [[0, -1]])
    """
    prof, name, instr = instructions.resolve("avx2", dtype)
    A = instr.a.to_element(a, "a", name)
    B = instr.b.to_element(b, "b", name)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"saturation_risk takes 2-D operands with matching K, got shapes {A.shape} and {B.shape}")
    M, K = A.shape
    N = B.shape[1]
    a32 = np.zeros((M, K + K % 2), np.int32)
    a32[:, :K] = A
    if instr.a.storage.kind == "i":  # signed activations: the +128 shift
        a32[:, :K] += 128
    b32 = np.zeros((K + K % 2, N), np.int32)
    b32[:K] = B
    pairs = np.zeros((M, N), np.int32)
    first_k = np.full((M, N), a32.shape[1], np.int32)
    if K:
        workers.run(_pair_scan, workers.count(M * K * N), a32, b32, pairs, first_k)
    first_k[pairs == 0] = -1
    return SaturationRisk(pairs, first_k)
