"""setuptools' build, plus the kernels compiled for the installing CPU (``tilegemm.precompile``).

A wheel built here carries, in ``tilegemm/_precompiled``, Numba's cache of the kernels a first
call of each dtype selects, for this CPU and the Numba version of the build environment; an
installed tilegemm reads it where its own cache has no entry, so that no first call waits for the
compiler. Elsewhere (another CPU, another Numba, other sources) Numba refuses those entries and the
kernels compile on first use, as without them. An editable install builds none (its sources
change); neither does a build with ``TILEGEMM_PRECOMPILE=0``, and one with
``TILEGEMM_PRECOMPILE="amx:bf16 amx:s8s8"`` compiles those pairs only. A failed compile leaves the wheel
without it and says so: the package works the same, only its first calls are slower.

The project's metadata is in pyproject.toml.
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyPrecompiled(build_py):
    def run(self):
        super().run()
        choice = os.environ.get("TILEGEMM_PRECOMPILE", "1").strip()
        if self.editable_mode or choice == "0":
            return
        into = os.path.join(self.build_lib, "tilegemm", "_precompiled")
        shutil.rmtree(into, ignore_errors=True)  # a cache of earlier sources would only be refused
        # pip's isolated build environment is on PYTHONPATH (numba and the other requirements of
        # pyproject's build-system): the built package goes in front of it, not in its place.
        path = [os.path.abspath(self.build_lib), os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
        env.pop("NUMBA_CACHE_DIR", None)
        cmd = [sys.executable, "-m", "tilegemm", "compile", "--into", os.path.abspath(into)]
        if choice != "1":  # ISA:DTYPE pairs, space-separated
            cmd += ["--only", *choice.split()]
        print("compiling the kernels for this CPU:", " ".join(cmd), flush=True)
        if subprocess.call(cmd, env=env, cwd=self.build_lib) != 0:
            shutil.rmtree(into, ignore_errors=True)
            print(
                "tilegemm: compiling the kernels ahead of time failed (see above); they will compile on "
                "first use instead",
                file=sys.stderr,
            )


setup(cmdclass={"build_py": BuildPyPrecompiled})
