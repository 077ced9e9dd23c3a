"""The README as a new user meets it: its two set-up commands, and every command it shows.

Every ``$ python -m tilegemm ...`` line of the README is parsed by the real command-line parser
(so no option in it is wrong), and run as written unless it is one of the long benchmark runs
(``bench`` sweeps and ``--targets`` take minutes); those code paths run in the benchmark tests and,
as ``bench --sizes 64 --budget 5`` from a fresh clone, in CI (``.ci/fresh-clone``).
"""

from __future__ import annotations

import datetime
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from tilegemm import instructions
from tilegemm.__main__ import _parser

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".ci"))
import readme_commands  # noqa: E402

TEXT = (ROOT / "README.md").read_text()
CLI = readme_commands.cli_commands(TEXT)
LONG = ("bench",)  # verbs whose README runs take minutes


def test_two_setup_commands_and_ci_runs_the_second():
    main, test = readme_commands.setup_commands(TEXT)
    assert main == "python -m pip install . && python -m tilegemm demo"
    assert test.startswith("python -m pip install -e") and "&& python -m pytest" in test
    ci = (ROOT / ".ci" / "run").read_text()
    assert "readme_commands.py test" in ci and "fresh-clone" in ci


def test_the_readme_shows_commands():
    verbs = {shlex.split(c)[3] for c in CLI}
    assert {"demo", "bench", "ir", "model", "info"} <= verbs


@pytest.mark.parametrize("command", CLI)
def test_every_command_parses(command):
    _parser().parse_args(shlex.split(command)[3:])


@pytest.mark.parametrize("command", [c for c in CLI if shlex.split(c)[3] not in LONG + ("demo",)])
def test_every_short_command_runs(command, tmp_path):
    done = subprocess.run(shlex.split(command), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_the_readme_is_short():
    """Measurements live in docs/performance.md; the README stays a page a new user reads."""
    lines = TEXT.count("\n")
    assert lines <= 250, f"README.md has {lines} lines (at most 250)"
    assert "docs/performance.md" in TEXT


def test_every_docs_page_is_listed():
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in TEXT, f"the README's documentation index lacks docs/{page.name}"


def test_every_instruction_page_is_listed():
    pages = {i.doc for i in instructions.INSTRUCTIONS.values()} | {p.doc for p in instructions.PROFILES.values()}
    for page in pages:
        assert (ROOT / page).is_file(), page
        assert page in TEXT, f"the README's documentation index lacks {page}"
    for isa in instructions.ISAS:
        assert f'isa="{isa}"' in TEXT or f"`{isa}`" in TEXT, isa


PYTHON = [m.group(1) for m in re.finditer(r"```python\n(.*?)```", TEXT, re.S)]


def test_the_readme_shows_python():
    assert any("tilegemm.matmul(" in code for code in PYTHON)


@pytest.mark.parametrize("code", PYTHON, ids=[f"block{i}" for i in range(len(PYTHON))])
def test_every_python_example_runs(code, tmp_path):
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


PERFORMANCE = (ROOT / "docs" / "performance.md").read_text()
HOSTS = re.findall(r"^## (\d{4}-\d{2}-\d{2}): ([^\n]+)\n(.*?)(?=^## |\Z)", PERFORMANCE, re.M | re.S)


def test_performance_has_dated_host_sections_with_commands():
    """docs/performance.md: one "## YYYY-MM-DD: host" section per host, each showing the command
    lines (``$ ...`` inside a code block) that produced its figures; tilegemm's parse."""
    assert HOSTS, "docs/performance.md has no '## YYYY-MM-DD: host' section"
    for date, host, body in HOSTS:
        assert datetime.date.fromisoformat(date) <= datetime.date.today(), (date, host)
        blocks = re.findall(r"^```\n(.*?)^```", body, re.M | re.S)
        commands = [ln[2:] for block in blocks for ln in block.splitlines() if ln.startswith("$ ")]
        assert commands, f"the section '{date}: {host}' shows no '$ command' line in a code block"
        for command in readme_commands.cli_commands("\n".join(f"$ {c}" for c in commands)):
            _parser().parse_args(shlex.split(command)[3:])
