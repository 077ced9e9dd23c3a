"""Every kernel of the table through the microkernel tester (tests/kernel_tester.py)."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import KERNEL_CASES, SEED_TILINGS, families, use_family
from kernel_tester import KernelTester, k_corners, k_values, mn_pairs

from tilegemm import dispatch, plan
from tilegemm.kernels import blocked, gemm, targets


def _paths(kernel):
    """Per-block paths for blocked kernels ("blocks": each block its own, here all fast on random
    data; "flag" and "exact" forced for every block), per-call paths for the superblock loop."""
    if kernel.instruction.mnemonic in plan.WRAPPING_TWIN:  # the wrapping kernels where nothing can saturate
        return ("fast", "exact")
    if not kernel.family.needs_proof:
        return ("fast",)
    if kernel.blocked is not None:
        return ("fast", "flag", "exact") if kernel.tiling in SEED_TILINGS else ("fast", "exact")
    return ("fast", "exact")


def _kernel(isa, dtype, tiling, family):
    return dataclasses.replace(dispatch.lookup(isa, dtype, tiling), family=dispatch.FAMILIES[family])


def _fallback_of(isa, dtype):
    return dispatch.FAMILIES[dispatch.lookup(isa, dtype, "1x1").instruction.kernel].fallback


def _engines(kernel, path):
    """The engines a case runs on: on the fast path of a blocked kernel with an engine beyond FMA,
    every engine this host has (FMA, and VDPBF16PS with AVX512_BF16); None (the target's choice)
    elsewhere. The forced slow paths never run the fast body, so they run once."""
    name = kernel._blocked_fma
    if path != "fast" or name is None:
        return (None,)
    more = tuple(e for e in targets.engines() if (name, e) in blocked.ENGINE_ENTRIES)
    return ("fma",) + more if more else (None,)


# Every family that can run an instruction on this host: its emulation, its fallback, and the
# instruction itself (kernels/targets.py NATIVE) where this host can run that, whichever the table
# picks; a blocked kernel's fast path on every engine this host has for it. A fallback runs its
# fast path only: the first family's slow paths already run its exact entry (a family with a
# fallback has none of its own).
CASES = [
    (isa, dtype, tiling, path, family, engine)
    for isa, dtype in KERNEL_CASES
    for family in families(dispatch.lookup(isa, dtype, "1x1").instruction.kernel)
    for tiling in dispatch.TILINGS
    for path in _paths(_kernel(isa, dtype, tiling, family))
    if path == "fast" or family != _fallback_of(isa, dtype)
    for engine in _engines(_kernel(isa, dtype, tiling, family), path)
]


def _with_quick_marks(cases):
    """The cases, each family's first fast 2x2 case on each engine marked ``quick``: ``pytest -m
    quick`` runs every kernel family (and engine) through the tester once (README, "Set-up")."""
    seen: set[tuple[str, str | None]] = set()
    out = []
    for case in cases:
        family, tiling, path, engine = case[4], case[2], case[3], case[5]
        if (family, engine) not in seen and tiling == "2x2" and path == "fast":
            seen.add((family, engine))
            out.append(pytest.param(*case, marks=pytest.mark.quick))
        else:
            out.append(case)
    return out


QUICK_FAMILIES = {c[4] for c in CASES if c[2] == "2x2" and c[3] == "fast"}


def _tester(isa, dtype, tiling, path, family, engine, monkeypatch, tier):
    use_family(monkeypatch, dispatch.lookup(isa, dtype, tiling).instruction.kernel, family)
    if path != "fast":
        monkeypatch.setattr(plan, "fast_path_ok", lambda *args, **kw: False)
        monkeypatch.setattr(plan, "FORCED_PATH", path)
    corners = _corners_only(isa, dtype, tiling, path)
    tester = KernelTester(isa, dtype, tiling, corners_only=corners, tier=tier, engine=engine)
    assert tester.kernel.family.name == family
    return tester


def _corners_only(isa, dtype, tiling, path):
    """The slow paths run every shape on the seed's tilings and the corner shapes on the others.
    A superblock-loop kernel's slow path computes each output alone, whatever the tiling (which
    only orders the tiles), so it runs every shape on 1x1 only; the blocked kernels' flag and
    exact paths go through the tiling's blocks and keep both."""
    full = SEED_TILINGS if dispatch.lookup(isa, dtype, tiling).blocked is not None else SEED_TILINGS[:1]
    return path != "fast" and tiling not in full


@pytest.mark.parametrize("isa,dtype,tiling,path,family,engine", _with_quick_marks(CASES))
def test_kernel(isa, dtype, tiling, path, family, engine, monkeypatch):
    """The default tier (``KernelTester.cases``): every M x N at K = step + 1, and on the seed's
    tilings the corner shapes at every other K."""
    _tester(isa, dtype, tiling, path, family, engine, monkeypatch, "default").run()


#: The cases whose deep tier adds shapes (all but the seed's tilings restricted to corner shapes).
DEEP_CASES = [c for c in CASES if KernelTester(*c[:3], _corners_only(*c[:4]), "deep").cases()]


@pytest.mark.deep
@pytest.mark.parametrize("isa,dtype,tiling,path,family,engine", DEEP_CASES)
def test_kernel_deep(isa, dtype, tiling, path, family, engine, monkeypatch):
    """The deep tier (``pytest -m deep``): the shapes the default tier leaves out, so that the two
    tiers together run every shape at every K."""
    tester = _tester(isa, dtype, tiling, path, family, engine, monkeypatch, "deep")
    assert tester.cases()
    tester.run()


@pytest.mark.parametrize(
    "isa,dtype",
    [
        ("amx", "bf16"),
        ("amx", "s8s8"),
        pytest.param("amx", "fp16", marks=pytest.mark.deep),
        pytest.param("amx", "u8s8", marks=pytest.mark.deep),
        pytest.param("avx512", "bf16", marks=pytest.mark.deep),
    ],
)
def test_superblock_loop_of_the_blocked_families(isa, dtype, monkeypatch):
    """The families with a blocked driver run the superblock loop on targets without a row in the
    per-target table, which no machine these tests run on lacks: run that loop here anyway (one
    float and one integer family by default, the others in the deep tier)."""
    monkeypatch.setattr(dispatch.Kernel, "blocked_name", property(lambda self: None))
    tester = KernelTester(isa, dtype, "2x2")
    assert tester.kernel.blocked is None and tester.kernel.table_entry is None
    tester.run()


def test_tester_covers_the_edges():
    k = dispatch.lookup("amx", "bf16", "2x2")
    assert k_values(k) == (1, 31, 32, 33, 64, 32 * k.k_chunk + 1)
    assert len(mn_pairs(k)) == 32 * 32
    wide = mn_pairs(dispatch.lookup("amx", "s8s8", "1x6"))
    assert {m for m, _ in wide} == set(range(1, 17)) and {n for _, n in wide} == set(range(1, 97))
    assert k_values(dispatch.lookup("amx", "u8u8", "1x1"))[-1] == 64 * k.k_chunk + 1
    assert k_corners(k) == ()
    # ACE: an instruction is one K group, 16 to a packed block; MX scales come in blocks of 32.
    mx = dispatch.lookup("ace", "mxfp8_e4m3", "2x2")
    assert k_values(mx) == (1, 3, 4, 5, 8, 64 * mx.k_chunk + 1)
    assert k_corners(mx) == (31, 32, 33, 63, 64, 65)
    # AMX-FP8 past one body call of the loop that runs it (its own loop's chunk where the body
    # holds C in registers: kernels/gemm.py)
    f8 = dispatch.lookup("amx", "hf8", "2x2")
    chunk = gemm.FP8_K_CHUNK if f8.body.hold_c else gemm.K_CHUNK
    assert k_values(f8)[-1] == 64 * chunk + 1


def test_tester_catches_a_wrong_kernel(monkeypatch):
    """A kernel that drops one product in the K tail must fail the tester."""
    import tilegemm

    real = tilegemm.api.matmul

    def broken(a, b, *args, **kw):
        if hasattr(a, "shape") and a.shape[-1] > 1:
            a = a.copy()
            a[..., -1] = 0
        return real(a, b, *args, **kw)

    monkeypatch.setattr(tilegemm, "matmul", broken)
    with pytest.raises(AssertionError, match=r"tdpbssd-1x1-.* M x N x K = 1 x 1 x 63"):
        KernelTester("amx", "s8s8", "1x1").run()
