"""This host gives x86-64's bits: the adversarial cases of ``tests/data/same_bits.py`` (every
profile and dtype, NaN/Inf/denormal/-0 operands and accumulators, K tails, saturation edges, MX
block scales, every non-default switch reading), computed here and compared bit for bit with the
results recorded on x86-64 (``tests/data/same_bits.npz``). On x86-64 this guards the fixture
itself; on AArch64 (``.ci/arm64``) it is the check that the architecture changes no bit.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from conftest import assert_bits

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "data"))
import same_bits  # noqa: E402

FIXTURE = np.load(same_bits.FIXTURE)
CASES = list(same_bits.cases())

pytestmark = pytest.mark.xdist_group("same_bits")


def test_the_fixture_holds_every_case_and_nothing_else():
    names = {c.name for c in CASES}
    stored = {k for k in FIXTURE.files if not k.startswith("#") and "#" not in k}
    assert stored == names, (sorted(stored - names), sorted(names - stored))


def test_the_cases_cover_every_dtype_profile_and_tiling():
    from tilegemm import TILINGS, instructions

    have = {(c.isa, c.dtype) for c in CASES}
    want = {(p.name, d) for p in instructions.PROFILES.values() if p.same_as is None for d in p.dtypes}
    assert have == want
    assert {c.tiling for c in CASES} == set(TILINGS)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_bits_as_x86_64(case):
    # The inputs first: a change in how a case is made (numpy's generator, the case code) would
    # make the comparison meaningless rather than wrong.
    assert bytes(FIXTURE[case.name + "#inputs"]).decode() == same_bits.digest(case), (
        f"{case.name}: the inputs differ from those the fixture was made from; "
        "rerun python tests/data/same_bits.py on x86-64"
    )
    want = FIXTURE[case.name]
    got = same_bits.run(case)
    if want.dtype.kind == "V":  # npz keeps ml_dtypes' bfloat16 as raw 2-byte records
        want = want.view(got.dtype)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert_bits(got, want, f"{case.name} (tiling {case.tiling}, K = {case.k})")
