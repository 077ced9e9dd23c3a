"""The test suite's own machinery: the worker groups of the README's test command arrive."""

from __future__ import annotations

import pytest


def test_xdist_groups_reach_the_scheduler(request):
    """Under ``pytest -n auto --dist loadgroup`` each test id carries its group (conftest.py's
    ``pytest_collection_modifyitems``), or the workers race to compile the same kernels."""
    if not hasattr(request.config, "workerinput") or not request.config.getvalue("loadgroup"):
        pytest.skip("checks the README's test command, pytest -n auto --dist loadgroup")
    assert request.node.nodeid.endswith("@" + request.module.__name__), request.node.nodeid
