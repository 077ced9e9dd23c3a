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

Targets without AVX2, FMA and F16C get no entry and run the portable superblock loop
(``gemm.py``) with the shapes of :data:`SHAPES` by target class.

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

__all__ = [
    "Body",
    "Entry",
    "TABLE",
    "plan",
    "entry_for",
    "target",
    "Shape",
    "SHAPES",
    "target_features",
    "target_class",
    "shape",
    "CLASSES",
    "NATIVE",
    "Native",
    "family",
    "native_missing",
    "has_mxcsr",
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
)


@functools.cache
def _target() -> tuple[str, frozenset[str]]:
    import llvmlite.binding as llvm
    from numba.core import config

    name = config.CPU_NAME or llvm.get_host_cpu_name()
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else llvm.get_host_cpu_features().flatten()
    return str(name), frozenset(features.split(","))


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
# The portable superblock loop's shapes (gemm.py, tiles.py): by target class, for targets
# without a row above and for families that run the superblock loop.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """One superblock-loop body: C rows per body, C columns, floats (or int32) per vector, and
    (AMX-FP8) whether C stays in registers across the K steps of a call."""

    rows: int
    cols: int
    width: int
    hold_c: bool = False


#: Target classes, most capable first: (name, features that must all be present).
CLASSES: tuple[tuple[str, frozenset[str]], ...] = (
    ("avx512_vnni", frozenset({"+avx512f", "+avx512bw", "+avx512vnni"})),
    ("avx512", frozenset({"+avx512f", "+avx512bw"})),
    ("avx2", frozenset({"+avx2", "+fma"})),
    ("generic", frozenset()),
)

# Rows per body. Floats (f32pairs, vdp): rows x (even, odd) x 16 columns of accumulators plus
# the B vectors must fit the register file: 4 rows with 32 zmm, 2 rows with 16 ymm (4 rows
# spilled on haswell). INT8 (i8quads): the widened-byte body needs temporaries per row; with a
# VNNI dot product LLVM fuses them and 4 rows fit, elsewhere 1 row (measured by cross-target
# compiles: tilegemm.inspect).
SHAPES: dict[str, dict[str, Shape]] = {
    "avx512_vnni": {"f32pairs": Shape(4, 16, 16), "vdp": Shape(4, 16, 16), "i8quads": Shape(4, 16, 16)},
    "avx512": {"f32pairs": Shape(4, 16, 16), "vdp": Shape(4, 16, 16), "i8quads": Shape(1, 16, 16)},
    "avx2": {"f32pairs": Shape(2, 16, 8), "vdp": Shape(2, 16, 8), "i8quads": Shape(1, 16, 8)},
    "generic": {"f32pairs": Shape(2, 16, 8), "vdp": Shape(2, 16, 8), "i8quads": Shape(1, 16, 8)},
}
# AMX-COMPLEX (cfp16): 4 accumulators (two lanes of RL and of IM) per row and vector of 16
# columns: 4 rows with 32 zmm, 1 row of 2 ymm each with 16 ymm. AMX-FP8 (fp8quads): binary64
# accumulators, 16 columns = 2 zmm or 4 ymm per row: 8 rows with 32 zmm, 2 with 16 ymm. ``width``
# counts the body's own elements (doubles for fp8quads). With 32 zmm, C also stays in registers
# across a chunk's K steps (one zmm of float32 per row): on Zen 4 the body alone in L1 went from
# 92% to 96-97% of the binary64 peak (``bench --body``), a prepacked n = 1024 FP8 matmul from 0.45-
# 0.47 to 0.47-0.48 of numpy float32. With 16 ymm it would not fit (the cross-target compile for
# haswell spilled 12 vector registers in the inner loop): C goes through memory there.
for _cls, _cf, _f8 in (
    ("avx512_vnni", Shape(4, 16, 16), Shape(8, 16, 8, hold_c=True)),
    ("avx512", Shape(4, 16, 16), Shape(8, 16, 8, hold_c=True)),
    ("avx2", Shape(1, 16, 8), Shape(2, 16, 4)),
    ("generic", Shape(1, 16, 8), Shape(2, 16, 4)),
):
    SHAPES[_cls].update(cfp16=_cf, fp8quads=_f8)
# AMX-FP8 in binary32 (fp8c, kernels/fp8.py): per row one float32 accumulator vector of 16 columns
# (one zmm, two ymm), and C beside it with 32 registers; 16 ymm hold 4 rows' sums but not C too,
# which goes through memory there. 4 rows: a step is redone in binary64 for all its rows where
# one FMA of one of them rounded, so fewer rows redo less; on Zen 4, one thread, n = 1024, BF8 x
# BF8 with standard normal operands (the benchmark's), the kernel alone measured 0.78 of numpy
# float32 with 4 rows, 0.64 with 8 and 0.39 with 16 (HF8 x HF8, never redone: 1.05-1.07 each).
# Without AVX (16 xmm), 2 rows of four 4-float vectors.
for _cls, _shape in (
    ("avx512_vnni", Shape(4, 16, 16, hold_c=True)),
    ("avx512", Shape(4, 16, 16, hold_c=True)),
    ("avx2", Shape(4, 16, 8)),
    ("generic", Shape(2, 16, 4)),
):
    SHAPES[_cls]["fp8c"] = _shape
# ACE (ace_mx, ace_bf16): C stays in registers across the outer-product steps of a block. MX: per
# row 16 float32 C values (one zmm, or two ymm: each joins two rounded binary64 vectors) and two
# (four) binary64 sums per step, 8 (16) B vectors per step; the 2-row AVX2 body, a function of
# its own (kernels/ace.py), spills 4 vector registers in its inner loop for znver3 and 6 for
# haswell (40 inlined with C as four half-width vectors per row; 2 x 16 measured fastest of 1, 2
# and 4 rows on Zen 3). BF16: one C vector per row and two B vectors per step (16 zmm:
# 8 rows; 16 ymm: 2 rows of two vectors).
# MXINT8 in binary32 (ace_mx32) as BF16: one C vector per row, four B vectors per step.
for _cls, _mx, _bf in (
    ("avx512_vnni", Shape(8, 16, 8), Shape(8, 16, 16)),
    ("avx512", Shape(8, 16, 8), Shape(8, 16, 16)),
    ("avx2", Shape(2, 16, 4), Shape(2, 16, 8)),
    ("generic", Shape(2, 16, 4), Shape(2, 16, 8)),
):
    SHAPES[_cls].update(ace_mx=_mx, ace_mx32=_bf, ace_mx32c=_bf, ace_bf16=_bf)
# The other CPUs' paths (isa.py): one chain per C element that starts from C, so short bodies
# (4 rows) let the next body's C loads overlap this one's work (8 and 16 rows measured 10-25%
# slower at n = 1024 on Zen 4, when a body call ran one K step; a call now runs a chunk of steps
# with C in registers, not remeasured there); the FP16-accumulator step needs temporaries. Its
# chain (FMA, a three-operation rounding) is long, so AVX2 runs 2 rows (4 chains of 8 lanes): at
# n = 1024 on Zen 4, the AVX2 code gave 0.086 to 0.088 of numpy float32 with 2 rows against 0.065
# with 1 (the rounding changed too); on Zen 4 itself 4 and 8 rows of 16 lanes measured alike.
_ISA_SHAPES = {
    "avx512_vnni": {
        "i8sat": Shape(4, 16, 16),
        "i16pairs": Shape(4, 16, 16),
        "f32fma": Shape(4, 16, 16),
        "f16acc": Shape(4, 16, 16),
    },
    "avx512": {
        "i8sat": Shape(2, 16, 16),
        "i16pairs": Shape(4, 16, 16),
        "f32fma": Shape(4, 16, 16),
        "f16acc": Shape(4, 16, 16),
    },
    "avx2": {
        "i8sat": Shape(1, 16, 8),
        "i16pairs": Shape(2, 16, 8),
        "f32fma": Shape(4, 16, 8),
        "f16acc": Shape(2, 16, 8),
    },
    "generic": {
        "i8sat": Shape(1, 16, 8),
        "i16pairs": Shape(1, 16, 8),
        "f32fma": Shape(4, 16, 8),
        "f16acc": Shape(1, 16, 8),
    },
}
for _cls, _shapes in _ISA_SHAPES.items():
    SHAPES[_cls].update(_shapes)
# VFMADD231PH itself (``f16acc_native``): 16 binary16 columns per ymm, one chain per C element.
# Two FMA units of latency 4 need 8 chains: 8 rows, each FMA reading its A element as an
# embedded broadcast. Shape from that port model, not measured: no AVX512-FP16 CPU ran it. On
# targets without AVX512-FP16 the table never picks the family; the tests still run it there,
# where LLVM carries each binary16 FMA out in binary64 and rounds once (a library call).
for _cls, _rows in (("avx512_vnni", 8), ("avx512", 8), ("avx2", 2), ("generic", 2)):
    SHAPES[_cls]["f16acc_native"] = Shape(_rows, 16, 16)


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


def target_features() -> set[str]:
    """Features of the target Numba compiles for (``NUMBA_CPU_FEATURES`` when set, else the host)."""
    return set(_target()[1])


def has_mxcsr() -> bool:
    """Whether Numba compiles for x86 (every cross-target compile here keeps the host's
    architecture), whose SSE control and status register, MXCSR, the binary32 AMX-FP8 body reads."""
    import llvmlite.binding as llvm

    return llvm.get_process_triple().split("-")[0] in ("x86_64", "i386", "i686")


def target_class(features: set[str] | frozenset[str] | None = None) -> str:
    """The first class of :data:`CLASSES` whose features the target has."""
    have = _target()[1] if features is None else features
    return next(name for name, need in CLASSES if need <= have)


def shape(family: str, features: set[str] | frozenset[str] | None = None) -> Shape:
    """The superblock-loop body shape of a kernel family on the target."""
    return SHAPES[target_class(features)][family]
