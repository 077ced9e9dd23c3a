"""Every Python example in docs/ runs (from the repository root, as a reader would run it)."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))


#: A Python example, and the sample of what it prints where the page shows one: the next fenced
#: block, if it is an ``output`` block (``output numbers-vary``: the numbers depend on the host,
#: as where a page compares with this CPU's PyTorch; the words and layout do not).
_EXAMPLE = re.compile(r"```python\n(.*?)```(?:(?:(?!```).)*?```output( numbers-vary)?\n(.*?)```)?", re.S)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _shape(line: str) -> str:
    return _NUMBER.sub("#", line)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_examples_run(page, monkeypatch, capsys):
    """Each example runs; where the page shows its output, every printed line matches the sample
    (a sample the code no longer prints fails)."""
    examples = _EXAMPLE.findall(page.read_text())
    assert examples, f"{page.name} has no worked example"
    monkeypatch.chdir(ROOT)
    for code, vary, sample in examples:
        capsys.readouterr()
        exec(compile(code, str(page), "exec"), {"__name__": "__docs__"})
        printed = capsys.readouterr().out.splitlines()
        if not sample:
            continue
        want = sample.splitlines()
        if vary:
            printed, want = [_shape(x) for x in printed], [_shape(x) for x in want]
        assert printed == want, f"{page.name}: the sample output no longer matches what the example prints"


def test_a_stale_sample_output_fails():
    """The sample check itself: a page whose output block says something else is caught."""
    page = (
        "```python\nprint('max 129 ulp, 1 of opposite sign')\n```\n\n"
        "It prints:\n\n```output numbers-vary\nmax 28768 ulp\n```\n"
    )
    ((_, vary, sample),) = _EXAMPLE.findall(page)
    assert vary and sample == "max 28768 ulp\n"
    assert _shape("max 129 ulp, 1 of opposite sign") != _shape(sample.strip())
    assert _shape("max 129 ulp") == _shape(sample.strip())
