"""The seed's kernels ported to tilegemm.amx: same bits as tilegemm.matmul, counters as predicted."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALL_DTYPES, assert_bits, operands

import tilegemm
from tilegemm.amx import intrinsics, seed

PORTS = [seed.gemm_1x1, seed.gemm_2x2, seed.gemm_2x2_resident]


@pytest.mark.parametrize("port", PORTS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_ports_match_matmul(port, dtype):
    rng = np.random.default_rng(4)
    for m, n, k in [(32, 32, 64), (17, 33, 47), (5, 20, 131), (40, 16, 3)]:
        a, b = operands(dtype, (m, k), (k, n), rng)
        assert_bits(port(a, b, dtype), tilegemm.matmul(a, b, dtype), f"{port.__name__} {dtype} {m},{n},{k}")


@pytest.mark.parametrize("R,C", [(2, 3), (3, 2)])
def test_single_buffered_ports(R, C):
    rng = np.random.default_rng(5)
    a, b = operands("bf16", (96, 70), (70, 96), rng)
    assert_bits(seed.gemm_single_buffered(a, b, "bf16", R, C), tilegemm.matmul(a, b), f"{R}x{C}")
    unit = intrinsics.reset()
    seed.gemm_single_buffered(a[:, :64], b[:64], "bf16", R, C)  # whole K steps: no tail reconfiguration
    # Per K step: R A loads and R*C B loads for R*C multiplies (2x3: 8 per 6).
    assert unit.counters.tile_loads == (R + R * C) * unit.counters.multiplies // (R * C)
    with pytest.raises(ValueError, match="whole tiles"):
        seed.gemm_single_buffered(a[:17], b, "bf16", R, C)


@pytest.mark.parametrize(
    "port,loads_per_multiply",
    [
        (seed.gemm_1x1, 2.0),  # the seed: "for every multiply, we do two tile loads"
        (seed.gemm_2x2, 1.5),  # the listing as printed: 6 loads per 4 multiplies
        (seed.gemm_2x2_resident, 1.0),  # the text's claim: 4 loads per 4 multiplies
    ],
)
def test_counters_show_the_articles_ratios(port, loads_per_multiply):
    rng = np.random.default_rng(6)
    a, b = operands("s8s8", (64, 256), (256, 64), rng)
    unit = intrinsics.reset()
    port(a, b, "s8s8")
    c = unit.counters
    assert c.load_to_compute == loads_per_multiply
    assert c.macs == 64 * 64 * 256
    assert c.bytes_loaded == c.tile_loads * 1024


def test_pack_b_matches_tilegemm_pack():
    rng = np.random.default_rng(7)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    bits = tilegemm.formats.BF16.to_codes(b, "b", "bf16")
    assert np.array_equal(seed.pack_b_vnni(bits, 32, 64, 2), tilegemm.pack(b).data.reshape(-1))


def test_2x2_port_256_cubed():
    # Its time is a benchmark row (python -m tilegemm bench --targets), not asserted here.
    rng = np.random.default_rng(8)
    a, b = operands("bf16", (256, 256), (256, 256), rng)
    assert_bits(seed.gemm_2x2(a, b), tilegemm.matmul(a, b), "256^3 through the 2x2 port")
