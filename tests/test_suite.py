"""The test suite's own machinery: the worker groups of the README's test command arrive, and the
report header names the table row that runs here and the rows that are only cross-compiled."""

from __future__ import annotations

import pytest
from conftest import CROSS_CPUS, pytest_report_header, target_report
from kernel_tester import k_corners, k_values, mn_pairs

from tilegemm import inspect
from tilegemm.kernels import targets


def test_xdist_groups_reach_the_scheduler(request):
    """Under ``pytest -n auto --dist loadgroup`` each test id carries its group (conftest.py's
    ``pytest_collection_modifyitems``), or the workers race to compile the same kernels."""
    if not hasattr(request.config, "workerinput") or not request.config.getvalue("loadgroup"):
        pytest.skip("checks the README's test command, pytest -n auto --dist loadgroup")
    assert request.node.nodeid.endswith("@" + request.module.__name__), request.node.nodeid


def _row_lines(lines: list[str]) -> dict[str, str]:
    """Each table row's line of a report, by row name (exactly one line per row)."""
    out = {}
    for e in targets.TABLE:
        (line,) = [x for x in lines if x.startswith(f"tilegemm table row {e.name}:")]
        out[e.name] = line
    return out


def _assert_rows(lines: list[str], executed: targets.Entry | None) -> None:
    for e in targets.TABLE:
        line = _row_lines(lines)[e.name]
        cross = [c for c in CROSS_CPUS if c in e.cpus]
        assert cross and all(c in line for c in cross), line
        if e is executed:
            assert "executed here" in line and "cross-compiled only" not in line, line
        else:
            assert "cross-compiled only" in line and "executed" not in line, line


def test_report_header_names_the_executed_row_and_every_other(request):
    """The header pytest prints (by the controller under pytest-xdist) names this target's LLVM
    CPU and row as executed and every other row as cross-compiled only, for the CPUs
    tests/test_inspect.py compiles it for."""
    lines = pytest_report_header(request.config)
    cpu, features = targets.target()
    assert lines == target_report()
    assert lines[0].startswith(f"tilegemm target: LLVM CPU {cpu} (") and f"class {targets.target_class()}," in lines[0]
    _assert_rows(lines, targets.plan())
    assert (targets.plan() is None) == any("portable superblock loop" in x for x in lines)


@pytest.mark.parametrize("cpu", ["haswell", "znver3", "skylake-avx512", "sapphirerapids", "znver4", "apple-m1"])
def test_report_names_the_row_of_any_target(cpu):
    features = frozenset(inspect.TARGETS[cpu].split(","))
    row = targets.entry_for(cpu, features)
    assert row is not None and cpu in row.cpus
    lines = target_report(cpu, features)
    assert lines[0].startswith(f"tilegemm target: LLVM CPU {cpu} (given), class {targets.target_class(features)},")
    _assert_rows(lines, row)


def test_report_of_a_target_without_a_row():
    """x86-64 without AVX2 runs the portable superblock loop: no row executes."""
    lines = target_report("x86-64", frozenset({"+sse2"}))
    assert "class generic," in lines[0]
    assert any("no table row fits this target: the portable superblock loop runs" in x for x in lines)
    _assert_rows(lines, None)


def test_the_quick_subset_runs_every_kernel_family_once():
    """``pytest -m quick`` (README): one fast 2x2 case of the kernel tester per family and engine,
    and every family and engine of the full tester among them."""
    import test_kernels

    quick = [p for p in test_kernels._with_quick_marks(test_kernels.CASES) if hasattr(p, "marks")]
    families = [(p.values[4], str(p.values[5])) for p in quick]
    every = {(c[4], str(c[5])) for c in test_kernels.CASES if c[3] == "fast"}
    assert sorted(families) == sorted(set(families)) == sorted(every)
    assert all(p.values[2:4] == ("2x2", "fast") and p.marks[0].name == "quick" for p in quick)


@pytest.mark.parametrize(
    "isa,dtype,tiling,corners_only",
    [
        ("amx", "bf16", "2x2", False),
        ("ace", "mxfp8_e4m3", "1x1", False),
        ("amx", "s8s8", "1x6", False),
        ("ace", "mxfp8_e4m3", "3x2", True),
        ("amx", "bf16", "2x2", True),
    ],
)
def test_the_two_tiers_of_the_kernel_tester_run_every_shape_once(isa, dtype, tiling, corners_only):
    """The default tier and the deep one (``pytest -m deep``) of the kernel tester run, together,
    every (K, M, N) of the full sweep (and the corner shapes at every K), and no shape twice."""
    from kernel_tester import KernelTester, k_full

    def shapes(tier):
        cases = KernelTester(isa, dtype, tiling, corners_only, tier).cases()
        return [(k, mn) for k, pairs, _ in cases for mn in pairs]

    def whole(tier):
        return [k for k, _, w in KernelTester(isa, dtype, tiling, corners_only, tier).cases() if w]

    default, deep = shapes("default"), shapes("deep")
    full = KernelTester(isa, dtype, tiling, corners_only)
    swept = full.corners() if corners_only else mn_pairs(full.kernel)
    every = [(k, mn) for k in k_values(full.kernel) for mn in swept]
    every += [(k, mn) for k in k_corners(full.kernel) for mn in full.corners()]
    assert len(set(default)) == len(default) and len(set(deep)) == len(deep)
    assert not set(default) & set(deep) and set(default) | set(deep) >= set(every)
    ks = set(k_values(full.kernel)) | set(k_corners(full.kernel))
    assert sorted(whole("default") + whole("deep")) == sorted(ks)  # the whole-superblock checks, once each
    kf = k_full(full.kernel)
    assert {mn for k, mn in default if k == kf} == set(swept)


def test_the_default_tier_leaves_out_the_deep_tests(request):
    """pyproject.toml deselects the deep tier unless -m asks for it; the README's test command
    runs the default tier."""
    import test_kernels

    assert "not deep" in " ".join(request.config.getini("addopts"))
    assert test_kernels.DEEP_CASES and all(c in test_kernels.CASES for c in test_kernels.DEEP_CASES)
    with pytest.raises(ValueError, match="'everything'"):
        from kernel_tester import KernelTester

        KernelTester("amx", "bf16", "2x2", tier="everything")
