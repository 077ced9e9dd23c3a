"""Adversarial cases whose x86-64 results every other host must equal bit for bit.

The cases are built here from seeds, so only their results are stored
(``tests/data/same_bits.npz``, a few kilobytes compressed): for every profile and dtype (the
``onednn`` library profile on its default host included) and every non-default reading of the
instruction's switches,

- ``specials``: random operands with about one element in six replaced by an arbitrary bit
  pattern of the format (NaNs with their signs and payloads, infinities, denormals, the largest
  finite values) and one in twenty by a signed zero, K one past a whole instruction (the K tail),
  accumulated into a C holding NaNs, infinities, denormals and -0;
- ``finite``: the same without NaN and infinity codes, operands spread over the whole exponent
  range (products that overflow, sums that become tiny and are flushed), K three instructions
  and one element, from a C of -0;
- ``cancel``: each A row's second half the negation of its first half against a B whose halves
  are equal (exact cancellation in every chain), from +0;
- integers: ``specials`` holds codes over the whole range and a C within 2^10 of +-2^31 (the
  modulo 2^32 wrap and VPDPBUSDS's int32 saturation); ``finite`` the extreme codes only (every
  pair of VPMADDUBSW saturating int16);
- MX dtypes: E8M0 block scales over the whole range with 0x00, 0xFE and NaN (0xFF) among them.

Tilings vary with the case, so that each of ``tilegemm.TILINGS`` runs. Every result is checked
against ``tilegemm.reference`` before it is stored (the fixture records a checked answer, never
whatever a host printed).

Run ``python tests/data/same_bits.py`` on x86-64 to rewrite the fixture;
``tests/test_same_bits.py`` recomputes every case on the current host and compares.
"""

from __future__ import annotations

import hashlib
import pathlib
import platform
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

import tilegemm
from tilegemm import instructions

FIXTURE = pathlib.Path(__file__).with_name("same_bits.npz")
M, N = 19, 21  # not multiples of a tile: M and N tails in every case


@dataclass(frozen=True)
class Case:
    """One call: ``tilegemm.matmul(a, b, dtype, tiling, isa=isa, out=c, accumulate=True, **switches)``."""

    name: str
    isa: str
    dtype: str
    variant: str
    k: int
    tiling: str
    switches: tuple[tuple[str, object], ...] = ()


def _code_space(fmt) -> tuple[np.dtype, int]:
    """(unsigned dtype, bits) of a format's codes."""
    bits = 8 * fmt.storage.itemsize
    return np.dtype(f"uint{bits}"), bits


def _finite(fmt, codes: np.ndarray) -> np.ndarray:
    """Whether each code of a float format is finite (ints: all)."""
    if not fmt.is_float:
        return np.ones(codes.shape, bool)
    parts = [codes & 0xFFFF, codes >> 16] if fmt.lanes == 2 else [codes]
    ok = np.ones(codes.shape, bool)
    for p in parts:
        part = fmt.part if fmt.lanes == 2 else fmt
        with np.errstate(invalid="ignore", over="ignore"):
            v = part.decode(p.astype(part.storage)).astype(np.float64)
        ok &= np.isfinite(v)
    return ok


def _arbitrary(fmt, shape, rng, finite: bool) -> np.ndarray:
    """Arbitrary codes over the whole code space (finite ones only with ``finite``)."""
    udt, bits = _code_space(fmt)
    codes = rng.integers(0, 1 << bits, shape, dtype=np.uint64).astype(udt)
    if finite:
        bad = ~_finite(fmt, codes)
        while bad.any():
            codes[bad] = rng.integers(0, 1 << bits, int(bad.sum()), dtype=np.uint64).astype(udt)
            bad = ~_finite(fmt, codes)
    return codes


def _operand(case: Case, which: str, shape, rng) -> np.ndarray:
    """Codes of operand ``which`` ("a" or "b") in the format's storage, unsigned view."""
    i = instructions.resolve(case.isa, case.dtype)[2]
    fmt = i.a if which == "a" else i.b
    udt, bits = _code_space(fmt)
    if not fmt.is_float:
        if case.variant == "finite":  # the extreme codes: saturation edges
            info = np.iinfo(fmt.storage)
            return (
                rng.choice(np.array([info.min, info.max, info.max - 1, 0, -1 % (info.max + 1)]), shape)
                .astype(fmt.storage)
                .view(udt)
            )
        return _arbitrary(fmt, shape, rng, False)
    if case.variant == "finite":
        return _arbitrary(fmt, shape, rng, True)
    if fmt.lanes == 2:  # complex: each part as a real FP16
        base = fmt.to_codes(fmt.sample(shape, rng, wide=True), which, case.dtype).view(udt)
    else:
        base = fmt.to_codes(fmt.sample(shape, rng, wide=True), which, case.dtype).view(udt)
    if case.variant == "specials":
        pick = rng.random(shape)
        base = np.where(pick < 1 / 6, _arbitrary(fmt, shape, rng, False), base)
        sign = udt.type(1 << (bits - 1))
        zero = np.where(rng.random(shape) < 0.5, udt.type(0), sign).astype(udt)
        base = np.where((pick >= 1 / 6) & (pick < 1 / 6 + 1 / 20), zero, base)
    return base


def _scales(case: Case, k: int, rng):
    i = instructions.resolve(case.isa, case.dtype)[2]
    if not i.scale_block:
        return None
    blocks = -(-k // i.scale_block)
    sa = rng.integers(0x60, 0xA0, (M, blocks)).astype(np.uint8)
    sb = rng.integers(0x60, 0xA0, (blocks, N)).astype(np.uint8)
    if case.variant == "specials":
        sa[rng.random(sa.shape) < 0.1] = 0xFF
        sb[0, 3] = 0x00
        sb[-1, 5] = 0xFE
        sa[2, 0] = 0xFE
        sb[0, 7] = 0xFF
    return sa, sb


def _start(case: Case, rng) -> np.ndarray:
    """C before the call: NaNs, infinities, denormals and -0 for ``specials``; -0 for
    ``finite``, +0 for ``cancel``; for integers values near +-2^31."""
    i = instructions.resolve(case.isa, case.dtype)[2]
    acc = np.dtype(i.acc)
    if acc.kind == "i":
        if case.variant == "specials":
            near = rng.integers(-(1 << 10), 1 << 10, (M, N))
            return np.where(rng.random((M, N)) < 0.5, (1 << 31) - 1 - np.abs(near), -(1 << 31) + np.abs(near)).astype(
                acc
            )
        return np.zeros((M, N), acc)
    bits = 8 * acc.itemsize // (2 if acc.kind == "c" else 1)
    udt = np.dtype(f"uint{bits}")
    if case.variant == "specials":
        shape = (M, 2 * N) if acc.kind == "c" else (M, N)
        c = rng.standard_normal(shape).astype(np.float32 if bits == 32 else np.float16).view(udt)
        wild = rng.integers(0, 1 << bits, shape, dtype=np.uint64).astype(udt)
        c = np.where(rng.random(shape) < 0.25, wild, c)
        c[0, 0] = 1 << (bits - 1)  # -0
        c[0, 1] = 1  # the smallest denormal
        return c.view(acc)
    sign = (1 << (bits - 1)) if case.variant == "finite" else 0
    return np.full((M, 2 * N) if acc.kind == "c" else (M, N), sign, udt).view(acc)


def inputs(case: Case):
    """``(a, b, c, scales)`` of a case, as ``tilegemm.matmul`` takes them exactly (element
    arrays or codes, never values that a conversion would round)."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    i = instructions.resolve(case.isa, case.dtype)[2]
    k = case.k
    a = _operand(case, "a", (M, k), rng)
    b = _operand(case, "b", (k, N), rng)
    if case.variant == "cancel":
        h = k // 2
        b[h : 2 * h] = b[:h]
        sign = np.array(1 << (8 * a.itemsize - 1), a.dtype) if i.a.is_float else None
        if i.a.lanes == 2:  # complex: negate both FP16 parts
            a[:, h : 2 * h] = a[:, :h] ^ np.uint32(0x80008000)
        elif sign is not None:
            a[:, h : 2 * h] = a[:, :h] ^ sign
        else:  # integers: -x, within range (the most negative code is left as it is)
            sa = a.view(i.a.storage)
            if i.a.storage.kind == "i":
                neg = -sa[:, :h].astype(np.int64)
                sa[:, h : 2 * h] = np.where(neg > 127, sa[:, :h], neg).astype(i.a.storage)
    c = _start(case, rng)
    scales = _scales(case, k, rng)
    return _as_input(i.a, a), _as_input(i.b, b), c, scales


def _as_input(fmt, codes: np.ndarray) -> np.ndarray:
    if fmt.codes_from is not None:
        return codes.view(fmt.codes_from)
    return codes.view(fmt.storage).view(fmt.element) if fmt.lanes == 1 else codes


def cases() -> Iterator[Case]:
    tilings = iter(tilegemm.TILINGS * 100)
    for p in instructions.PROFILES.values():
        if p.same_as is not None:
            continue
        for dtype, i in p.dtypes.items():
            step = i.k_step
            for variant, k in (("specials", step + 1), ("finite", 3 * step + 1), ("cancel", 2 * step)):
                yield Case(f"{p.name}-{dtype}-{variant}", p.name, dtype, variant, k, next(tilings))
            for sw in i.switches:
                for value in sw.values[1:]:
                    yield Case(
                        f"{p.name}-{dtype}-specials-{sw.name}={value}",
                        p.name,
                        dtype,
                        "specials",
                        step + 1,
                        next(tilings),
                        ((sw.name, value),),
                    )


def run(case: Case, reference: bool = False) -> np.ndarray:
    """The case's result (``reference``: tilegemm.reference's). A library profile (``onednn``)
    returns its own output type and takes no accumulator: it runs from zero."""
    a, b, c, scales = inputs(case)
    kw = dict(case.switches)
    if instructions.PROFILES[case.isa].library is not None:
        if reference:
            return tilegemm.reference.matmul(a, b, case.dtype, isa=case.isa, **kw)
        return tilegemm.matmul(a, b, case.dtype, case.tiling, isa=case.isa, threads=1, **kw)
    if reference:
        return tilegemm.reference.matmul(a, b, case.dtype, c=c, isa=case.isa, scales=scales, **kw)
    out = c.copy()
    return tilegemm.matmul(
        a, b, case.dtype, case.tiling, isa=case.isa, out=out, accumulate=True, scales=scales, threads=1, **kw
    )


def digest(case: Case) -> str:
    """A hash of the case's inputs: a change in how they are made shows as a stale fixture."""
    h = hashlib.sha256()
    for x in inputs(case):
        if x is None:
            continue
        for part in x if isinstance(x, tuple) else (x,):
            h.update(np.ascontiguousarray(part).view(np.uint8).tobytes())
    return h.hexdigest()[:16]


def main() -> int:
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"the fixture records x86-64's bits; this is {platform.machine()}", file=sys.stderr)
        return 1
    arrays: dict[str, np.ndarray] = {}
    for case in cases():
        got = run(case)
        want = run(case, reference=True)
        d = tilegemm.bitdiff(got, want)
        if not d.identical:
            print(f"{case.name}: the kernel and the reference differ: {d}", file=sys.stderr)
            return 1
        arrays[case.name] = got
        arrays[case.name + "#inputs"] = np.frombuffer(digest(case).encode(), np.uint8)
        print(case.name, case.tiling, got.shape, got.dtype)
    arrays["#versions"] = np.frombuffer(f"numpy {np.__version__}, tilegemm {tilegemm.__version__}".encode(), np.uint8)
    np.savez_compressed(FIXTURE, **arrays)
    print(f"{len(arrays)} arrays -> {FIXTURE} ({FIXTURE.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
