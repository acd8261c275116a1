"""Source-side trees of a translation encoder with ON-LSTM layers (treelm.syntax.source_levels).

Reference: every sentence alone, ``x_1 .. x_n <eos>`` from the zero state, through the encoder's
cells step by step by hand (the right-to-left stack on the reversed sentence), its master forget
gate cumax(logits) giving d_f = 1 - mean_k f~(k); then ``treelm parse`` / ``plot`` on tiny runs.
"""

from __future__ import annotations

import io
import json
import os
import random
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from treelm.cells.onlstm import onlstm_update
from treelm.cli import main
from treelm.errors import TreelmError
from treelm.models.convs2s import ConvS2S
from treelm.models.lm import RNNLM
from treelm.models.rnn_attn import RNNAttention
from treelm.run import Run, load_run
from treelm.syntax.levels import NoMasterGatesError
from treelm.syntax.parse import parse_lines
from treelm.syntax.source_levels import compute_source_levels, source_sentence_levels
from treelm.syntax.sources import level_source
from treelm.syntax.trees import build_tree, mirror_tree, read_bracket_tree, tree_leaves
from treelm.tasks import read_run_config
from treelm.tasks.translation import SPECIALS, TranslationTask
from treelm.text.vocab import Vocab

ROOT = Path(__file__).resolve().parents[1]
LETTERS = list("abcdefgh")
NO_GATES = ("treelm: error: this run's model has no ON-LSTM layers; tree induction needs master "
            "gates")


def _model(**kw) -> RNNAttention:
    torch.manual_seed(0)
    opts = {"src_vocab_size": 4 + len(LETTERS), "tgt_vocab_size": 9, "padding_idx": 0,
            "cell": "onlstm", "cell_options": {"chunk_size": 4}, "encoder_sizes": [6, 8, 12],
            "decoder_sizes": [5, 8], "dropout": 0.3, **kw}       # dropout: eval mode must hold
    return RNNAttention(**opts)


def _vocab() -> Vocab:
    return Vocab.build([LETTERS], SPECIALS)


def _sentences(n: int = 9) -> list[list[str]]:
    rng = random.Random(0)
    return [[rng.choice(LETTERS) for _ in range(rng.randint(1, 7))] for _ in range(n)] + [[]]


def by_hand(model: RNNAttention, ids: list[int], stack: int) -> tuple[np.ndarray, np.ndarray]:
    """(df, di) (layers, n) of one sentence of n ids: its n + 1 symbols (<eos> last) read by one
    encoder stack's cells, one step at a time, from zero states; <eos>'s column dropped."""
    with torch.no_grad():
        x = model.src_embed.weight[torch.tensor(ids)]                 # (n + 1, E), no dropout
        if stack == 1:
            x = x.flip(0)                                            # right to left
        dfs, dis = [], []
        for cell in model.encoder_cells()[stack]:
            L, H = cell.n_levels, cell.hidden_size
            h, c = torch.zeros(1, H), torch.zeros(1, H)
            outs, df, di = [], [], []
            for t in range(x.size(0)):
                gates = (x[t : t + 1] @ cell.weight_ih.T + cell.bias_ih
                         + h @ cell.weight_hh.T + cell.bias_hh)
                master_input = 1 - torch.cumsum(torch.softmax(gates[0, :L], -1), -1)
                master_forget = torch.cumsum(torch.softmax(gates[0, L : 2 * L], -1), -1)
                df.append(float(1 - master_forget.mean()))
                di.append(float(master_input.mean()))
                h, c, _, _ = onlstm_update(gates, c, L, "paper")
                outs.append(h)
            x = torch.cat(outs)
            dfs.append(df)
            dis.append(di)
    df, di = np.array(dfs), np.array(dis)
    if stack == 1:
        df, di = df[:, ::-1], di[:, ::-1]                            # back to source order
    return df[:, :-1], di[:, :-1]


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_levels_equal_the_cells_by_hand_and_batches_agree(direction):
    model, vocab = _model(), _vocab()
    model.train()
    sents = _sentences()
    got = source_sentence_levels(model, vocab, sents, batch_size=3, direction=direction)
    assert model.training                                            # mode restored
    one = source_sentence_levels(model, vocab, sents, batch_size=1, direction=direction)
    stack = 0 if direction == "forward" else 1
    for words, lv, lv1 in zip(sents, got, one):
        assert lv.tokens == words and lv.layers == (1, 2) and lv.direction == direction
        assert lv.df.shape == lv.di.shape == (2, len(words)) and lv.df.dtype == np.float32
        np.testing.assert_allclose(lv.df, lv1.df, atol=1e-6, rtol=0)
        np.testing.assert_allclose(lv.di, lv1.di, atol=1e-6, rtol=0)
        if words:
            df, di = by_hand(model, [*vocab.encode(words), vocab.eos], stack)
            np.testing.assert_allclose(lv.df, df, atol=1e-5, rtol=0)
            np.testing.assert_allclose(lv.di, di, atol=1e-5, rtol=0)
    # the features are the encoder's memory: forward half, then backward half, in source order
    model.eval()
    src = torch.tensor([[*vocab.encode(sents[0]), vocab.eos], [*vocab.encode(["a"]), vocab.eos,
                        *[vocab.pad] * (len(sents[0]) - 1)]])
    with torch.no_grad():
        memory = model.encode(src)["memory"]
        feats = model.encoder_features(src)
    assert torch.allclose(memory[0], torch.cat([f.out[:, 0] for f in feats], -1), atol=1e-6)
    assert torch.allclose(memory[1, :2], torch.cat([f.out[:2, 1] for f in feats], -1), atol=1e-6)


def test_backward_trees_are_built_on_the_reversed_sentence():
    model, vocab = _model(), _vocab()
    words = list("abcdefg")
    fwd, bwd = (source_sentence_levels(model, vocab, [words], direction=d)[0]
                for d in ("forward", "backward"))
    assert fwd.tree(2) == build_tree(fwd.df[1], words)
    tree = bwd.tree(1, "split")
    assert tree == mirror_tree(build_tree(bwd.df[0][::-1], words[::-1], "split"))
    assert tree_leaves(tree) == words
    assert mirror_tree([["a", "b"], ("c", ["d", "e"])]) == [[["e", "d"], "c"], ["b", "a"]]
    chain: object = "x"
    for _ in range(100_000):                                         # no recursion
        chain = [chain, "y"]
    assert tree_leaves(mirror_tree(chain))[:3] == ["y", "y", "y"]


def test_directions_and_models_without_master_gates():
    vocab = _vocab()
    with pytest.raises(TreelmError, match="needs a bidirectional encoder"):
        compute_source_levels(_model(bidirectional=False), [[4, 5]], vocab.eos, vocab.pad,
                              "backward")
    for model in (_model(cell="lstm", cell_options={}),
                  ConvS2S(12, 9, 0, embed_dim=4, encoder_layers=[[4, 3]],
                          decoder_layers=[[4, 3]], decoder_out_embed_dim=4)):
        run = types.SimpleNamespace(model=model, task=None)
        with pytest.raises(NoMasterGatesError, match="no ON-LSTM layers"):
            level_source(run)
    lm = types.SimpleNamespace(model=RNNLM(10, "onlstm", [4, 8], False,
                                           cell_options={"chunk_size": 4}))
    with pytest.raises(TreelmError, match="reads left to right only"):
        level_source(lm, "backward")


def test_bpe_pieces_are_the_leaves(tmp_path):
    """A BPE translation run: the source line is read by the run's piece model."""
    words = "ein zwei drei Hund Katze Haus Baum rot blau grün".split()
    rng = random.Random(0)
    src = [" ".join(rng.choice(words) for _ in range(6)) for _ in range(200)]
    d = tmp_path / "d"
    d.mkdir()
    for stem, lines in (("train", src), ("val", src[:5]), ("test_2016_flickr", src[:5])):
        (d / f"{stem}.de").write_text("".join(s + "\n" for s in lines))
        (d / f"{stem}.en").write_text("".join(s.upper() + "\n" for s in lines))
    cfg = {"task": "translation", "data": {"dir": str(d), "vocab_size": 60}}
    task = TranslationTask.create(read_run_config(cfg), torch.device("cpu"))
    model = _model(**task.model_dims())
    source = level_source(Run(tmp_path, cfg, task, model))
    assert source.layers == (1, 2) and source.tokenizer is task.src_tok
    text = "der rote Hund"
    pieces = task.src_tok.encode_line(text)
    assert len(pieces) > 3                                           # pieces, not words
    line, unknown = next(parse_lines(source, [text], [1], "brackets", "official"))
    assert tree_leaves(read_bracket_tree(line)) == pieces
    assert [pieces[i] for i in source.read([pieces], 1, "map")[0].unknown] == unknown


# ----------------------------------------------------------------------------- verbs


def _train(run: Path, *overrides: str) -> None:
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["train", "--config", "configs/tiny-translation.yaml", "--out", str(run),
                     "--quiet", "train.epochs=1", "data.synthetic_sizes=[100,10,10]",
                     "model.encoder_sizes=[8,8,8]", "model.decoder_sizes=[8,8]",
                     *overrides]) == 0
    finally:
        os.chdir(here)


@pytest.fixture(scope="module")
def onlstm_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("srctrees") / "onlstm"
    _train(run, "model.cell=onlstm", "model.cell_options={chunk_size: 4}")
    return run


def _out(capsys, *argv) -> list[str]:
    assert main([str(a) for a in argv]) == 0
    return capsys.readouterr().out.split("\n")[:-1]


def test_parse_prints_trees_over_the_source(onlstm_run, capsys, tmp_path):
    capsys.readouterr()
    out = _out(capsys, "parse", onlstm_run, "a b c d e f")
    assert len(out) == 1 and tree_leaves(read_bracket_tree(out[0])) == list("abcdef")
    f = tmp_path / "in.de"
    f.write_text("a b c\n\nh g f e d\n")
    for direction in ("forward", "backward"):
        out = _out(capsys, "parse", onlstm_run, "--input", f, "--layer", "all",
                   "--direction", direction)
        assert len(out) == 5 and out[2] == ""                      # an empty line stays empty
        for line, (k, words) in zip(out[:2] + out[3:], [(1, "abc"), (2, "abc"), (1, "hgfed"),
                                                         (2, "hgfed")]):
            head, tree = line.split("\t")
            assert head == f"layer {k}" and tree_leaves(read_bracket_tree(tree)) == list(words)
    out = _out(capsys, "parse", onlstm_run, "h g f e d", "--layer", "2", "--direction",
               "backward", "--format", "json")
    obj = json.loads(out[0])
    assert obj["tokens"] == list("hgfed") and obj["parses"][0]["layer"] == 2
    lv = level_source(load_run(onlstm_run), "backward").read([list("hgfed")], 1, "map")[0]
    assert lv.direction == "backward" and obj["parses"][0]["tree"] == lv.tree(2)
    np.testing.assert_allclose(obj["parses"][0]["df"], lv.df[1], atol=1e-6)
    png = tmp_path / "levels.png"
    assert _out(capsys, "plot", onlstm_run, "a b c d", "-o", png, "--direction",
                "backward") == [str(png)]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_lstm_encoder_has_no_master_gates(tmp_path, capsys, monkeypatch):
    run = tmp_path / "lstm"
    _train(run, "model.cell=lstm")
    capsys.readouterr()
    for argv in (["parse", run, "a b c"], ["plot", run, "a b", "-o", tmp_path / "x.png"]):
        assert main([str(a) for a in argv]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.strip().splitlines() == [NO_GATES]
    monkeypatch.setattr("sys.stdin", io.StringIO("a b\n"))
    assert main(["parse", str(run), "--direction", "backward"]) == 2
    assert capsys.readouterr().err.strip() == NO_GATES
