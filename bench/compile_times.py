"""Where a test run spends its time compiling: a pytest plugin.

    PYTHONPATH=bench NUMBA_CACHE_DIR=$(mktemp -d) python -m pytest -p compile_times -q

Numba reports each compile as a ``numba:compile`` event; a compile that types a call compiles
the callee inside it. The plugin charges each compile its own time, less the compiles nested in
it, to the compiled function (module and qualified name), and each outermost compile to the test
that was running. At the end of the run it prints the totals and the largest entries of both.
Run it without xdist (``-n 0``, the default here): each worker would count only its own share."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from numba.core import event

_TOP = 25


class _Recorder(event.Listener):
    def __init__(self) -> None:
        self.stack: list[list[float]] = []  # [start, time of the compiles nested in it]
        self.functions: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # [compiles, seconds]
        self.tests: dict[str, float] = defaultdict(float)
        self.test = "(collection)"

    def on_start(self, ev) -> None:
        self.stack.append([time.perf_counter(), 0.0])

    def on_end(self, ev) -> None:
        start, nested = self.stack.pop()
        took = time.perf_counter() - start
        fn = getattr(ev.data.get("dispatcher"), "py_func", None)
        name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
        entry = self.functions[name]
        entry[0] += 1
        entry[1] += took - nested
        if self.stack:
            self.stack[-1][1] += took
        else:
            self.tests[self.test] += took


_recorder = _Recorder()


def pytest_configure(config: pytest.Config) -> None:
    event.register("numba:compile", _recorder)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _recorder.test = item.nodeid


def pytest_terminal_summary(terminalreporter) -> None:
    functions, tests = _recorder.functions, _recorder.tests
    count = sum(int(n) for n, _ in functions.values())
    total = sum(s for _, s in functions.values())
    write = terminalreporter.write_line
    terminalreporter.section("Numba compiles")
    write(f"{count} compiles, {total:.1f} s (each compile's own time, nested compiles charged to theirs)")
    write("seconds  compiles  function")
    for name, (n, s) in sorted(functions.items(), key=lambda kv: -kv[1][1])[:_TOP]:
        write(f"{s:7.1f}  {int(n):8d}  {name}")
    write("seconds  test (its outermost compiles)")
    for name, s in sorted(tests.items(), key=lambda kv: -kv[1])[:_TOP]:
        write(f"{s:7.1f}  {name}")
