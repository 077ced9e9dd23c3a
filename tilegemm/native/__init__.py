"""Native execution: the emulated instructions run on this CPU's own silicon, where it has them.

- ``tilegemm.matmul(..., backend="native")`` runs the instruction's native program (the seed's
  tile loops for the AMX instructions; for the other CPUs' paths one instruction per K group:
  VDPBF16PS, VPDPBUSD(S), VPMADDUBSW, VFMADD231PS, ``tilegemm.native.vdp``), JIT-compiled by
  LLVM through llvmlite for this host, on the same packed operands, K steps and tail rule as the
  emulation; ``backend="auto"`` does so where this host can and emulates otherwise.
- ``tilegemm.amx.TileUnit(native=True)``: the tile API's programs on the real tile registers.
- ``python -m tilegemm selfcheck``: every instruction this host runs natively against the
  emulation, on adversarial operands.

What a host can run is decided from ``/proc/cpuinfo`` and, for tile instructions, the kernel's
tile permission (:mod:`tilegemm.native.host`); nothing here executes an instruction the CPU
lacks. :mod:`tilegemm.native.dryrun` runs the native programs' code with the tile unit emulated,
for hosts without AMX. This package imports llvmlite only when something is compiled.
"""

from __future__ import annotations

import functools

from ..instructions import Instruction
from .host import TILE_FLAG, NativeUnavailable, request_tile_permission, this_host

__all__ = ["NativeUnavailable", "BACKENDS", "needs", "lacks", "require", "usable", "select", "this_host"]

#: The values of ``backend=`` (besides a ``gemm.Target`` object): the default first.
BACKENDS = ("emulated", "native", "auto")


def needs(instr: Instruction) -> tuple[str, ...]:
    """The /proc/cpuinfo flags a CPU needs to run ``instr`` natively."""
    flags = (TILE_FLAG,) if instr.tile_method is not None else ()
    return flags + ((instr.cpu_flag,) if instr.cpu_flag and instr.cpu_flag not in flags else ())


def lacks(instr: Instruction) -> tuple[str, ...]:
    """What this host lacks to run ``instr`` natively, without asking the kernel anything:
    the OS, a native program, or CPU flags. Empty when only the permission remains to be asked."""
    from .gemm import generator

    h = this_host()
    if not h.supported_os:
        return (f"Linux x86-64 (this is {h.system} {h.machine})",)
    if generator(instr) is None:
        return (f"a native program for {instr.mnemonic}",)
    return h.lacks(needs(instr))


def require(instr: Instruction) -> None:
    """Return if this host can run ``instr`` natively now; otherwise raise
    :class:`NativeUnavailable` naming what is missing (CPU flags, or the kernel's permission)."""
    missing = lacks(instr)
    if missing:
        h = this_host()
        raise NativeUnavailable(
            f"backend='native' cannot run {instr.mnemonic} here: this CPU ({h.model}) lacks "
            f"{', '.join(missing)}; use backend='emulated' (the default) or 'auto'",
            missing,
        )
    if instr.tile_method is not None:
        try:
            request_tile_permission()
        except NativeUnavailable as e:
            raise NativeUnavailable(f"backend='native' cannot run {instr.mnemonic} here: {e}", e.missing) from None


@functools.cache
def usable(instr: Instruction) -> bool:
    """Whether ``instr`` runs natively here (:func:`require` passes); decided once per process."""
    try:
        require(instr)
    except NativeUnavailable:
        return False
    return True


def select(backend, instr: Instruction):
    """The ``gemm.Target`` a ``backend=`` value runs ``instr`` on, or None for emulation.

    ``"emulated"`` (None: the default), ``"native"`` (this CPU, or :class:`NativeUnavailable`),
    ``"auto"`` (this CPU where :func:`usable`, else emulation), or a ``gemm.Target`` such as
    ``tilegemm.native.dryrun.DRY``. Anything else is a ``ValueError``."""
    from .gemm import HOST, Target, generator

    if isinstance(backend, Target):
        if generator(instr) != "tiles" and backend is not HOST:
            raise ValueError(f"target {backend!r} runs tile instructions only, not {instr.mnemonic}")
        if backend is HOST:
            require(instr)
        return backend
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    if backend == BACKENDS[0]:
        return None
    if backend == BACKENDS[1]:
        require(instr)
        return HOST
    return HOST if usable(instr) else None
