"""Tests for treelm.data.treebank: PTB reading, ON-LSTM/PRPN preprocessing and errors."""

import os

import pytest

from treelm.data.treebank import (
    WORD_TAGS,
    TreebankError,
    load_treebank,
    nltk_part,
    normalize_word,
    parse_bracketed,
    strip_function_tags,
)

# Two multi-line WSJ-style trees with the empty-label wrapper, then a tree with no word at
# all, then a one-word sentence. Covers punctuation, -NONE- traces, $, #, -LRB-, digits,
# function tags / indices and unary chains.
MRG = """\
( (S
    (NP-SBJ-1 (DT The) (NN company) )
    (VP (VBD paid)
      (NP ($ $) (CD 3.5) (CD million) (-NONE- *U*) )
      (PP-TMP (IN in)
        (NP (CD 1989) ))
      (S-ADV
        (NP-SBJ (-NONE- *-1) )
        (VP (VBG citing)
          (NP (-LRB- -LRB-) (NNS costs) (-RRB- -RRB-) ))))
    (. .) ))
( (S (NP-SBJ (PRP It) ) (VP (VBZ works) (NP (# #) (CD 12) )) (. !) ))
( (S (NP-SBJ (-NONE- *) ) (: --) (. .) ))
( (FRAG (INTJ (UH Hello) ) (. .) ))
"""

FIRST_TREE = [["the", "company"], ["paid", ["N.N", "million"], ["in", "N"], ["citing", "costs"]]]
FIRST_SPANS = [
    ("S", 0, 9),
    ("NP", 0, 2),
    ("VP", 2, 9),
    ("NP", 3, 5),
    ("PP", 5, 7),
    ("S", 7, 9),  # S-ADV -> VP unary chain: both labels kept
    ("VP", 7, 9),
]


@pytest.fixture
def mrg_file(tmp_path):
    path = tmp_path / "wsj_0001.mrg"
    path.write_text(MRG)
    return path


def test_preprocessing_of_handwritten_mrg(mrg_file):
    golds = load_treebank(mrg_file)
    assert len(golds) == 3  # the wordless third tree is dropped, not an error
    first, second, third = golds
    assert first.words == [
        "the", "company", "paid", "N.N", "million", "in", "N", "citing", "costs",
    ]
    assert first.tree == FIRST_TREE
    assert first.labeled_spans == FIRST_SPANS
    assert first.source == f"{mrg_file}:1"
    # '#', '.' dropped; (NP (# #) (CD 12)) becomes the single word N (unary collapse)
    assert second.words == ["it", "works", "N"]
    assert second.tree == ["it", ["works", "N"]]
    assert second.labeled_spans == [("S", 0, 3), ("VP", 1, 3)]
    assert second.source == f"{mrg_file}:12"
    assert third.words == ["hello"] and third.tree == "hello" and third.labeled_spans == []


def test_one_tree_per_line_file_gives_same_result(tmp_path, mrg_file):
    flat = tmp_path / "trees.txt"
    trees: list[list[str]] = []
    for line in MRG.splitlines():
        if line.startswith("( ("):
            trees.append([])
        trees[-1].append(line.strip())
    flat.write_text("\n".join(" ".join(t) for t in trees) + "\n")
    assert [g.tree for g in load_treebank(flat)] == [g.tree for g in load_treebank(mrg_file)]
    assert load_treebank(flat)[1].source == f"{flat}:2"


def test_max_len_applies_after_preprocessing(mrg_file):
    # the first tree has 14 tokens in the file but 9 kept words
    assert [len(g) for g in load_treebank(mrg_file, max_len=9)] == [9, 3, 1]
    assert [len(g) for g in load_treebank(mrg_file, max_len=3)] == [3, 1]


def test_directory_glob_and_list_sources(tmp_path, mrg_file):
    sub = tmp_path / "22"
    sub.mkdir()
    (sub / "wsj_2201.MRG").write_text("((S (NP (DT a) (NN dog)) (VP (VBZ barks))))\n")
    (tmp_path / "notes.txt").write_text("not a treebank file")
    from_dir = load_treebank(tmp_path)
    assert len(from_dir) == 4
    assert from_dir[0].words == ["a", "dog", "barks"]  # "22/..." sorts first
    assert len(load_treebank(str(tmp_path / "*.mrg"))) == 3
    assert len(load_treebank([mrg_file, sub / "wsj_2201.MRG"])) == 4


def test_nltk_source_reads_nltk_data_without_downloading(tmp_path, monkeypatch):
    combined = tmp_path / "corpora" / "treebank" / "combined"
    combined.mkdir(parents=True)
    (combined / "wsj_0001.mrg").write_text(MRG)
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    golds = load_treebank("nltk")
    assert golds[0].tree == FIRST_TREE
    assert golds[0].source == "nltk:treebank/wsj_0001.mrg:1"


def test_nltk_source_missing_is_a_treebank_error(tmp_path, monkeypatch):
    import nltk

    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(TreebankError, match="NLTK_DATA"):
        load_treebank("nltk")


def test_word_normalisation_and_labels():
    assert normalize_word("1980s") == "Ns"
    assert normalize_word("3.5") == "N.N"
    assert normalize_word("Vinken") == "vinken"
    assert strip_function_tags("NP-SBJ-1") == "NP"
    assert strip_function_tags("NP=2") == "NP"
    assert strip_function_tags("PP-LOC-CLR") == "PP"
    assert strip_function_tags("-NONE-") == "-NONE-"
    assert "-NONE-" not in WORD_TAGS and "PRP$" in WORD_TAGS and "$" not in WORD_TAGS


def test_parse_keeps_raw_structure():
    (root,) = parse_bracketed("( (S (NP-SBJ (NNP Mr.) (NNP Vinken))\n (. .)) )")
    assert root.label == "" and len(root.children) == 1
    s = root.children[0]
    assert s.label == "S" and s.children[0].children[0].children == ["Mr."]


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("( (S (NP (DT a) (NN b)) ))\n\n( (S (NP (DT a)\n (NN b)) )\n", 3, "unclosed"),
        ("( (S (DT a) ))\n( (S (DT a) )))\n", 2, "unexpected ')'"),
        ("( (S (DT a) ))\ngarbage here\n", 2, "outside brackets"),
        ("", 1, "no bracketed tree"),
        ("   \n\n", 1, "no bracketed tree"),
        ("( (S (NP) (DT a)) )\n", 1, "empty node"),
        ("( (S\n (NN dog cat)) )\n", 1, "after a word"),
        ("( (S (NN dog (DT a))) )\n", 1, "sub-tree after a word"),
        ("(())\n", 1, "empty node"),
    ],
)
def test_malformed_input_raises_with_file_and_line(tmp_path, text, line, reason):
    bad = tmp_path / "bad.mrg"
    bad.write_text(text)
    with pytest.raises(TreebankError) as info:
        load_treebank(bad)
    message = str(info.value)
    assert message.startswith(f"{bad}:{line}:"), message
    assert reason in message
    assert "\n" not in message
    assert isinstance(info.value, ValueError)


def test_missing_path_and_non_utf8(tmp_path):
    with pytest.raises(TreebankError, match="no such file"):
        load_treebank(tmp_path / "absent.mrg")
    with pytest.raises(TreebankError, match="no .mrg files"):
        load_treebank(tmp_path)
    bad = tmp_path / "latin1.mrg"
    bad.write_bytes(b"( (S (DT a)))\n( (S (NN caf\xe9)))\n")
    with pytest.raises(TreebankError, match=r"latin1\.mrg:2: not UTF-8"):
        load_treebank(bad)


def _sample(tmp_path, numbers) -> None:
    """An NLTK_DATA directory whose sample holds wsj_NNNN.mrg for ``numbers``, one sentence each
    (its words name the file)."""
    combined = tmp_path / "corpora" / "treebank" / "combined"
    combined.mkdir(parents=True)
    for n in numbers:
        (combined / f"wsj_{n:04d}.mrg").write_text(
            f"( (S (NP (NN file) ) (VP (VBZ is) (NP (CD {n}) (NN here) ))) )\n( (S (NP (NN "
            f"second) ) (VP (VBZ is) (NP (NN f{n}) ))) )\n")


def test_nltk_dev_and_test_split_by_file_disjoint_and_covering(tmp_path, monkeypatch):
    numbers = [1, 2, 50, 99, 100, 101, 150, 199]
    _sample(tmp_path, numbers)
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    whole, dev, test = (load_treebank(name) for name in ("nltk", "nltk-dev", "nltk-test"))
    files = {name: {g.source.split(":")[1].split("/")[1] for g in golds}
             for name, golds in (("nltk", whole), ("dev", dev), ("test", test))}
    assert files["dev"] == {f"wsj_{n:04d}.mrg" for n in numbers if n <= 99}
    assert files["test"] == {f"wsj_{n:04d}.mrg" for n in numbers if n >= 100}
    assert not files["dev"] & files["test"]                 # disjoint by file...
    assert files["dev"] | files["test"] == files["nltk"]    # ...and covering the sample
    sources = [g.source for g in whole]
    assert sorted(g.source for g in dev + test) == sorted(sources) and len(set(sources)) == 16
    assert [g.words for g in dev + test] == [g.words for g in whole]   # in file order
    assert nltk_part("wsj_0099.mrg") == "dev" and nltk_part("wsj_0100.mrg") == "test"
    with pytest.raises(TreebankError, match="wsj_NNNN"):
        nltk_part("notes.mrg")


def test_eval_parse_reads_the_parts(tmp_path, monkeypatch, capsys):
    import json

    from treelm.cli import main

    _sample(tmp_path, [7, 107, 108])
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    for name, n in (("nltk-dev", 2), ("nltk-test", 4), ("nltk", 6)):
        assert main(["eval-parse", "--baseline", "right", "--treebank", name, "--format",
                     "json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["treebank"] == name and report["n_sentences"] == n


def test_nltk_sample_read_from_its_archive_as_from_its_folder(tmp_path, monkeypatch):
    """``corpora/treebank.zip`` (as NLTK ships it) reads as the unpacked folder does, and
    finding the sample in NLTK_DATA imports no nltk (1-2 s of a training run's start)."""
    import subprocess
    import sys
    import zipfile

    folder, packed = tmp_path / "folder", tmp_path / "packed"
    _sample(folder, [3, 1, 120])
    (packed / "corpora").mkdir(parents=True)
    with zipfile.ZipFile(packed / "corpora" / "treebank.zip", "w") as z:
        for f in sorted((folder / "corpora" / "treebank" / "combined").iterdir()):
            z.write(f, f"treebank/combined/{f.name}")
        z.writestr("treebank/combined/README", "not a tree file")
    read = {}
    for where in (folder, packed):
        monkeypatch.setenv("NLTK_DATA", str(where))
        read[where] = [(g.source, g.words, g.tree) for g in load_treebank("nltk")]
    assert read[folder] == read[packed] and len(read[packed]) == 6
    assert read[packed][0][0] == "nltk:treebank/wsj_0001.mrg:1"      # in file order
    code = ("import sys; from treelm.data.treebank import load_treebank; "
            "assert len(load_treebank('nltk-dev')) == 4; print('nltk' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "NLTK_DATA": str(packed)}, check=True)
    assert out.stdout.strip() == "False"
