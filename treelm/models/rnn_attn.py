"""RNN encoder-decoder with attention (Bahdanau, Cho & Bengio 2015; Luong, Pham & Manning 2015).

Source ``x_1..x_m`` (the last is ``<eos>``), target prefix ``y_0 = <bos>, y_1, …`` (teacher
forcing: the decoder reads ``y_0..y_{n-1}`` and predicts ``y_1..y_n = <eos>``). Any treelm cell
stack (:class:`~treelm.nn.stack.RNNStack`: LSTM, GRU, ON-LSTM, Elman, …) is the encoder and the
decoder.

Encoder

    e_j  = drop(E_x[x_j])                                 source embedding
    h→_j = Enc→(e_1..e_j)         h←_j = Enc←(e_j..e_m)   stacks read left to right and, with
                                                          ``bidirectional``, right to left
    m_j  = [h→_j; h←_j]                                   memory, (M,) = (2·H_e,) or (H_e,)

Bridge (decoder initial state, ``bridge: true``; zeros otherwise)

    s    = [h→_m; h←_1]                                   both directions' final outputs
    z^{l,k}_0 = tanh(W^{l,k} s + b^{l,k})                 every state tensor k (h; c for an
                                                          LSTM) of every decoder layer l

Decoder step ``t`` (Luong et al.'s global attention; input feeding optional)

    u_t  = [drop(E_y[y_{t-1}]); h̃_{t-1}]   with ``input_feed`` (h̃_0 = 0), else drop(E_y[y_{t-1}])
    h_t  = Dec(u_t; z_{t-1})                              top decoder layer's output, (H_d,)
    a_tj = v·tanh(W_q h_t + W_k m_j + b)   additive (Bahdanau's MLP score, Luong's "concat")
         = h_tᵀ W_a m_j                    general
         = h_tᵀ m_j                        dot (needs M = H_d)
    α_tj = exp(a_tj) / Σ_{i real} exp(a_ti)               0 at source padding
    c_t  = Σ_j α_tj m_j                                   context, (M,)
    h̃_t  = tanh(W_c [c_t; h_t] + b_c)                     attentional state, (H_d,)
    p(y_t | y_<t, x) = softmax(W_o drop(h̃_t) + b_o)

Bahdanau et al. score the *previous* decoder state ``z_{t-1}`` and feed ``c_t`` into the RNN; this
module scores the current output ``h_t`` (Luong's order), so that without input feeding the whole
target runs through the decoder stack in one call (the cells' fused kernels), and input feeding
(``u_t`` carries ``h̃_{t-1}``) is what tells the decoder where it attended before.

Shapes: batch-first int64 tokens, ``src`` (B, S), ``tgt_in`` (B, T), padding ``padding_idx``
(right padding); the stacks run time-major inside. The right-to-left encoder reads each sentence
reversed within its own length (:func:`~treelm.models.tagger.reverse_within`), so padding reaches
no real position and the memory of a sentence does not depend on the others of its batch.
Attention keys ``W_k m_j`` (additive) or ``W_a m_j`` (general) are computed once per sentence in
:meth:`encode`. Incremental decoding keeps, batch dimension 0 everywhere, the memory, its keys and
mask, every decoder layer's state and ``h̃_{t-1}``; one :meth:`step` gives the logits that
:meth:`forward` computes at the same position (tested to 1e-6 in float64).

Source-side trees (:mod:`treelm.syntax.source_levels`) read the encoder through
:meth:`encoder_features` (per direction, every layer's outputs and cell ``aux``, such as ON-LSTM's
master-gate levels, in source order) and :meth:`encoder_cells`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from treelm.kernels.precision import up
from treelm.models.tagger import reverse_within
from treelm.nn.stack import RNNStack, StackOutput

ATTENTIONS = ("additive", "general", "dot")


class Attention(nn.Module):
    """Scores of a query against every memory position, their softmax over the real positions
    and the context vector (see the module docstring for the three scores)."""

    def __init__(self, kind: str, query_size: int, memory_size: int, hidden: int) -> None:
        super().__init__()
        if kind not in ATTENTIONS:
            raise ValueError(f"unknown attention {kind!r}; choose one of {', '.join(ATTENTIONS)}")
        if kind == "dot" and query_size != memory_size:
            raise ValueError(f"attention: dot needs the encoder output size ({memory_size}) to "
                             f"equal the decoder's ({query_size}); use general or additive")
        self.kind = kind
        if kind == "additive":
            self.key = nn.Linear(memory_size, hidden)                 # W_k, b
            self.query = nn.Linear(query_size, hidden, bias=False)    # W_q
            self.v = nn.Linear(hidden, 1, bias=False)
        elif kind == "general":
            self.key = nn.Linear(memory_size, query_size, bias=False)  # W_a

    def keys(self, memory: Tensor) -> Tensor:
        """(B, S, M) -> what the scores compare a query with: W_k m + b, W_a m, or m."""
        return memory if self.kind == "dot" else self.key(memory)

    def forward(self, query: Tensor, keys: Tensor, memory: Tensor, mask: Tensor
                ) -> tuple[Tensor, Tensor]:
        """query (B, T, H_d), keys (B, S, ·), memory (B, S, M), mask (B, S) true at real
        positions -> context (B, T, M), weights α (B, T, S)."""
        if self.kind == "additive":
            q = self.query(query)                                     # (B, T, A)
            scores = self.v(torch.tanh(q.unsqueeze(2) + keys.unsqueeze(1))).squeeze(-1)
        else:
            scores = query @ keys.transpose(1, 2)                     # (B, T, S)
        scores = up(scores).masked_fill(~mask.unsqueeze(1), float("-inf"))  # softmax in fp32
        alpha = torch.softmax(scores, -1)
        return alpha @ memory, alpha


class RNNAttention(nn.Module):
    """Encoder-decoder with attention; the seq2seq interface (``forward``, ``encode``,
    ``start``, ``step``, ``attention``) of :mod:`treelm.decode.seq2seq`."""

    RULES: ClassVar[dict[str, Any]] = {
        "encoder_sizes": ">= 1", "decoder_sizes": ">= 1", "attention": ATTENTIONS,
        "attention_size": ">= 1", "dropout": "[0, 1)"}

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        padding_idx: int,
        cell: str = "lstm",
        encoder_sizes: list[int] | None = None,   # source embedding, then each encoder layer
        decoder_sizes: list[int] | None = None,   # target embedding, then each decoder layer
        bidirectional: bool = True,               # a second encoder stack, right to left
        attention: str = "additive",              # additive | general | dot
        attention_size: int | None = None,        # additive: the MLP's width (default H_d)
        input_feed: bool = True,                  # feed h̃_{t-1} into the decoder (Luong)
        bridge: bool = True,                      # decoder state from the encoder's final one
        dropout: float = 0.3,                     # embeddings, between layers, before W_o
        tie_weights: bool = False,                # W_o = E_y (needs H_d = target embedding)
        cell_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        enc = list(encoder_sizes or [256, 256])
        dec = list(decoder_sizes or [256, 256])
        if len(enc) < 2 or len(dec) < 2:
            raise ValueError("encoder_sizes and decoder_sizes need an embedding size and one "
                             f"layer at least, got {enc} and {dec}")
        if attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {attention!r}; choose one of "
                             f"{', '.join(ATTENTIONS)}")
        self.padding_idx, self.dropout, self.input_feed = padding_idx, dropout, input_feed
        self.src_embed = nn.Embedding(src_vocab_size, enc[0], padding_idx=padding_idx)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, dec[0], padding_idx=padding_idx)
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.uniform_(emb.weight, -0.1, 0.1)
            with torch.no_grad():
                emb.weight[padding_idx].zero_()
        opts = cell_options or {}
        self.encoders = nn.ModuleList(RNNStack(cell, enc, dropout, 0.0, opts)
                                      for _ in range(2 if bidirectional else 1))
        M = len(self.encoders) * self.encoders[0].output_size
        self.decoder = RNNStack(cell, [dec[0] + (dec[-1] if input_feed else 0), *dec[1:]],
                                dropout, 0.0, opts)
        H = self.decoder.output_size
        if input_feed and H != dec[-1]:
            raise ValueError(f"input_feed needs a decoder whose output size is its last size "
                             f"({dec[-1]}); {cell!r} outputs {H}")
        self.hidden_size, self.memory_size = H, M
        self.attn = Attention(attention, H, M, attention_size or H)
        self.combine = nn.Linear(M + H, H)                            # W_c, b_c
        self.out = nn.Linear(H, tgt_vocab_size)
        nn.init.zeros_(self.out.bias)
        if tie_weights:
            if H != dec[0]:
                raise ValueError(f"tie_weights needs the decoder output size ({H}) to equal "
                                 f"the target embedding size ({dec[0]})")
            self.out.weight = self.tgt_embed.weight
        # one linear map per state tensor of every decoder layer, from s = [h→_m; h←_1]
        self.state_shapes = [layer.state_sizes() for layer in self.decoder.layers]
        self.bridge = nn.ModuleList(
            nn.Linear(M, n) for sizes in self.state_shapes for n in sizes) if bridge else None

    # ------------------------------------------------------------------ encoder
    def _drop(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.dropout, self.training)

    def _read_source(self, src: Tensor, lengths: Tensor) -> list[StackOutput]:
        """Each encoder stack's output as it ran on ``src`` (B, S), time-major; the right-to-left
        stack's in its reading order (each sentence reversed within its length)."""
        x = self._drop(self.src_embed(src)).transpose(0, 1)              # (S, B, E)
        runs = [self.encoders[0](x)]
        if len(self.encoders) == 2:
            runs.append(self.encoders[1](reverse_within(x, lengths)))
        return runs

    def encoder_features(self, src: Tensor) -> list[StackOutput]:
        """Per direction (left to right, then right to left with ``bidirectional``): the encoder
        stack's per-layer outputs and cell ``aux`` (ON-LSTM levels ``df``/``di``, (S, B)) on
        ``src`` (B, S), time-major and in source order (the right-to-left stack's put back:
        position j is the step that read x_j); ``states`` as the stack left them."""
        lengths = src.ne(self.padding_idx).sum(1)
        first, *rest = self._read_source(src, lengths)

        def back(t: Tensor) -> Tensor:
            return reverse_within(t, lengths)

        return [first, *(StackOutput(back(r.out), r.states, [back(t) for t in r.raw],
                                     [{k: back(v) for k, v in a.items()} for a in r.aux])
                         for r in rest)]

    def encoder_cells(self) -> list[list[nn.Module]]:
        """Per direction (as :meth:`encoder_features`), that stack's cells, layer 1 first."""
        return [list(stack.layers) for stack in self.encoders]

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        """``src`` (B, S) -> memory m (B, S, M), its attention keys, mask (B, S) and the bridge's
        summary s (B, M)."""
        mask = src.ne(self.padding_idx)
        lengths = mask.sum(1)
        runs = self._read_source(src, lengths)
        outs = [runs[0].out, *(reverse_within(r.out, lengths) for r in runs[1:])]
        memory = torch.cat(outs, -1).transpose(0, 1)                      # (B, S, M)
        last = (lengths - 1).clamp_min(0).view(-1, 1, 1)
        ends = [outs[0].transpose(0, 1).gather(1, last.expand(-1, 1, outs[0].size(-1)))[:, 0]]
        if len(outs) == 2:
            ends.append(outs[1][0])                                       # h←_1
        memory = memory * mask.unsqueeze(-1)     # padding rows 0 (never attended either way)
        return {"memory": memory, "keys": self.attn.keys(memory), "mask": mask,
                "summary": torch.cat(ends, -1)}

    # ------------------------------------------------------------------ decoder
    def start(self, memory: dict[str, Tensor]) -> dict[str, Any]:
        """The decoder state before ``<bos>``: the memory, every layer's initial state (the
        bridge's, or zeros) and h̃_0 = 0."""
        s = memory["summary"]
        B = s.size(0)
        layers: list[tuple[Tensor, ...]] = []
        k = 0
        for layer, sizes in zip(self.decoder.layers, self.state_shapes):
            if self.bridge is None:
                layers.append(layer.init_state(B, s))
                continue
            layers.append(tuple(torch.tanh(self.bridge[k + i](s)) for i in range(len(sizes))))
            k += len(sizes)
        state: dict[str, Any] = {key: memory[key] for key in ("memory", "keys", "mask")}
        state["layers"] = layers
        state["feed"] = s.new_zeros(B, self.hidden_size)
        return state

    def _attend(self, h: Tensor, state: dict[str, Any]) -> tuple[Tensor, Tensor]:
        """Top-layer outputs h (B, T, H_d) -> attentional states h̃ (B, T, H_d), weights α."""
        context, alpha = self.attn(h, state["keys"], state["memory"], state["mask"])
        return torch.tanh(self.combine(torch.cat([context, h], -1))), alpha

    def _decode(self, tgt_in: Tensor, state: dict[str, Any]
                ) -> tuple[Tensor, Tensor, dict[str, Any]]:
        """Read ``tgt_in`` (B, T) from ``state``: attentional states h̃ (B, T, H_d), attention
        weights (B, T, S) and the state after the last token."""
        emb = self._drop(self.tgt_embed(tgt_in))                          # (B, T, E)
        if not self.input_feed:      # the whole target through the stack at once
            out = self.decoder(emb.transpose(0, 1), state["layers"])
            h_tilde, alpha = self._attend(out.out.transpose(0, 1), state)
            new = {**state, "layers": out.states, "feed": h_tilde[:, -1]}
            return h_tilde, alpha, new
        feed, layers = state["feed"], state["layers"]
        hs, alphas = [], []
        for t in range(tgt_in.size(1)):        # h̃_{t-1} is an input of step t: one at a time
            u = torch.cat([emb[:, t], feed], -1).unsqueeze(0)             # (1, B, E + H_d)
            out = self.decoder(u, layers)
            layers = out.states
            h_tilde, alpha = self._attend(out.out.transpose(0, 1), state)
            feed = h_tilde[:, 0]
            hs.append(h_tilde)
            alphas.append(alpha)
        return torch.cat(hs, 1), torch.cat(alphas, 1), {**state, "layers": layers,
                                                        "feed": feed}

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """``src`` (B, S), ``tgt_in`` (B, T) starting with <bos> -> logits (B, T, V_tgt)."""
        h_tilde, _, _ = self._decode(tgt_in, self.start(self.encode(src)))
        return self.out(self._drop(h_tilde))

    def attention(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Attention weights under teacher forcing, (1, B, T, S) (one attention layer)."""
        return self._decode(tgt_in, self.start(self.encode(src)))[1].unsqueeze(0)

    def step(self, tokens: Tensor, state: dict[str, Any]) -> tuple[Tensor, dict[str, Any]]:
        """Read one target token per sentence, ``tokens`` (B,) -> logits (B, V) of the next one
        and the new state (the input state is not modified)."""
        h_tilde, _, new = self._decode(tokens.unsqueeze(1), state)
        return self.out(self._drop(h_tilde[:, 0])), new

    def layer_cells(self) -> list[nn.Module]:
        return [layer for stack in (*self.encoders, self.decoder) for layer in stack.layers]
