"""ConvS2S: convolutional sequence to sequence learning (Gehring, Auli, Grangier, Yarats & Dauphin,
ICML 2017), computing what fairseq's ``fconv`` model computes (differences from the paper below).

Source ``x_1..x_m``, target prefix ``y_0 = <bos>, y_1, …`` (teacher forcing: the decoder reads
``y_0..y_{n-1}`` and predicts ``y_1..y_n``). ``f`` is the embedding size, layer ``l`` has ``C_l``
channels and kernel width ``k_l``; ``u`` encoder and ``L`` decoder layers; ``v([A B]) = A ⊗ σ(B)``
is the gated linear unit (GLU), ``r = √0.5``.

Encoder (Secs. 3.1, 3.2, 3.4)

    e_j   = drop(D_x[x_j] + P_x[p_j])                         word + position embedding, (f,)
    z⁰_j  = W_1 e_j + b_1                                     f → C_1
    z^l_j = r·(v(W^l [z̄^{l-1}_{j-⌊(k-1)/2⌋} … z̄^{l-1}_{j+⌊k/2⌋}] + b^l) + R^l z^{l-1}_j)
    z_j   = W_2 z^u_j + b_2  (0 at padding)                    C_u → f; the gradient of z is
                                                              scaled by 1/(2·L) on the way back
    keys z_j,  values ẑ_j = r·(z_j + e_j)

with ``z̄^{l-1} = drop(z^{l-1})`` set to 0 at padding (so a word next to padding sees zeros there,
as at a sentence edge), ``R^l`` a linear projection where ``C_{l-1} ≠ C_l`` (else the identity).

Decoder (Secs. 3.1-3.4)

    g_i   = drop(D_y[y_i] + P_y[q_i])                         (f,)
    h⁰_i  = W_3 g_i + b_3                                     f → C_1
    o^l_i = v(W^l [h̄^{l-1}_{i-k+1} … h̄^{l-1}_i] + b^l)        causal: k−1 zero vectors on the left
    d^l_i = r·(W_d^l o^l_i + b_d^l + g_i)                      Eq. 1, C_l → f
    a^l_ij = exp(d^l_i·z_j) / Σ_{t real} exp(d^l_i·z_t)        0 at padding j
    c^l_i = √m · Σ_j a^l_ij ẑ_j                                Eq. 2 scaled by m·√(1/m), Sec. 3.4
    h^l_i = r·(r·(W_c^l c^l_i + b_c^l + o^l_i) + R^l h^{l-1}_i)  attention, then residual
    s_i   = W_o drop(W_4 h^L_i + b_4) + b_o                   logits over the target vocabulary

with ``h̄^{l-1} = drop(h^{l-1})``, ``m`` the number of non-padding source words of the sentence.

Positions. ``p_j`` counts the non-padding tokens up to and including ``x_j`` (1, 2, …) and is 0 on
padding (``q_i`` likewise over the target); row 0 of the position tables is a zero vector that gets
no gradient, and ``max_positions`` rows follow it. fairseq numbers the same positions from
``padding_idx + 1`` in a table offset by ``padding_idx`` (its rows below ``padding_idx`` are never
used, and fconv's table has ``max_positions`` rows in all); the embeddings are the same. Padding
anywhere in the source (left or right) therefore shifts nothing, and appending padding changes no
logit. In incremental decoding fairseq numbers the target by the prefix length, padding included;
:meth:`ConvS2S.step` keeps the count of non-padding tokens, so it matches full recomputation even
on padding tokens.

Where paper and fairseq differ, this follows fairseq:

* Eq. 1 is ``d = W_d h + b_d + g``; fairseq multiplies it by ``√0.5`` (here too).
* Eq. 2's values are ``z + e``; fairseq uses ``√0.5·(z + e)`` (here too).
* Sec. 3.4 scales ``c`` by ``m√(1/m) = √m`` with ``m`` "the number of source elements"; fairseq
  (and this module) counts the non-padding ones of each sentence, so padding changes nothing.
* Sec. 3.3 adds ``c`` to the layer output; ``c`` has ``f`` components and the layer ``C_l``, so
  fairseq projects it (``W_c``) and adds with ``√0.5``, then adds the block's residual with
  ``√0.5`` again (above).
* Sec. 3.4 scales the encoder's gradients "by the number of attention mechanisms"; fairseq
  multiplies the gradient of ``z`` by ``1/(2·L)`` (every decoder layer attends here; ``z`` enters
  each attention twice, as keys and inside the values, perhaps the reason for the 2 — fairseq does
  not say). The source embeddings' direct path into the values is not scaled ("we exclude source
  word embeddings"); their path through the encoder layers is.
* Sec. 3.2 pads the decoder's input by ``k−1`` zeros on both sides and drops the last ``k``
  outputs (which would leave ``T−1`` of them); fairseq drops the last ``k−1``, the same as padding
  ``k−1`` on the left only (here): output ``i`` sees inputs ``i−k+1 … i``, its own word included.

Initialisation (Sec. 3.5, retain probability ``p = 1 − dropout``): embeddings ``N(0, 0.1)``
(padding rows 0); a convolution feeding a GLU ``N(0, √(4p/(k·C_in)))``; a linear layer whose input
is dropped out (``W_1``, ``W_3``, ``W_o``) ``N(0, √(p/n_in))``, every other linear layer
``N(0, √(1/n_in))``; biases 0. Every convolution and linear layer is weight-normalised
(Salimans & Kingma 2016; Sec. 4.2 "all layers except for lookup tables"), ``w = g·v/‖v‖`` per
output unit, ``g`` starting at ``‖v‖`` so the initial weights are the ones drawn above. With
``share_input_output_embed`` the output layer ``W_o`` is the target embedding matrix itself (no
weight norm, as fairseq). Dropout (Sec. 4.2): on the embeddings, on the input of every
convolution, and on the decoder output before ``W_o``.

Shapes: batch-first int64 tokens, ``src`` (B, S), ``tgt_in`` (B, T), padding ``padding_idx``;
activations (B, T, C) (convolutions run on the (B, C, T) transpose). Teacher forcing computes every
layer for all T positions at once; incremental decoding (:meth:`ConvS2S.step`) keeps, per decoder
layer, the last ``k−1`` inputs of its convolution (zeros at the start, as the left padding) and
computes only the new column: ``O(k·C²)`` per layer and step instead of recomputing the prefix.
The decoder state is a flat dict of tensors, batch dimension 0 everywhere, so beam search reorders
it with one ``index_select`` per tensor (:func:`treelm.decode.state.reorder_state`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm

from treelm.kernels.precision import up

SQRT_HALF = math.sqrt(0.5)


class GradMultiply(torch.autograd.Function):
    """Identity forward; the backward multiplies the gradient by ``scale`` (Sec. 3.4)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, scale: float) -> Tensor:
        ctx.scale = scale
        return x.clone()  # a new tensor, not a view: the caller may modify either

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return grad * ctx.scale, None


def make_positions(tokens: Tensor, padding_idx: int) -> Tensor:
    """(B, T) tokens -> (B, T) positions: 1, 2, … over the non-padding tokens, 0 on padding."""
    real = tokens.ne(padding_idx).long()
    return torch.cumsum(real, dim=1) * real


def wn_linear(n_in: int, n_out: int, dropout: float = 0.0) -> nn.Linear:
    """Weight-normalised linear layer, weights ``N(0, √((1 − dropout)/n_in))``, bias 0 (Sec. 3.5;
    ``dropout`` is the dropout rate on this layer's input, 0 when its input is not dropped)."""
    m = nn.Linear(n_in, n_out)
    nn.init.normal_(m.weight, 0.0, math.sqrt((1.0 - dropout) / n_in))
    nn.init.zeros_(m.bias)
    return weight_norm(m, dim=0)


def embedding(n: int, dim: int, padding_idx: int) -> nn.Embedding:
    """Lookup table ``N(0, 0.1)`` (Sec. 3.5) with a zero padding row that gets no gradient."""
    m = nn.Embedding(n, dim, padding_idx=padding_idx)
    nn.init.normal_(m.weight, 0.0, 0.1)
    with torch.no_grad():
        m.weight[padding_idx].zero_()
    return m


class GLUConv(nn.Module):
    """One convolution block's non-linear part (Sec. 3.2): ``v(W [x_{i-a} … x_{i+b}] + b_w)`` with
    ``W ∈ R^{2C_out × k·C_in}``, ``v([A B]) = A ⊗ σ(B)`` (the first ``C_out`` outputs are ``A``).

    Weights ``N(0, √(4p/(k·C_in)))`` (Sec. 3.5: a GLU roughly quarters the variance of its input,
    and dropout with retain probability ``p`` on the input multiplies it by ``1/p``), weight norm
    per output channel. ``forward(x, left, right)`` zero-pads ``x`` (B, T, C_in) by ``left`` and
    ``right`` steps: ``(k−1)//2, k//2`` keeps the length (encoder), ``k−1, 0`` is causal (decoder),
    ``0, 0`` on a ``k``-step window gives that window's single output (incremental decoding).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int,
                 dropout: float) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        conv = nn.Conv1d(in_channels, 2 * out_channels, kernel_size)
        std = math.sqrt(4.0 * (1.0 - dropout) / (kernel_size * in_channels))
        nn.init.normal_(conv.weight, 0.0, std)
        nn.init.zeros_(conv.bias)
        # Conv1d weights are (out, in, k): dim 0 normalises each output channel over (in, k),
        # as fairseq's ConvTBC (k, in, out) with dim=2
        self.conv = weight_norm(conv, dim=0)

    def forward(self, x: Tensor, left: int, right: int) -> Tensor:
        y = self.conv(F.pad(x.transpose(1, 2), (left, right)))     # (B, 2·C_out, T')
        return F.glu(y, dim=1).transpose(1, 2)                     # (B, T', C_out)


class MultiStepAttention(nn.Module):
    """The attention of one decoder layer (Sec. 3.3, Eqs. 1-2, scaled as in Sec. 3.4 / fairseq).

    ``o`` (B, T, C) the layer's GLU output, ``g`` (B, T, f) the target embeddings, keys ``z`` and
    values ``ẑ = √0.5·(z + e)`` (B, S, f), ``src_mask`` (B, S) True at real source words:

        d = √0.5·(W_d o + b_d + g)             a = softmax over real j of d·z_j
        c = √m · Σ_j a_j ẑ_j                   out = √0.5·(W_c c + b_c + o)

    Returns ``out`` (B, T, C) and the weights ``a`` (B, T, S), exactly 0 at padding.
    """

    def __init__(self, channels: int, embed_dim: int) -> None:
        super().__init__()
        self.in_projection = wn_linear(channels, embed_dim)      # W_d: to the embedding space
        self.out_projection = wn_linear(embed_dim, channels)     # W_c: back to the channels

    def forward(self, o: Tensor, g: Tensor, z: Tensor, z_plus_e: Tensor,
                src_mask: Tensor) -> tuple[Tensor, Tensor]:
        d = (self.in_projection(o) + g) * SQRT_HALF
        scores = up(torch.bmm(d, z.transpose(1, 2)))     # (B, T, S); the softmax in float32
        # the most negative finite number rather than -inf: exp underflows to exactly 0 all the
        # same, and a source of padding only gives finite (unused) weights instead of NaN
        scores = scores.masked_fill(~src_mask.unsqueeze(1), torch.finfo(scores.dtype).min)
        a = F.softmax(scores, dim=-1)
        m = src_mask.sum(dim=1).to(z_plus_e.dtype)                          # (B,) real words
        # m·√(1/m) = √m: undoes the 1/m shrinking of the variance by a uniform average (Sec. 3.4)
        c = torch.bmm(a, z_plus_e) * m.sqrt().view(-1, 1, 1)
        return (self.out_projection(c) + o) * SQRT_HALF, a


def _conv_stack(layers: list[list[int]], dropout: float
                ) -> tuple[nn.ModuleList, nn.ModuleList, list[int]]:
    """Convolution blocks for ``layers`` [[C_l, k_l], …] and the residual projections ``R^l``
    (a weight-normalised linear map where ``C_{l-1} ≠ C_l``, else the identity; fairseq's
    ``residual=1``). Returns ``(convs, projections, input channels per layer)``."""
    convs, projections, inputs = nn.ModuleList(), nn.ModuleList(), []
    c_in = layers[0][0]
    for c_out, k in layers:
        inputs.append(c_in)
        projections.append(wn_linear(c_in, c_out) if c_in != c_out else nn.Identity())
        convs.append(GLUConv(c_in, c_out, k, dropout))
        c_in = c_out
    return convs, projections, inputs


def _check_layers(name: str, layers: Any) -> list[list[int]]:
    """``layers`` as a list of ``[channels, kernel]`` pairs of positive ints, or a ValueError."""
    if not isinstance(layers, (list, tuple)) or not layers:
        raise ValueError(f"{name} must be a non-empty list of [channels, kernel] pairs, "
                         f"got {layers!r}")
    out = []
    for spec in layers:
        if (not isinstance(spec, (list, tuple)) or len(spec) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                           for v in spec)):
            raise ValueError(f"{name}: each layer is [channels, kernel] with integers >= 1, "
                             f"got {spec!r}")
        out.append([int(spec[0]), int(spec[1])])
    return out


class ConvS2S(nn.Module):
    """Convolutional encoder-decoder with multi-step attention (see the module docstring).

    ``forward(src, tgt_in)`` -> logits (B, T, V_tgt) under teacher forcing; ``encode`` /
    ``start`` / ``step`` decode incrementally with exactly the same numbers; ``attention`` gives
    every decoder layer's attention weights (L, B, T, S).
    """

    RULES: ClassVar[dict[str, Any]] = {
        "embed_dim": ">= 1", "decoder_out_embed_dim": ">= 1", "max_positions": ">= 1",
        "dropout": "[0, 1)"}

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        padding_idx: int,
        embed_dim: int = 256,                            # f: embeddings, keys and values
        encoder_layers: list[list[int]] | None = None,   # [[channels, kernel], …]; [[256, 3]] * 4
        decoder_layers: list[list[int]] | None = None,   # likewise; [[256, 3]] * 4
        decoder_out_embed_dim: int = 256,                # W_4: top decoder layer -> this -> vocab
        max_positions: int = 1024,                       # longest sentence (non-padding tokens)
        dropout: float = 0.1,                            # fairseq's fconv default
        share_input_output_embed: bool = False,          # W_o = D_y (needs out_embed == embed)
    ) -> None:
        super().__init__()
        # defaults: a Multi30k-sized model that trains on a CPU (fairseq's fconv_iwslt_de_en is
        # 256-dim with 4 encoder and 3 decoder layers of [256, 3]; the WMT models are 512+ wide
        # and 15-20 layers deep)
        enc = _check_layers("encoder_layers", encoder_layers or [[256, 3]] * 4)
        dec = _check_layers("decoder_layers", decoder_layers or [[256, 3]] * 4)
        if share_input_output_embed and decoder_out_embed_dim != embed_dim:
            raise ValueError("share_input_output_embed needs decoder_out_embed_dim == embed_dim, "
                             f"got {decoder_out_embed_dim} and {embed_dim}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.padding_idx, self.max_positions, self.dropout = padding_idx, max_positions, dropout
        self.encoder_kernels = [k for _, k in enc]
        self.decoder_kernels = [k for _, k in dec]
        self.tgt_vocab_size = tgt_vocab_size
        # Sec. 3.4 / fairseq: every decoder layer attends, each gradient into z is scaled by this
        self.encoder_grad_scale = 1.0 / (2.0 * len(dec))

        # encoder
        self.src_embed = embedding(src_vocab_size, embed_dim, padding_idx)
        self.src_positions = embedding(max_positions + 1, embed_dim, 0)
        self.enc_fc1 = wn_linear(embed_dim, enc[0][0], dropout)    # its input e is dropped out
        self.enc_convs, self.enc_projections, _ = _conv_stack(enc, dropout)
        self.enc_fc2 = wn_linear(enc[-1][0], embed_dim)

        # decoder
        self.tgt_embed = embedding(tgt_vocab_size, embed_dim, padding_idx)
        self.tgt_positions = embedding(max_positions + 1, embed_dim, 0)
        self.dec_fc1 = wn_linear(embed_dim, dec[0][0], dropout)
        self.dec_convs, self.dec_projections, self.dec_in_channels = _conv_stack(dec, dropout)
        self.attentions = nn.ModuleList(MultiStepAttention(c, embed_dim) for c, _ in dec)
        self.dec_fc2 = wn_linear(dec[-1][0], decoder_out_embed_dim)
        if share_input_output_embed:
            self.dec_fc3 = nn.Linear(decoder_out_embed_dim, tgt_vocab_size)
            self.dec_fc3.weight = self.tgt_embed.weight
            nn.init.zeros_(self.dec_fc3.bias)   # the paper's zero biases (fairseq keeps torch's)
        else:
            self.dec_fc3 = wn_linear(decoder_out_embed_dim, tgt_vocab_size, dropout)

    # ------------------------------------------------------------------ pieces

    def _drop(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.dropout, self.training)

    def _embed(self, tokens: Tensor, positions: Tensor, words: nn.Embedding,
               table: nn.Embedding) -> Tensor:
        """``drop(D[tokens] + P[positions])`` (Sec. 3.1), any shape of tokens."""
        if positions.numel() and int(positions.max()) > self.max_positions:
            raise ValueError(f"a sentence has {int(positions.max())} tokens, more than "
                             f"max_positions = {self.max_positions}")
        return self._drop(words(tokens) + table(positions))

    def _decoder_layer(self, i: int, h: Tensor, o: Tensor, g: Tensor,
                       memory: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Layer ``i``'s attention and residual on its GLU output ``o``: the new ``h`` and the
        attention weights. ``h`` is the layer's input (before dropout)."""
        out, a = self.attentions[i](o, g, memory["z"], memory["z_plus_e"], memory["src_mask"])
        return (out + self.dec_projections[i](h)) * SQRT_HALF, a

    def _output(self, h: Tensor) -> Tensor:
        return self.dec_fc3(self._drop(self.dec_fc2(h)))

    # ------------------------------------------------------------------ interface

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        """``src`` (B, S) -> ``z`` (B, S, f) the encoder output (0 at padding), ``z_plus_e``
        (B, S, f) ``√0.5·(z + e)``, ``src_mask`` (B, S) bool, True at real (non-padding) words."""
        real = src.ne(self.padding_idx)
        pad = ~real.unsqueeze(-1)
        e = self._embed(src, make_positions(src, self.padding_idx), self.src_embed,
                        self.src_positions)
        x = self.enc_fc1(e)
        for conv, proj in zip(self.enc_convs, self.enc_projections):
            residual = proj(x)
            # zeros at padding before every convolution: a word next to padding then sees what
            # it would see at the sentence's edge, so padding never changes the real positions
            y = conv(self._drop(x.masked_fill(pad, 0.0)),
                     (conv.kernel_size - 1) // 2, conv.kernel_size // 2)
            x = (y + residual) * SQRT_HALF
        z = self.enc_fc2(x).masked_fill(pad, 0.0)
        z = GradMultiply.apply(z, self.encoder_grad_scale)
        return {"z": z, "z_plus_e": (z + e) * SQRT_HALF, "src_mask": real}

    def decode(self, tgt_in: Tensor, memory: dict[str, Tensor]) -> tuple[Tensor, list[Tensor]]:
        """Teacher forcing over the whole target: logits (B, T, V) and per layer the attention
        weights (B, T, S)."""
        g = self._embed(tgt_in, make_positions(tgt_in, self.padding_idx), self.tgt_embed,
                        self.tgt_positions)
        h = self.dec_fc1(g)
        weights = []
        for i, conv in enumerate(self.dec_convs):
            o = conv(self._drop(h), conv.kernel_size - 1, 0)   # causal: k−1 zeros on the left
            h, a = self._decoder_layer(i, h, o, g, memory)
            weights.append(a)
        return self._output(h), weights

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """``src`` (B, S), ``tgt_in`` (B, T) starting with <bos> -> logits (B, T, V_tgt)."""
        return self.decode(tgt_in, self.encode(src))[0]

    def attention(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Attention weights of every decoder layer under teacher forcing, (L, B, T, S)."""
        return torch.stack(self.decode(tgt_in, self.encode(src))[1])

    def start(self, memory: dict[str, Tensor]) -> dict[str, Tensor]:
        """The decoder state before the first ``step``: the memory, ``pos`` (B,) the number of
        non-padding target tokens read so far (0), and per decoder layer ``buf<i>`` (B, k_i − 1,
        C_in) the last ``k_i − 1`` inputs of its convolution (zeros: the causal left padding)."""
        z = memory["z"]
        B = z.size(0)
        state = dict(memory)
        state["pos"] = torch.zeros(B, dtype=torch.long, device=z.device)
        for i, (c, k) in enumerate(zip(self.dec_in_channels, self.decoder_kernels)):
            state[f"buf{i}"] = z.new_zeros(B, k - 1, c)
        return state

    def step(self, tokens: Tensor, state: dict[str, Tensor]
             ) -> tuple[Tensor, dict[str, Tensor]]:
        """Read one target token per sentence, ``tokens`` (B,) -> logits (B, V) for the next one,
        and the new state (the input state is not modified). Equal to :meth:`forward` at every
        position of the prefix read so far, padding tokens included.

        Weight norm recomputes every weight on each call; a decoding loop can run inside
        ``torch.nn.utils.parametrize.cached()`` to compute them once (same numbers)."""
        real = tokens.ne(self.padding_idx).long()
        count = state["pos"] + real
        # the position make_positions would give: the running count, 0 on padding
        g = self._embed(tokens.unsqueeze(1), (count * real).unsqueeze(1), self.tgt_embed,
                        self.tgt_positions)                              # (B, 1, f)
        h = self.dec_fc1(g)
        new = dict(state)
        new["pos"] = count
        for i, conv in enumerate(self.dec_convs):
            window = torch.cat([state[f"buf{i}"], self._drop(h)], dim=1)  # (B, k, C_in)
            new[f"buf{i}"] = window[:, 1:]
            o = conv(window, 0, 0)                                      # (B, 1, C_out)
            h, _ = self._decoder_layer(i, h, o, g, state)
        return self._output(h).squeeze(1), new
