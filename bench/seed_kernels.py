"""The seed article's AMX kernels ported to ``tilegemm.amx.intrinsics``.

The ports live in the package (``tilegemm.amx.seed``) so that ``python -m tilegemm model`` can
count their tile loads; this module is the place the benchmarks and readers look for them.
"""

from tilegemm.amx.seed import (  # noqa: F401
    gemm_1x1,
    gemm_2x2,
    gemm_2x2_resident,
    gemm_single_buffered,
    pack_b_vnni,
)
