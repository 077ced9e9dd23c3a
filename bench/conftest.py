"""pytest-benchmark suite: ``pytest bench --benchmark-only``. The normal test run never collects
this folder (``testpaths = tests``) and disables benchmarks (``--benchmark-disable``)."""
