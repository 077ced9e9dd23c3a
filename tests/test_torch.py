"""tilegemm.torch: PyTorch's bf16 products emulated as the AMX server computes them."""

from __future__ import annotations

import re

import numpy as np
import pytest
import silicon
from conftest import assert_bits

torch = pytest.importorskip("torch")
F = torch.nn.functional

import tilegemm  # noqa: E402
import tilegemm.torch as tt  # noqa: E402
from tilegemm import onednn  # noqa: E402

BF = torch.bfloat16


def _np(t):
    return tt.to_numpy(t)


def _rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(BF)


# -- the recorded silicon results, through emulate() --------------------------------------------


@pytest.mark.parametrize("case", silicon.cases(), ids=[c["key"] for c in silicon.cases()])
def test_silicon(case):
    """Every recorded case: PyTorch's own call, under emulate(), returns the recorded bits."""
    A, B, bias = (None if x is None else tt.from_numpy(x) for x in silicon.inputs(case))
    with tt.emulate(onednn_threads=case["threads"], strict=True) as mode:
        if case["op"] == "matmul":
            out = torch.matmul(A, B)
        elif case["op"] == "bmm":
            out = torch.bmm(A, B)
        else:
            out = F.linear(A, B, bias)
    assert out.dtype == BF and len(mode.calls) == 1
    assert_bits(_np(out), silicon.recording()[1][case["key"]].view(_np(out).dtype), case["key"])


# -- the oneDNN problem PyTorch makes of a call, against this machine's oneDNN ----------------

_PROBLEM = re.compile(r"(?:(\d+)x)?(\d+)x(\d+):(?:\d+x)?(\d+)x(\d+)")


def _verbose_problems(text):
    """(batch, M, K, N, weights transposed, sum post-op) of every matmul ONEDNN_VERBOSE printed."""
    out = []
    for line in text.splitlines():
        if not line.startswith("onednn_verbose") or ",exec,cpu,matmul," not in line:
            continue
        fields = line.split(",")
        mds, attrs, problem = fields[8], fields[9], fields[11]
        m = _PROBLEM.fullmatch(problem)
        batch, M, K, _, N = m.groups()
        wei = re.search(r"wei:bf16::blocked:(\w+)", mds).group(1)
        out.append((int(batch or 1), int(M), int(K), int(N), wei in ("ba", "acb"), "post-ops:sum" in attrs))
    return out


def _calls():
    """Products whose oneDNN problem depends on PyTorch's own decomposition (all above the
    M*N*K = 4096 under which PyTorch keeps small products to itself)."""
    x2, x3, x4 = _rand(24, 96), _rand(3, 8, 96, seed=1), _rand(2, 4, 8, 16, seed=2)
    w, b = _rand(40, 96, seed=3), _rand(40, seed=4)
    w64, b64 = _rand(64, 96, seed=14), _rand(64, seed=15)
    m = _rand(96, 40, seed=5)
    return [
        ("mm", lambda: torch.mm(x2, m)),
        ("matmul 2-D, transposed weight", lambda: x2 @ w.t()),
        ("linear 2-D + bias", lambda: F.linear(x2, w, b)),
        ("linear 3-D + bias (flattened addmm)", lambda: F.linear(x3, w, b)),
        ("linear 3-D, no bias (folded matmul)", lambda: F.linear(x3, w)),
        ("matmul 3-D @ 2-D (folded)", lambda: torch.matmul(x3, m)),
        ("matmul 4-D attention scores", lambda: torch.matmul(x4, x4.transpose(-1, -2))),
        ("matmul 4-D @ 4-D", lambda: x4 @ _rand(2, 4, 16, 8, seed=17)),
        ("bmm", lambda: torch.bmm(x3, _rand(3, 96, 20, seed=6))),
        ("bmm, transposed B", lambda: torch.bmm(x3, _rand(3, 20, 96, seed=7).transpose(1, 2))),
        ("addmm", lambda: torch.addmm(_rand(24, 40, seed=8), x2, m)),
        ("addmm, beta 0.5", lambda: torch.addmm(_rand(40, seed=9), x2, m, beta=0.5)),
        ("baddbmm", lambda: torch.baddbmm(_rand(3, 8, 20, seed=10), x3, _rand(3, 96, 20, seed=11))),
        ("matmul 2-D @ 3-D", lambda: torch.matmul(x2, _rand(2, 96, 20, seed=12))),
        ("matmul 3-D broadcast batch", lambda: torch.matmul(x3[:1], _rand(3, 96, 20, seed=13))),
        ("linear 1-D input + bias", lambda: F.linear(x2[0], w64, b64)),
        ("Tensor.matmul, N = 1", lambda: _rand(64, 96, seed=16).matmul(m[:, :1])),
    ]


def test_problems_match_this_machines_onednn(capfd):
    """tilegemm.torch hands oneDNN the problem PyTorch hands it: dimensions, batch, weights layout
    and post-op, as this machine's oneDNN reports them (ONEDNN_VERBOSE). Only the blocking and the
    ISA differ from the server: they are not in these fields."""
    calls = _calls()
    capfd.readouterr()
    with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        torch.mm(_rand(24, 96), _rand(96, 40, seed=1))
    if not _verbose_problems(capfd.readouterr().out):
        pytest.skip("this machine's PyTorch does not run bf16 products on oneDNN")
    for what, call in calls:
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            call()
        torch_sees = _verbose_problems(capfd.readouterr().out)
        with tt.emulate(strict=True) as mode:
            call()
        mine = [(c.plan.batch, c.plan.M, c.plan.K, c.plan.N, c.plan.b_transposed, c.plan.post_sum) for c in mode.calls]
        assert mine == torch_sees, what


def test_outputs_have_torchs_dtype_shape_and_the_profiles_bits():
    for what, call in _calls():
        plain = call()
        with tt.emulate(strict=True) as mode:
            emulated = call()
        assert emulated.dtype == plain.dtype and emulated.shape == plain.shape, what
        assert emulated.is_contiguous() == plain.is_contiguous(), what
        assert len(mode.calls) == 1 and not mode.skipped, what
    # the values are the profile's: linear through tilegemm.onednn directly
    x, w, b = _rand(3, 8, 96), _rand(40, 96, seed=1), _rand(40, seed=2)
    with tt.emulate(onednn_threads=1):
        y = F.linear(x, w, b)
    assert_bits(_np(y), onednn.linear(_np(x), _np(w), _np(b), onednn_threads=1), "linear")
    with tt.emulate(onednn_threads=1):
        s = torch.matmul(x, x.transpose(-1, -2))
    want = onednn.compute(
        _np(x), _np(x.transpose(-1, -2)), onednn.plan(8, 96, 8, batch=3, onednn_threads=1, b_transposed=True)
    )
    assert_bits(_np(s), want, "attention scores")


def test_parameters_are_packed_once_and_again_after_an_update(monkeypatch):
    """A Linear's weight is packed on its first emulated call and the packing reused by later
    calls and modes (``tt._PACKED``); an in-place update of the weight packs it again, a dead
    parameter's packing goes with it, and beyond the byte limit the oldest entries go. The bits
    are those of ``tilegemm.onednn.linear`` on the current weights throughout."""
    tt._PACKED.clear()
    lin = torch.nn.Linear(96, 40).to(BF)
    x = _rand(8, 96, seed=3)

    def check(lin):
        with torch.no_grad(), tt.emulate(onednn_threads=1):
            y = lin(x)
        want = onednn.linear(_np(x), _np(lin.weight.detach()), _np(lin.bias.detach()), onednn_threads=1)
        assert_bits(_np(y), want, "linear")

    def packings():
        return [packed for _, packed in tt._PACKED._entries.values()]

    check(lin)
    kept = packings()
    check(lin)
    assert len(kept) == 1 and packings()[0] is kept[0]  # the same packing, not packed again
    with torch.no_grad():
        lin.weight[3, 5] = 1000.0  # an in-place update: the version moves on
    check(lin)
    assert len(packings()) == 1 and packings()[0] is not kept[0]  # packed again; the old one gone
    # a gemm:jit host keeps the weight's K blocks, beside the brgemm packing
    with torch.no_grad(), tt.emulate(onednn_threads=1, host="recording-zen4-avx512"):
        y = lin(x)
    want = onednn.linear(
        _np(x), _np(lin.weight.detach()), _np(lin.bias.detach()), onednn_threads=1, host="recording-zen4-avx512"
    )
    assert_bits(_np(y), want, "linear on a gemm:jit host")
    assert sorted(k[-1] for k in tt._PACKED._entries) == ["brgemm", "gemm"]
    with torch.no_grad():
        lin.weight[0, 0] = 3.0
    check(lin)  # the update drops both kinds of the earlier version
    assert sorted(k[-1] for k in tt._PACKED._entries) == ["brgemm"]
    activations = _rand(96, 40, seed=4)  # not a parameter: packed per call, never kept
    with tt.emulate(onednn_threads=1):
        torch.matmul(x, activations)
    assert len(tt._PACKED._entries) == 1
    del lin
    import gc

    gc.collect()
    assert not tt._PACKED._entries and tt._PACKED._bytes == 0
    monkeypatch.setattr(tt._PACKED, "limit", 1)
    first, second = torch.nn.Linear(96, 40).to(BF), torch.nn.Linear(96, 40).to(BF)
    with torch.no_grad(), tt.emulate(onednn_threads=1):
        first(x)
        second(x)
    assert [k[0] for k in tt._PACKED._entries] == [id(second.weight)]  # only the latest is kept


def test_what_is_not_covered_runs_in_torch_and_is_listed():
    a, b = _rand(24, 96), _rand(96, 40, seed=1)
    cases = [
        ("matmul", lambda: torch.matmul(a.float(), b.float()), "dtype torch.float32"),
        ("addmm", lambda: torch.addmm(_rand(40, seed=2), a, b, alpha=2), "alpha=2.0"),
        ("mm", lambda: torch.mm(_rand(96, 24, seed=3).t(), b), "transposed source"),
        ("matmul", lambda: _rand(2, 4, 8, 16).transpose(-1, -2) @ _rand(2, 4, 8, 16), "transposed source"),
        ("matmul", lambda: torch.matmul(a, b[:, 0]), "matrix-vector"),
        ("mm", lambda: torch.mm(a, b, out=torch.empty(24, 40, dtype=BF)), "out="),
        ("einsum", lambda: torch.einsum("ik,kj->ij", a, b), "does not model"),
        ("conv2d", lambda: F.conv2d(_rand(1, 2, 8, 8), _rand(3, 2, 3, 3, seed=4)), "does not model"),
    ]
    for name, call, reason in cases:
        plain = call()
        with tt.emulate() as mode:
            got = call()
        assert torch.equal(
            got.view(torch.int16) if got.dtype == BF else got, plain.view(torch.int16) if plain.dtype == BF else plain
        )
        assert [c.function for c in mode.skipped] == [name] and reason in mode.skipped[0].reason, name
        assert not mode.calls
        with pytest.raises(tt.NotEmulated, match=re.escape(reason)):
            with tt.emulate(strict=True):
                call()
    with tt.emulate(strict=True) as mode:  # other operations are not products: not listed
        torch.relu(a)
        a.softmax(-1)
    assert not mode.skipped and not mode.calls


def test_emulate_arguments():
    with pytest.raises(ValueError, match="library profiles"):
        tt.emulate(isa="amx")
    with pytest.raises(ValueError, match="unknown isa"):
        tt.emulate(isa="spr")
    with pytest.raises(ValueError, match="onednn_threads"):
        tt.emulate(onednn_threads=0)
    with pytest.raises(TypeError, match="Host"):
        tt.emulate(host={"cores": 2})
    # the modelled thread count changes the plan (here: the K split of 256 x 4096 x 512)
    a, b = _rand(256, 4096), _rand(4096, 512, seed=1)
    with tt.emulate(onednn_threads=1) as one:
        y1 = a @ b
    with tt.emulate(onednn_threads=2) as two:
        y2 = a @ b
    assert one.calls[0].plan.groups != two.calls[0].plan.groups
    assert_bits(_np(y1), onednn.matmul(_np(a), _np(b), onednn_threads=1), "1 thread")
    assert_bits(_np(y2), onednn.matmul(_np(a), _np(b), onednn_threads=2), "2 threads")


def test_autograd_forward_emulated_backward_torchs():
    """Values: the emulation. Gradients: exactly plain PyTorch's, from the same inputs."""
    x = _rand(4, 12, 96).requires_grad_()
    layer = torch.nn.Linear(96, 40, dtype=BF)
    g = _rand(4, 12, 40, seed=9)

    y = layer(x)
    y.backward(g)
    plain = (y.detach().clone(), x.grad.clone(), layer.weight.grad.clone(), layer.bias.grad.clone())
    x.grad = None
    layer.zero_grad()
    with tt.emulate() as mode:
        ye = layer(x)
    assert ye.requires_grad and mode.calls
    ye.backward(g)
    with torch.no_grad(), tt.emulate():
        want = layer(x)
    assert_bits(_np(ye), _np(want), "forward")
    for got, ref in zip((x.grad, layer.weight.grad, layer.bias.grad), plain[1:]):
        assert_bits(_np(got), _np(ref), "gradient")
    # a product whose inputs both need gradients
    a, b = _rand(8, 64).requires_grad_(), _rand(64, 24, seed=1).requires_grad_()
    (a @ b).sum().backward()
    ga, gb = a.grad.clone(), b.grad.clone()
    a.grad = b.grad = None
    with tt.emulate():
        (a @ b).sum().backward()
    assert_bits(_np(a.grad), _np(ga), "dA")
    assert_bits(_np(b.grad), _np(gb), "dB")


def test_a_transformer_block_is_covered():
    """Every product of the docs' transformer block is emulated (strict), on the profile's bits."""
    torch.manual_seed(0)
    block = _block()
    x = _rand(2, 16, 64, seed=3)
    with tt.emulate(strict=True) as mode:
        y = block(x)
    assert y.shape == x.shape and y.dtype == BF
    kinds = [c.function for c in mode.calls]
    assert kinds.count("linear") == 6 and kinds.count("matmul") == 2


def _block():
    class Block(torch.nn.Module):
        def __init__(self, d=64, heads=4, hidden=256):
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.q, self.k, self.v, self.proj = (torch.nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, d)

        def forward(self, x):
            b, s, d = x.shape
            h = self.norm1(x)
            q, k, v = (f(h).view(b, s, self.heads, -1).transpose(1, 2) for f in (self.q, self.k, self.v))
            att = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
            x = x + self.proj((att.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d))
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    return Block().to(BF)


def test_tilegemm_matmul_in_the_mode_is_untouched():
    a, b = np.ones((4, 8), np.float32), np.ones((8, 2), np.float32)
    with tt.emulate() as mode:
        assert tilegemm.matmul(a, b)[0, 0] == 8
    assert not mode.calls


def test_bench_rows_for_the_torch_mode():
    from tilegemm import benchmark

    lines = []
    rows = benchmark.torch_mode(shapes=(("linear", 4, 64, 32), ("bmm", 8, 32, 8)), repeats=1, report=lines.append)
    assert [r["what"] for r in rows] == ["linear", "bmm"] and len(lines) == 2
    assert rows[1]["shape"] == "8 x 8 x 32 x 8" and "K_blk=32" in rows[1]["plan"]
    assert all(r["emulate_over_bare"] > 0 and r["onednn_over_bare"] > 0 for r in rows)


def test_tilegemm_torch_is_reachable_after_import_tilegemm_alone():
    """``tilegemm.torch`` is an attribute of the package that imports torch only when asked for."""
    import subprocess
    import sys

    code = (
        "import sys, tilegemm\n"
        "assert 'torch' not in sys.modules, 'import tilegemm imported torch'\n"
        "print(tilegemm.torch.emulate.__name__, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["emulate", "True"]


@pytest.mark.parametrize(
    "dtype, tdtype",
    [("bf16", "bfloat16"), ("fp16", "float16"), ("bf16", "float32"), ("s8s8", "int8"), ("u8u8", "uint8")],
)
def test_matmul_takes_torch_cpu_tensors(dtype, tdtype):
    """A torch tensor gives the bits of the same values as a NumPy array: bf16 and fp16 tensors
    are exact in float32, which the call rounds back to the same codes; integers are themselves.
    Transposed (strided) and autograd tensors are read as they are; the result is NumPy's."""
    g = torch.Generator().manual_seed(7)
    t = getattr(torch, tdtype)
    if t.is_floating_point:
        a, b = torch.randn(9, 40, generator=g).to(t), torch.randn(7, 40, generator=g).to(t).t()
        a.requires_grad_(True)
        want = tilegemm.matmul(a.detach().float().numpy(), b.float().numpy(), dtype=dtype)
    else:
        lo, hi = (-128, 128) if tdtype == "int8" else (0, 256)
        a = torch.randint(lo, hi, (9, 40), generator=g).to(t)
        b = torch.randint(lo, hi, (7, 40), generator=g).to(t).t()
        want = tilegemm.matmul(a.numpy().astype(np.int64), b.numpy().astype(np.int64), dtype=dtype)
    got = tilegemm.matmul(a, b, dtype=dtype)
    assert isinstance(got, np.ndarray) and got.shape == (9, 7)
    assert_bits(got, want)
    assert_bits(tilegemm.matmul(a, tilegemm.pack(b, dtype), dtype=dtype), want)


def test_a_tensor_off_the_cpu_is_refused_by_name():
    a = torch.empty(4, 4, device="meta")
    with pytest.raises(ValueError, match=r"operand a is a torch tensor on meta.*a\.cpu\(\)"):
        tilegemm.matmul(a, np.ones((4, 4), np.float32))


# -- compare: one model on several hosts -----------------------------------------------------


def test_compare_is_per_layer_emulate():
    """Each host's row of the model's output is what emulate() gives on that host, and every
    layer's difference is bitdiff of the two hosts' outputs of that layer."""
    model, x = tt.demo_model(layers=1, d=64, heads=2, mlp=128, seq=16, batch=1)
    hosts = ("recording-amx", "recording-zen4", "milan-64")
    result = tt.compare(model, x, hosts=hosts)
    assert result.hosts == hosts and result.layers[-1] == "(output)"
    assert result.layers[:3] == ("0.ln1", "0.attn.qkv", "0.attn.proj")
    assert len(result.rows) == 3 * len(result.layers)
    for h in hosts:
        with torch.no_grad(), tt.emulate(host=h) as mode:
            y = model(x)
        assert len(mode.calls) == 6 and not mode.skipped  # qkv, q k^T, att v, proj, fc1, fc2
        assert_bits(_np(result.outputs[h]), _np(y))
    for row in result.rows:
        if row.layer == "(output)":
            a, b = (_np(result.outputs[h]) for h in row.hosts)
            want = tilegemm.bitdiff(a, b)
            assert (row.diff.count, row.diff.max_ulp, row.diff.first) == (want.count, want.max_ulp, want.first)
    # the first layer runs no product: it is the same everywhere
    assert all(r.diff.identical for r in result.rows if r.layer == "0.ln1")
    assert result.divergence().shape == (len(result.layers), 3)


def test_compare_finds_no_difference_between_one_host_twice_named():
    model, x = tt.demo_model(layers=1, d=64, heads=2, mlp=128, seq=16, batch=1)
    same = onednn.Host(**vars(onednn.HOSTS["recording-zen4"]))
    result = tt.compare(model, x, hosts=("recording-zen4", same))
    assert all(r.diff.identical for r in result.rows)
    assert "differ" in str(result).splitlines()[0]


def test_compare_differs_where_the_classes_do():
    model, x = tt.demo_model()
    result = tt.compare(model, x)
    out = {r.hosts: r.diff for r in result.rows if r.layer == "(output)"}
    # the Zen 4's VDPBF16PS brgemm and gemm:jit's emulated VDPBF16PS part only where gemm:jit cuts
    # a K above 384 in two (fc2, K = 512); the bf16 residual hides those few here
    alike = ("recording-zen4", "recording-zen4-avx512")
    assert out.pop(alike).identical
    assert all(not r.diff.identical for r in result.rows if r.hosts == alike and r.layer.endswith("fc2"))
    assert len(out) == 5 and all(0 < d.count < d.total // 10 for d in out.values())


def test_compare_refuses_bad_hosts():
    model, x = tt.demo_model(layers=1, d=32, heads=2, mlp=64, seq=4, batch=1)
    with pytest.raises(ValueError, match="at least two hosts"):
        tt.compare(model, x, hosts=("recording-amx",))
    with pytest.raises(ValueError, match="unknown host 'zen4'.*recording-zen4"):
        tt.compare(model, x, hosts=("recording-amx", "zen4"))
    with pytest.raises(ValueError, match="a host twice"):
        tt.compare(model, x, hosts=("milan-64", "milan-64"))
    with pytest.raises(TypeError, match="torch.nn.Module"):
        tt.compare(lambda t: t, x)


def test_compare_plot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    model, x = tt.demo_model(layers=1, d=64, heads=2, mlp=128, seq=16, batch=1)
    result = tt.compare(model, x, hosts=("recording-amx", "milan-64"))
    ax = result.plot()
    assert [t.get_text() for t in ax.get_yticklabels()] == list(result.layers)
    assert ax.images[0].get_array().shape == (len(result.layers), 1)
