"""treelm.nn.lookup.RowLookup: E[w] whose gradient is written into one kept buffer; against
F.embedding's own backward, to the last bit."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
import torch.nn.functional as F

from treelm.nn.dropout import DroppedEmbedding
from treelm.nn.lookup import RowLookup


def _grads(lookup, steps, tied: bool) -> list[torch.Tensor]:
    """∂ℓ/∂E after each of ``steps`` backward passes (E also used as a tied output matrix)."""
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(50, 8))
    out = []
    for tokens, up, h in steps:
        weight.grad = None
        rows = lookup(weight, tokens)
        loss = (rows * up).sum()
        if tied:            # the output layer's use, split as the adaptive softmax splits E
            head, tail = torch.split(weight, [20, 30])
            loss = loss + (h @ head.t()).pow(2).sum() + tail[:3].sum()
        loss.backward()
        out.append(weight.grad)
    return out


def test_row_lookup_gradient_is_f_embedding_s_to_the_bit() -> None:
    """Repeated tokens (summed in order), a tied second use, three backwards reusing the buffer:
    every gradient is F.embedding's bit for bit, and none is changed by a later backward."""
    g = torch.Generator().manual_seed(3)
    steps = []
    for _ in range(3):
        tokens = torch.randint(0, 50, (9, 4), generator=g)
        tokens[:, 0] = 7                                   # one row summed 9 times
        steps.append((tokens, torch.randn(9, 4, 8, generator=g), torch.randn(5, 8, generator=g)))
    for tied in (False, True):
        ref = _grads(lambda w, t: F.embedding(t, w), steps, tied)
        lookup = RowLookup()
        ours = _grads(lookup, steps, tied)
        kept = [x.clone() for x in ours]
        assert all(torch.equal(a, b) for a, b in zip(ref, ours))
        assert all(torch.equal(a, b) for a, b in zip(kept, ours))   # no grad aliases the buffer
        assert lookup.buffer is not None and all(x.data_ptr() != lookup.buffer.data_ptr()
                                                 for x in ours)


def test_buffer_is_kept_and_only_touched_rows_cleared() -> None:
    lookup = RowLookup()
    weight = torch.nn.Parameter(torch.randn(30, 4))
    lookup(weight, torch.tensor([[1, 2], [2, 3]])).sum().backward()
    first = lookup.buffer
    assert first is not None and first[[1, 3]].eq(1).all() and first[2].eq(2).all()
    lookup(weight, torch.tensor([[5]])).sum().backward()
    assert lookup.buffer is first                          # the same buffer, not a new one
    assert first[[1, 2, 3]].eq(0).all() and first[5].eq(1).all() and first.sum() == 4


def test_dropped_embedding_uses_it_and_no_grad_paths_do_not() -> None:
    emb = DroppedEmbedding(40, 6, dropoute=0.2)
    tokens = torch.randint(0, 40, (5, 3))
    emb(tokens).sum().backward()
    assert emb.rows.buffer is not None
    with torch.no_grad():
        emb.eval()
        torch.testing.assert_close(emb(tokens), F.embedding(tokens, emb.weight))


def test_tied_gradient_is_the_two_uses_sum_to_the_bit() -> None:
    """RowLookup.tied_rows / tied_pieces: E's two uses meeting in the backward. ∂ℓ/∂E equals
    autograd's sum of F.embedding's and the split's gradients bit for bit, repeated rows and an
    unread piece included; it is handed to .grad without a copy (the pieces' gradient, the rows
    added in place); and no later backward changes an earlier gradient."""
    g = torch.Generator().manual_seed(5)
    lookup = RowLookup()
    weight = torch.nn.Parameter(torch.randn(50, 8, generator=g))
    kept, refs = [], []
    for unread in (False, True):
        tokens = torch.randint(0, 50, (9, 4), generator=g)
        tokens[:, 1] = 3
        up, h = torch.randn(9, 4, 8, generator=g), torch.randn(5, 8, generator=g)

        def loss_of(rows, head, tail, up=up, h=h, unread=unread):
            loss = (rows * up).sum() + (h @ head.t()).pow(2).sum()
            return loss if unread else loss + (tail[:4] * 1.5).sum()

        weight.grad = None
        loss_of(F.embedding(tokens, weight), *torch.split(weight, [20, 30])).backward()
        refs.append(weight.grad)
        weight.grad = None
        rows, meet = lookup.tied_rows(weight, tokens)
        pieces = lookup.tied_pieces(weight, [20, 30], meet)
        made = []                       # the data pointers of the tensors torch.cat makes
        real_cat = torch.cat

        def cat(tensors, made=made, real_cat=real_cat):
            out = real_cat(tensors)
            made.append(out.data_ptr())
            return out

        with mock.patch.object(torch, "cat", cat):
            loss_of(rows, *pieces).backward()
        assert made == [weight.grad.data_ptr()]
        kept.append((weight.grad, weight.grad.clone()))
    for ref, (ours, copy) in zip(refs, kept):
        assert torch.equal(ref, ours) and torch.equal(ours, copy)


@pytest.mark.parametrize("output", [{"kind": "softmax"},
                                    {"kind": "adaptive", "cutoffs": [30], "div_value": 2}])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_tied_language_model_gradients_are_unchanged(output, precision) -> None:
    """A tied RNNLM's training loss hands E's two uses out together: every parameter's
    gradient is the one of the separate path (the model told it is untied) to the bit."""
    from treelm.models.lm import RNNLM

    grads = []
    for tied_path in (True, False):
        torch.manual_seed(0)
        model = RNNLM(80, cell="lstm", sizes=[16, 16], output=output, dropoute=0.1,
                      dropouti=0.2)
        model.tied = tied_path
        tokens = torch.randint(0, 80, (7, 3), generator=torch.Generator().manual_seed(1))
        targets = torch.randint(0, 80, (7, 3), generator=torch.Generator().manual_seed(2))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            nll = model(tokens, targets=targets).nll
        nll.backward()
        grads.append([p.grad for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_tied_uses_meet_in_either_order() -> None:
    """Were the rows' backward to run before the pieces', each use gives its own gradient and
    autograd adds them: the same gradient as F.embedding's and the split's."""
    weight = torch.nn.Parameter(torch.randn(12, 3))
    tokens = torch.tensor([[1, 4], [4, 11]])
    up = torch.randn(2, 2, 3)
    weight.grad = None
    (F.embedding(tokens, weight) * up).sum().add(torch.split(weight, [5, 7])[1].sum() * 2) \
        .backward()
    ref = weight.grad
    weight.grad = None
    lookup = RowLookup()
    rows, meet = lookup.tied_rows(weight, tokens)
    pieces = lookup.tied_pieces(weight, [5, 7], meet)
    (rows * up).sum().backward()                   # the rows' backward first
    assert meet is not None and meet.rows_first
    (pieces[1].sum() * 2).backward()
    assert not meet.rows_first and torch.equal(weight.grad, ref)


@pytest.mark.parametrize("use", ["alone", "untied", "tied"])
def test_two_lookups_in_one_backward(use: str) -> None:
    """One embedding looked up twice in one loss (a tree teacher's features beside the language
    model's loss), each lookup's backward at its own time: ∂ℓ/∂E is F.embedding's, whichever
    way the first use went (the buffer is not written over while autograd holds it)."""
    g = torch.Generator().manual_seed(7)
    weight = torch.nn.Parameter(torch.randn(20, 3, generator=g))
    t1, t2 = torch.tensor([[1, 2], [3, 3]]), torch.tensor([3, 4, 5, 1])
    u1, u2 = torch.randn(2, 2, 3, generator=g), torch.randn(4, 3, generator=g)
    h = torch.randn(2, 3, generator=g)

    def loss_of(rows1, rows2, pieces):
        loss = (rows1 * u1).sum() + (rows2 * u2).pow(2).sum()
        return loss if use == "alone" else loss + (h @ pieces[0].t()).sum() + pieces[1].sum()

    loss_of(F.embedding(t1, weight), F.embedding(t2, weight),
            torch.split(weight, [8, 12])).backward()
    ref, weight.grad = weight.grad, None
    lookup = RowLookup()
    for _ in range(2):                                  # the kept buffer reused, then again
        if use == "tied":
            rows1, meet = lookup.tied_rows(weight, t1)
            pieces = lookup.tied_pieces(weight, [8, 12], meet)
        else:
            rows1, pieces = lookup(weight, t1), torch.split(weight, [8, 12])
        loss_of(rows1, lookup(weight, t2), pieces).backward()
        torch.testing.assert_close(weight.grad, ref, rtol=1e-6, atol=1e-6)
        weight.grad = None
    assert not lookup.pending
