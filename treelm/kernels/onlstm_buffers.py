"""The buffers of a fused ON-LSTM sequence: what the forward time loop writes at each step and the
backward loop reads, laid out once per sequence so that no step allocates (the notation is that of
:mod:`treelm.kernels.onlstm_torch`). Both step implementations, the PyTorch one and the Triton
kernel, write the same buffers, and the C++ loop saves the same tensors, so one backward contract
serves them all.
"""

from __future__ import annotations

from torch import Tensor

__all__ = ["ForwardBuffers"]


class ForwardBuffers:
    """Everything the forward pass writes; with ``save`` sized for all steps (backward reads it).

    ``gates`` (n, B, G): the pre-activations, overwritten in place by ``[z_ĩ, z_f̃ | o, ĉ, i, f]``
    (the master logits stay); ``P``, ``M`` (·, B, 2, L): ``[p̃_i, p̃_f]`` and ``[ĩ, f̃]``;
    ``hat`` (n, B, 2, H): ``[î, f̂]``; ``cs`` (T + 1, B, H): ``c_0 … c_T`` (two alternating slots
    without ``save``); ``tanh_c`` (n, B, H); ``out`` (T, B, H): ``h_1 … h_T``. ``n = T`` with
    ``save``, else 1 (slot ``k = 0`` reused). ``M`` always covers all ``T`` steps (the levels).
    """

    FIELDS = ("gates", "P", "M", "hat", "cs", "tanh_c", "out")

    def __init__(self, xp: Tensor, hidden: int, n_levels: int, save: bool) -> None:
        T, B, G = xp.shape
        H, L = hidden, n_levels
        n = T if save else 1
        new = xp.new_empty
        self._dims(T, B, H, L, save)
        self.gates = new(n, B, G)
        self.P, self.M = new(n, B, 2, L), new(T, B, 2, L)
        self.hat = new(n, B, 2, H)
        self.cs = new(T + 1 if save else 2, B, H)
        self.tanh_c = new(n, B, H)
        self.out = new(T, B, H)

    def _dims(self, T: int, B: int, H: int, L: int, save: bool) -> None:
        self.T, self.B, self.H, self.L, self.C, self.save = T, B, H, L, H // L, save

    def tensors(self) -> tuple[Tensor, ...]:
        """The buffers in :attr:`FIELDS` order (for ``ctx.save_for_backward``)."""
        return tuple(getattr(self, k) for k in self.FIELDS)

    @classmethod
    def restore(cls, tensors: tuple[Tensor, ...]) -> ForwardBuffers:
        """The saved buffers of a ``save=True`` forward, from :meth:`tensors`."""
        buf = cls.__new__(cls)
        for k, t in zip(cls.FIELDS, tensors):
            setattr(buf, k, t)
        T, B, _, L = buf.M.shape
        buf._dims(T, B, buf.out.shape[-1], L, True)
        return buf

    def slots(self, t: int) -> tuple[int, int, int]:
        """Buffer indices at step ``t``: per-step slot ``k``, and the slots of c_{t-1} and c_t."""
        if self.save:
            return t, t, t + 1
        return 0, t % 2, (t + 1) % 2

    def gate_views(self, gates: Tensor) -> dict[str, tuple[Tensor, ...]]:
        """Per-step views of a (·, B, G) gate-layout tensor: logits (B, 2L) and (B, 2, L),
        ``o``, ``ĉ`` (B, H), ``[i, f]`` (B, 2, H) and (B, 2, L, C)."""
        n, B, _ = gates.shape
        H, L, C = self.H, self.L, self.C
        a = 2 * L
        return {
            "m2": gates[:, :, :a].unbind(0),
            "m": gates[:, :, :a].view(n, B, 2, L).unbind(0),
            "o": gates[:, :, a : a + H].unbind(0),
            "g": gates[:, :, a + H : a + 2 * H].unbind(0),
            "if": gates[:, :, a + 2 * H :].view(n, B, 2, H).unbind(0),
            "if4": gates[:, :, a + 2 * H :].view(n, B, 2, L, C).unbind(0),
        }
