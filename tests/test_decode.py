"""Decoding (sampling, greedy, beam search) and the ``generate`` / ``probe`` verbs."""

import io
import json
import math

import pytest
import torch

from treelm.api.model import TreelmModel
from treelm.cli import main
from treelm.config import apply_overrides, load_config
from treelm.decode import (
    LMStep,
    beam_search,
    greedy_decode,
    reorder_state,
    sample,
    top_k_filter,
    top_p_filter,
)
from treelm.generate.commands import SymbolWriter, next_symbol_table
from treelm.models.lm import RNNLM

V = 13


@pytest.fixture(scope="module")
def lm() -> RNNLM:
    torch.manual_seed(0)
    model = RNNLM(V, "lstm", sizes=[8, 24], tie_weights=False)
    with torch.no_grad():                     # sharper distributions than the default init
        model.head.weight.mul_(20)
    return model.eval()


def _primed(model, batch=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, V, (5, batch), generator=g)
    step = LMStep(model)
    logits, state = step.prime(prompt)
    return step, logits, state


# ----------------------------------------------------------------------------- equivalences
def test_temperature_zero_top_k_one_and_beam_one_equal_greedy(lm):
    step, logits, state = _primed(lm)
    ref = greedy_decode(step, logits, state, 15)
    assert ref.shape == (15, 3)
    g = torch.Generator().manual_seed(5)
    assert torch.equal(sample(step, logits, state, 15, temperature=0.0), ref)
    assert torch.equal(sample(step, logits, state, 15, temperature=1e-4, generator=g), ref)
    assert torch.equal(sample(step, logits, state, 15, temperature=1.0, top_k=1, generator=g), ref)
    assert torch.equal(sample(step, logits, state, 15, temperature=1.0, top_p=1e-6,
                              generator=g), ref)
    beams = beam_search(step, logits, state, beam_size=1, max_len=15)
    for b in range(3):
        assert beams[b][0].tokens == ref[:, b].tolist()


@torch.no_grad()
def test_sampling_is_seeded_and_state_carried(lm):
    step, logits, state = _primed(lm)
    a = sample(step, logits, state, 20, generator=torch.Generator().manual_seed(7))
    b = sample(step, logits, state, 20, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    # the state is carried: sampling step by step by hand gives the same symbols
    g = torch.Generator().manual_seed(7)
    toks, lg, st = [], logits, state
    for _ in range(20):
        t = torch.multinomial(lg.softmax(-1), 1, generator=g).squeeze(-1)
        toks.append(t)
        lg, st = step(t, st)
    assert torch.equal(torch.stack(toks), a)


@torch.no_grad()
def test_beam_logprob_is_the_sequence_logprob(lm):
    step, logits, state = _primed(lm, batch=2)
    hyps = beam_search(step, logits, state, beam_size=4, max_len=6)
    for b, hs in enumerate(hyps):
        assert len(hs) == 4 and all(x.score >= y.score for x, y in zip(hs, hs[1:]))
        for h in hs:        # rescore by running the sequence through the model
            lp, lg = 0.0, logits[b : b + 1]
            st = reorder_state(state, torch.tensor([b]))
            for t in h.tokens:
                lp += float(lg.log_softmax(-1)[0, t])
                lg, st = step(torch.tensor([t]), st)
            assert h.logprob == pytest.approx(lp, abs=1e-4)


# ----------------------------------------------------------------------------- hand-built model
EOS, A, B, C, D = range(5)
TABLE = torch.tensor([
    # eos   A     B     C     D         (next symbol probabilities given the previous one)
    [1.00, 0.00, 0.00, 0.00, 0.00],   # after eos (finished)
    [0.33, 0.00, 0.00, 0.34, 0.33],   # after A: nearly uniform
    [0.95, 0.00, 0.00, 0.05, 0.00],   # after B: almost surely the end
    [1.00, 0.00, 0.00, 0.00, 0.00],   # after C
    [1.00, 0.00, 0.00, 0.00, 0.00],   # after D
])
START = torch.tensor([0.0, 0.55, 0.45, 0.0, 0.0])


def table_step(tokens, state):
    """Deterministic step: the next-symbol distribution depends only on the previous symbol.
    The state is nested (a list holding a tuple and a dict) to exercise the reordering."""
    (prev,), counters = state
    assert torch.equal(prev, prev)  # a tensor, reordered with the beams
    logits = (TABLE[tokens] + 1e-12).log()
    return logits, [(tokens,), {"n": counters["n"] + 1}]


def _table_start(batch=1):
    logits = (START + 1e-12).log().expand(batch, -1).clone()
    state = [(torch.full((batch,), -1),), {"n": torch.zeros(batch)}]
    return logits, state


def test_beam_finds_the_most_probable_sequence_where_greedy_does_not():
    logits, state = _table_start(batch=2)
    g = greedy_decode(table_step, logits, state, 10, eos=EOS)
    assert g[:, 0].tolist() == [A, C, EOS]                   # p = 0.55 · 0.34 = 0.187
    hyps = beam_search(table_step, logits, state, beam_size=2, max_len=10, eos=EOS)
    for hs in hyps:
        best = hs[0]
        assert best.tokens == [B, EOS] and best.finished     # p = 0.45 · 0.95 = 0.4275
        assert best.logprob == pytest.approx(math.log(0.45 * 0.95), abs=1e-6)
        assert hs[1].tokens == [A, C, EOS]
        assert hs[1].logprob == pytest.approx(math.log(0.55 * 0.34), abs=1e-6)


def test_beam_min_len_and_length_penalty():
    logits, state = _table_start()
    best = beam_search(table_step, logits, state, beam_size=3, max_len=10, eos=EOS,
                       min_len=2)[0][0]
    assert best.tokens == [A, C, EOS]           # <eos> may not be one of the first 2 symbols
    hs = beam_search(table_step, logits, state, beam_size=3, max_len=10, eos=EOS, alpha=1.0)[0]
    for h in hs:
        assert h.score == pytest.approx(h.logprob / ((5 + len(h.tokens)) / 6))


# ----------------------------------------------------------------------------- filters
def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.15, 0.5, 0.05, 0.3]])       # sorted: 1 (.5), 3 (.3), 0 (.15), 2
    logits = probs.log()

    def kept(p):
        return set(torch.isfinite(top_p_filter(logits, p))[0].nonzero().flatten().tolist())

    assert kept(0.3) == {1}               # the top symbol alone reaches 0.3
    assert kept(0.5) == {1}               # ... and exactly 0.5
    assert kept(0.79) == {1, 3}           # 0.5 + 0.3 = 0.8 >= 0.79
    assert kept(0.81) == {0, 1, 3}        # 0.95
    assert kept(0.96) == {0, 1, 2, 3}
    assert kept(1.0) == {0, 1, 2, 3}
    z = top_p_filter(logits, 0.79)        # the kept logits are unchanged
    assert torch.equal(z[0, [1, 3]], logits[0, [1, 3]])


def test_top_k_filter():
    z = top_k_filter(torch.tensor([[0.1, 3.0, -1.0, 2.0]]), 2)
    assert torch.isfinite(z).tolist() == [[False, True, False, True]]


def test_reorder_state_nested_and_batch_dim():
    s = [(torch.arange(3).view(3, 1),), {"m": torch.arange(6).view(3, 2)}]
    out = reorder_state(s, torch.tensor([2, 2, 0]))
    assert out[0][0].flatten().tolist() == [2, 2, 0]
    t = reorder_state(torch.arange(6).view(2, 3), torch.tensor([1, 0]), batch_dim=1)
    assert t.tolist() == [[1, 0], [4, 3]]


def test_symbol_writer_streams_and_flushes():
    class Out(io.StringIO):
        flushes = 0

        def flush(self):
            Out.flushes += 1

    from treelm.text import make_tokenizer

    out = Out()
    w = SymbolWriter(make_tokenizer("word"), out)
    for s in ["a", "b", "<eos>", "a"]:
        w.write(s)
    w.end()
    assert out.getvalue() == "a b\na\n" and Out.flushes >= 4
    out = io.StringIO()
    w = SymbolWriter(make_tokenizer("char"), out)
    for s in ["x", " ", "x", "<eos>"]:
        w.write(s)
    w.end()
    assert out.getvalue() == "x x\n"


# ----------------------------------------------------------------------------- command line
def _train(root, tmp, overrides):
    from treelm.train.trainer import train

    cfg = apply_overrides(load_config(root / "configs/tiny-lm.yaml"), overrides)
    cfg["data"]["file"] = str(root / "tests/data/tiny.txt")
    train(cfg, tmp, quiet=True)
    return tmp


@pytest.fixture(scope="module")
def word_run(tmp_path_factory):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    return _train(root, tmp_path_factory.mktemp("word"), ["train.epochs=1", "train.threads=1"])


@pytest.fixture(scope="module")
def char_run(tmp_path_factory):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    return _train(root, tmp_path_factory.mktemp("char"), [
        "train.epochs=1", "train.threads=1", "data.tokenizer=char", "model.cell=lstm",
        "model.sizes=[12,32]", "model.tie_weights=false", "model.cell_options={}",
        "train.optimizer=adam", "train.lr=0.01", "train.bptt=40", "train.batch_size=16",
        "train.eval_batch_size=16", "train.test_batch_size=16"])


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_generate_word_model(word_run, capsys):
    rc, out, _ = _run(capsys, "generate", word_run, "--prompt", "the company", "--length", 12,
                      "--seed", 3)
    assert rc == 0 and out.startswith("the company")
    # 12 symbols: words, and <eos> shown as a newline (plus one final newline if not at <eos>)
    assert len(out.split()) - 2 + out.count("\n") in (12, 13)
    rc2, out2, _ = _run(capsys, "generate", word_run, "--prompt", "the company", "--length", 12,
                        "--seed", 3)
    assert out2 == out
    rc, out, err = _run(capsys, "generate", word_run, "--prompt", "the", "--length", 8,
                        "--beam", 3)
    assert rc == 0 and out.startswith("the") and "log-prob" in err


def test_generate_unknown_prompt_symbol(word_run, char_run, capsys):
    rc, out, err = _run(capsys, "generate", word_run, "--prompt", "the zyzzyvas", "--length", 3,
                        "--unk", "error")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "--prompt: 'zyzzyvas'" in err and "--unk map" in err
    rc, out, err = _run(capsys, "generate", word_run, "--prompt", "the zyzzyvas", "--length", 3)
    assert rc == 0 and out.startswith("the zyzzyvas")          # --unk map, the default
    assert err.strip() == ("treelm: 1 symbol(s) outside the run's vocabulary read as <unk>: "
                           "'zyzzyvas'")
    rc, _, err = _run(capsys, "generate", char_run, "--prompt", "caf\u00e9", "--length", 3,
                      "--unk", "error")
    assert rc == 2 and "'\u00e9'" in err
    rc, _, err = _run(capsys, "generate", word_run, "--beam", 2, "--top-k", 3)
    assert rc == 2 and "--beam" in err


def test_generate_char_model(char_run, capsys):
    rc, out, _ = _run(capsys, "generate", char_run, "--prompt", "the ", "--length", 60,
                      "--seed", 1, "--top-p", 0.9, "--temperature", 0.8)
    assert rc == 0 and out.startswith("the ")
    body = out[len("the "):]
    assert 60 <= len(body) <= 61 + 4 * body.count("<unk>")  # + the final newline
    rc, greedy_out, _ = _run(capsys, "generate", char_run, "--prompt", "the ", "--length", 30,
                             "--temperature", 0)
    rc, beam1_out, _ = _run(capsys, "generate", char_run, "--prompt", "the ", "--length", 30,
                            "--beam", 1)
    # beam 1 is greedy up to the first <eos> (where beam search stops)
    assert greedy_out.startswith(beam1_out.rstrip("\n"))


def test_probe(char_run, capsys):
    rc, out, _ = _run(capsys, "probe", char_run, "--prompt", "fixi", "--prompt", "the compan",
                      "--top-k", 3)
    lines = out.strip().splitlines()
    assert rc == 0 and lines[0].split() == ["prefix", "rank", "next", "prob"]
    assert len(lines) == 1 + 2 * 3 and '"fixi"' in lines[1] and '"the compan"' in lines[4]
    rc, out, _ = _run(capsys, "probe", char_run, "--prompt", "fixi", "--prompt", "the compan",
                      "--top-k", 3, "--format", "json")
    d = json.loads(out)
    assert [p["prefix"] for p in d["prefixes"]] == ["fixi", "the compan"]
    from treelm.run import load_run

    r = load_run(char_run)
    for p in d["prefixes"]:
        probs = [n["prob"] for n in p["next"]]
        assert probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-6
        ids = [r.vocab.eos, *r.vocab.encode(list(p["prefix"]))]
        with torch.no_grad():
            ref = r.model(torch.tensor(ids).unsqueeze(1)).logits[-1, 0].softmax(-1)
        top = r.vocab.stoi[p["next"][0]["symbol"]]
        assert int(ref.argmax()) == top and float(ref[top]) == pytest.approx(probs[0], abs=1e-5)
    assert next_symbol_table(TreelmModel(r), ["the"], 2)[0]["next"][0]["prob"] > 0
