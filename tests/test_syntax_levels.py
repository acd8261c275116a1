"""treelm.syntax.levels: ON-LSTM master-gate levels read as in the official evaluation.

Reference: every sentence alone, from the zero state, as ``<eos> w_1 .. w_n <eos>`` through the
full model (``RNNLM.forward``), keeping positions 1..n of ``aux[layer]["df" / "di"]``.
"""

from pathlib import Path

import numpy as np
import pytest
import torch

from treelm.cli import main
from treelm.errors import TreelmError
from treelm.models.lm import RNNLM
from treelm.run import load_run
from treelm.syntax.levels import (
    NO_MASTER_GATES,
    NoMasterGatesError,
    compute_levels,
    default_layer,
    onlstm_layers,
    sentence_levels,
)
from treelm.syntax.trees import build_tree

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "tiny.txt"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("levels") / "run"
    assert main(["train", "--config", str(ROOT / "configs" / "tiny-lm.yaml"), "--out", str(run),
                 "--quiet", f"data.file={TINY}", "train.epochs=1"]) == 0
    return load_run(run)


def reference_levels(model, eos: int, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """One sentence, literally as test_phrase_grammar.py: <eos> w <eos>, keep [1:-1]."""
    model.eval()
    x = torch.tensor([eos, *ids, eos]).unsqueeze(1)
    with torch.no_grad():
        out = model(x)
    df = torch.stack([a["df"][1:-1, 0] for a in out.aux]).numpy()
    di = torch.stack([a["di"][1:-1, 0] for a in out.aux]).numpy()
    return df, di


def corpus_sentences(n: int = 60) -> list[list[str]]:
    lines = [line.split() for line in TINY.read_text().splitlines() if line.strip()]
    # lengths 1..15 in a shuffled order, so that batches mix lengths
    rng = np.random.default_rng(0)
    return [lines[i][: 1 + int(rng.integers(15))] for i in rng.permutation(len(lines))[:n]]


@pytest.mark.parametrize("batch_size", [1, 7, 256])
def test_batched_equals_one_by_one(tiny_run, batch_size):
    model, vocab = tiny_run.model, tiny_run.vocab
    sents = corpus_sentences()
    got = sentence_levels(model, vocab, sents, batch_size=batch_size)
    assert len(got) == len(sents)
    for words, lv in zip(sents, got):
        df, di = reference_levels(model, vocab.eos, vocab.encode(words))
        assert lv.tokens == words
        assert lv.df.shape == lv.di.shape == (2, len(words))   # wrappers dropped
        np.testing.assert_allclose(lv.df, df, rtol=0, atol=1e-6)
        np.testing.assert_allclose(lv.di, di, rtol=0, atol=1e-6)


def test_padding_and_batch_mates_do_not_matter():
    torch.manual_seed(0)
    model = RNNLM(50, "onlstm", [12, 20, 20, 12], cell_options={"chunk_size": 4})
    rng = np.random.default_rng(1)
    seqs = [rng.integers(2, 50, int(n)).tolist() for n in rng.integers(1, 12, 40)]
    alone = [compute_levels(model, [s], eos=0, batch_size=1)[0] for s in seqs]
    together = compute_levels(model, seqs, eos=0, batch_size=16)
    reversed_ = compute_levels(model, seqs[::-1], eos=0, batch_size=5)[::-1]
    for a, b, c in zip(alone, together, reversed_):
        assert a[0].shape == (3, len(b[0][0]))
        for x, y, z in zip(a, b, c):
            np.testing.assert_allclose(x, y, atol=1e-6, rtol=0)
            np.testing.assert_allclose(x, z, atol=1e-6, rtol=0)


def test_a_batch_shrinks_as_its_sentences_end(monkeypatch):
    """Passes of STEPS positions read only the columns up to the last sentence still unread (the
    batch is longest first), and the levels equal each sentence read alone."""
    from treelm.syntax import levels

    torch.manual_seed(0)
    model = RNNLM(50, "onlstm", [12, 20, 20, 12], cell_options={"chunk_size": 4})
    rng = np.random.default_rng(2)
    lengths = [23, 3, 17, 9, 9, 1, 12, 30]
    seqs = [rng.integers(2, 50, n).tolist() for n in lengths]
    alone = [compute_levels(model, [s], eos=0, batch_size=1)[0] for s in seqs]
    monkeypatch.setattr(levels, "STEPS", 40)               # 40 // 8 = 5 steps a pass
    widths = []
    hook = model.layer_cells()[0].register_forward_hook(
        lambda m, args, out: widths.append(tuple(args[0].shape[:2])))
    together = compute_levels(model, seqs, eos=0, batch_size=8)
    hook.remove()
    # the opening <eos>; then 30 steps in passes of 5, over the sentences (longest first:
    # 30 23 17 12 9 9 3 1) that still have a word at each pass's first step
    assert widths == [(1, 1), (5, 8), (5, 6), (5, 4), (5, 3), (5, 2), (5, 1)]
    for a, b in zip(alone, together):
        for x, y in zip(a, b):
            assert x.shape == y.shape
            np.testing.assert_allclose(x, y, atol=1e-6, rtol=0)


def test_empty_sentences_and_order():
    torch.manual_seed(0)
    model = RNNLM(30, "onlstm", [8, 8], cell_options={"chunk_size": 2})
    out = compute_levels(model, [[3, 4], [], [5]], eos=0)
    assert [o[0].shape for o in out] == [(1, 2), (1, 0), (1, 1)]
    assert compute_levels(model, [], eos=0) == []


def test_unknown_words_map_or_error(tiny_run):
    model, vocab = tiny_run.model, tiny_run.vocab
    words = ["the", "qqqzzz", "company"]
    lv = sentence_levels(model, vocab, [words])[0]
    assert lv.unknown == [1]
    assert lv.ids[1] == vocab.unk
    df, _ = reference_levels(model, vocab.eos, [vocab.stoi["the"], vocab.unk,
                                                vocab.stoi["company"]])
    np.testing.assert_allclose(lv.df, df, atol=1e-6)
    with pytest.raises(TreelmError, match="qqqzzz"):
        sentence_levels(model, vocab, [words], unk="error")


def test_tree_uses_forget_levels_of_the_layer(tiny_run):
    sents = corpus_sentences(5)
    for lv in sentence_levels(tiny_run.model, tiny_run.vocab, sents):
        for layer in (1, 2):
            assert lv.tree(layer) == build_tree(lv.df[layer - 1], lv.tokens)
            assert lv.tree(layer, "split") == build_tree(lv.df[layer - 1], lv.tokens, "split")
        with pytest.raises(TreelmError, match="layer 3"):
            lv.tree(3)


def test_mode_restored_and_no_grad(tiny_run):
    model = tiny_run.model
    model.train()
    try:
        lv = sentence_levels(model, tiny_run.vocab, [["the", "company"]])[0]
        assert model.training
        df, _ = reference_levels(model, tiny_run.vocab.eos, tiny_run.vocab.encode(lv.tokens))
        np.testing.assert_allclose(lv.df, df, atol=1e-6)    # dropout was off
    finally:
        model.eval()


def test_layers_and_default_layer():
    assert default_layer((1, 2, 3)) == 2
    assert default_layer((1,)) == 1
    assert default_layer((1, 2)) == 1
    model = RNNLM(20, "onlstm", [8, 8, 8, 8], cell_options={"chunk_size": 2})
    assert onlstm_layers(model) == (1, 2, 3)


def test_model_without_master_gates():
    model = RNNLM(20, "lstm", [8, 8, 8])
    with pytest.raises(NoMasterGatesError, match="no ON-LSTM layers"):
        compute_levels(model, [[1, 2]], eos=0)
    assert "master gates" in NO_MASTER_GATES
