"""``python -m tilegemm selfcheck``: its cases exercise what they are named for, and it reports
this host's instructions as this host can run them."""

from __future__ import annotations

import io

import numpy as np
import pytest

import tilegemm
from tilegemm import dispatch, native
from tilegemm.__main__ import main as cli
from tilegemm.native import gemm, selfcheck

I = tilegemm.instructions.INSTRUCTIONS
PROFILES = tilegemm.instructions.PROFILES
HAS_BF16 = "avx512_bf16" in native.this_host().flags


@pytest.mark.parametrize("mnemonic", ["TDPBF16PS", "TDPBSUD", "VDPBF16PS"])
def test_plan_covers_families_tilings_threads_and_k(mnemonic):
    instr = I[mnemonic]
    for target in (selfcheck.QUICK, selfcheck.FULL):
        todo = list(selfcheck.plan(instr, target))
        assert sum(M * N for _, M, _, N, _, _ in todo) >= target
        assert {p[0] for p in todo} == set(selfcheck.families(instr))
        ks = {p[2] for p in todo}
        step = instr.k_step
        assert {1, step - 1, step, step + 1, 4100} <= ks
        assert {p[5] for p in todo} >= {1, min(2, tilegemm.api.numba.config.NUMBA_NUM_THREADS)}
        assert any(p[1] % 16 and p[3] % 16 for p in todo)  # partial tiles on both edges
    if instr.tile_method is not None:
        assert {p[4] for p in selfcheck.plan(instr, selfcheck.FULL)} == set(dispatch.TILINGS)


def _cases(mnemonic, family):
    return [c for c in selfcheck.cases(I[mnemonic], selfcheck.QUICK) if c.family == family]


@pytest.mark.parametrize("mnemonic", ["TDPBF16PS", "TDPFP16PS"])
def test_float_families_do_what_they_say(mnemonic):
    """Operands are exact in the format; each family produces the event it is named for, in
    the emulation's own results."""
    instr = I[mnemonic]
    for c in selfcheck.cases(instr, selfcheck.QUICK):
        for x, fmt in ((c.a, instr.a), (c.b, instr.b)):
            if c.family == "nan_payloads":  # the format's own codes: no conversion touches a NaN
                assert x.dtype == fmt.element
                continue
            assert x.dtype == np.float32 and tilegemm.bitdiff(fmt.decode(fmt.to_codes(x, "x", "t")), x).identical
    codes = np.concatenate([instr.a.to_codes(c.a, "a", "t").ravel() for c in _cases(mnemonic, "denormals")])
    expo_mask = {8: 0x7F80, 11: 0x7C00}[instr.a.precision]
    assert np.mean(((codes & expo_mask) == 0) & ((codes & 0x7FFF) != 0)) > 0.2  # format denormals
    results = {}
    for fam in selfcheck.families(instr):
        outs = []
        for c in _cases(mnemonic, fam):
            out = c.c.copy() if c.c is not None else None
            r = tilegemm.matmul(c.a, c.b, out=out, accumulate=out is not None, dtype=instr.a.name)
            outs.append(r.ravel())
        results[fam] = np.concatenate(outs)
    assert np.isinf(results["overflow"]).any()
    # NaNs of many payloads, quiet and signaling, both signs, in A and in C.
    a = np.concatenate([c.a.view(np.uint16).ravel() for c in _cases(mnemonic, "nan_payloads")])
    mant = instr.a.precision - 1
    top = ((1 << (15 - mant)) - 1) << mant
    nan = a[((a & top) == top) & ((a & ((1 << mant) - 1)) != 0)]
    quiet = (nan >> (mant - 1)) & 1
    assert len(np.unique(nan & 0x7FFF)) > 20 and quiet.any() and not quiet.all() and len(np.unique(nan >> 15)) == 2
    cbits = np.concatenate([c.c.view(np.uint32).ravel() for c in _cases(mnemonic, "nan_payloads")])
    assert len(np.unique(cbits[np.isnan(cbits.view(np.float32))])) > 20
    assert np.isnan(results["nan_inf"]).any()
    canc = results["cancellation"]
    assert (canc == 0).any() and (np.signbit(canc) & (canc == 0)).sum() < (canc == 0).sum()
    assert max(c.a.shape[1] for c in _cases(mnemonic, "long_k")) >= 4097
    if mnemonic == "TDPBF16PS":  # binary32 results at the normal range's edge, and flushed ones
        tiny = np.abs(results["tininess"])
        assert ((tiny >= 2.0**-126) & (tiny < 2.0**-120)).any() and (tiny == 0).any()


def test_int_families_wrap():
    cases = _cases("TDPBSSD", "wrap")
    wrapped = False
    for c in cases:
        exact = c.c.astype(np.int64) + c.a.astype(np.int64) @ c.b.astype(np.int64)
        wrapped |= bool(((exact > 2**31 - 1) | (exact < -(2**31))).any())
    assert wrapped


def test_selfcheck_reports_this_host():
    """Every instruction a dtype runs has a line: counts where this host runs it natively, else
    what it lacks (the parts of a composite record, complex FP16's, run through it)."""
    buf = io.StringIO()
    assert selfcheck.main(quick=True, out=buf) == 0
    text = buf.getvalue()
    reachable = {i.mnemonic: i for p in PROFILES.values() if p.library is None for i in p.dtypes.values()}
    assert "TCMMRLFP16PS+TCMMIMFP16PS" in reachable and "TCMMRLFP16PS" not in reachable
    for instr in reachable.values():
        line = next(ln for ln in text.splitlines() if ln.startswith(instr.mnemonic))
        if native.usable(instr):
            n = line.split()[1]
            assert f"{n} of {n} outputs identical" in line and int(n.replace(",", "")) >= selfcheck.QUICK
            # NaN payloads are reported beside the verdict for every float instruction.
            assert ("NaN payload or sign differs in" in line) == instr.is_float, line
        else:
            from tilegemm.native.gemm import generator

            if generator(instr) is None and not native.needs(instr):  # ACE: no CPU has it
                why = "no CPU implements it (a proposed instruction)"
                assert "it would need )" not in line
            elif generator(instr) is None:
                why = "tilegemm has no native program for it"
            else:
                why = "this host lacks"
            assert f"not run: {why}" in line and "would compare" in line
    if "amx_tile" not in native.this_host().flags:
        assert "This CPU has no AMX" in text


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no AVX512_BF16: no native instruction to break")
def test_a_differing_output_fails_the_selfcheck(monkeypatch):
    """A native kernel that gets one output wrong: the self-check names the case, exits 1."""
    real = gemm.run

    def wrong(*args, **kw):
        real(*args, **kw)
        C3 = args[5]
        C3.reshape(-1).view(np.uint32)[0] ^= 1

    monkeypatch.setattr(gemm, "run", wrong)
    monkeypatch.setattr(selfcheck, "QUICK", 2000)
    buf = io.StringIO()
    assert selfcheck.main(quick=True, out=buf) == 1
    text = buf.getvalue()
    assert "VDPBF16PS" in text and "DIFFERS denormals: M x N x K" in text and "elements differ" in text


def test_cli_verb(monkeypatch):
    seen = []
    monkeypatch.setattr(selfcheck, "main", lambda quick: seen.append(quick) or 3)
    assert cli(["selfcheck", "--quick"]) == 3 and cli(["selfcheck"]) == 3
    assert seen == [True, False]
