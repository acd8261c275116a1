"""Matrix products on the GEMM backend that is fastest on this machine for their shape, chosen by
measuring: above all the ``T`` per-step products ``a_t Wᵀ`` of a recurrent loop against one weight.

A CPU build of PyTorch offers three ways to multiply, and treelm's C++ extension a fourth:

* ``"mm"``: ``torch.mm`` / ``torch.addmm`` (MKL's sgemm on x86), reading the operands as they are;
* ``"mkl"``: MKL's packed GEMM (``torch.ops.mkl._mkl_reorder_linear_weight`` once, then
  ``torch.ops.mkl._mkl_linear``), as inductor does for frozen linear layers; float32 only;
* ``"onednn"``: oneDNN's linear (``torch.ops.mkldnn._linear_pointwise``), on a weight packed once
  by ``torch.ops.mkldnn._reorder_linear_weight`` when it serves many products, on the weight as it
  is for a single product; float32 and bfloat16;
* ``"panel"``: treelm's own kernel for a few rows (``csrc/panel_gemm.cpp``): the weight
  packed once into column panels, each step's rows through a register tile: 10 × 32 in an
  AVX-512 build, 5 × 16 in an AVX2 one (the extension's ``panel_columns()`` says which width its
  panels have). At batch 20 with AVX2 the libraries' kernels reach about 60% of the FMA peak on
  a step's product; this one is measured beside them and taken where it is faster, packing
  included. float32, and bfloat16 (``vdpbf16ps``) in an AVX-512 build on a CPU with avx512_bf16
  (the extension's ``panel_bf16()``), on AMX's tiles where the CPU has amx_bf16 and Linux
  grants them (``panel_amx()``; ``TREELM_PANEL_AMX=0`` keeps ``vdpbf16ps``).

Which one wins depends on the CPU, not on the code: MKL picks its fastest kernels by vendor, oneDNN
by instruction set. On MKL packed, the fused ON-LSTM trained at 0.94× ``nn.LSTM``'s speed on an
Intel Xeon but at 0.44× on an AMD EPYC, where one step's product (20×1150)·(1150×4830) takes 3.9 ms
with MKL packed, 2.9 ms with ``torch.mm`` and 1.1 ms with oneDNN packed. So nothing here names a
vendor: the first time a product shape is seen (per process, operand layout, dtype, device and
thread count), each candidate backend prepares the weight and runs the product a few times, in
turns (see :func:`_measure`); that takes a few milliseconds for small shapes and up to about a
second for the largest one-off products of the paper's size, once per process.

Products against a weight used ``steps > 1`` times (a time loop) choose among ``mm``, ``mkl``,
``onednn`` packed and ``panel``, minimising ``pack + steps · call``, so a single-step loop
(decoding one token) does not pay for a packing that a 70-step sequence amortises. Single
products (``steps == 1``: an input projection over all steps, a weight gradient) choose between
``mm`` and ``onednn`` on the unpacked weight (packing pays only when reused; MKL's packed and
plain products run the same kernels). Near ties go to the simpler backend (:data:`BACKENDS`
order, within :data:`TIE_MARGIN`, 5% in a loop) so that the choice, and with it the rounding,
does not flip between runs on noise. Every backend computes in float32 arithmetic; they differ
only in summation order (oneDNN's results differ from MKL's by a few float32 ulps).

The package: :mod:`.backends` (which backends this build has, the overrides, preparing a weight
for a product), :mod:`.choice` (measuring the candidates for a shape, the cache of measurements
and decisions that checkpoints carry), :mod:`.products` (the front ends below).

Front ends: :class:`FixedMatmul` and :func:`matmul` (not differentiable) for hand-written forward
and backward passes such as the fused ON-LSTM's; :func:`linear`, ``F.linear``'s numbers and
gradients, for autograd code: the cells' per-step products inside the :func:`loop` scope that
:meth:`treelm.cells.base.Cell.forward` opens around its time steps, single products elsewhere;
:func:`cast_linear`, autocast's ``F.linear`` without autograd (a loop's input projection in
evaluation).

Overrides (tests, benchmarks, reproducing a run bit for bit): the environment variable
``TREELM_GEMM=auto|mkl|onednn|mm``, or :func:`set_backend` / the context manager
:func:`use_backend`, which take precedence over it. A forced backend that cannot run the product
(ops missing from this build, dtype, non-CPU tensor) falls back to ``"mm"``. Non-CPU tensors and
dtypes no other backend takes (float64, float16) always use ``"mm"`` without measuring. Choices
are logged once each at debug level (logger ``treelm.kernels.gemm``) and listed by
:func:`decisions` for benchmark records.
"""

from treelm.kernels.gemm.backends import (
    _AVAILABLE,
    BACKENDS,
    CHOICES,
    ENV_VAR,
    Prepared,
    available_backends,
    requested_backend,
    set_backend,
    transpose_contiguous,
    usable_backends,
    use_backend,
)
from treelm.kernels.gemm.choice import (
    Measurement,
    clear_cache,
    clear_decisions,
    decisions,
    measurements,
    restore_measurements,
)
from treelm.kernels.gemm.products import (
    CastMatmul,
    FixedMatmul,
    cast_linear,
    linear,
    loop,
    matmul,
    step_matmul,
)

__all__ = [
    "BACKENDS",
    "CHOICES",
    "ENV_VAR",
    "_AVAILABLE",
    "CastMatmul",
    "FixedMatmul",
    "Measurement",
    "Prepared",
    "available_backends",
    "cast_linear",
    "clear_cache",
    "clear_decisions",
    "decisions",
    "linear",
    "loop",
    "matmul",
    "measurements",
    "restore_measurements",
    "step_matmul",
    "requested_backend",
    "set_backend",
    "transpose_contiguous",
    "usable_backends",
    "use_backend",
]
