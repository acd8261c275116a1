"""The C++ ON-LSTM loops (:mod:`treelm.kernels.onlstm_cxx`) against the readable reference cell and
the Python fused path (:mod:`treelm.kernels.onlstm_torch`): values and every gradient within 1e-5
(float32) / 1e-10 (float64), under each GEMM backend this machine has; gradcheck in float64;
the dispatch (``impl="auto"`` takes the C++ loop on CPU float32/float64, with and without grad);
autocast; and the fallback to the Python path when the extension is switched off or cannot be
built. Skipped, with the reason, only where there is no C++ compiler at all."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from test_kernels_onlstm import (  # the reference-comparison helpers of the fused-kernel tests
    TOL,
    _assert_all_close,
    _backend_params,
    _OpLog,
    _pair,
    _run,
    forced_gemm,  # noqa: F401, F811  (a fixture)
)
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from treelm.cells.onlstm import ONLSTM
from treelm.kernels import build, gemm, onlstm_sequence
from treelm.kernels.gemm import step_matmul
from treelm.kernels.onlstm_cxx import (
    CxxONLSTMFunction,
    CxxProjectedONLSTMFunction,
    onlstm_cxx_sequence,
)
from treelm.kernels.sequence import cxx_operands, weight_grad

if shutil.which(os.environ.get("CXX", "c++")) is None:
    pytest.skip("no C++ compiler: the C++ ON-LSTM loop cannot be built here",
                allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def ext():
    """The compiled extension; with a compiler present a failed build is a failure, not a skip."""
    if not build.enabled():
        pytest.skip(f"${build.ENV_VAR}=0 in this environment")
    module = build.load()
    assert module is not None, build.unavailable_reason()
    return module


def count_calls(ext, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]) -> dict[str, int]:
    """Counts calls of the extension's functions ``names`` (so a test can tell which path
    ran); the counts live in the returned dict."""
    n = dict.fromkeys(names, 0)

    def counting(name: str):  # noqa: ANN202
        f = getattr(ext, name)

        def counted(*args, **kw):  # noqa: ANN002, ANN003, ANN202
            n[name] += 1
            return f(*args, **kw)

        return counted

    for name in n:
        monkeypatch.setattr(ext, name, counting(name))
    return n


@pytest.fixture
def calls(ext, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the ON-LSTM loops' forward/backward calls."""
    return count_calls(ext, monkeypatch, ("forward", "backward"))


SHAPES = [(1, 1, 3, 10), (5, 3, 4, 10), (7, 2, 6, 20)]
# every shape, chunk 1 and H, both master inputs, (DropConnect, initial state) three ways, on
# "mm" in float32 and float64; the packed backends (float32) on the largest shape, chunk 5
CASES = [
    (shape, chunk, mi, dc, st, backend)
    for shape, chunk, mi, (dc, st), backend in itertools.product(
        SHAPES, (1, "H"), ("paper", "symmetric"), ((False, False), (True, True), (False, True)),
        ("mm",))
] + [((7, 2, 6, 20), 5, mi, True, True, b) for mi in ("paper", "symmetric")
     for b in ("mkl", "onednn")]
CPU_BACKENDS = {     # e.g. "f32-mm" -> (device, dtype, backend)
    p.id.removeprefix("cpu-"): p for p in _backend_params((torch.float32, torch.float64))
    if p.values[0] == "cpu"}
PARAMS = [
    pytest.param(*case[:5], *CPU_BACKENDS[f"{dt}-{case[5]}"].values,
                 id=f"{case[0]}-c{case[1]}-{case[2]}-dc{int(case[3])}-st{int(case[4])}-{dt}-{case[5]}",
                 marks=CPU_BACKENDS[f"{dt}-{case[5]}"].marks)
    for case in CASES for dt in ("f32", "f64")
    if f"{dt}-{case[5]}" in CPU_BACKENDS
]


@pytest.mark.parametrize(
    "shape,chunk,master_input,dropconnect,carried,device,dtype,forced_gemm", PARAMS,
    indirect=["forced_gemm"],
)
def test_cxx_matches_reference_and_python(
    shape: tuple[int, int, int, int], chunk: int | str, master_input: str, dropconnect: bool,
    carried: bool, device: str, dtype: torch.dtype, forced_gemm,  # noqa: F811
    calls: dict[str, int],
) -> None:
    """Forward and backward (every output with a gradient, initial state given or zero, the
    recurrent weight DropConnect-dropped or not) against the reference and the Python fused
    path; the products ran on the forced backend."""
    T, B, I, H = shape
    chunk = H if chunk == "H" else chunk
    torch.manual_seed(hash((shape, chunk, master_input)) % 2**31)
    ref, cxx = _pair(I, H, chunk, master_input, dtype, "cxx")
    python = ONLSTM(I, H, chunk, master_input, impl="cpu").to(dtype)
    python.load_state_dict(ref.state_dict())
    x = torch.randn(T, B, I, dtype=dtype)
    state = (torch.randn(B, H, dtype=dtype), torch.randn(B, H, dtype=dtype)) if carried else None
    got = _run(cxx, x, state, dropconnect)
    assert calls == {"forward": 1, "backward": 1}
    _assert_all_close(_run(ref, x, state, dropconnect), got, TOL[dtype])
    _assert_all_close(_run(python, x, state, dropconnect), got, TOL[dtype])
    forced_gemm()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("carried", [False, True])
def test_cxx_no_grad_forward(dtype: torch.dtype, master_input: str, carried: bool,
                             calls: dict[str, int]) -> None:
    """Under ``torch.no_grad`` the default cell (``impl="auto"``) runs the C++ forward without
    saving, and its outputs are the reference's and the Python path's."""
    torch.manual_seed(0)
    ref, cxx = _pair(5, 12, 3, master_input, dtype, "auto")
    python = ONLSTM(5, 12, 3, master_input, impl="cpu").to(dtype)
    python.load_state_dict(ref.state_dict())
    x = torch.randn(6, 4, 5, dtype=dtype)
    state = (torch.randn(4, 12, dtype=dtype), torch.randn(4, 12, dtype=dtype)) if carried else None
    with torch.no_grad():
        a, b, c = ref(x, state), cxx(x, state), python(x, state)
    assert calls == {"forward": 1, "backward": 0}
    for other in (a, c):
        for u, v in [(other[0], b[0]), (other[1][0], b[1][0]), (other[1][1], b[1][1]),
                     (other[2]["df"], b[2]["df"]), (other[2]["di"], b[2]["di"])]:
            torch.testing.assert_close(v, u, atol=TOL[dtype], rtol=TOL[dtype])


def test_batch_one_inference_takes_cxx(calls: dict[str, int]) -> None:
    """Batch-1 evaluation (a word model's test set): the cell's plain forward is one C++ call
    per sequence, equal to the reference."""
    torch.manual_seed(0)
    ref, cell = _pair(8, 20, 5, "paper", torch.float32, "auto")
    x = torch.randn(9, 1, 8)
    with torch.no_grad():
        a, b = ref(x), cell(x)
    assert calls["forward"] == 1
    torch.testing.assert_close(b[0], a[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
def test_cxx_gradcheck(master_input: str, calls: dict[str, int]) -> None:
    torch.manual_seed(0)
    T, B, I, H, L = 3, 2, 3, 4, 2
    G = 4 * H + 2 * L
    kw = {"dtype": torch.float64}
    args = [torch.randn(T, B, I, **kw), torch.randn(B, H, **kw), torch.randn(B, H, **kw),
            torch.randn(G, I, **kw) * 0.5, torch.randn(G, **kw) * 0.5,
            torch.randn(G, H, **kw) * 0.5, torch.randn(G, **kw) * 0.5]
    args = [a.requires_grad_() for a in args]

    def f(x, h0, c0, w_ih, b_ih, w_hh, b_hh):
        out, (h, c), aux = onlstm_cxx_sequence(
            x, (h0, c0), w_ih, b_ih, w_hh, b_hh, L, master_input
        )
        return out, h, c, aux["df"], aux["di"]

    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-7)
    assert calls["backward"] > 0


def test_cxx_function_gradcheck_direct() -> None:
    torch.manual_seed(1)
    T, B, H, L = 4, 2, 6, 3
    G = 4 * H + 2 * L
    kw = {"dtype": torch.float64}
    xp = torch.randn(T, B, G, **kw, requires_grad=True)
    h0 = torch.randn(B, H, **kw, requires_grad=True)
    c0 = torch.randn(B, H, **kw, requires_grad=True)
    w = (torch.randn(G, H, **kw) * 0.4).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, b, c, d: CxxONLSTMFunction.apply(a, b, c, d, L, True), (xp, h0, c0, w))


def test_projected_function_gradcheck_direct() -> None:
    """The float32 training path's Function, projection inside (one δGᵀ for both weight
    gradients), checked in float64 against finite differences: x, W_ih, b, h_0, c_0, U."""
    torch.manual_seed(2)
    T, B, n_in, H, L = 4, 2, 3, 6, 3
    G = 4 * H + 2 * L
    kw = {"dtype": torch.float64, "requires_grad": True}
    x, w_ih = torch.randn(T, B, n_in, **kw), torch.randn(G, n_in, **kw)
    b, h0, c0 = torch.randn(G, **kw), torch.randn(B, H, **kw), torch.randn(B, H, **kw)
    u = (torch.randn(G, H, dtype=torch.float64) * 0.4).requires_grad_()
    for symmetric in (False, True):
        assert torch.autograd.gradcheck(
            lambda *t, s=symmetric: CxxProjectedONLSTMFunction.apply(*t, L, s),
            (x, w_ih, b, h0, c0, u))


def test_float32_training_takes_the_projected_function() -> None:
    """Float32 with a gradient: the projection inside the Function; under bfloat16 autocast and
    without a gradient, the projection outside as before."""
    torch.manual_seed(0)
    m = ONLSTM(3, 8, 2)
    x = torch.randn(4, 2, 3)
    out, _, _ = m(x)
    assert type(out.grad_fn).__name__ == "CxxProjectedONLSTMFunctionBackward"
    with torch.autocast("cpu", torch.bfloat16):
        out, _, _ = m(x)
    assert type(out.grad_fn).__name__ != "CxxProjectedONLSTMFunctionBackward"
    with torch.no_grad():
        assert m(x)[0].grad_fn is None


def test_cxx_partial_grads_retain_graph_and_inplace_check(calls: dict[str, int]) -> None:
    """Frozen weights (no weight gradient asked), a broadcast output gradient (a sum's), a
    second backward through the retained graph, and autograd noticing a modified output."""
    torch.manual_seed(0)
    ref, cxx = _pair(4, 6, 2, "symmetric", torch.float64, "cxx")
    for m in (ref, cxx):
        m.weight_ih.requires_grad_(False)
        m.weight_hh.requires_grad_(False)
    x = torch.randn(4, 3, 4, dtype=torch.float64, requires_grad=True)
    grads = []
    for m in (ref, cxx):
        x.grad = None
        out, (h, c), aux = m(x)
        loss = out.sum() + c.square().sum() + aux["df"].sum()
        loss.backward(retain_graph=True)
        g = (x.grad.clone(), m.bias_hh.grad.clone())
        loss.backward()
        torch.testing.assert_close(x.grad, 2 * g[0])
        grads.append(g)
        assert m.weight_hh.grad is None
    for u, v in zip(*grads):
        torch.testing.assert_close(v, u, atol=1e-10, rtol=1e-10)
    assert calls["backward"] == 2
    out, _, _ = cxx(x)
    out.add_(1.0)
    with pytest.raises(RuntimeError):
        out.sum().backward()


def test_dispatch_to_cxx_and_elsewhere(calls: dict[str, int]) -> None:
    """``auto``/``fused``/``cxx`` take the C++ loop for CPU float32/float64; ``cpu`` the Python
    path; a dtype the loop does not take (bfloat16 weights) goes to the Python path too."""
    torch.manual_seed(0)
    m = ONLSTM(3, 4, 2)
    x = torch.randn(2, 1, 3)
    args = (x, (x.new_zeros(1, 4), x.new_zeros(1, 4)), m.weight_ih, m.bias_ih, m.weight_hh,
            m.bias_hh, 2, "paper")
    for impl, n in (("auto", 1), ("fused", 2), ("cxx", 3), ("cpu", 3)):
        onlstm_sequence(*args, impl=impl)
        assert calls["forward"] == n, impl
    low = [a.to(torch.bfloat16) if isinstance(a, Tensor) else a for a in args[2:]]
    state = tuple(s.to(torch.bfloat16) for s in args[1])
    out, _, _ = onlstm_sequence(x.to(torch.bfloat16), state, *low, impl="auto")
    assert calls["forward"] == 3 and out.dtype == torch.bfloat16
    with pytest.raises(ValueError):
        onlstm_sequence(*args[:-1], "other", impl="cxx")


def _bf16_backends() -> list[str]:
    """``mm``, and treelm's bfloat16 panels where this build and CPU run them."""
    ext = build.load() if build.enabled() else None
    return ["mm"] + (["panel"] if ext is not None and ext.panel_bf16() else [])


@pytest.mark.parametrize("backend", _bf16_backends())
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
def test_cxx_bf16_autocast(master_input: str, backend: str, calls: dict[str, int]) -> None:
    """Under ``torch.autocast(bfloat16)`` the C++ loop runs its products in bfloat16 (every
    matrix product seen has bfloat16 operands; the panels' run inside the extension, unseen),
    state and outputs in float32; loss within 2e-2 of float32's, gradients'
    cosine > 0.99; and close to the Python path under autocast."""
    T, B, I, H, chunk = 8, 4, 16, 32, 4
    torch.manual_seed(0)
    m = ONLSTM(I, H, chunk, master_input, impl="cxx")
    python = ONLSTM(I, H, chunk, master_input, impl="cpu")
    python.load_state_dict(m.state_dict())
    x = torch.randn(T, B, I)
    w_out, w_c = torch.randn(T, B, H), torch.randn(B, H)

    def loss_and_grads(cell: ONLSTM, low: bool) -> tuple[Tensor, list[Tensor], _OpLog]:
        cell.zero_grad()
        log = _OpLog()
        with log:
            with torch.autocast("cpu", torch.bfloat16, enabled=low):
                out, (h, c), aux = cell(x)
                assert out.dtype == c.dtype == aux["df"].dtype == torch.float32
                loss = (out * w_out).sum() + (c * w_c).sum() + aux["df"].sum() - aux["di"].sum()
            loss.backward()
        return loss.detach(), [p.grad.clone() for p in cell.parameters()], log

    with gemm.use_backend(backend):
        ref_loss, ref_grads, _ = loss_and_grads(m, False)
        low_loss, low_grads, log = loss_and_grads(m, True)
        py_loss, py_grads, _ = loss_and_grads(python, True)
    assert calls == {"forward": 2, "backward": 2}
    products = {k for k in log.calls if k.split(".")[1] in ("mm", "addmm", "linear")}
    assert all(log.dtypes[k] == {torch.bfloat16} for k in products), {
        k: log.dtypes[k] for k in products}
    assert products or backend != "mm"
    assert abs(low_loss - ref_loss) <= 2e-2 * abs(ref_loss)
    assert abs(low_loss - py_loss) <= 1e-3 * abs(py_loss)
    for a, b, c in zip(low_grads, ref_grads, py_grads):
        assert F.cosine_similarity(a.flatten(), b.flatten(), 0) > 0.99
        assert F.cosine_similarity(a.flatten(), c.flatten(), 0) > 0.999


def test_loops_round_to_bfloat16_as_torch_does(ext) -> None:
    """The loops write their next bfloat16 product's operands (h_t, δz_t) themselves: rounded to
    nearest, ties to even, as ``Tensor.to(torch.bfloat16)`` rounds, bit for bit (ties both ways,
    NaN, infinities, subnormals, the largest floats)."""
    torch.manual_seed(0)
    ties = torch.tensor([0x3F808000, 0x3F818000, 0xBF808000, 0x3F80FFFF, 0x7F7FFFFF, 0x00000001,
                         0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00001, 0x00000000, 0x80000000],
                        dtype=torch.int64).to(torch.int32).view(torch.float32)
    x = torch.cat([torch.randn(10_000) * 10.0 ** torch.randint(-30, 30, (10_000,)), ties])
    got, want = ext.round_bf16(x).view(torch.int16), x.to(torch.bfloat16).view(torch.int16)
    nan = x.isnan()
    assert torch.equal(got[~nan], want[~nan])
    assert ext.round_bf16(x)[nan].isnan().all()


@pytest.mark.parametrize("save", [False, True])
@pytest.mark.parametrize("backend", ["onednn", *_bf16_backends()])
def test_cxx_reads_bfloat16_projection_as_widened(ext, save: bool, backend: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Under bfloat16 autocast the loop takes xp as autocast's projection left it (bfloat16) and
    reads it widened: every output is the float32 copy's to the last bit, and the model's
    path hands it the bfloat16 tensor (no float32 copy of all steps' projections)."""
    T, B, I, H, L = 7, 5, 12, 24, 6
    torch.manual_seed(1)
    xp = torch.randn(T, B, 4 * H + 2 * L).to(torch.bfloat16)
    h0, c0, u = torch.randn(B, H), torch.randn(B, H), torch.randn(4 * H + 2 * L, H) * 0.2
    with gemm.use_backend(backend), torch.autocast("cpu", torch.bfloat16):
        kind, w, packed = cxx_operands(step_matmul(u, B, T, False, torch.bfloat16))
        low = ext.forward(xp, h0, c0, kind, w, packed, L, True, save)
        wide = ext.forward(xp.float(), h0, c0, kind, w, packed, L, True, save)
    assert len(low) == len(wide) and all(torch.equal(a, b) for a, b in zip(low, wide))
    seen: list[torch.dtype] = []
    real = ext.forward
    monkeypatch.setattr(ext, "forward", lambda xp, *a: seen.append(xp.dtype) or real(xp, *a))
    cell = ONLSTM(I, H, H // L, "symmetric", impl="cxx")
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        cell(torch.randn(T, B, I))
    assert seen == [torch.bfloat16]


@pytest.mark.parametrize("backend", ["onednn", *_bf16_backends()])
def test_cxx_keeps_bfloat16_states_for_the_weight_gradient(ext, backend: str) -> None:
    """With ``save`` under bfloat16 products the loop keeps h_0 … h_T as it rounded them for its
    products: bit for bit ``cat(h0, out).to(bfloat16)``, so δU from them equals δU from the
    concatenation and cast it replaces; float32 products keep none."""
    T, B, H, L = 6, 4, 16, 4
    torch.manual_seed(2)
    xp = torch.randn(T, B, 4 * H + 2 * L)
    h0, c0, u = torch.randn(B, H), torch.randn(B, H), torch.randn(4 * H + 2 * L, H) * 0.2
    with gemm.use_backend(backend), torch.autocast("cpu", torch.bfloat16):
        kind, w, packed = cxx_operands(step_matmul(u, B, T, False, torch.bfloat16))
        out, *_, states = ext.forward(xp, h0, c0, kind, w, packed, L, True, True)
    assert states.shape == (T + 1, B, H) and states.dtype == torch.bfloat16
    want = torch.cat((h0.unsqueeze(0), out)).to(torch.bfloat16)
    assert torch.equal(states.view(torch.int16), want.view(torch.int16))
    dG = torch.randn(T, B, 4 * H + 2 * L).to(torch.bfloat16)
    kept = weight_grad(dG, h0, out, torch.bfloat16, torch.float32, states)
    assert torch.equal(kept, weight_grad(dG, h0, out, torch.bfloat16, torch.float32))
    kind, w, packed = cxx_operands(step_matmul(u, B, T, False, None))
    assert ext.forward(xp, h0, c0, kind, w, packed, L, True, True)[-1] is None


def _panel_dtypes() -> list[torch.dtype | None]:
    """float32 panels, and bfloat16 panels where this build and CPU run them."""
    ext = build.load() if build.enabled() else None
    return [None] + ([torch.bfloat16] if ext is not None and ext.panel_bf16() else [])


@pytest.mark.parametrize("low", _panel_dtypes(), ids=lambda d: "bf16" if d else "f32")
@pytest.mark.parametrize("batch", [1, 7, 20, 23, 64])
def test_threads_owning_rows_give_the_per_step_schedules_bits(ext, low: torch.dtype | None,
                                                              batch: int) -> None:
    """With panel products each thread owns a run of rows for the whole sequence (one parallel
    region, no join per step, tiles of even sizes); the per-step schedule (a region per product,
    one per gate pass) is kept for the library products. Same sums in the same order: every
    output of both loops, saved buffers and gradients included, equal to the bit, on 2 threads,
    at batches that split unevenly between threads and into tiles. (rows=2 takes the row
    schedule whatever the panels' size; the default, 1, only up to a few MB.)"""
    T, H, L = 5, 96, 8
    G = 4 * H + 2 * L
    torch.manual_seed(3)
    xp = torch.randn(T, batch, G)
    h0, c0, u = torch.randn(batch, H), torch.randn(batch, H), torch.randn(G, H) * 0.2
    grads = (torch.randn(T, batch, H), torch.randn(batch, H), torch.randn(batch, H),
             torch.randn(T, batch), torch.randn(T, batch))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with gemm.use_backend("panel"):
            fwd = cxx_operands(step_matmul(u, batch, T, False, low))
            bwd = cxx_operands(step_matmul(u, batch, T, True, low))
            assert fwd[0] == bwd[0] == 3                  # the panels
            runs = []
            for rows in (2, 0):                           # own rows; the per-step schedule
                out, c, df, di, M, *saved = ext.forward(xp, h0, c0, *fwd, L, True, True, rows)
                gates, P, cs, tanh_c, states = saved
                back = ext.backward(*grads, gates, P, M, cs, tanh_c, *bwd, True, rows)
                no_grad = ext.forward(xp, h0, c0, *fwd, L, True, False, rows)
                runs.append([out, c, df, di, M, gates, P, cs, tanh_c, *back, *no_grad]
                            + ([states] if low else []))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*runs):
        assert a.dtype == b.dtype and torch.equal(a, b)


# --------------------------------------------------------------------------------- fallback

FALLBACK_SCRIPT = """
import sys, torch
from treelm.cells.onlstm import ONLSTM
from treelm.kernels import build
torch.manual_seed(0)
ref = ONLSTM(3, 6, 2, impl="reference").double()
cell = ONLSTM(3, 6, 2).double()
cell.load_state_dict(ref.state_dict())
x = torch.randn(4, 2, 3, dtype=torch.float64)
results = []
for m in (ref, cell):
    out, (h, c), aux = m(x)
    (out.sum() + c.sum() + aux["di"].sum()).backward()
    results.append([out, c, m.weight_hh.grad])
for u, v in zip(*results):
    torch.testing.assert_close(v, u, atol=1e-10, rtol=1e-10)
print("cxx" if build.load() is not None else "python")
"""


def test_fallback_when_switched_off() -> None:
    """``TREELM_CXX=0``: the default cell runs the Python fused path, silently, with the same
    numbers."""
    env = {**os.environ, "PYTHONPATH": os.getcwd(), build.ENV_VAR: "0"}
    r = subprocess.run([sys.executable, "-c", FALLBACK_SCRIPT], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "python"
    assert r.stderr == ""


@pytest.mark.parametrize("failure", ["no compiler", "build error"])
def test_fallback_when_it_cannot_be_built(failure: str, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing built and no compiler (or a build that fails): one line on stderr, once, with
    the reason; the cell still runs (the Python path) and matches the reference."""
    def broken(verbose: bool = False):  # noqa: ANN202
        raise RuntimeError("Error building extension 'x'\nmore compiler output")

    monkeypatch.setattr(build, "compile_extension", broken)
    monkeypatch.setattr(build, "_tried", False)
    monkeypatch.setattr(build, "_module", None)
    monkeypatch.setattr(build, "name", lambda: "treelm_onlstm_missing")   # nothing built there
    if failure == "no compiler":
        monkeypatch.setattr(build, "compiler", lambda: None)
    capsys.readouterr()
    torch.manual_seed(0)
    ref, cell = _pair(3, 6, 2, "paper", torch.float64, "auto")
    x = torch.randn(4, 2, 3, dtype=torch.float64)
    for _ in range(2):
        _assert_all_close(_run(ref, x, None, False), _run(cell, x, None, False), 1e-10)
    lines = capsys.readouterr().err.splitlines()
    assert build.load() is None
    if failure == "no compiler":
        assert len(lines) == 1, lines
    else:                           # the "compiling once" notice, then why it failed
        assert len(lines) == 2 and "compiling the C++ time loops once" in lines[0], lines
    reason = "no C++ compiler" if failure == "no compiler" else "Error building extension"
    assert "C++ time loops unavailable" in lines[-1] and reason in lines[-1], lines


def test_build_command_reports() -> None:
    """``python -m treelm.kernels.build`` (what ``make setup`` runs) says what it did."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    r = subprocess.run([sys.executable, "-m", "treelm.kernels.build"], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "C++ time loops already built in" in r.stdout
    assert r.stderr == ""


class _Casts(TorchDispatchMode):
    """The shapes of the float32 tensors cast to bfloat16 below autograd."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if (func.overloadpacket in (torch.ops.aten._to_copy, torch.ops.aten.copy_)
                and isinstance(out, Tensor) and out.dtype == torch.bfloat16
                and args[-1 if func.overloadpacket is torch.ops.aten.copy_ else 0].dtype
                == torch.float32):
            self.shapes.append(tuple(out.shape))
        return out


@pytest.mark.parametrize("cell", ["onlstm", "lstm"])
def test_bf16_training_casts_the_recurrent_weight_once(cell: str) -> None:
    """Under bfloat16 autocast a training step's forward and backward loops share one
    bfloat16 copy of U (the backward's products read the forward's), so U is cast once."""
    from treelm.cells.lstm import LSTM

    I, H = 16, 32
    torch.manual_seed(0)
    m = ONLSTM(I, H, 4, "paper", impl="cxx") if cell == "onlstm" else LSTM(I, H, impl="auto")
    u_shape = tuple(m.weight_hh.shape)
    casts = _Casts()
    with casts:
        with torch.autocast("cpu", torch.bfloat16):
            out = m(torch.randn(8, 4, I))[0]
        out.square().sum().backward()
    assert casts.shapes.count(u_shape) == 1, casts.shapes
    assert m.weight_hh.grad is not None and m.weight_hh.grad.dtype == torch.float32
