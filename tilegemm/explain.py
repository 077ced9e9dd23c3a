"""``explain``: how many outputs two ``isa=`` profiles give different bits for, and why.

:func:`explain` runs both profiles on the caller's operands (the fast kernels), counts the
outputs whose bits differ and summarises the differences, then replays one differing output's
operation sequence in both profiles through the readable reference with a trace
(:mod:`tilegemm.reference.trace`) and names the first step where they part:

- ``"int16 saturation"``: a VPMADDUBSW pair left int16 (``avx2``), at K index k;
- ``"int32 saturation"``: VPDPBUSDS clipped the running sum where the other profile wrapped;
- ``"denormal flush (DAZ)"`` / ``"denormal flush (FTZ)"``: a denormal input read as zero, or a
  tiny result written as zero (AMX, VDPBF16PS), where the other profile kept it;
- ``"fp16 accumulator overflow"`` / ``"fp16 accumulator rounding"``: the binary16 accumulator of
  ``avx512_fp16`` overflowed, or rounded away bits a binary32 accumulator kept;
- ``"overflow"``: a binary32 result overflowed in one profile only;
- ``"rounding order"``: the same exact products summed in another grouping (AMX's even/odd
  chains per tile step against one chain, VDPBF16PS's odd-first pairs ...);
- ``"input conversion"``: with a dtype per side (``dtype=("tf32", "bf16")``), an element that
  the two formats read differently (TF32 truncates a float32 to 10 fraction bits, BF16 rounds it
  to 7), so that the exact products part at K index k.

It also builds a minimal reproducer: the few K elements (and the accumulator value) that part the
two profiles on their own, checked by running both kernels on them.

Nothing here computes a result of its own: the kernels and the reference do.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from . import instructions
from .api import matmul
from .compare import BitDiff, bitdiff
from .formats import exact_start

__all__ = ["explain", "default_dtype", "Explanation", "Verdict", "Reproducer", "CAUSES"]

#: The causes :func:`explain` names, most specific first.
CAUSES = (
    "int16 saturation",
    "int32 saturation",
    "denormal flush (DAZ)",
    "denormal flush (FTZ)",
    "fp16 accumulator overflow",
    "overflow",
    "fp16 accumulator rounding",
    "input conversion",
    "rounding order",
)


@dataclass(frozen=True)
class Verdict:
    """Why one output differs: the ``cause`` (:data:`CAUSES`), the K index ``k`` of the
    operation where the profiles part, the profile ``isa`` whose operation it is (None for a
    rounding-order difference, which is both profiles'), and a sentence."""

    cause: str
    k: int | None
    isa: str | None
    detail: str

    def __str__(self) -> str:
        at = f" at K index {self.k}" if self.k is not None else ""
        who = f" in {self.isa}" if self.isa is not None else ""
        return f"{self.cause}{at}{who}: {self.detail}"


@dataclass(frozen=True)
class Reproducer:
    """A 1 x k problem that parts the two profiles on its own: ``a`` (1 x k), ``b`` (k x 1),
    the accumulator start ``c`` (None: from zero), and what each profile returns for it.
    ``k_index`` says which K indices of the original output its elements are."""

    a: np.ndarray
    b: np.ndarray
    c: object
    dtype: str | tuple[str, str]  # a pair where the two sides take different dtypes
    isa: tuple[str, str]
    results: tuple
    k_index: tuple[int, ...]

    def code(self) -> str:
        """Python that reproduces it."""
        a_dt, b_dt = self.a.dtype, self.b.dtype

        def arr(x, dt):
            shape = x.shape
            if np.dtype(dt).kind not in "iu" and np.isnan(x.astype(np.float64)).any():
                # a NaN's payload and sign are bits of the case: spell the elements as bits
                width = np.dtype(dt).itemsize
                bits = [f"0x{int(v):0{2 * width}x}" for v in np.ascontiguousarray(x).view(_UINTS[width]).reshape(-1)]
                uint = f"np.uint{8 * width}"
                return f"np.array([{', '.join(bits)}], {uint}).view({_np_name(dt)}).reshape{shape}"
            vals = [_num(v) for v in x.reshape(-1)]
            return f"np.array({vals}, {_np_name(dt)}).reshape{shape}"

        lines = ["import numpy as np, tilegemm", f"a = {arr(self.a, a_dt)}", f"b = {arr(self.b, b_dt)}"]
        for isa, dtype, r in zip(self.isa, _sides(self.dtype), self.results):
            acc = instructions.resolve(isa, dtype)[2].acc
            if self.c is None:
                lines.append(f"tilegemm.matmul(a, b, {dtype!r}, isa={isa!r})  # {_show(r, acc)}")
            else:
                lines.append(
                    f"tilegemm.matmul(a, b, {dtype!r}, isa={isa!r}, out=np.array([[{_num(self.c)}]], "
                    f"{_np_name(acc)}), accumulate=True)  # {_show(r, acc)}"
                )
        return "\n".join(lines)


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` found. ``str()`` of it is the full report."""

    dtype: str | tuple[str, str]  # a pair where the two sides take different dtypes
    isa: tuple[str, str]
    shape: tuple[int, int, int]
    diff: BitDiff
    distribution: dict
    index: tuple[int, int] | None
    values: tuple
    verdict: Verdict | None
    traces: tuple | None = None
    span: tuple[int, int] | None = None
    reproducer: Reproducer | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def replay(self, max_rows: int = 28) -> str:
        """The two profiles' operations for the chosen output, side by side, around the step
        where they part (rows with an event are always shown)."""
        if self.traces is None:
            return ""
        return _replay(self, max_rows)

    def __str__(self) -> str:
        x, y = self.isa
        M, K, N = self.shape
        lines = [f"explain: dtype={self.dtype!r}, isa={x!r} vs {y!r}, M x K x N = {M} x {K} x {N}"]
        if instructions.same_bits(x, y) and isinstance(self.dtype, str):
            lines.append(f"{x} and {y} are encodings of the same instructions: identical bits by definition")
        d = self.diff
        lines.append(f"outputs whose bits differ: {d.count} of {d.total} ({d.share:.2%})")
        if d.nan_payloads:
            lines.append(f"  of them, NaNs on both sides that differ in payload or sign: {d.nan_payloads}")
        for key, value in self.distribution.items():
            lines.append(f"  {key}: {value}")
        if self.index is None:
            return "\n".join(lines + list(self.notes))
        acc = [instructions.resolve(i, d)[2].acc for i, d in zip(self.isa, _sides(self.dtype))]
        vals = ", ".join(f"{i} {_show(v, a)}" for i, v, a in zip(self.isa, self.values, acc))
        lines.append(f"output C[{self.index[0]}, {self.index[1]}]: {vals}")
        if self.verdict is not None:
            lines.append(f"first parting: {self.verdict}")
        if self.traces is not None:
            lines.append("replay:")
            lines.append(self.replay())
        if self.reproducer is not None:
            lines.append(f"minimal reproducer (K indices {list(self.reproducer.k_index)} of this output):")
            lines.extend("  " + ln for ln in self.reproducer.code().split("\n"))
        lines.extend(self.notes)
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def explain(a, b, dtype=None, isa=("amx", "avx2"), *, index=None, c=None, reproduce=True, **switches) -> Explanation:
    """Run two ``isa=`` profiles on the same operands and say where and why their bits differ.

    Parameters
    ----------
    a, b : array_like, 2-D (M x K and K x N)
        The operands, converted to ``dtype`` once as :func:`tilegemm.matmul` converts them.
    dtype : str or (str, str), optional
        A dtype both profiles take (default: :func:`default_dtype`, the first of ``isa[0]``'s
        dtypes that ``isa[1]`` takes), or one per profile: ``("tf32", "bf16")`` with
        ``isa=("amx", "amx")`` asks what TMMULTF32PS computes that TDPBF16PS does not.
    isa : (str, str)
        The two profiles (:data:`tilegemm.instructions.ISAS`).
    index : (int, int), optional
        The output to replay; default the first (row-major) whose bits differ.
    c : array_like, optional
        A starting C (M x N) for both, as with ``out=``/``accumulate=True``; it is converted to
        each profile's result dtype (a ``ValueError`` where that would not be exact).
    reproduce : bool
        Build a minimal reproducer (a few dozen extra kernel calls on tiny problems).
    **switches
        Switches of the instructions (:attr:`tilegemm.instructions.Instruction.switches`).

    Returns
    -------
    Explanation
        ``str()`` gives the report; the fields hold the counts, the verdict, the traces and the
        reproducer.

    Examples
    --------
    >>> import numpy as np, tilegemm
    >>> e = tilegemm.explain(np.uint8([[255, 255]]), np.int8([[127], [127]]), "u8s8", isa=("amx", "avx2"))
    >>> e.verdict.cause, e.verdict.k, e.values
    ('int16 saturation', 0, (64770, 32767))
    """
    x, y = _pair(isa)
    dtype = default_dtype(x, y) if dtype is None else dtype
    if isinstance(dtype, tuple | list) and len(dtype) == 2:
        dx, dy = dtype
    elif isinstance(dtype, tuple | list):
        raise ValueError(f"dtype takes one dtype or a pair (one per profile), got {dtype!r}")
    else:
        dx = dy = dtype
    _, nx, ix = instructions.resolve(x, dx)
    _, ny, iy = instructions.resolve(y, dy)
    names = (nx, ny)
    name: str | tuple[str, str] = nx if nx == ny else names
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"explain takes 2-D operands (M x K and K x N), got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"explain: inner dimensions do not match: a has shape {a.shape} and b has shape {b.shape}")
    M, K = a.shape
    N = b.shape[1]
    cx = cy = None
    if c is not None:
        cx, cy = (exact_start(c, i.acc, (M, N)) for i in (ix, iy))
    rx = _run(a, b, nx, x, cx, switches)
    ry = _run(a, b, ny, y, cy, switches)
    wx, wy = _common(rx), _common(ry)
    d = bitdiff(wx, wy)
    dist = _distribution(wx, wy, a, b, names, ix, iy, (x, y), c is None)
    if index is None:
        index = d.first
    elif not (
        isinstance(index, tuple | list) and len(index) == 2 and all(isinstance(i, int | np.integer) for i in index)
    ):
        raise ValueError(f"index must be a pair (m, n) of integers, got {index!r}")
    elif not (0 <= index[0] < M and 0 <= index[1] < N):
        raise ValueError(f"index {tuple(index)} is outside the {M} x {N} result")
    if index is None:
        return Explanation(name, (x, y), (M, K, N), d, dist, None, (), None)
    m, n = (int(i) for i in index)
    values = (_num(rx[m, n]), _num(ry[m, n]))
    if nx == ny:
        # The operands as the instructions read them (BF16/FP16 values, 8-bit integers): the
        # conversion is idempotent, and the reproducer then shows the values that matter. With a
        # dtype per side they stay as given: each side's conversion is part of what parts them.
        a, b = _read(ix, a, "a", nx), _read(ix, b, "b", nx)
    if _same(values[0], values[1]):
        note = (f"output C[{m}, {n}] has the same bits in both profiles",)
        return Explanation(name, (x, y), (M, K, N), d, dist, (m, n), values, None, notes=note)
    row, col = a[m : m + 1], b[:, n : n + 1]
    starts = (None if cx is None else cx[m, n], None if cy is None else cy[m, n])
    tx, ty = (_trace(row, col, dt, p, s, switches) for dt, p, s in zip(names, (x, y), starts))
    _check(tx, values[0], x)
    _check(ty, values[1], y)
    verdict, span = _verdict((tx, ty), (x, y), (ix, iy), (row, col, names))
    repro = (
        _reproducer(row, col, starts, names, (x, y), (ix, iy), (tx, ty), verdict, span, switches) if reproduce else None
    )
    return Explanation(name, (x, y), (M, K, N), d, dist, (m, n), values, verdict, (tx, ty), span, repro)


# -- running -----------------------------------------------------------------------------------


def default_dtype(x: str, y: str) -> str:
    """The first dtype of profile ``x`` that profile ``y`` takes too (``ValueError``: none)."""
    px, py = instructions.profile(x), instructions.profile(y)
    common = [d for d in px.dtypes if d in py.names()]
    if not common:
        raise ValueError(
            f"isa={x!r} and isa={y!r} take no dtype in common ({', '.join(px.names())} / {', '.join(py.names())})"
        )
    return common[0]


def _sides(dtype: str | tuple[str, str]) -> tuple[str, str]:
    return (dtype, dtype) if isinstance(dtype, str) else (dtype[0], dtype[1])


def _read(instr, x, operand, dtype):
    """``x`` as ``instr`` reads it: its format's values (float) or elements (integer). Float
    operands holding a NaN stay the format's own elements: a value passed on as float32 would be
    rounded to the format again, which keeps a NaN but not its payload."""
    fmt = getattr(instr, operand)
    if not fmt.is_float:
        return fmt.to_element(x, operand, dtype)
    codes = fmt.to_codes(x, operand, dtype)
    return codes.view(fmt.element) if fmt.holds_nan(codes) else fmt.decode(codes)


def _pair(isa) -> tuple[str, str]:
    if isinstance(isa, str) or not isinstance(isa, tuple | list) or len(isa) != 2:
        raise ValueError(f"isa must be a pair of profiles, e.g. ('amx', 'avx2'), got {isa!r}")
    for i in isa:
        instructions.profile(i)  # ValueError listing the valid ones
    return str(isa[0]), str(isa[1])


def _run(a, b, dtype, isa, c, switches):
    if c is None:
        return matmul(a, b, dtype, isa=isa, **switches)
    out = c.copy()
    return matmul(a, b, dtype, isa=isa, out=out, accumulate=True, **switches)


def _common(r: np.ndarray) -> np.ndarray:
    """A result in a dtype both sides can be compared in (binary16 widens exactly)."""
    return r.astype(np.float32) if r.dtype == np.float16 else r


def _trace(row, col, dtype, isa, start, switches):
    from . import reference  # imported on first use: ``import tilegemm`` stays light

    t = reference.trace.Trace()
    c = None if start is None else np.asarray(start).reshape(1, 1)
    reference.matmul(row, col, dtype, c=c, isa=isa, trace=t, **switches)
    return t


def _check(t, value, isa):
    if not _same(t.result, value):
        raise RuntimeError(f"the reference's trace for isa={isa!r} ends at {t.result!r}, the kernel gave {value!r}")


def _num(v):
    v = np.asarray(v).reshape(-1)[0] if np.ndim(v) else v
    if isinstance(v, (int, np.integer)):
        return int(v)
    return float(v)


def _same(u, v) -> bool:
    if isinstance(u, float) or isinstance(v, float):
        u, v = float(u), float(v)
        if math.isnan(u) or math.isnan(v):  # NaN bits are bits: sign and payload too
            return struct.pack("<d", u) == struct.pack("<d", v)
        return u == v and math.copysign(1, u) == math.copysign(1, v)
    return u == v


# -- distribution ------------------------------------------------------------------------------


def _distribution(wx, wy, a, b, dtypes, ix, iy, isas, from_zero=True) -> dict:
    out: dict = {}
    if wx.dtype.kind in "iu":
        delta = wy.astype(np.int64) - wx.astype(np.int64)
        dd = delta[delta != 0]
        if dd.size:
            median, mean = int(np.median(dd)), np.abs(dd).mean()
            text = f"min {dd.min()}, median {median}, max {dd.max()}, mean |difference| {mean:.4g}"
            out[f"{isas[1]} - {isas[0]}"] = text
            hist = _log2_histogram(np.abs(dd))
            out["|difference| by power of two"] = hist
        return out
    fx, fy = wx.astype(np.float64), wy.astype(np.float64)
    both = np.isfinite(fx) & np.isfinite(fy)
    diff_mask = both & (fx != fy)
    if diff_mask.any():
        rel = np.abs(fy - fx)[diff_mask] / np.maximum(np.abs(fx[diff_mask]), np.abs(fy[diff_mask]))
        out["relative difference where they differ"] = (
            f"median {np.median(rel):.3g}, max {rel.max():.3g}; {_ulps(wx, wy, diff_mask)} binary32 ulps apart at most"
        )
    nan = np.isnan(fx) != np.isnan(fy)
    if nan.any():
        out["NaN in one profile only"] = int(nan.sum())
    if not from_zero:
        return out
    # Error against a binary64 product of the same (rounded) operands, per profile; with a dtype
    # per side, of the operands as given (what each format's rounding costs is then part of it).
    if dtypes[0] == dtypes[1]:
        a64 = _read(ix, a, "a", dtypes[0]).astype(np.float64)
        b64 = _read(ix, b, "b", dtypes[0]).astype(np.float64)
        against = "a binary64 product (C = 0)"
    else:
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        against = "a binary64 product of the operands as given (C = 0)"
    with np.errstate(all="ignore"):
        ref = a64 @ b64
        errs = []
        for name, w in zip(isas, (fx, fy)):
            ok = np.isfinite(ref) & np.isfinite(w)
            errs.append(f"{name} {np.abs(w[ok] - ref[ok]).mean():.4g}" if ok.any() else f"{name} -")
    out[f"mean |error| against {against}"] = ", ".join(errs)
    return out


def _ulps(wx, wy, mask) -> int:
    x = wx.astype(np.float32)[mask].view(np.int32).astype(np.int64)
    y = wy.astype(np.float32)[mask].view(np.int32).astype(np.int64)
    x = np.where(x < 0, -(x & 0x7FFFFFFF), x)
    y = np.where(y < 0, -(y & 0x7FFFFFFF), y)
    return int(np.abs(x - y).max()) if x.size else 0


def _log2_histogram(v: np.ndarray) -> str:
    e = np.floor(np.log2(v.astype(np.float64))).astype(int)
    vals, counts = np.unique(e, return_counts=True)
    return ", ".join(f"2^{k}: {c}" for k, c in zip(vals, counts))


# -- the verdict -------------------------------------------------------------------------------

_DEVIATIONS = ("int16 saturation", "int32 saturation")


def _verdict(traces, isas, instrs, operands=None):
    """(Verdict, (k0, k1)) for one differing output; ``operands`` (row, col, dtypes) where the
    two sides may take different dtypes."""
    if operands is not None and operands[2][0] != operands[2][1]:
        found = _conversion_verdict(instrs, *operands)
        if found is not None:
            return found
    if traces[0].fmt == "i32":
        return _int_verdict(traces, isas)
    return _float_verdict(traces, isas, instrs)


def _conversion_verdict(instrs, row, col, dtypes):
    """The first K index whose exact product the two dtypes' readings of the operands change,
    or None where every product is the same (the difference then lies in the arithmetic)."""
    reads = [(_read(i, row, "a", d)[0], _read(i, col, "b", d)[:, 0]) for i, d in zip(instrs, dtypes)]
    for k in range(row.shape[1]):
        px, py = (float(np.float64(r[0][k]) * np.float64(r[1][k])) for r in reads)
        if _same(px, py):
            continue
        given = (float(row[0, k]), float(col[k, 0]))
        read = [(float(r[0][k]), float(r[1][k])) for r in reads]
        detail = (
            f"a[k] = {_fmt_f(given[0])}, b[k] = {_fmt_f(given[1])} read as {_fmt_f(read[0][0])}, "
            f"{_fmt_f(read[0][1])} in {dtypes[0]} and as {_fmt_f(read[1][0])}, {_fmt_f(read[1][1])} in "
            f"{dtypes[1]}: the exact products part ({_fmt_f(px)} against {_fmt_f(py)})"
        )
        return Verdict("input conversion", k, None, detail), (k, k + 1)
    return None


def _first_k(op) -> int | None:
    return min(op.k) if op.k else None


def _int_verdict(traces, isas):
    """Integer profiles agree with exact arithmetic modulo 2^32 except where they saturate: the
    earliest saturation (by K) in either trace is where they part."""
    best = None
    for t, isa in zip(traces, isas):
        for op in t.ops:
            hit = [e for e in op.events if e in _DEVIATIONS]
            if hit:
                key = (_first_k(op) if op.k else -1, isas.index(isa))
                if best is None or key < best[0]:
                    best = (key, op, isa, hit[0])
                break
    if best is None:  # cannot happen for two correct integer profiles
        return Verdict("rounding order", None, None, "the integer results differ without a saturation"), None
    _, op, isa, cause = best
    k0 = _first_k(op) or 0
    if cause == "int16 saturation":
        (x0, y0), (x1, y1) = op.given[0], op.given[1]
        detail = (
            f"VPMADDUBSW pair (k = {op.k[0]}, {op.k[1]}): {x0} * {y0} + {x1} * {y1} = {op.exact} leaves int16 "
            f"and saturates to {op.result}"
        )
    else:
        before = op.given[-1]
        detail = (
            f"{op.what} quad (k = {op.k[0]} .. {op.k[-1]}): {before} + {op.exact - before} = {op.exact} leaves "
            f"int32 and saturates to {op.result}, where wrapping arithmetic gives {_wrap32(op.exact)}"
        )
    return Verdict(cause, k0, isa, detail), (k0, max(op.k) + 1)


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _span_ops(t, k0: int, k1: int):
    states = t.boundaries()
    lo = states[k0].op if k0 in states else -1
    return t.ops[lo + 1 : states[k1].op + 1]


def _float_verdict(traces, isas, instrs):
    tx, ty = traces
    bx, by = tx.boundaries(), ty.boundaries()
    common = sorted(set(bx) & set(by))
    prev = common[0]
    span = None
    for k in common:
        if not _same(bx[k].value, by[k].value):
            span = (prev, k)
            break
        prev = k
    if span is None:  # only the last state differs (cannot happen: the end is a boundary of both)
        span = (common[0], common[-1])
    k0, k1 = span
    ops = [_span_ops(t, k0, k1) for t in traces]
    gap = abs(Fraction(bx[k1].value) - Fraction(by[k1].value)) if _finite(bx[k1].value, by[k1].value) else None

    def first(kinds, rule=None):
        found = []
        for i, (t_ops, isa) in enumerate(zip(ops, isas)):
            for op in t_ops:
                if any(e in kinds for e in op.events) and (rule is None or op.rule == rule):
                    found.append((_first_k(op) if op.k else k0, i, op, isa))
                    break
        return min(found, key=lambda f: (f[0], f[1])) if found else None

    hit = first(("overflow",), "fma16")
    if hit:
        k, _, op, isa = hit
        return Verdict(
            "fp16 accumulator overflow",
            k,
            isa,
            f"{op.what}: {_fmt_exact(op)} is beyond binary16's range (|x| >= 65520) and becomes {op.result}",
        ), span
    hit = first(("overflow",))
    if hit:
        k, _, op, isa = hit
        return Verdict("overflow", k, isa, f"{op.what}: {_fmt_exact(op)} overflows binary32 to {op.result}"), span
    for kind, cause in (("DAZ", "denormal flush (DAZ)"), ("FTZ", "denormal flush (FTZ)")):
        hit = first((kind,))
        if hit and _flush_matters(hit[2], kind, gap):
            k, _, op, isa = hit
            if kind == "DAZ":
                given = ", ".join(_fmt_f(g) for g, r in zip(op.given, op.read) if g != r)
                detail = f"{op.what} reads the denormal {given} as zero; the other profile keeps it"
            else:
                detail = f"{op.what}: {_fmt_exact(op)} is tiny (below 2^-126) and written as zero; the other keeps it"
            return Verdict(cause, k, isa, detail), span
    f16 = [i for i, ins in enumerate(instrs) if ins.acc == np.float16]
    if len(f16) == 1:
        i = f16[0]
        for op in ops[i]:
            if "rounding" in op.events:
                k = _first_k(op) if op.k else k0
                return Verdict(
                    "fp16 accumulator rounding",
                    k,
                    isas[i],
                    f"{op.what}: {_fmt_exact(op)} rounds to {_fmt_f(op.result)} in the binary16 accumulator, "
                    f"where a binary32 accumulator keeps more bits",
                ), span
    sx, sy = instrs[0].summary, instrs[1].summary
    detail = (
        f"the same products, grouped differently over K {k0} .. {k1 - 1}: {isas[0]}: {sx}; {isas[1]}: {sy}; "
        f"their roundings part there ({_fmt_f(bx[k1].value)} against {_fmt_f(by[k1].value)})"
    )
    return Verdict("rounding order", k0, None, detail), span


def _finite(*vals) -> bool:
    return all(math.isfinite(float(v)) for v in vals)


def _flush_matters(op, kind, gap) -> bool:
    """A flush parts the profiles when what it dropped is at least half their difference."""
    if gap is None:
        return True
    if kind == "DAZ":

        def value(v):
            return v[0] * v[1] + v[2] if len(v) == 3 else v[0] + v[1]

        if not _finite(*op.given):
            return True
        lost = value([Fraction(x) for x in op.given]) - value([Fraction(x) for x in op.read])
    else:
        lost = op.exact if op.exact is not None else Fraction(0)
    return abs(lost) * 2 >= gap


def _fmt_f(v) -> str:
    v = float(v)
    if v == 0 or not math.isfinite(v):
        return repr(v)
    e = math.frexp(abs(v))[1] - 1
    if -20 <= e <= 24:
        return repr(v)
    return f"{v!r} (~2^{e})"


def _fmt_exact(op) -> str:
    r = op.read
    if op.exact is None:
        return " ".join(_fmt_f(v) for v in r)
    expr = f"{_fmt_f(r[0])} * {_fmt_f(r[1])} + {_fmt_f(r[2])}" if len(r) == 3 else f"{_fmt_f(r[0])} + {_fmt_f(r[1])}"
    return f"{expr} = {_fmt_f(float(op.exact))}"


# -- the reproducer ----------------------------------------------------------------------------


def _reproducer(row, col, starts, dtypes, isas, instrs, traces, verdict, span, switches):
    if verdict is None or span is None:
        return None
    K = row.shape[1]
    if traces[0].fmt == "i32":
        cand = _int_candidate(row, col, dtypes, isas, instrs, traces, verdict, span)
        return cand if cand is not None else _try(row, col, starts, dtypes, isas, tuple(range(K)), switches)
    k0, k1 = span
    k1 = min(k1, K)
    if verdict.cause == "input conversion":  # the element alone, from zero, if it parts them
        alone = _try(row, col, None, dtypes, isas, (k0,), switches, verdict.cause)
        return alone if alone is not None else _try(row, col, starts, dtypes, isas, tuple(range(K)), switches)
    c0 = [t.boundaries()[k0].value for t in traces]
    keep = list(range(k0, k1))
    best = _try(row, col, c0, dtypes, isas, tuple(keep), switches, verdict.cause)
    if best is None:  # the span alone does not reproduce: give the whole output
        return _try(row, col, starts, dtypes, isas, tuple(range(K)), switches)
    best = _shrink(best, row, col, dtypes, isas, switches, verdict.cause)
    if best.c is not None:
        zero = _try(row, col, None, dtypes, isas, best.k_index, switches, verdict.cause)
        if zero is not None:
            best = zero
    return best


def _int_candidate(row, col, dtypes, isas, instrs, traces, verdict, span):
    k0, k1 = span
    K = row.shape[1]
    ks = tuple(k for k in range(k0, k1) if k < K)
    if verdict.cause == "int16 saturation":
        return _try(row, col, None, dtypes, isas, ks, {})
    # int32 saturation: start from the accumulator the saturating profile held before the quad
    t = traces[isas.index(verdict.isa)]
    op = next(o for o in t.ops if o.k and min(o.k) == k0 and "int32 saturation" in o.events)
    before = op.given[-1]
    if instrs[0].a.storage.kind == "i":  # the reproducer's own compensation is added again
        before = _wrap32(before + 128 * int(sum(int(col[k, 0]) for k in ks)))
    return _try(row, col, [before, before], dtypes, isas, ks, {})


def _try(row, col, starts, dtypes, isas, ks, switches, cause=None):
    """The reproducer on K indices ``ks`` from ``starts`` if both kernels part on it (and, with
    ``cause``, for the same reason), else None."""
    if not ks:
        return None
    a = np.ascontiguousarray(row[:, list(ks)])
    b = np.ascontiguousarray(col[list(ks), :])
    results = []
    cs = []
    for isa, dt, s in zip(isas, dtypes, starts if isinstance(starts, list | tuple) else (starts, starts)):
        acc = instructions.resolve(isa, dt)[2].acc
        c = None if s is None else np.array([[s]], acc)
        cs.append(c)
        results.append(_num(_run(a, b, dt, isa, c, switches)[0, 0]))
    if _same(results[0], results[1]):
        return None
    if cause is not None:
        tr = [_trace(a, b, dt, isa, c, switches) for isa, dt, c in zip(isas, dtypes, cs)]
        instrs = [instructions.resolve(i, dt)[2] for i, dt in zip(isas, dtypes)]
        v, _ = _verdict(tr, isas, instrs, (a, b, dtypes))
        if v.cause != cause:
            return None
    start = None if cs[0] is None else _num(cs[0][0, 0])
    same = dtypes[0] == dtypes[1]
    return Reproducer(a, b, start, dtypes[0] if same else (dtypes[0], dtypes[1]), isas, tuple(results), tuple(ks))


def _shrink(best, row, col, dtypes, isas, switches, cause, budget=120):
    """Drop K elements (halves, then quarters ... then single ones) while the reproducer still
    parts the profiles for the same reason."""
    ks = list(best.k_index)
    start = best.c
    chunk = max(1, len(ks) // 2)
    tries = 0
    while chunk >= 1 and tries < budget:
        i = 0
        changed = False
        while i < len(ks) and tries < budget:
            cand = ks[:i] + ks[i + chunk :]
            tries += 1
            got = _try(row, col, start, dtypes, isas, tuple(cand), switches, cause)
            if got is not None:
                ks, best, changed = cand, got, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return best


# -- rendering ---------------------------------------------------------------------------------


_UINTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _np_name(dt) -> str:
    dt = np.dtype(dt)
    return "tilegemm.formats.bf16_dtype()" if dt.name == "bfloat16" else f"np.{dt.name}"


def _show(v, acc) -> str:
    acc = np.dtype(acc)
    if acc.kind in "iu":
        return f"{int(v)}"
    bits = np.array([v], acc).view(np.uint16 if acc.itemsize == 2 else np.uint32)[0]
    return f"{float(v)!r} (0x{int(bits):0{2 * acc.itemsize}x})"


def _op_text(op, fmt) -> str:
    k = "" if not op.k else (f"k={op.k[0]}" if len(op.k) == 1 else f"k={op.k[0]}..{op.k[-1]}")
    ev = [e for e in op.events if e != "rounding"]
    if fmt == "i32":
        body = f"{op.what} -> {op.result}"
        if op.what.startswith("VPMADDUBSW"):
            body = f"{op.what} {op.exact} -> {op.result}"
    else:
        body = f"{op.what} [{op.chain}] -> {_fmt_f(op.result)}"
    return f"{k:10} {body}" + (f"  <{', '.join(ev)}>" if ev else "")


def _replay(e: Explanation, max_rows: int) -> str:
    assert e.traces is not None  # a replay exists only where the two profiles differ
    tx, ty = e.traces
    k0, k1 = e.span if e.span is not None else (0, e.shape[1])
    lo = max(0, k0 - 2)

    def rows(t):
        out = []
        show = k0 == 0  # an op on C alone goes with the op before it (or the start)
        for op in t.ops:
            if op.k:
                show = max(op.k) >= lo and min(op.k) < k1
            if show:
                out.append((_op_text(op, t.fmt), bool([v for v in op.events if v != "rounding"])))
        return out

    rx, ry = rows(tx), rows(ty)
    width = 56
    lines = [f"  {e.isa[0]:<{width}} | {e.isa[1]}"]
    n = max(len(rx), len(ry))
    keep = set(range(min(n, 6))) | set(range(max(0, n - 4), n))
    for i in range(n):
        if (i < len(rx) and rx[i][1]) or (i < len(ry) and ry[i][1]):
            keep |= {i - 1, i, i + 1}
    if n <= max_rows:
        keep = set(range(n))
    shown = -1
    for i in range(n):
        if i not in keep:
            continue
        if shown != -1 and i != shown + 1:
            lines.append(f"  {'...':<{width}} | ...")
        left = rx[i][0] if i < len(rx) else ""
        right = ry[i][0] if i < len(ry) else ""
        lines.append(f"  {left[:width]:<{width}} | {right}")
        shown = i
    bx, by = tx.boundaries(), ty.boundaries()
    if k1 in bx and k1 in by and tx.fmt != "i32":
        lines.append(f"  {'after K ' + str(k1) + ': ' + _fmt_f(bx[k1].value):<{width}} | {_fmt_f(by[k1].value)}")
    return "\n".join(lines)
