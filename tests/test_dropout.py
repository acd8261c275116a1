"""The AWD-LSTM regularisers of :mod:`treelm.nn.dropout` against their definitions: embedding
dropout on the looked-up rows is AWD's masked matrix (same random draws, same numbers, same
gradient), locked dropout shares one mask over time, and weight drop drops single weights, on the
CPU by a hashed mask (:mod:`treelm.kernels.hash_dropout`) checked against its formula in numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from treelm.kernels.hash_dropout import hash_dropout
from treelm.kernels.onlstm_cxx import cxx_available
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


def _hash_mask_reference(n: int, p: float, seed: int) -> np.ndarray:
    """The hashed mask of ``csrc/hash_dropout.cpp`` from its formula, in numpy's uint32."""
    def mix(h: np.ndarray) -> np.ndarray:
        h = h ^ (h >> np.uint32(16))
        h = h * np.uint32(0x85EBCA6B)
        h = h ^ (h >> np.uint32(13))
        h = h * np.uint32(0xC2B2AE35)
        return h ^ (h >> np.uint32(16))

    bits = seed % 2 ** 64
    s0, s1 = np.uint32(bits & 0xFFFFFFFF), np.uint32(bits >> 32)
    i = np.arange(n, dtype=np.uint32)
    with np.errstate(over="ignore"):
        u = mix(mix(i * np.uint32(0x9E3779B9) ^ s0) ^ s1) >> np.uint32(8)
    return u >= np.uint32(math.ceil(p * 2 ** 24))


needs_cxx = pytest.mark.skipif(not cxx_available(), reason="C++ extension not built")


@needs_cxx
@pytest.mark.parametrize("seed", [0, 12345, -(2 ** 63), 2 ** 63 - 1])
def test_hash_dropout_is_its_formula(seed: int) -> None:
    x = torch.rand(37, 53, dtype=torch.float64) + 1.0
    out = hash_dropout(x, 0.3, seed)
    assert out is not None
    keep = torch.from_numpy(_hash_mask_reference(x.numel(), 0.3, seed)).view_as(x)
    assert torch.equal(out == 0, ~keep)
    assert torch.equal(out[keep], x[keep] * (1.0 / 0.7))


@needs_cxx
def test_hash_dropout_statistics_and_seeds() -> None:
    x = torch.ones(1680, 400)
    for p in (0.1, 0.5):
        kept = (hash_dropout(x, p, 7) != 0).float()
        sd = (p * (1 - p) / x.numel()) ** 0.5
        assert abs(1 - kept.mean().item() - p) < 5 * sd
        flat = kept.flatten()          # neighbours independent: both kept (1 − p)² of the time
        assert abs((flat[1:] * flat[:-1]).mean().item() - (1 - p) ** 2) < 0.005
        rows = 1 - kept.mean(1)        # no row or column pattern: binomial spread per row
        assert rows.std().item() < 1.5 * (p * (1 - p) / 400) ** 0.5
    assert not torch.equal(hash_dropout(x, 0.5, 1), hash_dropout(x, 0.5, 2))
    torch.manual_seed(9)
    a = hash_dropout(x, 0.5)
    torch.manual_seed(9)
    assert torch.equal(a, hash_dropout(x, 0.5))    # the seed comes from the CPU generator


@needs_cxx
def test_hash_dropout_gradient_and_threads() -> None:
    x = torch.randn(8, 9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: hash_dropout(t, 0.4, 11), (x,))
    threads = torch.get_num_threads()
    big = torch.randn(300, 700)
    try:
        torch.set_num_threads(1)
        one = hash_dropout(big, 0.2, 3)
        torch.set_num_threads(2)
        assert torch.equal(one, hash_dropout(big, 0.2, 3))
    finally:
        torch.set_num_threads(threads)


def test_hash_dropout_declines_what_it_does_not_run() -> None:
    assert hash_dropout(torch.ones(4, dtype=torch.bfloat16), 0.5, 1) is None
    # weight drop then draws its mask with torch.rand: bfloat16 weights are still dropped
    torch.manual_seed(0)
    out = weight_drop(torch.ones(200, 50, dtype=torch.bfloat16), 0.5, True)
    assert 0.4 < (out == 0).float().mean().item() < 0.6
