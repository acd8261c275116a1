"""Fused ON-LSTM implementations behind :class:`treelm.cells.onlstm.ONLSTM`.

* ``"cpu"``: :mod:`treelm.kernels.onlstm_torch`, a whole-sequence ``torch.autograd.Function`` with a
  hand-derived BPTT (pure PyTorch; runs on any device): the "Python fused path".
* ``"cxx"``: :mod:`treelm.kernels.onlstm_cxx`, the same Function with both time loops in a small
  C++ extension (CPU, float32/float64, autocast's bfloat16 products too), built by ``make setup``
  (:mod:`treelm.kernels.build`); where it cannot run (no compiler, ``TREELM_CXX=0``, another
  device or dtype) the Python fused path runs instead.
* ``"triton"``: :mod:`treelm.kernels.onlstm_triton`, the same Function with the per-step gate math
  in one Triton kernel forward and one backward (CUDA tensors, or CPU under
  ``TRITON_INTERPRET=1``); needs ``triton``.
* ``"auto"`` / ``"fused"``: Triton for CUDA tensors when it is importable, ``"cxx"`` otherwise
  (which is the Python fused path wherever the C++ loop does not apply).

Their matrix products (the per-step recurrent ones, the input projection, the weight gradient) go
through :mod:`treelm.kernels.gemm`, which runs each on the GEMM backend (MKL packed, oneDNN, plain
``torch.mm``) measured fastest for its shape on this machine (always ``torch.mm`` for CUDA and
float64 tensors); ``TREELM_GEMM=auto|mkl|onednn|mm`` overrides the choice.

``"reference"`` (the readable per-step cell) is handled by the cell itself. Under
``torch.autocast`` the fused paths run their products in the autocast dtype and keep the state
and the gate math in float32 (:func:`treelm.kernels.onlstm_torch.onlstm_torch_sequence`).
:mod:`treelm.kernels.graphs` replays a training step's forward and backward, and an inference
call's forward alone, from CUDA graphs (float32 inputs on the Triton path, under bf16 autocast
too; on by default, the cell's ``cuda_graphs``).
"""

from __future__ import annotations

from torch import Tensor

from treelm.kernels.onlstm_cxx import onlstm_cxx_sequence
from treelm.kernels.onlstm_torch import LayerOutput, onlstm_torch_sequence
from treelm.kernels.sequence import input_part

IMPLS = ("auto", "fused", "cpu", "cxx", "triton")


def onlstm_sequence(x: Tensor, state: tuple[Tensor, Tensor], weight_ih: Tensor, bias_ih: Tensor,
                    weight_hh: Tensor, bias_hh: Tensor, n_levels: int, master_input: str,
                    impl: str = "auto", xp: Tensor | None = None) -> LayerOutput:
    """Whole-sequence ON-LSTM: x (T, B, I), state ``(h0, c0)`` each (B, H).

    ``weight_ih`` (G, I), ``weight_hh`` (G, H), biases (G,), ``G = 4H + 2·n_levels``, laid out as
    in :mod:`treelm.cells.onlstm`. Returns ``out`` (T, B, H), ``(h_T, c_T)`` and
    ``{"df": (T, B), "di": (T, B)}``, equal to the reference cell's (up to rounding), with
    gradients for every tensor argument, the levels included. ``xp`` (T, B, G): the input part
    ``x W_ihᵀ + b_ih + b_hh`` already made (:func:`onlstm_input_part`), without autograd: the
    CPU paths take it (on CUDA it is made again).
    """
    _check(impl)
    args = (x, state, weight_ih, bias_ih, weight_hh, bias_hh, n_levels, master_input)
    if impl == "triton" or (impl in ("auto", "fused") and x.is_cuda and triton_available()):
        from treelm.kernels.onlstm_triton import onlstm_triton_sequence

        return onlstm_triton_sequence(*args)
    if impl == "cpu":
        return onlstm_torch_sequence(*args, xp=xp)
    return onlstm_cxx_sequence(*args, xp=xp)


def onlstm_input_part(x: Tensor, weight_ih: Tensor, bias_ih: Tensor, bias_hh: Tensor,
                      impl: str = "auto") -> Tensor | None:
    """The input part :func:`onlstm_sequence` would make for ``x`` (…, I) on its path, for a
    caller that makes it once for inputs it reads many times and hands it back as ``xp``
    (:func:`treelm.kernels.sequence.input_part`); ``None`` where that path makes its own (CUDA:
    the Triton path and its CUDA graphs take none)."""
    _check(impl)
    if x.device.type != "cpu" or impl == "triton":
        return None
    return input_part(x, weight_ih, bias_ih, bias_hh)


def _check(impl: str) -> None:
    if impl not in IMPLS:
        raise ValueError(f"unknown ON-LSTM impl {impl!r}; choose one of {IMPLS} or 'reference'")


def triton_available() -> bool:
    """Whether ``triton`` can be imported (checked once)."""
    global _TRITON
    if _TRITON is None:
        try:
            import triton  # noqa: F401
        except ImportError:
            _TRITON = False
        else:
            _TRITON = True
    return _TRITON


_TRITON: bool | None = None
