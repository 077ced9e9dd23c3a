"""Register blocking per target: the one table the microkernels take their shapes from.

A body computes ``rows`` rows x 16 columns of C per call with vectors of ``width`` lanes. The
right shape depends on the target's vector registers (16 ymm with AVX2, 32 zmm with AVX-512) and
on which dot-product instructions exist, so it is looked up here by the *target class* of the
CPU Numba compiles for (the host, or ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` in a cross-target
compile), never tuned to one machine. ``tilegemm.inspect`` compiles every class and the tests
check that no body spills vector registers in its loop on any of them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = ["Shape", "SHAPES", "target_features", "target_class", "shape", "CLASSES"]


@dataclass(frozen=True)
class Shape:
    """One body's register blocking: C rows per body, C columns, floats (or int32) per vector."""

    rows: int
    cols: int
    width: int


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
# counts the body's own elements (doubles for fp8quads).
for _cls, _cf, _f8 in (
    ("avx512_vnni", Shape(4, 16, 16), Shape(8, 16, 8)),
    ("avx512", Shape(4, 16, 16), Shape(8, 16, 8)),
    ("avx2", Shape(1, 16, 8), Shape(2, 16, 4)),
    ("generic", Shape(1, 16, 8), Shape(2, 16, 4)),
):
    SHAPES[_cls].update(cfp16=_cf, fp8quads=_f8)
# ACE (ace_mx, ace_bf16): C stays in registers across the outer-product steps of a block. MX: per
# row 16 float32 C values and two binary64 vectors per step, 8 B vectors per step; BF16: one C
# vector per row and two B vectors per step (16 zmm: 8 rows; 16 ymm: 2 rows of two vectors).
for _cls, _mx, _bf in (
    ("avx512_vnni", Shape(8, 16, 8), Shape(8, 16, 16)),
    ("avx512", Shape(8, 16, 8), Shape(8, 16, 16)),
    ("avx2", Shape(2, 16, 4), Shape(2, 16, 8)),
    ("generic", Shape(2, 16, 4), Shape(2, 16, 8)),
):
    SHAPES[_cls].update(ace_mx=_mx, ace_bf16=_bf)
# The other CPUs' paths (isa.py): one chain per C element that starts from C, so short bodies
# (4 rows) let the next body's C loads overlap this one's work (8 and 16 rows measured 10-25%
# slower at n = 1024 on Zen 4); the FP16-accumulator step needs temporaries.
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
        "f16acc": Shape(1, 16, 8),
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


@functools.cache
def _features() -> frozenset[str]:
    import llvmlite.binding as llvm
    from numba.core import config

    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else llvm.get_host_cpu_features().flatten()
    return frozenset(features.split(","))


def target_features() -> set[str]:
    """Features of the target Numba compiles for (``NUMBA_CPU_FEATURES`` when set, else the host),
    so that a cross-target compile picks the shapes of its target. Numba reads its target once
    per process, so this is read once too."""
    return set(_features())


def target_class(features: set[str] | frozenset[str] | None = None) -> str:
    """The first class of :data:`CLASSES` whose features the target has."""
    have = _features() if features is None else features
    return next(name for name, need in CLASSES if need <= have)


def shape(family: str, features: set[str] | frozenset[str] | None = None) -> Shape:
    """The body shape of a kernel family on the target."""
    return SHAPES[target_class(features)][family]
