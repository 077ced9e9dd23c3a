"""Every Python example in docs/ runs (from the repository root, as a reader would run it)."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_examples_run(page, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    assert blocks, f"{page.name} has no worked example"
    monkeypatch.chdir(ROOT)
    for code in blocks:
        exec(compile(code, str(page), "exec"), {"__name__": "__docs__"})
