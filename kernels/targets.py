"""Register blocking per target: the one table the microkernels take their shapes from.

:data:`TABLE` holds one :class:`Entry` per CPU family the blocked drivers (``blocked.py``) are
built for: which body shape each kernel family runs (rows x columns of C, vector lanes, pairs per
loop iteration), the K chunk, the INT8 dot product (VPDPBUSD with AVX512_VNNI, VPMADDWD without)
and the machine facts the benchmark's peak comes from. An entry is picked by the *LLVM CPU name*
of the compile target (the host, or ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` in a cross-target
compile) and its features, because the same IR is scheduled differently per CPU: a body that is
spill-free for one LLVM CPU can spill for another with the same features (measured with
``tilegemm.inspect``; ``tests/test_inspect.py`` compiles every entry for every CPU it names and
requires its inner loops to stay within :attr:`Body.spills`, zero for every entry here).

Targets without AVX2, FMA and F16C (x86) or NEON (AArch64) get no entry and run the portable superblock loop
(``gemm.py``) with the shapes each family declares by target class (``families.py``).

Why these shapes (``docs/architecture.md``, "Per-target bodies", has the measurements):

- Intel AVX-512 cores with two 512-bit FMA units: a body of one tile column (4 x 16) issues
  1.28 loads per FMA (2 B vectors and 8 broadcasts per 8 FMAs) and is load-bound at about 0.78
  of the FMA peak with two load ports; 4 x 32 covers two tiles so that each broadcast feeds two
  FMAs (0.66 loads per FMA with B read as BF16 dwords): FMA-bound.
- Zen 4 executes one 512-bit FMA per cycle and three loads: FMA-bound with any shape; 8 x 16
  amortizes the two widening operations per B vector over 16 FMAs.
- AVX2 (16 ymm registers): 2 x 16 pairs bodies leave room for B and run 8 chains (even and odd
  per vector); 3 x 16 spills on haswell and znver3. VDPBF16PS has one chain per C element, so
  its 2 x 16 ran 4 chains for two FMA units of latency 4 (48% of the peak on Zen 3): 4 x 16 runs 8.
- Every float body loops over 4 pairs per iteration: with all 16 pairs of a step unrolled,
  LLVM's scheduler hoists the B loads of later pairs and spills (4 x 32 on sapphirerapids,
  2 x 16 on haswell, 7 x 16 with FP16 on znver4), with 4 it spills nowhere.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from . import families
from .families import CLASSES, Shape

__all__ = [
    "Body",
    "Entry",
    "TABLE",
    "plan",
    "entry_for",
    "target",
    "Shape",
    "target_features",
    "target_class",
    "shape",
    "CLASSES",
    "NATIVE",
    "Native",
    "family",
    "native_missing",
    "has_mxcsr",
    "is_aarch64",
    "target_arch",
    "x86_nans",
    "ENGINE_NEEDS",
    "engines",
]


@dataclass(frozen=True)
class Body:
    """One body's register blocking: C rows x columns per call, lanes per vector, pairs (or quads)
    per iteration of its loop over a K step, the most vector registers its inner loop may store
    to or reload from the stack on the entry's CPUs (checked by cross-target compiles), and, for
    TDPFP16PS, where a pair's even and odd chains live: ``"split"`` (separate vectors, B's halves
    separated by shuffles) or ``"interleaved"`` (adjacent lanes of one vector, B widened as it
    lies: ``bodies._fp16_pairs_interleaved``)."""

    rows: int
    cols: int
    width: int
    unroll: int = 4
    spills: int = 0
    layout: str = "split"

    def __str__(self) -> str:
        return f"{self.rows}x{self.cols}"


@dataclass(frozen=True)
class Entry:
    """One row of the per-target table.

    Attributes
    ----------
    name:
        The row's name (shown by ``python -m tilegemm info`` and in kernel names).
    cpus:
        LLVM CPU names the row was chosen and spill-checked for; other CPUs with the features
        fall back to the first row whose features they have.
    needs:
        LLVM features the row's code uses.
    pairs_bf16, pairs_fp16, dot:
        The fast float bodies of TDPBF16PS, TDPFP16PS (``f32pairs``) and VDPBF16PS (``vdp``).
    flag_rows:
        Rows per call of the exact vector body (the flush-and-flag body of blocks that fail the
        fast proof); it divides the rows of every float body.
    quads, int_kind:
        The INT8 body and its dot product: ``"vnni"`` (VPDPBUSD) or ``"madd"`` (VPMADDWD).
    kc:
        K steps per chunk: a body runs them on one block of C before moving on, and C is read
        and written once per chunk. 16 steps: the B blocks a 1- or 2-tile body reads (16 or
        32 KiB as BF16) stay in L1 and C's traffic halves against 8 (measured on Zen 4: 8, 16
        and 32 within a few percent, 4 slower).
    fma_units, fma_width:
        Vector FMA instructions per cycle per core and their lanes (float32), for the FMA peak.
    note:
        Where the shapes come from.
    """

    name: str
    cpus: tuple[str, ...]
    needs: frozenset[str]
    pairs_bf16: Body
    pairs_fp16: Body
    dot: Body
    flag_rows: int
    quads: Body
    int_kind: str
    kc: int
    fma_units: int
    fma_width: int
    note: str

    def body(self, name: str) -> Body:
        """A body by field name (``"pairs_bf16"``, ``"pairs_fp16"``, ``"dot"``, ``"quads"``)."""
        body = getattr(self, name)
        assert isinstance(body, Body)
        return body


_AVX2 = frozenset({"+avx2", "+fma", "+f16c"})
#: AArch64's Advanced SIMD: 32 registers of 128 bits (v0-v31) on every AArch64 core
#: (Arm Architecture Reference Manual for A-profile, B1.2.1 "Registers in AArch64 state").
_NEON = frozenset({"+neon"})
_AVX512 = _AVX2 | {"+avx512f", "+avx512bw", "+avx512vl"}
_VNNI = _AVX512 | {"+avx512vnni"}

#: The per-target table, most specific first.
TABLE: tuple[Entry, ...] = (
    Entry(
        "avx512-2fma-vnni",
        (
            "icelake-server",
            "icelake-client",
            "tigerlake",
            "rocketlake",
            "cascadelake",
            "cooperlake",
            "sapphirerapids",
            "emeraldrapids",
            "graniterapids",
            "graniterapids-d",
        ),
        _VNNI,
        pairs_bf16=Body(4, 32, 16),
        pairs_fp16=Body(4, 32, 16),
        dot=Body(4, 32, 16),
        flag_rows=4,
        quads=Body(8, 32, 16),
        int_kind="vnni",
        kc=16,
        fma_units=2,
        fma_width=16,
        note="Intel AVX-512, two 512-bit FMA units: two tiles per body (port model: FMA-bound); "
        "cross-compiled and spill-checked, not run on such a CPU",
    ),
    Entry(
        "avx512-2fma",
        ("skylake-avx512", "cannonlake"),
        _AVX512,
        pairs_bf16=Body(4, 32, 16),
        pairs_fp16=Body(4, 32, 16),
        dot=Body(4, 32, 16),
        flag_rows=4,
        quads=Body(4, 16, 16),
        int_kind="madd",
        kc=16,
        fma_units=2,
        fma_width=16,
        note="Intel AVX-512 without VNNI: VPMADDWD on widened bytes, 4 x 16 the largest spill-free "
        "shape; cross-compiled and spill-checked, not run on such a CPU",
    ),
    Entry(
        "avx512-zen4",
        ("znver4", "znver5"),
        _VNNI,
        pairs_bf16=Body(8, 16, 16),
        pairs_fp16=Body(8, 16, 16),
        dot=Body(8, 16, 16),
        flag_rows=4,
        quads=Body(8, 32, 16),
        int_kind="vnni",
        kc=16,
        fma_units=1,
        fma_width=16,
        note="AMD Zen 4: one 512-bit FMA per cycle; measured on a Zen 4 host (znver5: not measured)",
    ),
    Entry(
        "avx2-zen",
        ("znver1", "znver2", "znver3"),
        _AVX2,
        pairs_bf16=Body(2, 16, 8),
        pairs_fp16=Body(2, 16, 8, layout="interleaved"),
        dot=Body(4, 16, 8),
        flag_rows=1,
        quads=Body(3, 8, 8),
        int_kind="madd",
        kc=16,
        fma_units=2,
        fma_width=8,
        note="AMD Zen 1-3, 16 ymm registers; spill-checked for znver3 and measured on a Zen 3 host "
        "(2x16 float bodies at 58% of the FMA peak with BF16, 3x8 to 6x8 no faster; FP16 with "
        "interleaved chains 2.2x the split layout; VDPBF16PS's one chain per element needs 8 "
        "chains to cover 2 FMA units of latency 4: 4x16, 0.47 -> 0.76-0.83 of numpy at n = 1024, "
        "5x16 the same, 3x16 0.68, 6x16 0.66)",
    ),
    Entry(
        "avx2",
        ("haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake", "x86-64-v3"),
        _AVX2,
        pairs_bf16=Body(2, 16, 8),
        pairs_fp16=Body(2, 16, 8),
        dot=Body(4, 16, 8),
        flag_rows=1,
        quads=Body(3, 8, 8),
        int_kind="madd",
        kc=16,
        fma_units=2,
        fma_width=8,
        note="Intel AVX2 (two 256-bit FMA ports), 16 ymm registers; cross-compiled and spill-checked for haswell "
        "(VDPBF16PS 4x16: 8 chains for 2 FMA ports of latency 4-5, as on Zen; not run on such a CPU)",
    ),
    Entry(
        "neon",
        ("neoverse-v1", "neoverse-v2", "apple-m1"),
        _NEON,
        # The bodies' vectors are 8 lanes wide and LLVM splits each into two 128-bit registers,
        # so NEON's 32 q registers hold what AVX2's 16 ymm hold. Shapes: the largest without a
        # spill in the inner loop on all three CPUs with LLVM 22 (cross-compiled): BF16 2 x 16
        # as on avx2 (3 x 16 would be 24 chains of two q registers each); FP16 with interleaved
        # chains (the split layout's shuffles spilled 2 on neoverse-v1); VDPBF16PS 3 x 16 (4 x 16
        # spilled 8 on apple-m1); INT8 2 x 8 (3 x 8 spilled 4 on neoverse-v2).
        pairs_bf16=Body(2, 16, 8),
        pairs_fp16=Body(2, 16, 8, layout="interleaved"),
        dot=Body(3, 16, 8),
        flag_rows=1,
        quads=Body(2, 8, 8),
        int_kind="widen",
        kc=16,
        fma_units=4,
        fma_width=4,
        note="AArch64 NEON, 32 registers of 128 bits (Neoverse V1 and V2, Apple M1: four 128-bit FMA "
        "pipes); VPMADDWD's sums as SMULL and SMLAL; cross-compiled (aarch64-unknown-linux-gnu) and "
        "spill-checked for the three, run under qemu-user (.ci/arm64), not timed on such a CPU",
    ),
)


@functools.cache
def _target() -> tuple[str, frozenset[str]]:
    import llvmlite.binding as llvm
    from numba.core import config

    name = config.CPU_NAME or llvm.get_host_cpu_name()
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else llvm.get_host_cpu_features().flatten()
    have = frozenset(features.split(","))
    if config.CPU_FEATURES is None and is_aarch64() and "-neon" not in have:
        # Every AArch64 target LLVM compiles for has NEON unless told otherwise (the "generic"
        # CPU of its AArch64 target parser includes FP and SIMD), but the host's feature list
        # may not say so: Linux lists "asimd" in /proc/cpuinfo, which qemu-user does not
        # emulate, and macOS answers through sysctl.
        have |= _NEON
    return str(name), have


def target() -> tuple[str, frozenset[str]]:
    """LLVM CPU name and features of the target Numba compiles for (``NUMBA_CPU_NAME`` /
    ``NUMBA_CPU_FEATURES`` when set, else the host). Numba reads its target once per process, so
    this is read once too."""
    return _target()


def entry_for(cpu: str, features: set[str] | frozenset[str]) -> Entry | None:
    """The table row for an LLVM CPU name and feature set: the row naming the CPU if its features
    are there, else the first row whose features are (None: no row, the portable loop runs)."""
    for e in TABLE:
        if cpu in e.cpus and e.needs <= features:
            return e
    return next((e for e in TABLE if e.needs <= features), None)


def plan() -> Entry | None:
    """The table row of the compile target (None: the portable superblock loop runs)."""
    return entry_for(*_target())


# --------------------------------------------------------------------------------------------
# The portable superblock loop's shapes: by target class, declared with each family
# (families.py), for targets without a row above and for families that run the superblock loop.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Native:
    """A family that runs an instruction itself, in place of the family emulating it, where the
    compile target has the instruction.

    ``needs``: the LLVM features the instruction needs; ``family``: the family that runs it;
    ``portable``: its IR is target-independent, so LLVM carries it out exactly on targets without
    the instruction too (which lets the tests run it on every host)."""

    needs: frozenset[str]
    family: str
    portable: bool


#: Family -> the :class:`Native` family that replaces it where the compile target has the
#: instruction. VFMADD231PH on ymm needs AVX512-FP16 with AVX512VL (Sapphire Rapids and later
#: Xeons); its IR, ``llvm.fma`` on ``half`` vectors, is the IEEE binary16 FMA on any target.
NATIVE: dict[str, Native] = {
    "f16acc": Native(frozenset({"+avx512fp16", "+avx512vl", "+avx512bw"}), "f16acc_native", True),
}


def native_missing(name: str, features: set[str] | frozenset[str] | None = None) -> tuple[str, ...]:
    """The LLVM features the compile target (or a target with ``features``) lacks for
    :data:`NATIVE`'s replacement of family ``name``, sorted; empty where it has them all or the
    family has no replacement."""
    if name not in NATIVE:
        return ()
    have = _target()[1] if features is None else features
    return tuple(sorted(NATIVE[name].needs - have))


def family(name: str, features: set[str] | frozenset[str] | None = None) -> str:
    """The kernel family that runs for family ``name`` on the compile target (or on a target with
    ``features``): :data:`NATIVE`'s replacement where the target has its instruction, else ``name``."""
    if name in NATIVE and not native_missing(name, features):
        return NATIVE[name].family
    return name


#: The engines beyond FMA that the blocked drivers' BF16 bodies can run TDPBF16PS's chains on,
#: fastest first, with the LLVM features each needs: VDPBF16PS on zmm (AVX512_BF16: Cooper Lake,
#: Sapphire Rapids and later Xeons, AMD Zen 4 and 5), two steps of a chain per instruction.
ENGINE_NEEDS: dict[str, frozenset[str]] = {
    "vdpbf16ps": frozenset({"+avx512bf16", "+avx512f", "+avx512bw"}),
}


def engines(features: set[str] | frozenset[str] | None = None) -> tuple[str, ...]:
    """The engines of :data:`ENGINE_NEEDS` the compile target (or a target with ``features``)
    has, fastest first; ``"fma"``, which every target with a table row has, is left out. An
    engine also needs a row whose BF16 body is 16 lanes wide."""
    return _target_engines() if features is None else _engines_of("", features)


@functools.cache
def _target_engines() -> tuple[str, ...]:
    """:func:`engines` of the compile target, asked several times per call; the target is fixed."""
    return _engines_of(*_target())


def _engines_of(cpu: str, have: set[str] | frozenset[str]) -> tuple[str, ...]:
    row = entry_for(cpu, have)
    if row is None or row.pairs_bf16.width != 16:
        return ()
    return tuple(e for e, need in ENGINE_NEEDS.items() if need <= have)


def target_features() -> set[str]:
    """Features of the target Numba compiles for (``NUMBA_CPU_FEATURES`` when set, else the host)."""
    return set(_target()[1])


def is_aarch64() -> bool:
    """Whether this process runs AArch64 code (Linux ``aarch64``, macOS ``arm64``)."""
    import llvmlite.binding as llvm

    return llvm.get_process_triple().split("-")[0] in ("aarch64", "arm64")


def target_arch() -> str:
    """The architecture of the compile target (``"x86_64"``, ``"aarch64"``, ...). Numba compiles for
    the architecture it runs on; a cross-target compile for an AArch64 CPU on x86-64
    (``NUMBA_CPU_FEATURES`` naming ``+neon``, an AArch64 feature; ``tilegemm.inspect`` retargets
    its IR) is built as for AArch64 too, so that its IR holds no x86 intrinsic."""
    import llvmlite.binding as llvm

    if is_aarch64() or "+neon" in _target()[1]:
        return "aarch64"
    return llvm.get_process_triple().split("-")[0]


@functools.cache
def x86_nans() -> bool:
    """Whether the target's invalid operations (inf - inf, 0 * inf, ...) return x86's default NaN,
    the "real indefinite" 0xFFC00000 (Intel SDM vol. 1, 4.8.3.7), as the fast bodies' hardware
    arithmetic must. AArch64 returns 0x7FC00000 (Arm ARM, FPDefaultNaN()); elsewhere the caller
    (``tilegemm.api``) recomputes a result that holds a NaN on the paths that take NaNs by rule."""
    return has_mxcsr()


def has_mxcsr() -> bool:
    """Whether the compile target is x86, whose SSE control and status register, MXCSR, the
    binary32 AMX-FP8 body reads (:func:`target_arch`)."""
    return target_arch() in ("x86_64", "i386", "i686")


def target_class(features: set[str] | frozenset[str] | None = None) -> str:
    """The first class of :data:`CLASSES` whose features the target has."""
    have = _target()[1] if features is None else features
    return next(name for name, need in CLASSES if need <= have)


def shape(family: str, features: set[str] | frozenset[str] | None = None) -> Shape:
    """The superblock-loop body shape of a kernel family on the target (``families.Family.shapes``)."""
    return families.get(family).shapes[target_class(features)]
