"""Shared test helpers: operand generation, the kernel tester's comparison, path forcing."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys

import numpy as np
import pytest
from hypothesis import settings

import tilegemm
from tilegemm import instructions, plan

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile("tilegemm", derandomize=True, deadline=None, print_blob=True, max_examples=40)
settings.load_profile("tilegemm")

DEFAULT = instructions.PROFILES[instructions.DEFAULT_ISA]
#: The default profile's dtypes (the AMX instructions), floats and integers, from the records.
ALL_DTYPES = tuple(DEFAULT.dtypes)
FLOAT_DTYPES = tuple(d for d, i in DEFAULT.dtypes.items() if i.is_float)
INT_DTYPES = tuple(d for d, i in DEFAULT.dtypes.items() if not i.is_float)


def _kernel_cases():
    """Every (isa, dtype) any instruction profile defines (library profiles such as "onednn" run
    these kernels inside their own schedule and have their own tests; a profile that is another
    encoding of one already listed, ``Profile.same_as``, is not listed twice), except where an
    earlier case runs the same kernels on the same operands: ACE's int8 outer products run AMX's int8 kernels
    (their references are compared with AMX's in tests/test_ace.py)."""
    cases: dict = {}
    for p in instructions.PROFILES.values():
        if p.library is None and p.same_as is None:
            for d, i in p.dtypes.items():
                cases.setdefault((i.kernel, i.a, i.b, i.acc, i.switches, i.scale_block), (p.name, d))
    return tuple(cases.values())


KERNEL_CASES = _kernel_cases()
SEED_TILINGS = ("1x1", "2x2")  # the seed's two; the kernel tester covers every tiling


def instr(dtype, isa=instructions.DEFAULT_ISA):
    return instructions.resolve(isa, dtype)[2]


def operands(dtype, a_shape, b_shape, rng, isa=instructions.DEFAULT_ISA):
    """Random inputs a caller would pass for ``dtype``: float64 (the conversion rounds once from
    it), or in-range integers as int64; 8-bit floats for ACE's MX outer products, which refuse
    anything else."""
    i = instr(dtype, isa)
    a, b = i.a.sample(a_shape, rng, wide=True), i.b.sample(b_shape, rng, wide=True)
    return i.quantize(a, b, dtype) if i.codes_only else (a, b)


def assert_bits(got, want, context=""):
    """The one comparison: bit for bit through tilegemm.bitdiff."""
    d = tilegemm.bitdiff(got, want)
    assert d.identical, f"{context}: {d}"


def reference_stack(a, b, dtype, c=None, isa=instructions.DEFAULT_ISA):
    """tilegemm.reference.matmul over broadcast batch dimensions (reference is 2-D)."""
    a = np.asarray(a)
    b = np.asarray(b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + (a.shape[-2], b.shape[-1]), instr(dtype, isa).acc)
    for idx in np.ndindex(*batch):
        out[idx] = tilegemm.reference.matmul(a[idx], b[idx], dtype, None if c is None else c[idx], isa=isa)
    return out


@pytest.fixture(params=["fast", "exact"])
def path(request, monkeypatch):
    """Run the float kernels through their fast path where the proof allows it, or always exact."""
    if request.param == "exact":
        monkeypatch.setattr(plan, "fast_path_ok", lambda *args, **kw: False)
        monkeypatch.setattr(plan, "FORCED_PATH", "exact")  # blocked kernels: every block exact
    return request.param


#: The two kernel families of ``isa="avx512_fp16"``: VFMADD231PH emulated on binary32 lanes, and
#: the instruction itself on binary16 lanes (what the table runs where the CPU has AVX512-FP16).
F16ACC_FAMILIES = ("f16acc", "f16acc_native")
#: What LLVM calls where the target has no binary16 arithmetic (libgcc, GCC 12 and later).
_HALF_HELPERS = ("__truncdfhf2", "__truncsfhf2", "__extendhfsf2")


@functools.cache  # a skip raises, so only a successful link is kept
def link_half_helpers():
    """Make libgcc's binary16 conversions visible to Numba's JIT, or skip: without AVX512-FP16, LLVM
    carries a binary16 FMA out as a binary64 FMA (exact, or rounded once below binary16's
    precision) rounded once to binary16 by ``__truncdfhf2``, the same rounding as the instruction's
    (docs/isa-profiles.md), and converts through ``__extendhfsf2``/``__truncsfhf2`` without F16C."""
    import ctypes
    import ctypes.util

    import llvmlite.binding as llvm

    name = ctypes.util.find_library("gcc_s")
    lib = ctypes.CDLL(name) if name else None
    if lib is None or not all(hasattr(lib, s) for s in _HALF_HELPERS):
        pytest.skip(f"no libgcc_s with {', '.join(_HALF_HELPERS)} (GCC >= 12): binary16 IR cannot run on this host")
    llvm.load_library_permanently(name)


def families(kernel: str) -> tuple[str, ...]:
    """Kernel family ``kernel`` (an instruction record's), then its fallback (the family a call runs
    where the first one's proof fails, ``tilegemm.dispatch.Family.fallback``), then the family that
    runs the instruction itself (``tilegemm.kernels.targets.NATIVE``) where this host can run it:
    with the instruction, or anywhere for target-independent IR."""
    from tilegemm import dispatch
    from tilegemm.kernels import targets

    out = (kernel,)
    fallback = dispatch.FAMILIES[kernel].fallback
    if fallback is not None:
        out += (fallback,)
    nat = targets.NATIVE.get(kernel)
    if nat is not None and (nat.portable or not targets.native_missing(kernel)):
        out += (nat.family,)
    return out


def use_family(monkeypatch, kernel: str, family: str):
    """Make every instruction whose record names kernel family ``kernel`` run family ``family`` (one
    of :func:`families`) for the rest of the test, whichever the table picks on this host."""
    from tilegemm import dispatch
    from tilegemm.kernels import targets

    nat = targets.NATIVE.get(kernel)
    if nat is not None and family == nat.family and targets.native_missing(kernel):
        link_half_helpers()  # portable IR on a host without the instruction: LLVM's library calls
    fam = dispatch.FAMILIES[family]
    table = {
        key: dataclasses.replace(k, family=fam) if k.instruction.kernel == kernel else k
        for key, k in dispatch.table().items()
    }
    monkeypatch.setattr(dispatch, "table", lambda: table)


def use_f16acc_family(monkeypatch, name):
    """Make ``isa="avx512_fp16"`` run kernel family ``name`` (one of :data:`F16ACC_FAMILIES`)."""
    use_family(monkeypatch, "f16acc", name)


@pytest.fixture(params=F16ACC_FAMILIES)
def f16acc_family(request, monkeypatch):
    """Each family of ``isa="avx512_fp16"`` in turn (:func:`use_f16acc_family`)."""
    use_f16acc_family(monkeypatch, request.param)
    return request.param


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests that run on one pytest-xdist worker")
    config.addinivalue_line("markers", "quick: the quick subset, every kernel family once (pytest -m quick)")
    config.addinivalue_line(
        "markers",
        "deep: the exhaustive tier, left out by default (pyproject.toml's addopts) and run by .ci/run (pytest -m deep)",
    )


#: Modules that share a group because their first tests compile the same large kernel (the tile
#: unit's TDPBF16PS, about 30 s on one core): in one group the second module loads it from the
#: cache instead of compiling it again on the other worker at the same time.
SHARED_GROUPS = {"test_seed_kernels": "tile-unit", "test_native_dryrun": "tile-unit", "test_unit": "tile-unit"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Groups for ``pytest -n auto --dist loadgroup`` (the README's test command): the kernel
    tester's cases by (isa, dtype), every other test by its module. A group runs on one worker, so
    the two workers of a cold run compile different kernels instead of racing to compile the same
    ones (the Numba cache makes the second compile of a kernel a load). ``tryfirst``: pytest-xdist
    reads the markers in its own hook of this name, which would otherwise run first
    (tests/test_suite.py checks that the groups arrive)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        callspec = getattr(item, "callspec", None)
        if item.module.__name__.endswith("test_kernels") and callspec is not None and "isa" in callspec.params:
            group = f"kernels-{callspec.params['isa']}-{callspec.params['dtype']}"
        else:
            group = SHARED_GROUPS.get(item.module.__name__, item.module.__name__)
        item.add_marker(pytest.mark.xdist_group(group))


#: The CPUs tests/test_inspect.py cross-compiles the per-target table's bodies for (compiled,
#: never run) and whose inner loops it holds to the spill budgets: AVX2 (Intel, AMD), AVX-512
#: without and with VNNI (Intel), with AMX (Intel), Zen 4, and AArch64 NEON (Arm Neoverse V1
#: and V2, Apple M1: compiled for aarch64-unknown-linux-gnu, ``tilegemm.inspect.TRIPLES``).
CROSS_CPUS = (
    "haswell",
    "znver3",
    "skylake-avx512",
    "icelake-server",
    "sapphirerapids",
    "znver4",
    "neoverse-v1",
    "neoverse-v2",
    "apple-m1",
)


def target_report(cpu: str | None = None, features: frozenset[str] | None = None) -> list[str]:
    """Lines naming the compile target (the host, or ``NUMBA_CPU_NAME``; or ``cpu`` with
    ``features``), its LLVM, and for every row of the per-target table whether its bodies run in
    these tests (the target's row: the kernel tests execute it) or are only cross-compiled (for the
    CPUs of :data:`CROSS_CPUS` it names), so that a report shows which rows this host verified."""
    import llvmlite
    import llvmlite.binding as llvm

    from tilegemm.kernels import targets

    if cpu is None:
        cpu, features = targets.target()
        row = targets.plan()
        host = llvm.get_host_cpu_name()
        origin = "this host" if cpu == host else f"NUMBA_CPU_NAME; this host is {host}"
    else:
        features = features or frozenset()
        row = targets.entry_for(cpu, features)
        origin = "given"
    version = ".".join(map(str, llvm.llvm_version_info))
    lines = [
        f"tilegemm target: LLVM CPU {cpu} ({origin}), class {targets.target_class(features)}, "
        f"LLVM {version} (llvmlite {llvmlite.__version__})"
    ]
    if row is None:
        lines.append("tilegemm: no table row fits this target: the portable superblock loop runs")
    for e in targets.TABLE:
        cross = ", ".join(c for c in CROSS_CPUS if c in e.cpus)
        if e is row:
            what = (
                f"executed here; also cross-compiled for {cross} (tests/test_inspect.py)" if cross else "executed here"
            )
        else:
            what = (
                f"cross-compiled only, for {cross} (tests/test_inspect.py)"
                if cross
                else "neither executed nor compiled"
            )
        lines.append(f"tilegemm table row {e.name}: {what}")
    return lines


def pytest_report_header(config):
    """The target and the table rows it runs (:func:`target_report`). Under pytest-xdist the
    controller prints the header; it imports Numba and llvmlite here, which this module's imports
    of tilegemm have already done, so the header adds only the host CPU query."""
    return target_report()
