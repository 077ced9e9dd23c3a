"""The README's commands, as a new user would copy them.

``python .ci/readme_commands.py setup`` prints the two set-up commands (main job, tests), one per
line; ``main`` or ``test`` prints one of them; ``cli`` prints every ``$ python -m tilegemm ...``
command shown in the README's examples. Used by .ci/run, .ci/fresh-clone and the tests.
"""

from __future__ import annotations

import pathlib
import re
import sys

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def setup_commands(text: str) -> list[str]:
    """The indented command lines of the README's "Set-up on a fresh machine" section."""
    section = text.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return [ln.strip() for ln in section.splitlines() if ln.startswith("    ") and ln.strip()]


def cli_commands(text: str) -> list[str]:
    """Every ``$ python -m tilegemm ...`` line inside the README's code blocks."""
    return [m.group(1).strip() for m in re.finditer(r"^\$ (python -m tilegemm[^\n]*)$", text, re.M)]


def main(argv: list[str]) -> int:
    text = README.read_text()
    setup = setup_commands(text)
    if len(setup) != 2:
        print(f"README must give exactly two set-up commands, found {len(setup)}: {setup}", file=sys.stderr)
        return 1
    what = argv[0] if argv else "setup"
    lines = {"setup": setup, "main": setup[:1], "test": setup[1:], "cli": cli_commands(text)}[what]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
