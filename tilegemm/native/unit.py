"""``TileUnit(native=True)``: each tile instruction of the tile API executed by the CPU.

A :class:`tilegemm.amx.TileUnit` keeps its registers in NumPy (``unit.tiles``) and checks every
fault condition before it acts, natively or not (a real #UD or #GP would kill the process). In
native mode, each data or multiply instruction then runs as one small compiled function on the
real tile registers: LDTILECFG with the unit's configuration, TILELOADD of every configured
register from ``unit.tiles``, the instruction itself (its tile numbers are immediates, so there
is one function per instruction and operands, compiled on first use), TILESTORED of every
configured register back into ``unit.tiles``, TILERELEASE. The registers therefore survive
whatever the process does between two instructions (other code may use the tile unit too), and
``unit.tile(t)`` reads what the silicon wrote.

Configuration instructions (LDTILECFG, STTILECFG, TILERELEASE) stay in Python: they change no
register contents the next native instruction does not restore, and every native instruction
executes LDTILECFG with the unit's configuration.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from .gemm import HOST, Target
from .host import TILE_FLAG, NativeUnavailable, request_tile_permission, this_host

__all__ = ["NativeTiles", "unit_ir"]

_REGISTERS = 8


def unit_ir(op: tuple, name: str, lower=lambda n: n) -> str:
    """IR of ``void name(ptr cfg, ptr registers, ptr mem, i64 stride)`` for one instruction:
    ``("load", t)``, ``("store", t)``, ``("zero", t)`` or ``("dp", instruction, dst, a, b)``."""
    from .program import declarations

    tdp = op[1].llvm if op[0] == "dp" else "llvm.x86.tdpbf16ps"
    L = [f"define void @{name}(ptr %cfg, ptr %regs, ptr %mem, i64 %stride) {{", "entry:"]
    L.append(f"  call void @{lower('llvm.x86.ldtilecfg')}(ptr %cfg)")

    def every_configured(what: str, block: str) -> None:
        L.append(f"  br label %{block}0")
        for t in range(_REGISTERS):
            L.append(f"{block}{t}:")
            L.append(f"  %{block}.rp{t} = getelementptr i8, ptr %cfg, i64 {48 + t}")
            L.append(f"  %{block}.r{t} = load i8, ptr %{block}.rp{t}")
            L.append(f"  %{block}.on{t} = icmp ne i8 %{block}.r{t}, 0")
            L.append(f"  br i1 %{block}.on{t}, label %{block}.do{t}, label %{block}{t + 1}")
            L.append(f"{block}.do{t}:")
            L.append(f"  %{block}.p{t} = getelementptr i8, ptr %regs, i64 {1024 * t}")
            L.append(f"  call void @{lower(what)}(i8 {t}, ptr %{block}.p{t}, i64 64)")
            L.append(f"  br label %{block}{t + 1}")
        L.append(f"{block}{_REGISTERS}:")

    every_configured("llvm.x86.tileloadd64", "in")
    if op[0] == "load":
        L.append(f"  call void @{lower('llvm.x86.tileloadd64')}(i8 {op[1]}, ptr %mem, i64 %stride)")
    elif op[0] == "store":
        L.append(f"  call void @{lower('llvm.x86.tilestored64')}(i8 {op[1]}, ptr %mem, i64 %stride)")
    elif op[0] == "zero":
        L.append(f"  call void @{lower('llvm.x86.tilezero')}(i8 {op[1]})")
    else:
        _, instr, d, a, b = op
        L.append(f"  call void @{lower(instr.llvm)}(i8 {d}, i8 {a}, i8 {b})")
    every_configured("llvm.x86.tilestored64", "out")
    L += [f"  call void @{lower('llvm.x86.tilerelease')}()", "  ret void", "}"]
    return "\n".join(declarations(tdp, lower) + L) + "\n"


class NativeTiles:
    """Executes tile instructions of a ``TileUnit`` on ``target`` (module docstring)."""

    def __init__(self, target: Target = HOST):
        self.target = target
        self._asked = threading.local()

    @classmethod
    def for_host(cls) -> NativeTiles:
        """The executor for this CPU; :class:`NativeUnavailable` where it has no tile registers
        or the kernel refuses them."""
        h = this_host()
        missing = h.lacks((TILE_FLAG,)) if h.supported_os else (f"Linux x86-64 (this is {h.system} {h.machine})",)
        if missing:
            raise NativeUnavailable(
                f"TileUnit(native=True) needs this CPU's tile registers: this CPU ({h.model}) lacks "
                f"{', '.join(missing)}; use TileUnit() (emulated)",
                missing,
            )
        try:
            request_tile_permission()
        except NativeUnavailable as e:
            raise NativeUnavailable(f"TileUnit(native=True): {e}", e.missing) from None
        return cls(HOST)

    def _ready(self, op: tuple) -> None:
        """Before a real tile instruction runs in this thread: its CPU flag, and the permission."""
        if self.target.permission:
            if op[0] == "dp" and op[1].cpu_flag not in this_host().flags:
                raise NativeUnavailable(
                    f"{op[1].mnemonic} needs {op[1].cpu_flag}, which this CPU ({this_host().model}) lacks",
                    (op[1].cpu_flag,),
                )
            if not getattr(self._asked, "done", False):
                request_tile_permission()
                self._asked.done = True

    def execute(self, unit, op: tuple, buf: np.ndarray | None = None, offset: int = 0, stride: int = 0) -> None:
        """Run ``op`` (see :func:`unit_ir`) on ``unit``'s registers; ``buf[offset:]`` is the
        memory of a load or store, already checked by the unit."""
        self._ready(op)
        fn = _compiled(self.target, _key(op))
        cfg = np.frombuffer(unit.config.to_bytes(), np.uint8).copy()
        regs = unit.tiles
        mem = buf if buf is not None else np.zeros(1, np.uint8)
        buffers = {"configuration": cfg, "registers": regs, "memory": mem}
        with self.target.session(buffers):
            fn(cfg.ctypes.data, regs.ctypes.data, mem.ctypes.data + int(offset), int(stride))


def _key(op: tuple) -> tuple:
    return op if op[0] != "dp" else ("dp", op[1].mnemonic) + tuple(int(x) for x in op[2:])


@functools.cache
def _compiled(target: Target, key: tuple):
    import ctypes

    from ..instructions import INSTRUCTIONS
    from . import jit

    op: tuple = key if key[0] != "dp" else ("dp", INSTRUCTIONS[key[1]]) + key[2:]
    name = "tilegemm_unit_" + "_".join(str(x).lower() for x in key) + f"_{target.name}"
    addr = jit.compile_host(unit_ir(op, name, target.lower), (name,), target.features)[name]
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(addr)
