"""The dry run: the native kernels' code on a CPU without AMX, the tile unit emulated.

:data:`DRY` is a compile target for the native programs (``tilegemm.native.gemm``,
``tilegemm.native.unit``) in which every tile instruction (``ldtilecfg``, ``tileloadd64``,
``tdpbf16ps`` ...) becomes a call, with the same arguments, into a :class:`tilegemm.amx.TileUnit`
of the calling thread: the emulated unit, which checks every #GP, #UD and #PF condition of the
SDM before it acts. Everything else is the native kernel's own machine code, compiled for this
host and run: the job loop, the addresses and strides, the configurations, the K steps and the
short last step, the threads.

So a dry run shows that a native program is valid (no fault) and that it computes what the
emulation computes, on any x86-64 host. It does not run the silicon's arithmetic: its
multiplies are the emulator's. It is never chosen by ``backend="native"`` or ``"auto"``; pass
``backend=tilegemm.native.dryrun.DRY`` to :func:`tilegemm.matmul` to ask for it by name.

Pointers reach the unit as (operand buffer, byte offset): a session registers the buffers a run
may touch, and an address outside all of them is a #PF. An exception inside a callback cannot
unwind through machine code; it is kept, every later callback of the session does nothing, and
the session raises it when the run returns.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections import Counter
from contextlib import contextmanager

import numpy as np

from ..amx.config import PFFault, TileConfig
from ..amx.unit import TILE_INSTRUCTIONS, TileUnit
from .gemm import Target

__all__ = ["DRY", "Session", "lower", "last_session"]

PREFIX = "tilegemm.dry."
_X86 = "llvm.x86."

_CFG = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_ONE = ctypes.CFUNCTYPE(None, ctypes.c_uint8)
_MEM = ctypes.CFUNCTYPE(None, ctypes.c_uint8, ctypes.c_void_p, ctypes.c_int64)
_THREE = ctypes.CFUNCTYPE(None, ctypes.c_uint8, ctypes.c_uint8, ctypes.c_uint8)
_NONE = ctypes.CFUNCTYPE(None)


def lower(intrinsic: str) -> str:
    """The function a tile intrinsic becomes in the dry run (other intrinsics stay)."""
    return PREFIX + intrinsic[len(_X86) :] if intrinsic.startswith(_X86) else intrinsic


class Session:
    """One dry run: the buffers it may touch, one emulated unit per thread, the first error."""

    def __init__(self, buffers: dict[str, np.ndarray]):
        self.buffers = [
            (name, int(b.ctypes.data), b.nbytes, b.reshape(-1).view(np.uint8)) for name, b in buffers.items()
        ]
        self.units: dict[int, TileUnit] = {}
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def unit(self) -> TileUnit:
        key = threading.get_ident()
        with self._lock:
            if key not in self.units:
                self.units[key] = TileUnit()
            return self.units[key]

    def locate(self, instr: str, t, ptr: int) -> tuple[np.ndarray, int]:
        """(buffer as bytes, offset) holding address ``ptr``; #PF outside every buffer."""
        for _, base, size, u8 in self.buffers:
            if base <= ptr < base + size:
                return u8, ptr - base
        names = ", ".join(b[0] for b in self.buffers)
        raise PFFault(instr, t, f"address {ptr:#x} lies outside every operand buffer ({names})")

    @property
    def counters(self) -> Counter:
        """Instructions executed by all threads' units, by mnemonic."""
        out: Counter = Counter()
        for u in self.units.values():
            out.update(u.counters.instructions)
        return out


_ACTIVE: list[Session] = []
_SESSION_LOCK = threading.Lock()
_LAST: list[Session] = []


def last_session() -> Session | None:
    """The most recent finished dry-run session (its units and counters), for inspection."""
    return _LAST[-1] if _LAST else None


def _guard(fn):
    """Run a callback on the active session's unit unless an earlier callback failed."""

    def call(*args):
        s = _ACTIVE[0] if _ACTIVE else None
        if s is None or s.error is not None:
            return
        try:
            fn(s, *args)
        except BaseException as e:  # kept and raised by the session: machine code cannot unwind
            s.error = e

    return call


def _ldtilecfg(s, ptr):
    buf, off = s.locate("ldtilecfg", None, ptr)
    s.unit().ldtilecfg(TileConfig.from_bytes(buf[off : off + 64]))


def _sttilecfg(s, ptr):
    buf, off = s.locate("sttilecfg", None, ptr)
    buf[off : off + 64] = np.frombuffer(s.unit().sttilecfg(), np.uint8)


def _tileloadd(s, t, ptr, stride):
    buf, off = s.locate("tileloadd", t, ptr)
    s.unit().tileloadd(t, buf, off, stride)


def _tilestored(s, t, ptr, stride):
    buf, off = s.locate("tilestored", t, ptr)
    s.unit().tilestored(t, buf, off, stride)


def _multiply(method):
    return lambda s, d, a, b: getattr(s.unit(), method)(d, a, b)


_CALLBACKS = {
    "ldtilecfg": _CFG(_guard(_ldtilecfg)),
    "sttilecfg": _CFG(_guard(_sttilecfg)),
    "tileloadd64": _MEM(_guard(_tileloadd)),
    "tilestored64": _MEM(_guard(_tilestored)),
    "tilezero": _ONE(_guard(lambda s, t: s.unit().tilezero(t))),
    "tilerelease": _NONE(_guard(lambda s: s.unit().tilerelease())),
}
_CALLBACKS.update(
    {r.llvm[len(_X86) :]: _THREE(_guard(_multiply(m))) for m, r in TILE_INSTRUCTIONS.items() if r.llvm is not None}
)


@functools.cache
def _register() -> None:
    """Make every callback a symbol the JIT links against (once per process)."""
    import llvmlite.binding as llvm

    for name, cb in _CALLBACKS.items():
        llvm.add_symbol(PREFIX + name, ctypes.cast(cb, ctypes.c_void_p).value)


@contextmanager
def _session(buffers: dict[str, np.ndarray]):
    _register()
    s = Session(buffers)
    with _SESSION_LOCK:
        _ACTIVE.append(s)
        try:
            yield s
        finally:
            _ACTIVE.pop()
            _LAST[:] = [s]
    if s.error is not None:
        raise s.error


class _DryTarget(Target):
    def __repr__(self) -> str:
        return "tilegemm.native.dryrun.DRY"


#: The dry-run target (module docstring).
DRY = _DryTarget("dry", lower, "", False, _session)
_register()  # before anything is compiled for DRY: the JIT resolves the calls when it links
