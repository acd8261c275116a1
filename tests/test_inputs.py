"""Every input a user brings (issue 25): a piece model restricted to its run's vocabulary (any
sentence a BPE run can segment translates, old runs included), the shared reader and unknown-
symbol policy, and ``treelm eval --data`` on data files of every task, equal to the scores of the
same data as a split (and, for translation at beam 5 and with a length penalty, to what a study's
``score.eval`` records: ``studies/multi30k.yaml``)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import sentencepiece as spm
from benchmark_scripts import load_benchmark

from treelm.cli import main
from treelm.errors import TreelmError
from treelm.rundir.files import RunFiles
from treelm.text import Vocab
from treelm.text.inputs import NoInputError, UnknownSymbols, require_text, stdin_lines
from treelm.text.spm import NORMAL, UNUSED, pieces, restrict, single_characters
from treelm.text.tokenizers import SentencePieceTokenizer
from treelm.text.vocab import UnknownSymbolError

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "parallel"

# ----------------------------------------------------------------------------- piece models


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def bpe(request) -> tuple[SentencePieceTokenizer, list[str]]:
    """A piece model (BPE, and unigram: its Viterbi search skips unused pieces) learned on the
    German side of the tiny sample, and that side's lines."""
    lines = (DATA / "train.de").read_text(encoding="utf-8").splitlines()
    return SentencePieceTokenizer.train(lines, request.param, 120), lines


def test_restriction_marks_exactly_the_pieces_outside_the_vocabulary(bpe):
    tok, lines = bpe
    model = tok.model_bytes()
    assert restrict(model, [p for p, _ in pieces(model)]) == model    # nothing to change
    used = {p for ln in lines for p in tok.encode_line(ln)}
    restricted = spm.SentencePieceProcessor(model_proto=restrict(model, used))
    raw = spm.SentencePieceProcessor(model_proto=model)
    listed = pieces(restrict(model, used))
    assert [p for p, _ in listed] == [raw.id_to_piece(i) for i in range(raw.get_piece_size())]
    for i, (p, kind) in enumerate(listed):
        # sentencepiece's own reading of the edited model: unused = outside and not one character
        want = not raw.is_control(i) and not raw.is_unknown(i) and p not in used and len(p) > 1
        assert restricted.is_unused(i) == want == (kind == UNUSED), p
    assert set(single_characters(model)) == {p for p, k in pieces(model)
                                             if k == NORMAL and len(p) == 1}


def test_restricted_segmenter_keeps_training_text_and_splits_unseen_pieces(bpe):
    tok, lines = bpe
    lines = lines[:10]           # a vocabulary of these lines' pieces leaves out some of the model
    before = [tok.encode_line(ln) for ln in lines]
    vocab = Vocab.build(before, extra=tok.alphabet())
    outside = [p for p, k in pieces(tok.model_bytes()) if k == NORMAL and p not in vocab]
    assert outside, "the piece model should hold pieces these lines never end with"
    text = " ".join(p.replace("\u2581", "") for p in outside)
    assert any(p not in vocab for p in tok.encode_line(text))          # the old failure
    tok.restrict(vocab.itos)
    assert [tok.encode_line(ln) for ln in lines] == before              # training text unchanged
    assert all(p in vocab for p in tok.encode_line(text))
    assert tok.decode_line(tok.encode_line(text)) == text
    assert tok.encode_line("Hund €")[-1] == "€"                        # unknown to the model


def test_vocab_build_appends_extra_symbols_once():
    v = Vocab.build([["b", "a", "b"]], extra=["c", "a", "c"])
    assert v.itos == ["<eos>", "<unk>", "b", "a", "c"]


def test_bpe_run_translates_pieces_never_seen_as_words(bpe_translation_run, capsys,
                                                        monkeypatch):
    """The acceptance case: a sentence made only of pieces that no training word is, read with
    --unk error (nothing may be unknown)."""
    files = RunFiles(bpe_translation_run)
    tok, vocab = files.read_tokenizer(), files.read_vocab()
    words = set((DATA / "train.de").read_text(encoding="utf-8").split())
    outside = [p for p, k in pieces(tok.model_bytes()) if k == NORMAL and p not in vocab]
    sentence = " ".join(w for p in outside if (w := p.replace("\u2581", "")) and w not in words)
    assert sentence and not set(sentence.split()) & words
    raw = spm.SentencePieceProcessor(model_proto=tok.model_bytes())
    assert any(p not in vocab for p in raw.encode(sentence, out_type=str))   # before the fix
    monkeypatch.setattr("sys.stdin", io.StringIO(sentence + "\nDer Hund schläft im Park.\n"))
    capsys.readouterr()
    assert main(["translate", str(bpe_translation_run), "--unk", "error", "--beam", "2"]) == 0
    cap = capsys.readouterr()
    assert len(cap.out.splitlines()) == 2 and cap.err == ""


def test_an_old_run_without_every_piece_loads_and_translates(tmp_path, capsys, monkeypatch):
    """A run whose vocabulary holds only the pieces of the segmented training text (runs before
    issue 25): its segmenter is restricted when it is opened, and a character the vocabulary
    lacks follows --unk."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(SentencePieceTokenizer, "alphabet", lambda self: [])
    run = tmp_path / "old"
    assert main(["train", "--config", "configs/tiny-translation-bpe.yaml", "--out", str(run),
                 "--quiet", "train.epochs=1"]) == 0
    monkeypatch.undo()
    monkeypatch.chdir(ROOT)
    files = RunFiles(run)
    vocab, model = files.read_vocab(), files.read_tokenizer().model_bytes()
    missing = [c for c in single_characters(model) if c not in vocab]
    outside = [p for p, k in pieces(model) if k == NORMAL and p not in vocab and len(p) > 1]
    assert outside
    sentence = " ".join(p.replace("\u2581", "") for p in outside)
    monkeypatch.setattr("sys.stdin", io.StringIO(sentence + "\n"))
    capsys.readouterr()
    assert main(["translate", str(run), "--beam", "1"]) == 0
    cap = capsys.readouterr()
    assert len(cap.out.splitlines()) == 1
    # only characters the old vocabulary lacks can be unknown, and they are counted in one line
    assert cap.err.count("\n") <= 1
    if cap.err:
        named = cap.err.split("<unk>: ", 1)[1].strip().split(", ")
        assert {n.strip("'") for n in named} <= set(missing)


# ----------------------------------------------------------------------------- shared input


def test_require_text_holds_blank_lines_until_text_comes():
    assert list(require_text(["", " ", "a", ""], "stdin")) == ["", " ", "a", ""]
    with pytest.raises(NoInputError, match="no input: stdin is empty"):
        list(require_text(["", "  "], "stdin"))


def test_file_lines_split_at_newlines_only(tmp_path):
    from treelm.text.inputs import file_lines, input_lines

    f = tmp_path / "in.txt"
    f.write_bytes("a\u2028b\r\n\x0cc\n\nd".encode())
    assert file_lines(str(f)) == ["a\u2028b", "\x0cc", "", "d"]
    f.write_text("\n \n")
    with pytest.raises(NoInputError, match=f"no input: {f} is empty"):
        input_lines(str(f))


def test_stdin_lines_name_the_bad_line():
    class Raw(io.StringIO):
        buffer = io.BytesIO(b"ok\nfine\n\xff bad\n")

    with pytest.raises(TreelmError, match=r"stdin:3: not UTF-8 text"):
        list(stdin_lines(Raw()))
    assert list(stdin_lines(io.StringIO("a\r\nb\n"))) == ["a", "b"]


def test_unknown_policy_counts_or_refuses():
    p = UnknownSymbols("map")
    p.check([], "x:1")
    p.check(["zz", "yy", "zz"], "x:2")
    assert p.total == 3 and p.note() == ("treelm: 3 symbol(s) outside the run's vocabulary read "
                                         "as <unk>: 'zz', 'yy'")
    with pytest.raises(UnknownSymbolError, match=r"^x:7: 'zz' not in the run's vocabulary"):
        UnknownSymbols("error").check(["zz"], "x:7")
    with pytest.raises(TreelmError, match="unknown token policy"):
        UnknownSymbols("drop")


# ----------------------------------------------------------------------------- eval --data


def _eval(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(["eval", *argv]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _same_scores(a: dict, b: dict) -> None:
    keys = {k for k, v in a.items() if isinstance(v, float)}
    assert keys and keys == {k for k, v in b.items() if isinstance(v, float)}
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}


def test_eval_data_language_model(lm_run, tmp_path, capsys):
    """The test split written to a file scores as the split does."""
    lines = [ln for ln in (ROOT / "tests/data/tiny.txt").read_text().splitlines() if ln.strip()]
    n = len(lines)
    test = lines[int(n * 0.8) + int(n * 0.1):]
    f = tmp_path / "test.txt"
    f.write_text("\n\n".join(test) + "\n")            # blank lines are skipped, as in training
    split = _eval(capsys, str(lm_run), "--split", "test")
    data = _eval(capsys, str(lm_run), "--data", str(f))
    _same_scores(split, data)
    vocab = RunFiles(lm_run).read_vocab()
    assert data["data"] == str(f)
    assert data["unk_tokens"] == sum(w not in vocab for ln in test for w in ln.split()) > 0
    f.write_text("the zyzzyvas said\n")
    assert _eval(capsys, str(lm_run), "--data", str(f))["unk_tokens"] == 1


def test_eval_data_tagging_directory_and_conll(tagging_run, tmp_path, capsys):
    split = _eval(capsys, str(tagging_run), "--split", "test")
    test = ROOT / "tests/data/slots/test"
    data = _eval(capsys, str(tagging_run), "--data", str(test))
    _same_scores(split, data)
    words = (test / "seq.in").read_text().splitlines()
    tags = (test / "seq.out").read_text().splitlines()
    conll = tmp_path / "test.conll"
    conll.write_text("".join("".join(f"{w} X {t}\n" for w, t in zip(ws.split(), ts.split()))
                             + "\n" for ws, ts in zip(words, tags)))
    c = _eval(capsys, str(tagging_run), "--data", str(conll))
    assert "intent_accuracy" not in c                   # CoNLL has no intents
    for k in ("f1", "precision", "recall", "loss"):
        assert c[k] == split[k]
    # another data set's labels: scored as gold the model cannot find, and counted
    conll.write_text("boston B-new.label\nflights O\n\n")
    assert _eval(capsys, str(tagging_run), "--data", str(conll))["unknown_labels"] == 1


def test_eval_data_logic_file_and_directory(logic_run, tmp_path, capsys):
    import yaml

    from treelm.data.logic import LogicData, generate_split, write_pairs

    cfg = yaml.safe_load((ROOT / "configs/tiny-logic.yaml").read_text())
    pairs = generate_split(LogicData.parse(cfg["data"]), "test")
    write_pairs(tmp_path / "test.tsv", pairs)
    split = _eval(capsys, str(logic_run), "--split", "test")
    _same_scores(split, _eval(capsys, str(logic_run), "--data", str(tmp_path / "test.tsv")))
    d = tmp_path / "bowman"                          # his layout: one file per operator count
    d.mkdir()
    for n in range(1, 6):
        write_pairs(d / f"test{n}", [p for p in pairs if p.ops == n])
    by_dir = _eval(capsys, str(logic_run), "--data", str(d))
    assert by_dir["accuracy"] == split["accuracy"] and by_dir["pairs"] == split["pairs"]


def _decode_speed():
    return load_benchmark("decode_speed")


def test_eval_data_translation_equals_the_split_and_the_benchmark(bpe_translation_run, tmp_path,
                                                                  capsys):
    import gzip

    run = str(bpe_translation_run)
    stem = str(DATA / "test_2016_flickr")
    for beam in ("1", "5"):
        split = _eval(capsys, run, "--split", "test", "--beam", beam)
        data = _eval(capsys, run, "--data", stem, "--beam", beam)
        _same_scores(split, data)
        assert data["beam"] == int(beam) and data["unk_tokens"] == 0
    # a study's beam-5 figure (treelm.study.score: load_run + the task's evaluation)
    from treelm.study.score import score_evals

    study = score_evals(Path(run), [{"split": "test", "beam": 5, "name": "b5"},
                                    {"data": stem, "beam": 5, "length_penalty": 1.0}])["eval"]
    for k in ("bleu", "chrf"):                  # (the verb prints 4 decimals)
        assert round(study["b5"][k], 4) == data[k]
    # and benchmarks/decode_speed.py times the same search, both ways
    speed = _decode_speed().measure(Path(run), 4, 2, [1, 5])
    assert speed["sentences"] == 4 and set(speed["sentences_per_s"]) == {
        f"beam{b}_{how}" for b in (1, 5) for how in ("incremental", "recompute")}
    # gzip-compressed sides, and a length penalty
    for lang in ("de", "en"):
        (tmp_path / f"t.{lang}.gz").write_bytes(
            gzip.compress((DATA / f"test_2016_flickr.{lang}").read_bytes()))
    gz = _eval(capsys, run, "--data", str(tmp_path / "t"), "--beam", "5")
    _same_scores(data, gz)
    alpha = _eval(capsys, run, "--data", stem, "--beam", "5", "--length-penalty", "1.0")
    assert alpha["length_penalty"] == 1.0 and alpha["sentences"] == 40
    assert round(study["test_2016_flickr"]["bleu"], 4) == alpha["bleu"]   # its length penalty


def test_a_real_pipe_is_read_as_bytes_and_checked_line_by_line(bpe_translation_run, treelm_cmd):
    """stdin as a process gets it (a byte pipe, not a Python text stream): translated line by
    line; a line that is not UTF-8 is one line on stderr naming it."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run([*treelm_cmd, "translate", str(bpe_translation_run), "--beam", "1"],
                        input="Der Hund läuft.\n\nDer Mann.\n".encode(), capture_output=True,
                        env=env, timeout=300)
    assert ok.returncode == 0 and ok.stdout.decode().count("\n") == 3, ok.stderr
    bad = subprocess.run([*treelm_cmd, "translate", str(bpe_translation_run), "--beam", "1"],
                         input=b"Der Hund.\n\xff\xfe\n", capture_output=True, env=env,
                         timeout=300)
    assert bad.returncode == 2
    assert bad.stderr.decode().strip().startswith("treelm: error: stdin:2: not UTF-8 text")
