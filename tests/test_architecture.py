"""The shape of the package: a one-way import graph, and dtype/ISA facts only in the records."""

from __future__ import annotations

import ast
import pathlib
import re

import tilegemm
from tilegemm import instructions

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _modules() -> dict[str, pathlib.Path]:
    """Module name -> source file, for tilegemm/ and kernels/ (installed as tilegemm.kernels)."""
    mods = {}
    for top, prefix in (("tilegemm", ["tilegemm"]), ("kernels", ["tilegemm", "kernels"])):
        for path in (ROOT / top).rglob("*.py"):
            parts = prefix + list(path.relative_to(ROOT / top).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def import_graph() -> dict[str, set[str]]:
    """Every import between package modules, function-level (lazy) imports included."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                found = subs if subs else [target]  # `from . import x` imports x, not the package
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            edges[name] |= {t for t in found if t in mods and t != name}
    return edges


def _cycles(edges):
    state: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges[u]):
            if state.get(v) == 1:
                found.append(stack[stack.index(v) :] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    return found


def test_import_graph_has_no_cycle():
    edges = import_graph()
    assert "tilegemm.dispatch" in edges["tilegemm.api"]  # the scan sees real imports
    assert _cycles(edges) == []


def test_cycle_detection_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_kernels_do_not_import_the_framework():
    edges = import_graph()
    for name, targets in edges.items():
        if name.startswith("tilegemm.kernels"):
            assert all(t.startswith("tilegemm.kernels") for t in targets), (name, targets)


def _names():
    out = set(instructions.ISAS)
    for p in instructions.PROFILES.values():
        out |= set(p.names())
    return out


def _string_comparisons(tree, names):
    """Compare nodes with a string constant (or a tuple/list/set of them) naming a dtype or ISA."""
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            consts = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            for c in consts:
                if isinstance(c, ast.Constant) and c.value in names:
                    hits.append((node.lineno, c.value))
    return hits


def test_only_the_records_compare_dtype_or_isa_names():
    names = _names()
    offenders = {}
    for name, path in _modules().items():
        if name == "tilegemm.instructions" or name.startswith("tilegemm.instructions."):
            continue
        hits = _string_comparisons(ast.parse(path.read_text()), names)
        if hits:
            offenders[name] = hits
    assert offenders == {}


def test_the_scan_sees_a_comparison():
    tree = ast.parse("if dtype == 'bf16' or isa in ('avx512', 'x'):\n    pass\n")
    assert sorted(v for _, v in _string_comparisons(tree, _names())) == ["avx512", "bf16"]


def test_public_submodules_are_lazy_attributes():
    import subprocess
    import sys

    code = (
        "import sys, tilegemm; print('tilegemm.inspect' in sys.modules); "
        "r = tilegemm.inspect.vector_report; print('tilegemm.inspect' in sys.modules, callable(r)); "
        "print(all(hasattr(tilegemm, m) for m in tilegemm.SUBMODULES))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "True", "True"]
    assert "amx" in dir(tilegemm)


def test_kernel_body_variants_are_distinct():
    """Each family's fast body is chosen at compile time by a variant constant made from its name
    (``families.variant_id``): two bodies with one constant would run each other's arithmetic, and
    a constant that depended on import order would outlive its meaning in the on-disk cache."""
    from tilegemm import dispatch
    from tilegemm.kernels import families, tiles

    fams = list(dispatch.FAMILIES.values())  # a family in a module of its own registers its bodies on import
    bodies = set(tiles.STEP_BODIES) | set(tiles._FLOAT_BODIES)
    assert len(bodies) == len(tiles.STEP_BODIES) + len(tiles._FLOAT_BODIES)
    for fam in fams:
        assert tiles.variant(fam.variant) in bodies, fam.name
    names = [fam.variant for fam in fams]
    ids = {families.variant_id(n) for n in names}
    assert len(ids) == len(set(names))
    assert families.variant_id("amx_fast") == 1242698503  # crc32: the same in every process


def test_families_are_declared_once_as_data():
    """A family's record names its entries, body, layouts and per-class shapes; the entries it
    names exist, and every target class has a shape where the family declares any."""
    from tilegemm import dispatch, layouts
    from tilegemm.kernels import families

    for fam in dispatch.FAMILIES.values():
        for which in ("fast", "exact") if fam.fallback is None else ("fast",):
            assert callable(fam.entry(which)), (fam.name, which)
        if fam.tile is not None:
            assert callable(fam.entry("tile"))
        assert fam.a_layout in layouts.LAYOUTS and fam.b_layout in layouts.LAYOUTS
        if fam.shapes:
            assert set(fam.shapes) == {c for c, _ in families.CLASSES}, fam.name


def test_no_module_but_the_records_switches_on_layout_names():
    """Packing, ACE, inspect and the planner read the layout records (tilegemm.layouts)."""
    from tilegemm import layouts

    names = set(layouts.LAYOUTS)
    offenders = {}
    for name, path in _modules().items():
        if name in ("tilegemm.layouts", "tilegemm.kernels.families"):
            continue
        hits = _string_comparisons(ast.parse(path.read_text()), names)
        if hits:
            offenders[name] = hits
    assert offenders == {}


def test_a_b_builder_skips_the_range_only_when_asked():
    """The tile unit asks for blocks without the proof's range (it runs the exact entry); the
    blocks are the same, and the range a plan reads is still returned by default."""
    import numpy as np

    from tilegemm import layouts
    from tilegemm.instructions import resolve

    _, _, instr = resolve("amx", "bf16")
    lay = layouts.get("f32")
    el = np.arange(16 * 16 * 2, dtype=np.uint16).reshape(1, 1, 16, 16, 2) | np.uint16(0x3F00)
    full, rng = lay.pack_b(instr, instr.daz_inputs, el)
    bare, none = lay.pack_b(instr, instr.daz_inputs, el, summary=False)
    assert rng == (-1, 0) and none is None  # bf16 0x3F00 is 0.5, 0x3FFF just under 2
    assert np.array_equal(full.view(np.uint32), bare.view(np.uint32))


def test_the_records_import_no_numba():
    """The instruction, format, layout and family records load without Numba (a listing, the
    CLI's help, a docs build): no module they import at module level, transitively, imports numba
    or llvmlite at module level (function-level imports run on use only)."""
    mods = _modules()
    seen, todo = set(), ["tilegemm.instructions", "tilegemm.layouts", "tilegemm.kernels.families"]
    heavy = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = mods[name]
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.parse(path.read_text()).body:  # module level only (TYPE_CHECKING blocks are ifs)
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                found = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods] or [target]
            else:
                continue
            heavy |= {name for f in found if f.split(".")[0] in ("numba", "llvmlite")}
            todo.extend(f for f in found if f in mods and f != "tilegemm")
    assert "tilegemm.formats" in seen  # the walk follows the records' imports
    assert heavy == set()


def _self_declaring(name: str) -> bool:
    """A kernels module that declares its own family (found by name, not listed)."""
    from tilegemm.kernels import families

    short = name.rsplit(".", 1)[1]
    return short in families.FAMILIES or "families.declare(" in _modules()[name].read_text()


def test_the_kernels_docstring_names_every_module():
    """kernels/__init__.py's list of modules matches the folder: every module it names exists,
    and every module but the families declared in their own modules is named."""
    import tilegemm.kernels as K

    doc = K.__doc__
    named = set(re.findall(r"``(\w+)\.py``", doc))
    files = {p.stem for p in (ROOT / "kernels").glob("*.py") if p.stem != "__init__"}
    assert named <= files, named - files
    missing = {f for f in files - named if not _self_declaring(f"tilegemm.kernels.{f}")}
    assert missing == set()
    import inspect

    from tilegemm.kernels import gemm

    assert f"gemm.drive({str(inspect.signature(gemm.drive)).strip('()')})" in doc


def test_the_architecture_page_matches_the_code():
    """docs/architecture.md: the import order it gives holds (no module imports one to its right),
    the entry contract it gives is the driver's signature, and the records it names exist."""
    import inspect

    from tilegemm.kernels import gemm

    text = (ROOT / "docs" / "architecture.md").read_text()
    order = re.search(r"Import order[^:]*:\s*(.*?)<- everything", text, re.S).group(1)
    chain = [f"tilegemm.{m}" for m in re.findall(r"`(\w+)`", order)]
    assert len(chain) >= 8
    edges = import_graph()
    for i, m in enumerate(chain):
        later = set(chain[i + 1 :])
        assert not (edges[m] & later), (m, edges[m] & later)
    signature = str(inspect.signature(gemm.drive)).strip("()")
    assert f"drive({signature})" in text
    for path in ("kernels/families.py", "tilegemm/layouts.py", "kernels/targets.py", "kernels/gemm.py"):
        assert (ROOT / path).is_file() and path in text, path
    for section in ("## Per-target bodies", "## The microkernel contract", "## Adding an instruction"):
        assert section in text


def test_the_instruction_table_is_one_registry_over_family_modules():
    """Every module of tilegemm/instructions/ but the record types is a family the registry
    joins, and the tables hold exactly what the families declare, each record once."""
    from tilegemm.instructions import _FAMILIES

    files = {p.stem for p in (ROOT / "tilegemm" / "instructions").glob("*.py")} - {"__init__", "records"}
    assert {f.__name__.rsplit(".", 1)[1] for f in _FAMILIES} == files
    declared = [i.mnemonic for f in _FAMILIES for i in f.INSTRUCTIONS]
    assert len(declared) == len(set(declared)) and set(declared) == set(instructions.INSTRUCTIONS)
    assert [p.name for f in _FAMILIES for p in f.PROFILES] == list(instructions.PROFILES)


def test_one_record_type_for_a_performance_target():
    """A measured target (what, ratio, goal, met) has one type, ``tilegemm.perf.Row``: no other
    class of the package declares those fields."""
    want = {"what", "ratio", "goal", "met"}
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                fields = {
                    s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
                if want <= fields:
                    found.append(f"{name}.{node.name}")
    assert found == ["tilegemm.perf.Row"]
