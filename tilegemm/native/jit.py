"""LLVM IR to machine code with llvmlite, for this host or for a named CPU. No C compiler.

- :func:`compile_host`: JIT-compile a module for this host (MCJIT) and return the addresses of
  its functions, to be called through ``ctypes``. ``features`` adds CPU features to the host's
  (so code for instructions this CPU lacks can be compiled, and must then never be called).
- :func:`assembly`: the assembly of a module for a named CPU, compile only.

A compiled module stays alive as long as the process (its engine is kept), so an address, once
returned, stays valid. Compilation is serialized by one lock; the code runs in any thread.
"""

from __future__ import annotations

import functools
import re
import threading

__all__ = ["compile_host", "assembly", "host_features", "with_features", "TRIPLE"]

TRIPLE = "x86_64-unknown-linux-gnu"
_LOCK = threading.Lock()
_ENGINES: list = []  # every engine made, kept alive with its code
_NOISE = re.compile(r"\s*\.(cfi_|p2align|file|type|size|section|ident|addrsig)")


@functools.cache
def _llvm():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()  # the programs' inline assembly (VFMADD231PS's operand order)
    # compile-only x86-64 code (TRIPLE) on a host of another architecture (AArch64)
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def host_features() -> str:
    """This CPU's LLVM feature string, as LLVM detects it (``+avx512bf16,-amx-tile,...``)."""
    return _llvm().get_host_cpu_features().flatten()


def with_features(base: str, extra: str) -> str:
    """``base`` with every feature of ``extra`` (``"+amx-tile,+amx-bf16"``) switched as ``extra`` says."""
    out = {f[1:]: f[0] for f in base.split(",") if f}
    for f in (x for x in extra.split(",") if x):
        out[f[1:]] = f[0]
    return ",".join(sign + name for name, sign in out.items())


def _machine(cpu: str, features: str, jit: bool):
    llvm = _llvm()
    target = llvm.Target.from_triple(TRIPLE if not jit else llvm.get_process_triple())
    return target.create_target_machine(cpu=cpu, features=features, opt=3, jit=jit)


def _module(text: str, tm):
    llvm = _llvm()
    mod = llvm.parse_assembly(text)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    return mod


def compile_host(text: str, names: tuple[str, ...], features: str = "") -> dict[str, int]:
    """JIT-compile IR ``text`` for this host (plus ``features``); the addresses of ``names``."""
    llvm = _llvm()
    with _LOCK:
        tm = _machine(llvm.get_host_cpu_name(), with_features(host_features(), features), jit=True)
        mod = _module(text, tm)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        _ENGINES.append((engine, mod, tm))
        out = {name: int(engine.get_function_address(name)) for name in names}
    missing = [n for n, a in out.items() if not a]
    if missing:
        raise RuntimeError(f"the compiled module has no function {', '.join(missing)}")
    return out


def assembly(text: str, cpu: str, features: str) -> str:
    """Assembly (AT&T) of IR ``text`` compiled for ``cpu`` with ``features``, directives dropped."""
    with _LOCK:
        tm = _machine(cpu, features, jit=False)
        out = tm.emit_assembly(_module(text, tm))
    return "\n".join(ln for ln in out.splitlines() if not _NOISE.match(ln)) + "\n"
