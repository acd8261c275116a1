"""The fused ON-LSTM kernels (``treelm.kernels``) against the readable reference cell.

The CPU path's recurrent products run on a GEMM backend chosen by measurement
(:mod:`treelm.kernels.gemm`); the equivalence tests force each backend this machine can run for
the dtype, so every one of them is checked against the reference, whichever would win here.

Every test that can run on CUDA is parametrised over the device: ``cuda`` runs where
``torch.cuda.is_available()`` and is skipped otherwise. Each test makes all its tensors on its
device (the loss weights too), so that the same file is green on a CPU and on a GPU machine."""

from __future__ import annotations

import collections
import itertools
import os

import pytest
import torch

if not torch.cuda.is_available():
    # The Triton tests run the kernel in Triton's interpreter on CPU tensors. The variable must be
    # set before ``triton`` is first imported (its own @jit helpers are built at import time).
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch.nn.functional as F  # noqa: E402
from torch import Tensor  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402
from torch.utils._python_dispatch import (  # noqa: E402
    TorchDispatchMode,
    _disable_current_modes,
)

from treelm.cells.onlstm import ONLSTM  # noqa: E402
from treelm.kernels import gemm, onlstm_sequence, triton_available  # noqa: E402
from treelm.kernels.onlstm_torch import (  # noqa: E402
    ONLSTMFunction,
    TorchBackCell,
    onlstm_backward_loop,
    onlstm_forward_loop,
    onlstm_torch_sequence,
)
from treelm.kernels.onlstm_triton import (  # noqa: E402
    TritonBackCell,
    TritonCell,
    onlstm_triton_sequence,
)

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}
# On CUDA, float32: cuBLAS sums in another order than the CPU GEMMs, and the Triton kernel's
# transcendental functions round differently; the fused paths were measured within 2.3e-5 of the
# reference there (issue 15).
CUDA_F32_TOL = 3e-5

HAS_CUDA = torch.cuda.is_available()
NEEDS_CUDA = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)]


def _tol(dtype: torch.dtype, device: str) -> float:
    return CUDA_F32_TOL if device == "cuda" and dtype == torch.float32 else TOL[dtype]

# (T, B, I, H): H = 10 and 20 admit the chunk sizes 1, 2, 5 and H
SHAPES = [(1, 1, 3, 10), (5, 3, 4, 10), (7, 2, 6, 20)]
CHUNKS = [1, 2, 5, "H"]


def _pair(
    input_size: int, hidden: int, chunk: int, master_input: str, dtype: torch.dtype, impl: str,
    device: str = "cpu",
) -> tuple[ONLSTM, ONLSTM]:
    ref = ONLSTM(input_size, hidden, chunk, master_input, impl="reference").to(device, dtype)
    fused = ONLSTM(input_size, hidden, chunk, master_input, impl=impl).to(device, dtype)
    fused.load_state_dict(ref.state_dict())
    return ref, fused


def _run(
    m: ONLSTM,
    x: Tensor,
    state: tuple[Tensor, Tensor] | None,
    dropconnect: bool,
    loss_seed: int = 2,
) -> list[Tensor]:
    """Forward + backward of a loss touching every output; the values and all gradients."""
    m.zero_grad()
    x = x.clone().requires_grad_()
    if state is not None:
        state = tuple(s.clone().requires_grad_() for s in state)
    weights = None
    if dropconnect:
        torch.manual_seed(1)
        weights = {"weight_hh": F.dropout(m.weight_hh, 0.5, True)}
    out, (h, c), aux = m(x, state, weights)
    results = [out, h, c, aux["df"], aux["di"]]
    gen = torch.Generator(x.device).manual_seed(loss_seed)
    loss = sum((r * torch.randn(r.shape, generator=gen, dtype=r.dtype, device=r.device)).sum()
               for r in results)
    loss.backward()
    grads = [x.grad] + [p.grad for p in m.parameters()]
    if state is not None:
        grads += [s.grad for s in state]
    return [r.detach() for r in results] + grads


def _assert_all_close(a: list[Tensor], b: list[Tensor], tol: float) -> None:
    names = ["out", "h", "c", "df", "di", "x.grad", "weight_ih.grad", "weight_hh.grad",
             "bias_ih.grad", "bias_hh.grad", "h0.grad", "c0.grad"]
    assert len(a) == len(b)
    for name, u, v in zip(names, a, b):
        assert u is not None and v is not None, name
        torch.testing.assert_close(u, v, atol=tol, rtol=tol, msg=lambda s, n=name: f"{n}: {s}")


CASES = list(itertools.product(
    SHAPES, CHUNKS, ("paper", "symmetric"), (False, True), (False, True)
))


def _backend_params(dtypes: tuple[torch.dtype, ...]) -> list:
    """``(device, dtype, GEMM backend)``: every backend that can run the dtype on the device (CUDA
    and float64: only ``"mm"``), the CUDA ones skipped without a GPU."""
    params = []
    for device in ("cpu", "cuda"):
        for dt in dtypes:
            for b in gemm.usable_backends(dt, device):
                name = f"{device}-{'f32' if dt == torch.float32 else 'f64'}-{b}"
                marks = NEEDS_CUDA if device == "cuda" else ()
                params.append(pytest.param(device, dt, b, marks=marks, id=name))
    return params


DEVICE_DTYPE_BACKENDS = _backend_params((torch.float32, torch.float64))
DEVICE_F32_BACKENDS = _backend_params((torch.float32,))


@pytest.fixture
def forced_gemm(request: pytest.FixtureRequest):
    """Runs the test with ``request.param`` forced as the GEMM backend; yields a check that the
    fused path's products (forward and backward) did run on it."""
    backend = request.param

    def used_only_it() -> None:
        used = {d["backend"] for d in gemm.decisions()}
        assert used == {backend}, f"asked for {backend}, the products ran on {used}"

    gemm.clear_decisions()
    with gemm.use_backend(backend):
        yield used_only_it


@pytest.mark.parametrize("device,dtype,forced_gemm", DEVICE_DTYPE_BACKENDS,
                         indirect=["forced_gemm"])
@pytest.mark.parametrize(
    "shape,chunk,master_input,dropconnect,carried", CASES,
    ids=[f"{s}-c{c}-{m}-dc{int(d)}-st{int(st)}" for s, c, m, d, st in CASES],
)
def test_cpu_matches_reference(
    shape: tuple[int, int, int, int], chunk: int | str, master_input: str, dropconnect: bool,
    carried: bool, device: str, dtype: torch.dtype, forced_gemm,
) -> None:
    T, B, I, H = shape
    chunk = H if chunk == "H" else chunk
    torch.manual_seed(hash((shape, chunk, master_input)) % 2**31)
    ref, fused = _pair(I, H, chunk, master_input, dtype, "cpu", device)
    x = torch.randn(T, B, I, dtype=dtype, device=device)
    state = None
    if carried:
        state = (torch.randn(B, H, dtype=dtype, device=device),
                 torch.randn(B, H, dtype=dtype, device=device))
    _assert_all_close(
        _run(ref, x, state, dropconnect), _run(fused, x, state, dropconnect), _tol(dtype, device)
    )
    forced_gemm()


@pytest.mark.parametrize("device,dtype,forced_gemm", DEVICE_F32_BACKENDS,
                         indirect=["forced_gemm"])
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
def test_paper_size_slice_matches_reference(
    master_input: str, device: str, dtype: torch.dtype, forced_gemm
) -> None:
    """Chunk 10 as in the paper, with a batch and width large enough for the packed GEMMs (on
    CUDA ``impl="auto"`` is the Triton path)."""
    torch.manual_seed(0)
    ref, fused = _pair(16, 60, 10, master_input, dtype, "auto", device)
    x = torch.randn(12, 8, 16, device=device)
    _assert_all_close(_run(ref, x, None, True), _run(fused, x, None, True), _tol(dtype, device))
    forced_gemm()


@pytest.mark.parametrize("device", DEVICES)
def test_auto_gemm_matches_reference(device: str) -> None:
    """Whatever the measurement picks (unforced), the numbers are the reference's."""
    torch.manual_seed(0)
    ref, fused = _pair(16, 60, 10, "paper", torch.float32, "auto", device)
    x = torch.randn(12, 8, 16, device=device)
    with gemm.use_backend("auto"):
        _assert_all_close(_run(ref, x, None, True), _run(fused, x, None, True),
                          _tol(torch.float32, device))


@pytest.mark.parametrize("device,dtype,forced_gemm", DEVICE_DTYPE_BACKENDS,
                         indirect=["forced_gemm"])
def test_no_grad_forward_matches_reference(device: str, dtype: torch.dtype, forced_gemm) -> None:
    torch.manual_seed(0)
    ref, fused = _pair(5, 12, 3, "paper", dtype, "cpu", device)
    x = torch.randn(6, 4, 5, dtype=dtype, device=device)
    state = (torch.randn(4, 12, dtype=dtype, device=device),
             torch.randn(4, 12, dtype=dtype, device=device))
    with torch.no_grad():
        a = ref(x, state)
        b = fused(x, state)
    tol = _tol(dtype, device)
    for u, v in [(a[0], b[0]), (a[1][0], b[1][0]), (a[1][1], b[1][1]),
                 (a[2]["df"], b[2]["df"]), (a[2]["di"], b[2]["di"])]:
        torch.testing.assert_close(u, v, atol=tol, rtol=tol)
    forced_gemm()


@pytest.mark.parametrize("device", DEVICES)
def test_partial_requires_grad(device: str) -> None:
    """Only some inputs need gradients (e.g. frozen weights, a state without grad)."""
    torch.manual_seed(0)
    ref, fused = _pair(4, 6, 2, "symmetric", torch.float64, "cpu", device)
    for m in (ref, fused):
        m.weight_ih.requires_grad_(False)
        m.weight_hh.requires_grad_(False)
    x = torch.randn(4, 3, 4, dtype=torch.float64, device=device, requires_grad=True)
    grads = []
    for m in (ref, fused):
        x.grad = None
        out, (h, c), aux = m(x)
        (out.sum() + c.square().sum() + aux["df"].sum()).backward()
        grads.append((x.grad.clone(), m.bias_hh.grad.clone()))
        assert m.weight_hh.grad is None
    for u, v in zip(*grads):
        torch.testing.assert_close(u, v, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_retain_graph_and_inplace_check(device: str) -> None:
    torch.manual_seed(0)
    m = ONLSTM(3, 4, 2, impl="cpu").to(device, torch.float64)
    x = torch.randn(3, 2, 3, dtype=torch.float64, device=device)
    out, _, aux = m(x)
    loss = out.sum() + aux["di"].sum()
    loss.backward(retain_graph=True)
    g = m.weight_hh.grad.clone()
    loss.backward()
    torch.testing.assert_close(m.weight_hh.grad, 2 * g)
    out, _, _ = m(x)
    out.add_(1.0)                       # the saved output was modified: autograd must notice
    with pytest.raises(RuntimeError):
        out.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
def test_gradcheck(master_input: str, device: str) -> None:
    torch.manual_seed(0)
    T, B, I, H, L = 3, 2, 3, 4, 2
    G = 4 * H + 2 * L
    kw = {"dtype": torch.float64, "device": device}
    args = [torch.randn(T, B, I, **kw), torch.randn(B, H, **kw), torch.randn(B, H, **kw),
            torch.randn(G, I, **kw) * 0.5, torch.randn(G, **kw) * 0.5,
            torch.randn(G, H, **kw) * 0.5, torch.randn(G, **kw) * 0.5]
    args = [a.requires_grad_() for a in args]

    def f(x, h0, c0, w_ih, b_ih, w_hh, b_hh):
        out, (h, c), aux = onlstm_torch_sequence(
            x, (h0, c0), w_ih, b_ih, w_hh, b_hh, L, master_input
        )
        return out, h, c, aux["df"], aux["di"]

    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_function_gradcheck_direct(device: str) -> None:
    """The autograd Function itself, on pre-projected inputs."""
    torch.manual_seed(1)
    T, B, H, L = 4, 2, 6, 3
    G = 4 * H + 2 * L
    kw = {"dtype": torch.float64, "device": device}
    xp = torch.randn(T, B, G, **kw, requires_grad=True)
    h0 = torch.randn(B, H, **kw, requires_grad=True)
    c0 = torch.randn(B, H, **kw, requires_grad=True)
    w = (torch.randn(G, H, **kw) * 0.4).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, b, c, d: ONLSTMFunction.apply(a, b, c, d, L, False), (xp, h0, c0, w)
    )


@pytest.mark.parametrize("device", DEVICES)
def test_dispatch(device: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 1, 3, device=device)
    m = ONLSTM(3, 4, 2).to(device)
    args = (x, (x.new_zeros(1, 4), x.new_zeros(1, 4)), m.weight_ih, m.bias_ih, m.weight_hh,
            m.bias_hh, 2, "paper")
    a = onlstm_sequence(*args, impl="auto")
    b = onlstm_sequence(*args, impl="cpu")
    tol = _tol(torch.float32, device)
    torch.testing.assert_close(a[0], b[0], atol=tol, rtol=tol)
    with pytest.raises(ValueError):
        onlstm_sequence(*args, impl="nope")
    with pytest.raises(ValueError):
        onlstm_sequence(*args[:-1], "other", impl="cpu")


# ---------------------------------------------------------------------------------- Triton

def _triton_device() -> str:
    """CUDA when present, else the Triton interpreter on CPU tensors (see the top of the file)."""
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("no CUDA and TRITON_INTERPRET is not 1")
    return "cpu"


@pytest.mark.skipif(not triton_available(), reason="triton is not installed")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(
    "shape,chunk,master_input,dropconnect,carried",
    [((4, 3, 4, 10), 2, "paper", True, True), ((3, 2, 3, 10), 5, "symmetric", False, True),
     ((5, 2, 3, 6), 1, "symmetric", True, False), ((2, 3, 2, 6), 6, "paper", False, False)],
)
def test_triton_matches_reference(
    shape: tuple[int, int, int, int], chunk: int,
    master_input: str, dropconnect: bool, carried: bool, dtype: torch.dtype,
) -> None:
    device = _triton_device()
    T, B, I, H = shape
    torch.manual_seed(3)
    ref, fused = _pair(I, H, chunk, master_input, dtype, "triton", device)
    x = torch.randn(T, B, I, dtype=dtype, device=device)
    state = None
    if carried:
        state = (torch.randn(B, H, dtype=dtype, device=device),
                 torch.randn(B, H, dtype=dtype, device=device))
    a = _run(ref, x, state, dropconnect)
    b = _run(fused, x, state, dropconnect)
    _assert_all_close(a, b, _tol(dtype, device))


@pytest.mark.skipif(not triton_available(), reason="triton is not installed")
def test_triton_no_grad() -> None:
    device = _triton_device()
    torch.manual_seed(4)
    ref, fused = _pair(3, 8, 2, "paper", torch.float32, "triton", device)
    x = torch.randn(3, 2, 3, device=device)
    with torch.no_grad():
        a, b = ref(x), fused(x)
    tol = _tol(torch.float32, device)
    torch.testing.assert_close(a[0], b[0], atol=tol, rtol=tol)
    torch.testing.assert_close(a[2]["di"], b[2]["di"], atol=tol, rtol=tol)


BACK_GRADS = {  # which gradients reach the outputs: (dout, h_T and c_T, the levels)
    "all": (True, True, True),
    "outputs": (True, False, False),       # first step: δh_T = dout only
    "state": (False, True, False),         # no output gradient at all
    "levels": (False, False, True),        # first step: δh_T = 0, compiled without either
    "broadcast": ("expanded", False, True),  # dout as a sum's stride-0 gradient
}


@pytest.mark.skipif(not triton_available(), reason="triton is not installed")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("grads", list(BACK_GRADS))
def test_triton_backward_step_matches_torch(grads: str, master_input: str,
                                            dtype: torch.dtype) -> None:
    """The Triton backward step kernel against the PyTorch one, through the same BPTT driver on
    the same saved forward: every gradient (δxp, δh_0, δc_0, δU) within 1e-5 (float32)."""
    device = _triton_device()
    T, B, H, L = 3, 2, 8, 4                     # chunk 2
    G = 4 * H + 2 * L
    gen = torch.Generator().manual_seed(5)

    def rand(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=gen, dtype=dtype).to(device)

    xp, h0, c0, w = rand(T, B, G), rand(B, H), rand(B, H), rand(G, H) * 0.5
    symmetric = master_input == "symmetric"
    with_out, with_state, with_levels = BACK_GRADS[grads]
    dout = None
    if with_out == "expanded":
        dout = rand(1, 1, H).expand(T, B, H)
    elif with_out:
        dout = rand(T, B, H)
    dh_last, dc_last = (rand(B, H), rand(B, H)) if with_state else (None, None)
    ddf, ddi = (rand(T, B), rand(T, B)) if with_levels else (None, None)
    with gemm.use_backend("mm"):
        *_, buf = onlstm_forward_loop(xp, h0, c0, w, L, symmetric, True)
        torch_grads, triton_grads = (
            onlstm_backward_loop(dout, dh_last, dc_last, ddf, ddi, h0, w, buf, symmetric, True,
                                 back)
            for back in (TorchBackCell, TritonBackCell))
    for name, a, b in zip(("dxp", "dh0", "dc0", "dU"), torch_grads, triton_grads):
        torch.testing.assert_close(b, a, atol=TOL[dtype], rtol=TOL[dtype],
                                   msg=lambda m, n=name: f"{n}: {m}")


def test_triton_is_optional() -> None:
    """Importing the package and the Triton module never imports triton itself."""
    import subprocess
    import sys

    code = ("import sys, treelm.kernels, treelm.kernels.onlstm_triton; "
            "print('triton' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.getcwd()}, check=True)
    assert r.stdout.strip() == "False"


# ------------------------------------------------------------------------------ no host work

class _OpLog(TorchDispatchMode):
    """Every op that runs below autograd: per op, how many calls returned fresh memory (an
    allocation: a returned tensor that aliases no argument); the calls that read a value back to
    the host (``_local_scalar_dense``: ``.item()``, ``bool(t)``, ``float(t)``) or made a tensor
    from Python data (``lift_fresh``: ``torch.tensor``, ``new_tensor``); and the devices of all
    tensor arguments; how many times each op ran (``calls``) and its arguments' dtypes."""

    HOST_READ = "aten._local_scalar_dense.default"
    HOST_DATA = ("aten.lift_fresh.default", "aten.lift_fresh_copy.default")

    def __init__(self) -> None:
        super().__init__()
        self.allocations: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self.dtypes: collections.defaultdict[str, set[torch.dtype]] = collections.defaultdict(set)
        self.host: list[str] = []
        self.devices: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        name = str(func)
        self.calls[name] += 1
        if name == self.HOST_READ or name in self.HOST_DATA:
            self.host.append(name)
        if any(r.alias_info is None and str(r.type).startswith("Tensor")
               for r in func._schema.returns):
            self.allocations[name] += 1
        tensors = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, Tensor)]
        self.devices |= {a.device.type for a in tensors}
        self.dtypes[name] |= {a.dtype for a in tensors}
        return func(*args, **kwargs)


def _log_forward_backward(T: int, master_input: str, device: str,
                          dtype: torch.dtype = torch.float32, sequence=onlstm_torch_sequence,
                          ) -> _OpLog:
    """One fused forward and backward (every output with a gradient, every input needing one)
    under :class:`_OpLog`; the inputs and the incoming gradients are made before it starts."""
    B, I, H, L = 2, 3, 8, 4
    G = 4 * H + 2 * L
    gen = torch.Generator().manual_seed(T)

    def rand(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=gen, dtype=dtype).to(device).requires_grad_()

    x, h0, c0 = rand(T, B, I), rand(B, H), rand(B, H)
    params = [rand(G, I), rand(G), rand(G, H), rand(G)]
    outs_shapes = [(T, B, H), (B, H), (B, H), (T, B), (T, B)]
    grads = [torch.randn(*s, generator=gen, dtype=dtype).to(device) for s in outs_shapes]
    log = _OpLog()
    with log:
        out, (h, c), aux = sequence(x, (h0, c0), params[0], params[1], params[2], params[3], L,
                                    master_input)
        torch.autograd.backward([out, h, c, aux["df"], aux["di"]], grads)
    return log


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
def test_no_host_work_and_allocations_per_sequence(master_input: str, device: str) -> None:
    """What a CUDA graph needs of the fused forward and backward: no value read back to the
    host, no tensor made from Python data, every allocation once per sequence (the same ops
    allocate the same number of times for 3 steps as for 7). On ``meta`` a host tensor mixed
    into the computation would show as a CPU argument, as it fails on CUDA. The GEMMs run on
    ``"mm"``, the only backend on CUDA (a packed CPU product returns a fresh result per call)."""
    with gemm.use_backend("mm"):
        short = _log_forward_backward(3, master_input, device)
        long = _log_forward_backward(7, master_input, device)
    assert short.allocations == long.allocations, {
        k: (short.allocations[k], n) for k, n in long.allocations.items()
        if short.allocations[k] != n}
    for log in (short, long):
        assert log.host == [] and log.devices == {device}


@pytest.mark.skipif(not triton_available(), reason="triton is not installed")
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
def test_triton_path_runs_two_kernels_and_two_gemms_per_step(
    master_input: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Triton path's forward and backward: per step one GEMM and one Triton kernel each way,
    and nothing else; no host work; allocations once per sequence. The kernels' launches are
    counted and run outside the op log (the interpreter's own tensor work on CPU is not the
    path's)."""
    device = _triton_device()
    launches: collections.Counter[str] = collections.Counter()
    for cls in (TritonCell, TritonBackCell):
        def launch(self, *args, run=cls.__call__, name=cls.__name__) -> None:  # noqa: ANN001
            launches[name] += 1
            with _disable_current_modes():
                run(self, *args)

        monkeypatch.setattr(cls, "__call__", launch)
    with gemm.use_backend("mm"):
        short = _log_forward_backward(3, master_input, device, sequence=onlstm_triton_sequence)
        assert launches == {"TritonCell": 3, "TritonBackCell": 3}
        long = _log_forward_backward(7, master_input, device, sequence=onlstm_triton_sequence)
    assert launches == {"TritonCell": 10, "TritonBackCell": 10}
    per_step = {k: n - short.calls[k] for k, n in long.calls.items() if n != short.calls[k]}
    assert per_step == {"aten.addmm.out": 4, "aten.mm.out": 4}
    assert short.allocations == long.allocations
    for log in (short, long):
        assert log.host == [] and log.devices == {device}


# ------------------------------------------------------------------------------ autocast

AUTOCAST_CASES = [
    pytest.param("cpu", "cpu", id="cpu-cpu"),
    pytest.param("cpu", "triton", id="cpu-triton", marks=pytest.mark.skipif(
        HAS_CUDA or not triton_available(), reason="Triton's interpreter: CPU machines only")),
    pytest.param("cuda", "cpu", id="cuda-cpu", marks=NEEDS_CUDA),
    pytest.param("cuda", "triton", id="cuda-triton", marks=NEEDS_CUDA),
]


@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("device,impl", AUTOCAST_CASES)
def test_bf16_autocast_close_to_float32(device: str, impl: str, master_input: str) -> None:
    """Under ``torch.autocast(bfloat16)`` the fused path's products run in bfloat16 (every
    matrix product seen has bfloat16 operands) while the state and outputs stay float32; the
    loss is within 2e-2 (relative) of the float32 one and every gradient points the same way
    (cosine > 0.99)."""
    T, B, I, H, chunk = (8, 4, 16, 32, 4) if impl == "cpu" else (4, 2, 6, 8, 2)
    torch.manual_seed(0)
    m = ONLSTM(I, H, chunk, master_input, impl=impl).to(device)
    x = torch.randn(T, B, I, device=device)
    w_out, w_c = torch.randn(T, B, H, device=device), torch.randn(B, H, device=device)

    def loss_and_grads(low: bool) -> tuple[Tensor, list[Tensor], _OpLog]:
        m.zero_grad()
        log = _OpLog()
        with log:
            with torch.autocast(device, torch.bfloat16, enabled=low):
                out, (h, c), aux = m(x)
                assert out.dtype == c.dtype == aux["df"].dtype == torch.float32
                loss = (out * w_out).sum() + (c * w_c).sum() + aux["df"].sum() - aux["di"].sum()
            loss.backward()
        return loss.detach(), [p.grad.clone() for p in m.parameters()], log

    with gemm.use_backend("mm"):
        ref_loss, ref_grads, _ = loss_and_grads(False)
        low_loss, low_grads, log = loss_and_grads(True)
    products = {k for k in log.calls if k.split(".")[1] in ("mm", "addmm", "linear")}
    assert products and all(log.dtypes[k] == {torch.bfloat16} for k in products), {
        k: log.dtypes[k] for k in products}
    assert abs(low_loss - ref_loss) <= 2e-2 * abs(ref_loss)
    for a, b in zip(low_grads, ref_grads):
        assert F.cosine_similarity(a.flatten(), b.flatten(), 0) > 0.99
