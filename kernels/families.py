"""The kernel families, declared once: data only, no Numba (``tilegemm.dispatch`` reads it too).

A :class:`Family` is one kind of compiled kernel: the entry points that run a GEMM (named from
its :attr:`Family.stem`), the body its superblock loop runs (a name that ``tiles.variant`` turns
into the compile-time constant the loop dispatches on), the operand layouts it reads
(``tilegemm.layouts``), whether its fast entry needs the per-call proof, the family it falls back
to, and its register blocking per target class (:attr:`Family.shapes`, plain data). An
instruction record (``tilegemm.instructions``) names its family by :attr:`Family.name`.

The families of this file run in ``gemm.py``'s loops. A family whose body lives in a module of
its own declares itself there (``declare``) and is found by name: :func:`get` imports
``tilegemm.kernels.<name>`` for a name not declared yet. So a new instruction whose arithmetic is
new is its record, its reference, one kernel module (body, entries, declaration) and its page.

The constants every body shares (the tile's 16 rows and 16 columns, the 16 groups of one K step)
live here, once.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["TILE", "GROUPS", "CLASSES", "Shape", "Family", "FAMILIES", "declare", "get", "variant_id"]

#: Rows and columns of a C tile (16 x 16 x 4 bytes), and the VNNI groups of one full K step
#: (16 rows of 64 bytes: 16 pairs of 16-bit elements or quads of bytes).
TILE = 16
GROUPS = 16

#: Target classes of the superblock loop, most capable first: (name, LLVM features that must all
#: be present). ``targets.target_class`` picks one; :attr:`Family.shapes` is keyed by them.
CLASSES: tuple[tuple[str, frozenset[str]], ...] = (
    ("avx512_vnni", frozenset({"+avx512f", "+avx512bw", "+avx512vnni"})),
    ("avx512", frozenset({"+avx512f", "+avx512bw"})),
    ("avx2", frozenset({"+avx2", "+fma"})),
    ("generic", frozenset()),
)


def variant_id(name: str) -> int:
    """The compile-time constant of body ``name``: a hash of the name, so that it never depends
    on import order (a cached kernel keeps the constant it was compiled with)."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


@dataclass(frozen=True)
class Shape:
    """One body's register blocking: C rows per body call, C columns, elements per vector (the
    body's own: doubles for binary64 bodies), and whether C stays in registers across the K steps
    of a call (``hold_c``)."""

    rows: int
    cols: int
    width: int
    hold_c: bool = False


def _by_class(avx512_vnni: Shape, avx512: Shape, avx2: Shape, generic: Shape) -> Mapping[str, Shape]:
    return MappingProxyType({"avx512_vnni": avx512_vnni, "avx512": avx512, "avx2": avx2, "generic": generic})


@dataclass(frozen=True, kw_only=True)
class Family:
    """A family of compiled kernels.

    Attributes
    ----------
    name:
        The key instruction records use.
    stem:
        Entry points are named from it in :attr:`module`: ``gemm_<stem>_fast`` and
        ``gemm_<stem>_exact`` for a family whose fast entry needs the proof (one with a
        :attr:`fallback` has only the fast one), else the one entry ``gemm_<stem>``.
    module:
        The ``tilegemm.kernels`` module holding the entries.
    variant:
        The fast body's name (``tiles.variant``), for reading its code one step at a time.
    a_layout, b_layout:
        What the kernels read (``tilegemm.layouts``).
    needs_proof:
        The fast entry is right only for operands that pass the layout's proof.
    shapes:
        The fast body's register blocking by target class (:data:`CLASSES`); empty for families
        whose rows come from the blocked drivers' per-target table only.
    tile:
        Stem of the tile API's entry (``tile_<tile>``: one instruction, exact, serially), or None.
    prepare:
        ``"module:function"`` run on the packed operands before the kernel,
        ``f(instr, A, B, C, ib, k)``: a step of the sequence that is not a tile multiply (the
        +128 compensation of signed activations) or padding the kernel relies on.
    c_view:
        The dtype the kernels see C as, where it is not the result's (binary16 C as uint16).
    blocked:
        The blocked entry point in ``blocked.py`` as a template that ``{b}`` completes with B's
        format (``"gemm_pairs_{b}"``), or None: the family runs the superblock loop only.
    fallback:
        The family a call runs where this family's proof fails, or None.
    fast_switches:
        The fast entry runs every reading of the instruction's switches; False: the default
        readings only, and a call with another runs the exact entry (the fast entry then need not
        compile the exact body in, which is most of its compile time).
    nans:
        What a call whose operands (or block scales) hold a NaN runs (docs/semantics.md, "NaN
        bits"): ``"exact"``, the exact entry (through :attr:`fallback` where the family has one),
        because the fast body's hardware FMAs and adds return whichever NaN operand the compiler
        placed first; ``"fast"``, the fast entry, whose body takes every NaN from the instruction's
        rule (AMX-FP8's and AMX-TF32's default NaN, VFMADD231PH's vectors with a NaN lane); or
        another family's name, which runs instead.
    """

    name: str
    stem: str
    variant: str
    a_layout: str
    b_layout: str
    needs_proof: bool
    shapes: Mapping[str, Shape] = field(default_factory=dict, hash=False)
    module: str = "gemm"
    tile: str | None = None
    prepare: str | None = None
    c_view: str | None = None
    blocked: str | None = None
    fallback: str | None = None
    fast_switches: bool = True
    nans: str = "exact"

    @property
    def fast(self) -> str:
        return f"gemm_{self.stem}_fast" if self.needs_proof else f"gemm_{self.stem}"

    @property
    def exact(self) -> str:
        return f"gemm_{self.stem}_exact" if self.needs_proof and self.fallback is None else self.fast

    @property
    def tile_entry(self) -> str | None:
        return None if self.tile is None else f"tile_{self.tile}"


_FAMILIES: dict[str, Family] = {}
#: Every declared family by name (a live view: families declared in their own modules appear
#: once imported; :func:`get` imports them).
FAMILIES: Mapping[str, Family] = MappingProxyType(_FAMILIES)


def declare(family: Family) -> Family:
    """Register ``family`` (once per name; declaring the same record again is a no-op)."""
    if _FAMILIES.get(family.name, family) != family:
        raise ValueError(f"kernel family {family.name!r} is declared twice, differently")
    _FAMILIES[family.name] = family
    return family


def get(name: str) -> Family:
    """The family ``name``: declared here, or by ``tilegemm.kernels.<name>`` (imported now)."""
    if name not in _FAMILIES:
        try:
            importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as e:
            raise KeyError(f"no kernel family {name!r} (declared: {', '.join(sorted(_FAMILIES))})") from e
        if name not in _FAMILIES:
            raise KeyError(f"module tilegemm.kernels.{name} declares no family {name!r}")
    return _FAMILIES[name]


_SHIFT = "tilegemm.profiles:compensate"
_PAD = "tilegemm.profiles:pad_identity"

# Why these shapes (the superblock loop's bodies; the blocked drivers take theirs from
# targets.TABLE):
# - Floats (f32pairs, vdp): rows x (even, odd) x 16 columns of accumulators plus the B vectors
#   must fit the register file: 4 rows with 32 zmm, 2 rows with 16 ymm (4 rows spilled on haswell).
# - INT8 (i8quads): the widened-byte body needs temporaries per row; with a VNNI dot product LLVM
#   fuses them and 4 rows fit, elsewhere 1 row (cross-target compiles: tilegemm.inspect).
# - AMX-COMPLEX (cfp16): 4 accumulators (two lanes of RL and of IM) per row and vector of 16
#   columns: 4 rows with 32 zmm, 1 row of 2 ymm each with 16 ymm.
# - AMX-FP8 (fp8quads): binary64 accumulators, 16 columns = 2 zmm or 4 ymm per row: 8 rows with
#   32 zmm, 2 with 16 ymm. With 32 zmm, C also stays in registers across a chunk's K steps (one
#   zmm of float32 per row); with 16 ymm it would not fit (haswell spilled 12 vector registers).
# - AMX-FP8 in binary32 (fp8c): per row one float32 accumulator vector of 16 columns, and C beside
#   it with 32 registers; 16 ymm hold 4 rows' sums but not C. 4 rows: a step is redone in binary64
#   for all its rows where one FMA of one of them rounded, so fewer rows redo less
#   (docs/performance.md has the measurements). Without AVX (16 xmm), 2 rows of 4-float vectors.
# - ACE MX (ace_mx): C in registers across the outer products of a block; per row 16 float32 C
#   values and two (four) binary64 sums per step: 8 rows with zmm, 2 with ymm. BF16 (ace_bf16)
#   and MXINT8 / MX FP8 in binary32 (ace_mx32, ace_mx32c): one C vector per row, 8 rows of zmm,
#   2 rows of two ymm.
# - The other CPUs' paths (i8sat, i16pairs, f32fma, f16acc): one chain per C element that starts
#   from C, short bodies (4 rows) so that the next body's C loads overlap this one's work; the
#   FP16-accumulator step needs temporaries and AVX2 runs 2 rows of it. VFMADD231PH itself
#   (f16acc_native): 8 chains for two FMA units of latency 4 (a port model: no AVX512-FP16 CPU
#   ran it).
_4x16_16, _2x16_8 = Shape(4, 16, 16), Shape(2, 16, 8)
_FLOATS = _by_class(_4x16_16, _4x16_16, _2x16_8, _2x16_8)
_ACE32 = _by_class(Shape(8, 16, 16), Shape(8, 16, 16), _2x16_8, _2x16_8)

for _family in (
    Family(
        name="f32pairs",
        stem="amx",
        variant="amx_fast",
        a_layout="f32",
        b_layout="f32",
        needs_proof=True,
        shapes=_FLOATS,
        tile="amx",
        blocked="gemm_pairs_{b}",
    ),
    Family(
        name="vdp",
        stem="avx512",
        variant="avx512_fast",
        a_layout="f32",
        b_layout="f32",
        needs_proof=True,
        shapes=_FLOATS,
        blocked="gemm_dot_{b}",
    ),
    Family(
        name="i8quads",
        stem="int",
        variant="amx_exact",
        a_layout="bytes",
        b_layout="bytes",
        needs_proof=False,
        shapes=_by_class(Shape(4, 16, 16), Shape(1, 16, 16), Shape(1, 16, 8), Shape(1, 16, 8)),
        tile="amx",
        blocked="gemm_quads",
    ),
    Family(
        name="cfp16",
        stem="cfp16",
        variant="cfp16_fast",
        a_layout="f32",
        b_layout="f32",
        needs_proof=True,
        shapes=_by_class(Shape(4, 16, 16), Shape(4, 16, 16), Shape(1, 16, 8), Shape(1, 16, 8)),
        tile="cfp16",
    ),
    Family(
        name="fp8quads",
        stem="fp8",
        variant="fp8_fast",
        a_layout="f64",
        b_layout="f64",
        needs_proof=True,
        shapes=_by_class(Shape(8, 16, 8, True), Shape(8, 16, 8, True), Shape(2, 16, 4), Shape(2, 16, 4)),
        tile="fp8",
        nans="fast",
    ),
    # AMX-FP8 in binary32, a step whose chain rounded (MXCSR.PE) again in binary64, under
    # fp8quads' proof (which the binary64 steps need); else fp8quads.
    Family(
        name="fp8c",
        stem="fp8c",
        variant="fp8c_fast",
        a_layout="fp8_32",
        b_layout="fp8_32",
        needs_proof=True,
        shapes=_by_class(Shape(4, 16, 16, True), Shape(4, 16, 16, True), Shape(4, 16, 8), Shape(2, 16, 4)),
        tile="fp8",
        fallback="fp8quads",
        nans="fast",
    ),
    # ACE: MX values scaled by their block scales (binary64), and BF16 as float32 without DAZ.
    Family(
        name="ace_mx",
        stem="ace_mx",
        variant="ace_mx_fast",
        a_layout="mx64",
        b_layout="mx64",
        needs_proof=True,
        shapes=_by_class(Shape(8, 16, 8), Shape(8, 16, 8), Shape(2, 16, 4), Shape(2, 16, 4)),
    ),
    # MXINT8 in binary32: a step's four products share one scale pair and sum exactly there while
    # the scaled values stay binary32 normals (tilegemm.layouts); else ace_mx.
    Family(
        name="ace_mx32",
        stem="ace_mx32",
        variant="ace_mx32_fast",
        a_layout="mx32",
        b_layout="mx32",
        needs_proof=True,
        shapes=_ACE32,
        fallback="ace_mx",
    ),
    # MX FP8 in binary32 where each step's bounds prove its sum exact there, binary64 for the
    # other steps, while the scaled values stay binary32 normals (tilegemm.layouts); else ace_mx.
    Family(
        name="ace_mx32c",
        stem="ace_mx32c",
        variant="ace_mx32c_fast",
        a_layout="mx32c",
        b_layout="mx32c",
        needs_proof=True,
        shapes=_ACE32,
        fallback="ace_mx",
    ),
    Family(
        name="ace_bf16",
        stem="ace_bf16",
        variant="ace_bf16_fast",
        a_layout="f32keep",
        b_layout="f32keep",
        needs_proof=True,
        shapes=_ACE32,
    ),
    # The other CPUs' paths (docs/isa-profiles.md; kernels/isa.py).
    Family(
        name="i8sat",
        stem="i8sat",
        variant="i8sat",
        a_layout="bytes",
        b_layout="bytes",
        needs_proof=False,
        shapes=_by_class(Shape(4, 16, 16), Shape(2, 16, 16), Shape(1, 16, 8), Shape(1, 16, 8)),
        prepare=_SHIFT,
    ),
    Family(
        name="i16pairs",
        stem="i16pairs",
        variant="i16pairs",
        a_layout="bytes",
        b_layout="bytes",
        needs_proof=False,
        shapes=_by_class(Shape(4, 16, 16), Shape(4, 16, 16), Shape(2, 16, 8), Shape(1, 16, 8)),
        prepare=_SHIFT,
    ),
    Family(
        name="f32fma",
        stem="f32fma",
        variant="f32fma_fast",
        a_layout="f32",
        b_layout="f32",
        needs_proof=True,
        shapes=_by_class(Shape(4, 16, 16), Shape(4, 16, 16), Shape(4, 16, 8), Shape(4, 16, 8)),
        prepare=_PAD,
    ),
    Family(
        name="f16acc",
        stem="f16acc",
        variant="f16acc",
        a_layout="f32",
        b_layout="f32",
        needs_proof=False,
        shapes=_by_class(Shape(4, 16, 16), Shape(4, 16, 16), Shape(2, 16, 8), Shape(1, 16, 8)),
        prepare=_PAD,
        c_view="uint16",
        nans="fast",
    ),
    # VFMADD231PH itself on binary16 codes, where the compile target has it (targets.NATIVE).
    Family(
        name="f16acc_native",
        stem="f16acc_native",
        variant="f16acc_native",
        a_layout="f16",
        b_layout="f16",
        needs_proof=False,
        shapes=_by_class(Shape(8, 16, 16), Shape(8, 16, 16), Shape(2, 16, 16), Shape(2, 16, 16)),
        prepare=_PAD,
        c_view="uint16",
        nans="f16acc",
    ),
):
    declare(_family)
