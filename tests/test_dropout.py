"""The AWD-LSTM regularisers of :mod:`treelm.nn.dropout` against their definitions: embedding
dropout on the looked-up rows is AWD's masked matrix (same random draws, same numbers, same
gradient), locked dropout shares one mask over time, and weight drop drops single weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from treelm.nn.dropout import DroppedEmbedding, embedding_dropout, locked_dropout, weight_drop


def _awd_embedding(weight: torch.Tensor, tokens: torch.Tensor, p: float) -> torch.Tensor:
    """AWD-LSTM's ``embedded_dropout``, written from its definition: the matrix with whole rows
    zeroed (the survivors scaled by 1/(1-p)), then looked up; the mask drawn as ours is."""
    keep = (torch.rand((weight.size(0), 1)) >= p).to(weight.dtype) / (1 - p)
    return F.embedding(tokens, weight * keep)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_dropout_is_the_masked_matrix_looked_up(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    w = torch.randn(50, 8, dtype=dtype)
    tokens = torch.randint(0, 50, (7, 5))
    w1, w2 = w.clone().requires_grad_(), w.clone().requires_grad_()
    g = torch.randn(7, 5, 8, dtype=dtype)
    torch.manual_seed(3)
    ours = embedding_dropout(w1, tokens, 0.4, True)
    torch.manual_seed(3)
    ref = _awd_embedding(w2, tokens, 0.4)
    assert torch.equal(ours, ref)                       # the same draws, the same products
    (ours * g).sum().backward()
    (ref * g).sum().backward()
    torch.testing.assert_close(w1.grad, w2.grad)        # summed in another order: close


def test_embedding_dropout_drops_a_word_everywhere() -> None:
    torch.manual_seed(1)
    w = torch.randn(20, 6) + 5.0                         # no zero entries of its own
    tokens = torch.randint(0, 20, (30, 4))
    out = embedding_dropout(w, tokens, 0.5, True)
    dropped = (out == 0).all(-1)
    for word in tokens.unique():
        at = tokens == word
        assert dropped[at].all() or not dropped[at].any()   # one fate per word type
    assert 0 < dropped.float().mean() < 1
    kept = ~dropped
    torch.testing.assert_close(out[kept], 2.0 * w[tokens][kept])
    assert torch.equal(embedding_dropout(w, tokens, 0.5, False), w[tokens])
    assert torch.equal(embedding_dropout(w, tokens, 0.0, True), w[tokens])


def test_dropped_embedding_lookup_uses_it() -> None:
    emb = DroppedEmbedding(30, 4, dropoute=0.3)
    tokens = torch.randint(0, 30, (9, 2))
    torch.manual_seed(5)
    ours = emb.lookup(tokens)
    torch.manual_seed(5)
    ref = _awd_embedding(emb.weight.detach(), tokens, 0.3)
    assert torch.equal(ours.detach(), ref)
    emb.eval()
    assert torch.equal(emb.lookup(tokens), emb.weight[tokens])


def test_locked_dropout_shares_one_mask_over_time() -> None:
    torch.manual_seed(2)
    x = torch.rand(12, 3, 10) + 1.0
    out = locked_dropout(x, 0.5, True)
    zero = out == 0
    assert torch.equal(zero, zero[:1].expand_as(zero))
    torch.testing.assert_close(out[~zero], 2.0 * x[~zero])
    assert locked_dropout(x, 0.5, False) is x


def test_weight_drop_drops_single_weights() -> None:
    torch.manual_seed(4)
    w = torch.rand(200, 50) + 1.0
    out = weight_drop(w, 0.25, True)
    zero = out == 0
    assert abs(zero.float().mean().item() - 0.25) < 0.02
    torch.testing.assert_close(out[~zero], w[~zero] / 0.75)
    assert weight_drop(w, 0.25, False) is w
