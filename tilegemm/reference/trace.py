"""A record of one output's operation sequence, taken while the reference runs.

Every reference GEMM function takes ``trace=``: given a :class:`Trace`, it records, for output
``[0, 0]`` of its arrays, each operation it performs (the operands read, the accumulator before
and after) and each point where the output holds ``C + A[:, :k] @ B[:k, :]`` as the sequence
computes it (a *state* at K position ``k``). :func:`tilegemm.explain` runs the reference on one
row of A and one column of B with a trace and reads why two profiles part; nothing here computes
a result, the reference does.

For each operation the trace works out what it lost, against exact arithmetic (integers, or
``fractions.Fraction`` for floats): a saturation, a wrap, a flushed denormal input (DAZ), a
flushed tiny result (FTZ), an overflow, or a rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

__all__ = ["Op", "State", "Trace", "is_denormal32"]

#: Events an operation can carry, as :attr:`Op.events` names them.
EVENTS = (
    "int16 saturation",
    "int32 saturation",
    "int32 wrap",
    "DAZ",
    "FTZ",
    "overflow",
    "rounding",
)


def _first(x):
    """Element [0, 0] of an operand array (any broadcastable shape), as a Python number."""
    v = np.asarray(x).reshape(-1)[0]
    return int(v) if np.asarray(v).dtype.kind in "iu" else float(v)


def is_denormal32(x: float) -> bool:
    """A non-zero value below binary32's smallest normal."""
    return x != 0 and math.isfinite(x) and abs(x) < 2.0**-126


@dataclass(frozen=True)
class Op:
    """One operation on one output's accumulators.

    Attributes
    ----------
    what:
        The operation as the instruction sequence names it (``"VPMADDUBSW pair"``, ``"fma32"``).
    k:
        The K indices it reads (indices >= K are padding); empty for a step on C alone.
    chain:
        The accumulator it writes (``"C"``: the output's own; ``"even"``/``"odd"``: AMX's partial
        sums; ``"pair"``: a word between instructions).
    rule:
        How its exact value becomes the result: ``"wrap32"``, ``"sat32"``, ``"sat16"``,
        ``"fma32 daz ftz"``, ``"add32 daz ftz"``, ``"fma32"``, ``"fma16"``.
    given, read:
        Its operands as given and as read (they differ where DAZ reads a denormal as zero). For
        an integer op: the products' factors ``((a, b), ...)`` and the accumulator; for a float
        op: ``(x, y, acc)`` (fma) or ``(x, y)`` (add).
    exact:
        The exact value before the rule (``int`` or ``Fraction``; None where an operand is
        infinite or NaN).
    result:
        What it wrote.
    events:
        What it lost (:data:`EVENTS`).
    """

    what: str
    k: tuple[int, ...]
    chain: str
    rule: str
    given: tuple
    read: tuple
    exact: object
    result: object
    events: tuple[str, ...]


@dataclass(frozen=True)
class State:
    """After operation ``op`` (index into :attr:`Trace.ops`; -1: before any), the output holds the
    sequence's value of ``C + A[:, :k] @ B[:k, :]``."""

    k: int
    value: object
    op: int


@dataclass
class Trace:
    """Operations and states of output ``[0, 0]``, in execution order. ``fmt`` is the output's
    number format (``"i32"``, ``"f32"``, ``"f16"``)."""

    fmt: str = ""
    ops: list = field(default_factory=list)
    states: list = field(default_factory=list)

    # -- recording (called by the reference) --------------------------------------------------

    def start(self, c, fmt: str) -> None:
        """The output's starting value (the caller's C, or 0)."""
        self.fmt = fmt
        self.states.append(State(0, _first(c), -1))

    def state(self, k: int, c) -> None:
        """After the last operation, the output holds its value for K position ``k``."""
        self.states.append(State(int(k), _first(c), len(self.ops) - 1))

    def int_op(self, what, k, chain, a, b, before, result, rule) -> None:
        """An integer operation: ``result = rule(before + sum(a[i] * b[i]))``."""
        pairs = tuple((_first(x), _first(y)) for x, y in zip(a, b))
        acc = _first(before)
        value = acc + sum(x * y for x, y in pairs)
        res = _first(result)
        events: tuple[str, ...] = ()
        if value != res:
            events = {"sat16": ("int16 saturation",), "sat32": ("int32 saturation",)}.get(rule, ("int32 wrap",))
        self.ops.append(Op(what, tuple(k), chain, rule, pairs + (acc,), pairs + (acc,), value, res, events))

    def float_op(self, what, k, chain, given, read, result, rule) -> None:
        """A float operation on operands ``read`` (``given`` before DAZ): ``fma`` of
        ``(x, y, acc)`` or ``add`` of ``(x, y)``, rounded by ``rule``."""
        g = tuple(_first(v) for v in given)
        r = tuple(_first(v) for v in read)
        res = _first(result)
        exact = None
        if all(math.isfinite(v) for v in r):
            exact = Fraction(r[0]) * Fraction(r[1]) + Fraction(r[2]) if len(r) == 3 else Fraction(r[0]) + Fraction(r[1])
        events = []
        if any(is_denormal32(x) and y == 0 for x, y in zip(g, r)):
            events.append("DAZ")
        if exact is not None:
            if math.isinf(res):
                events.append("overflow")
            elif res == 0 and exact != 0 and "ftz" in rule:
                events.append("FTZ")
            elif Fraction(res) != exact:
                events.append("rounding")
        self.ops.append(Op(what, tuple(k), chain, rule, g, r, exact, res, tuple(events)))

    # -- reading ----------------------------------------------------------------------------

    @property
    def result(self):
        """The output's final value."""
        return self.states[-1].value

    def boundaries(self) -> dict[int, State]:
        """K position -> the last state at that position."""
        return {s.k: s for s in self.states}
