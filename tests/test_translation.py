"""Translation: parallel data and its checks, BPE tables saved and read back, token batches, the
label-smoothed loss against a hand computation, the RNN encoder-decoder (incremental decoding
equal to full recomputation, additive attention on a hand case), greedy = beam 1, and a tiny run
through train / translate / eval."""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from treelm.cli import main
from treelm.data.corpus import CorpusError
from treelm.data.parallel import (
    ParallelData,
    load_pairs,
    read_pairs,
    synthetic_pairs,
    token_batches,
)
from treelm.decode.beam import beam_search
from treelm.decode.seq2seq import RecomputeStep, Seq2SeqStep
from treelm.errors import ConfigError
from treelm.models.rnn_attn import Attention, RNNAttention
from treelm.rundir.files import RunFiles, read_metrics
from treelm.tasks import read_run_config
from treelm.tasks.translation import TranslationTask, smoothed_loss

ROOT = Path(__file__).resolve().parents[1]

# ----------------------------------------------------------------------------- data


def _write(d: Path, stem: str, src: list[str], tgt: list[str], gz: bool = False) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for lang, lines in (("de", src), ("en", tgt)):
        data = "".join(s + "\n" for s in lines).encode()
        if gz:
            (d / f"{stem}.{lang}.gz").write_bytes(gzip.compress(data))
        else:
            (d / f"{stem}.{lang}").write_bytes(data)


def _spec(d: Path, **kw) -> ParallelData:
    return ParallelData.parse({"dir": str(d), "src": "de", "tgt": "en", **kw})


def test_reads_plain_and_gzipped_splits(tmp_path):
    _write(tmp_path, "train", ["ein Hund", " eine Katze "], ["a dog", "a cat"], gz=True)
    p = read_pairs(_spec(tmp_path), "train")
    assert (p.src, p.tgt) == (["ein Hund", "eine Katze"], ["a dog", "a cat"])
    _write(tmp_path, "val", ["ja"], ["yes"])
    assert read_pairs(_spec(tmp_path), "valid").tgt == ["yes"]


@pytest.mark.parametrize("src, tgt, raw, message", [
    (["a", "b"], ["a"], None, "val.en: 1 lines, but"),
    (["a", ""], ["a", "b"], None, "val.de:2: empty line"),
    (["a"], ["a"], b"ok\n\xff bad\n", "val.en:2: not UTF-8"),
])
def test_bad_pairs_are_one_line_errors(tmp_path, src, tgt, raw, message):
    _write(tmp_path, "val", src, tgt)
    if raw is not None:
        (tmp_path / "val.en").write_bytes(raw)
    with pytest.raises(CorpusError, match=message):
        read_pairs(_spec(tmp_path), "valid")


def test_missing_file_and_empty_line_policy(tmp_path):
    with pytest.raises(CorpusError, match=r"test_2016_flickr\.de: no such file"):
        read_pairs(_spec(tmp_path), "test")
    _write(tmp_path, "val", ["a", "", "c"], ["x", "y", "z"])
    p = read_pairs(_spec(tmp_path, empty_lines="skip"), "valid")
    assert (p.src, p.tgt, p.skipped) == (["a", "c"], ["x", "z"], 1)


def test_data_section_is_checked():
    with pytest.raises(ConfigError, match="needs data.dir"):
        ParallelData.parse({})
    with pytest.raises(ConfigError, match="contradict"):
        ParallelData.parse({"dir": "x", "synthetic": "copy"})
    with pytest.raises(ConfigError, match="unknown data options"):
        ParallelData.parse({"synthetic": "copy", "language": "de"})
    with pytest.raises(ConfigError, match="data.synthetic = 'rot13'"):
        ParallelData.parse({"synthetic": "rot13"})


@pytest.mark.parametrize("kind", ["copy", "reverse", "sort"])
def test_synthetic_tasks(kind):
    spec = ParallelData.parse({"synthetic": kind, "synthetic_sizes": [50, 20, 20]})
    train, test = synthetic_pairs(spec, "train"), synthetic_pairs(spec, "test")
    assert len(train) == 50 and len(test) == 20
    for s, t in zip(train.src, train.tgt):
        w = s.split()
        assert 5 <= len(w) <= 20 and set(w) <= set("abcdefghijklmnopqrst")
        assert t.split() == {"copy": w, "reverse": w[::-1], "sort": sorted(w)}[kind]
    assert synthetic_pairs(spec, "train").src == train.src          # seeded
    assert not set(train.src) & set(test.src)                        # held out


def test_bpe_tables_are_saved_and_read_back(tmp_path):
    words = "ein zwei drei Hund Katze Haus Baum rot blau grün".split()
    rng = random.Random(0)
    src = [" ".join(rng.choice(words) for _ in range(6)) for _ in range(200)]
    _write(tmp_path / "d", "train", src, [s.upper() for s in src])
    _write(tmp_path / "d", "val", src[:5], [s.upper() for s in src[:5]])
    _write(tmp_path / "d", "test_2016_flickr", src[:5], [s.upper() for s in src[:5]])
    for joint in (True, False):
        cfg = {"task": "translation", "data": {"dir": str(tmp_path / "d"), "vocab_size": 60,
                                              "joint": joint}}
        task = TranslationTask.create(read_run_config(cfg), torch.device("cpu"))
        files = RunFiles(tmp_path / f"run{joint}")
        files.path.mkdir()
        task.save(files)
        again = TranslationTask.open(read_run_config(cfg), files, torch.device("cpu"))
        assert again.src_vocab.itos == task.src_vocab.itos
        assert again.tgt_vocab.itos == task.tgt_vocab.itos
        assert again.src_tok.kind == "bpe"
        assert again.encode_source(src[3]) == task.encode_source(src[3])
        assert again.tgt_tok.decode_line(again.tgt_tok.encode_line(src[3].upper())) == \
            src[3].upper()
        assert (task.src_vocab is task.tgt_vocab) == joint


# ----------------------------------------------------------------------------- batches


def test_token_batches_cover_every_pair_once_within_the_budget():
    rng = random.Random(0)
    src = [rng.randint(1, 30) for _ in range(500)]
    tgt = [rng.randint(1, 30) for _ in range(500)]
    for pool in (0, 64):
        batches = token_batches(src, tgt, 100, random.Random(1), pool)
        flat = sorted(i for b in batches for i in b)
        assert flat == list(range(500))
        assert all(len(b) * max(max(src[i], tgt[i]) for i in b) <= 100 for b in batches)
        assert batches == token_batches(src, tgt, 100, random.Random(1), pool)
    # a pair longer than the budget is a batch of its own, never dropped
    assert token_batches([5, 500], [5, 5], 100) == [[0], [1]]


def _synthetic_task(**options) -> TranslationTask:
    cfg = {"task": "translation", "seed": 3,
           "data": {"synthetic": "reverse", "synthetic_sizes": [300, 20, 20],
                    "synthetic_lengths": [3, 9]}}
    cfg["train"] = {"max_tokens": 200, **options}
    return TranslationTask.create(read_run_config(cfg), torch.device("cpu"))


def _rows(batches) -> list[tuple[int, ...]]:
    """The source rows of batches of (src, tgt_in, tgt_out), padding removed, sorted."""
    return sorted(tuple(x for x in r.tolist() if x != 0) for b in batches for r in b[0])


def test_an_epoch_covers_every_pair_once_and_resumes_where_it_stopped():
    task = _synthetic_task()
    first = [b.data for b in task.batches()]
    assert _rows(first) == sorted(tuple(s) for s, _ in task.encoded("train"))
    task.new_epoch()
    it = task.batches()
    head = [next(it).data for _ in range(3)]
    state = task.state_dict()
    rest = [b.data for b in it]
    assert _rows(head + rest) == _rows(first)
    assert any(not torch.equal(a[0], b[0]) for a, b in zip(head, first))   # a new order
    other = _synthetic_task()
    other.load_state_dict(state)
    again = [b.data for b in other.batches()]
    assert len(again) == len(rest)
    assert all(torch.equal(x, y) for a, b in zip(again, rest) for x, y in zip(a, b))
    done, total = other.progress()
    assert done == total == sum(len(t) for _, t in task.encoded("train"))


# ----------------------------------------------------------------------------- loss


def test_label_smoothed_loss_by_hand():
    logits = torch.tensor([[[1.0, 2.0, 0.5, -1.0], [0.0, 0.0, 3.0, 1.0],
                            [2.0, 1.0, 1.0, 1.0]]])                   # (1, 3, V=4)
    target = torch.tensor([[1, 2, 0]])                                 # last one is padding
    eps = 0.2
    loss, nll, n = smoothed_loss(logits, target, pad=0, eps=eps)
    want_loss, want_nll = 0.0, 0.0
    for t in range(2):
        z = logits[0, t].tolist()
        logp = [v - math.log(sum(math.exp(u) for u in z)) for v in z]
        y = target[0, t].item()
        want_nll += -logp[y] / 2
        want_loss += ((1 - eps) * -logp[y] + eps * -sum(logp) / 4) / 2
    assert n == 2
    assert nll.item() == pytest.approx(want_nll, rel=1e-6)
    assert loss.item() == pytest.approx(want_loss, rel=1e-6)
    # = torch's label smoothing (uniform over all V) where nothing is padding
    flat = logits[0, :2]
    torch_loss = F.cross_entropy(flat, target[0, :2], label_smoothing=eps)
    assert loss.item() == pytest.approx(torch_loss.item(), rel=1e-6)


# ----------------------------------------------------------------------------- model


def test_additive_attention_on_a_hand_case():
    """a_j = v·tanh(W_q h + W_k m_j + b), α = softmax over the real positions, c = Σ α_j m_j."""
    att = Attention("additive", query_size=1, memory_size=2, hidden=1).double()
    with torch.no_grad():
        att.query.weight.fill_(2.0)                           # W_q = [2]
        att.key.weight.copy_(torch.tensor([[1.0, -1.0]]))     # W_k = [1, -1]
        att.key.bias.fill_(0.5)
        att.v.weight.fill_(3.0)
    h = torch.tensor([[[0.25]]], dtype=torch.float64)                        # (1, 1, 1)
    m = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [4.0, 4.0]]], dtype=torch.float64)  # (1, 3, 2)
    mask = torch.tensor([[True, True, False]])
    context, alpha = att(h, att.keys(m), m, mask)
    a1 = 3 * math.tanh(2 * 0.25 + 1.0 + 0.5)                  # m_1: 1 - 0 + 0.5
    a2 = 3 * math.tanh(2 * 0.25 - 2.0 + 0.5)                  # m_2: 0 - 2 + 0.5
    w1 = math.exp(a1) / (math.exp(a1) + math.exp(a2))
    assert alpha[0, 0].tolist() == pytest.approx([w1, 1 - w1, 0.0], abs=1e-12)
    assert context[0, 0].tolist() == pytest.approx([w1 * 1.0, (1 - w1) * 2.0], abs=1e-12)


def _model(**kw) -> RNNAttention:
    torch.manual_seed(0)
    opts = {"src_vocab_size": 11, "tgt_vocab_size": 13, "padding_idx": 0, "cell": "lstm",
            "encoder_sizes": [6, 8], "decoder_sizes": [5, 7, 9], "dropout": 0.0, **kw}
    return RNNAttention(**opts).double().eval()


@pytest.mark.parametrize("kw", [
    {},                                                            # additive, input feed, bridge
    {"attention": "general", "input_feed": False, "cell": "gru"},
    {"attention": "dot", "bidirectional": False, "encoder_sizes": [6, 9], "bridge": False},
    {"cell": "onlstm", "cell_options": {"chunk_size": 4}, "encoder_sizes": [6, 8],
     "decoder_sizes": [5, 8]},
])
def test_incremental_decoding_equals_full_recomputation(kw):
    m = _model(**kw)
    g = torch.Generator().manual_seed(1)
    src = torch.randint(1, 11, (3, 7), generator=g)
    src[1, 5:] = 0                                                  # padding
    src[2, 3:] = 0
    tgt = torch.randint(1, 13, (3, 6), generator=g)
    full = m(src, tgt)                                              # (B, T, V)
    state = m.start(m.encode(src))
    steps = []
    for t in range(tgt.size(1)):
        logits, state = m.step(tgt[:, t], state)
        steps.append(logits)
    assert torch.allclose(torch.stack(steps, 1), full, atol=1e-6, rtol=0)
    # a sentence's scores do not depend on the padding of the others
    alone = m(src[2:, :3], tgt[2:])
    assert torch.allclose(alone, full[2:], atol=1e-6, rtol=0)
    att = m.attention(src, tgt).detach()
    assert att.shape == (1, 3, 6, 7)
    assert torch.allclose(att.sum(-1), torch.ones(1, 3, 6, dtype=torch.float64))
    assert float(att[0, 2, :, 3:].abs().max()) == 0.0


def test_beam_1_is_greedy_and_the_stateless_step_agrees():
    task = _synthetic_task(max_len_a=1.0, max_len_b=2)   # an untrained model runs to the limit
    torch.manual_seed(0)
    model = RNNAttention(**task.model_dims(), encoder_sizes=[8, 12], decoder_sizes=[8, 12],
                         dropout=0.0).eval()
    sents = task.split("valid").src[:6]
    greedy = task.translate(model, sents, beam=1, batch_size=4)      # greedy_decode, batched
    v = task.tgt_vocab
    step = Seq2SeqStep(model, v.bos, (v.pad, v.bos))
    for sent, g in zip(sents, greedy):
        src = torch.tensor([task.encode_source(sent)])
        limit = int(task.options.max_len_a * src.size(1) + task.options.max_len_b)
        hyp = beam_search(step, *step.prime(src), 1, limit, v.eos)[0][0]
        assert v.decode(hyp.tokens[:-1] if hyp.finished else hyp.tokens) == g.symbols
    slow = task.translate(model, sents, beam=3, batch_size=4, incremental=False)
    fast = task.translate(model, sents, beam=3, batch_size=4)
    assert [t.text for t in slow] == [t.text for t in fast]
    for a, b in zip(slow, fast):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
    src = torch.tensor([task.encode_source(sents[0])])
    la, _ = RecomputeStep(model, v.bos, (v.pad, v.bos)).prime(src)
    lb, _ = step.prime(src)
    assert torch.allclose(la, lb, atol=1e-5)
    assert la[0, v.pad] == la[0, v.bos] == float("-inf")


# ----------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def translation_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("translation") / "run"
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["train", "--config", "configs/tiny-translation.yaml", "--out", str(run),
                     "--quiet"]) == 0
    finally:
        os.chdir(here)
    return run


def test_tiny_run_learns_and_scores_bleu(translation_run, capsys):
    train = read_metrics(translation_run, "train")
    assert train[-1]["loss"] < train[0]["loss"] - 0.5
    valid = read_metrics(translation_run, "valid")
    assert all({"bleu", "chrf", "exact", "loss", "ppl"} <= set(m) for m in valid)
    capsys.readouterr()
    assert main(["eval", str(translation_run), "--split", "test"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert lines[1].startswith("chrF2|nrefs:1|")
    out = json.loads(lines[-1])
    assert out["sentences"] == 40 and "tok:13a" in out["bleu_signature"]
    assert 0 <= out["bleu"] <= 100 and out["ppl"] > 1


def test_translate_streams_one_line_per_input(translation_run, capsys, monkeypatch, tmp_path):
    src = load_pairs(ParallelData.parse({"synthetic": "reverse", "synthetic_sizes": [1, 1, 5],
                                         "synthetic_lengths": [3, 6], "synthetic_vocab": 8}),
                     "test").src
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(s + "\n" for s in src)))
    capsys.readouterr()
    assert main(["translate", str(translation_run), "--beam", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(src) and all(set(o.split()) <= set("abcdefgh") for o in out)
    f = tmp_path / "in.txt"
    f.write_text("a b c\n\nd e f g\n")
    png = tmp_path / "att.png"
    assert main(["translate", str(translation_run), "--input", str(f), "--beam", "1",
                 "-o", str(png)]) == 0
    out = capsys.readouterr().out.split("\n")
    assert len(out) == 4 and out[1] == "" and out[3] == ""
    assert png.stat().st_size > 1000


def test_unknown_source_symbols_are_refused_or_mapped(translation_run, capsys, tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("a b c\nd zz e\n")                   # "zz": not one of the run's 8 symbols
    capsys.readouterr()
    assert main(["translate", str(translation_run), "--input", str(f), "--beam", "1",
                 "--unk", "error"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{f}:2: 'zz' not in the run's source vocabulary" in err
    assert main(["translate", str(translation_run), "--input", str(f), "--beam", "1"]) == 0
    cap = capsys.readouterr()                                  # --unk map, the default
    assert len(cap.out.splitlines()) == 2
    assert cap.err.strip() == ("treelm: 1 symbol(s) outside the run's source vocabulary read "
                               "as <unk>: 'zz'")


def test_convs2s_trains_translates_and_plots_through_the_task(tmp_path, capsys, monkeypatch):
    """The second model family on the same task, loop and search: ``model.type=convs2s`` in the
    tiny config (the RNN's options removed), one epoch, then eval, beam translation and the
    attention plot (one panel per decoder layer)."""
    monkeypatch.chdir(ROOT)
    run = tmp_path / "conv"
    assert main(["train", "--config", "configs/tiny-translation.yaml", "--out", str(run),
                 "--quiet", "train.epochs=2", "model.type=convs2s", "model.cell=null",
                 "model.encoder_sizes=null", "model.decoder_sizes=null",
                 "model.bidirectional=null", "model.attention=null", "model.input_feed=null",
                 "model.bridge=null", "model.embed_dim=16",
                 "model.encoder_layers=[[16,3],[16,3]]", "model.decoder_layers=[[16,3],[16,3]]",
                 "model.decoder_out_embed_dim=16"]) == 0
    train = read_metrics(run, "train")
    assert train[-1]["loss"] < train[0]["loss"]
    capsys.readouterr()
    assert main(["eval", str(run), "--split", "test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["sentences"] == 40 and 0 <= out["bleu"] <= 100
    f = tmp_path / "in.txt"
    f.write_text("a b c d\n")
    png = tmp_path / "att.png"
    assert main(["translate", str(run), "--input", str(f), "--beam", "3",
                 "-o", str(png)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 and png.stat().st_size > 1000


# ----------------------------------------------------------------------------- epoch plan, keys
@pytest.mark.parametrize("world", [1, 2])
def test_epoch_plan_is_the_one_translation_always_drew(world):
    """The task's batches come from the shared epoch iterator now; each rank's plan must be the
    one the task drew itself before (token_batches under Random(seed · 1 000 003 + epoch), cut
    to a multiple of ``world`` batches, every world-th): same batches, same order, so a run
    continues bit for bit and old checkpoints ({"epoch", "pos"}) resume at the same batch."""
    for epoch in (0, 1):
        for rank in range(world):
            cfg = {"task": "translation", "seed": 3,
                   "data": {"synthetic": "reverse", "synthetic_sizes": [300, 20, 20],
                            "synthetic_lengths": [3, 9]},
                   "train": {"max_tokens": 200, "bucket_pool": 64}}
            task = TranslationTask.create(read_run_config(cfg), torch.device("cpu"), rank, world)
            task.load_state_dict({"epoch": epoch, "pos": 0})
            rows = task.encoded("train")
            old = token_batches([len(s) for s, _ in rows], [len(t) for _, t in rows], 200,
                                random.Random(3 * 1_000_003 + epoch), 64)
            old = old[: len(old) // world * world][rank::world]
            assert task.epochs.plan() == old


def test_saved_runs_with_train_alpha_still_load_and_new_configs_say_the_new_name(
        translation_run, tmp_path, capsys):
    import shutil

    import yaml

    from treelm.run import load_run

    old = tmp_path / "old-run"
    shutil.copytree(translation_run, old)
    cfg_file = old / "config.yaml"
    cfg = yaml.safe_load(cfg_file.read_text(encoding="utf-8"))
    cfg["train"]["alpha"] = 0.7                   # as a run saved before the rename holds it
    cfg["train"].pop("length_penalty", None)
    cfg_file.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    assert load_run(old).task.options.length_penalty == 0.7
    here = os.getcwd()
    os.chdir(ROOT)
    capsys.readouterr()
    try:
        code = main(["train", "--config", "configs/tiny-translation.yaml", "--out",
                     str(tmp_path / "new"), "train.alpha=0.5"])
    finally:
        os.chdir(here)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "train.alpha is train.length_penalty" in err[0], err
    assert not (tmp_path / "new").exists()
