"""The Sinica Treebank (issue 39): the ICG reader, the preprocessing of a hand-checked clause, the
fixed split and the baselines on it, on a tiny Sinica-format sample written here (never
../shared). The Chinese language model and its input: tests/test_chinese_input.py."""

import json
from pathlib import Path

import pytest

from treelm.cli import main
from treelm.data.sinica import (
    BLOCK,
    CYCLE,
    PARTS,
    gold,
    is_punctuation,
    lm_lines,
    load_sinica,
    parse_icg,
    part_of,
    read_parsed,
)
from treelm.data.treebank import TreebankError
from treelm.errors import TreelmError
from treelm.syntax.report import load_golds

ROOT = Path(__file__).resolve().parents[1]

# Real lines of the sample's shape: the final mark after '#', a coordination under a POS-labelled
# phrase, the enumeration comma 、 inside a tree, a doubled role, a one-word clause, no final mark.
LINES = [
    "#3:3.[39029] S(theme:NP(Head:N(DUMMY1:Nba:嘉珍|Head:Caa:和|DUMMY2:Nhaa:我))|Head:VC1:住在|"
    "goal:NP(quantifier:DM:同一條|Head:Nab:巷子))#，(COMMACATEGORY)",
    "#8:8.[1211] NP(Head:DM:有一天)#，(COMMACATEGORY)",
    "#162:162.[39171] VP(Head:V_2:有|range:NP(DUMMY1:Nab:國王|Head:Caa:、|DUMMY2:Nab:商人))"
    "# ，(COMMACATEGORY)",
    "#670:670.[40437] NP(property:N‧的(head:Head:Nac:鵝掌形|Head:DE:的)|Head:Nab:葉子)#",
]


def test_reader_reads_icg_notation():
    node = parse_icg(LINES[0].split(" ", 1)[1].rsplit("#", 1)[0], "x:1")
    assert node.label == "S" and [c.label for c in node.children] == ["NP", "VC1", "NP"]
    coordination = node.children[0].children[0]
    assert coordination.label == "N" and [c.children for c in coordination.children] == [
        ["嘉珍"], ["和"], ["我"]]
    trees = read_parsed("\n".join(LINES) + "\n\n", "fixture")
    assert [t.line for t in trees] == [1, 2, 3, 4] and [t.index for t in trees] == [0, 1, 2, 3]
    assert [t.final for t in trees] == ["，(COMMACATEGORY)", "，(COMMACATEGORY)",
                                        "，(COMMACATEGORY)", ""]
    assert trees[0].ident == "#3:3.[39029]"
    # a doubled role (head:Head:Nac:鵝掌形) is one word under its POS
    assert trees[3].tree.children[0].children[0].children == ["鵝掌形"]


def test_preprocessing_of_a_hand_checked_clause():
    trees = read_parsed("\n".join(LINES), "fixture")
    g = gold(trees[0], "fixture")
    assert g is not None and g.source == "fixture:1"
    # 嘉珍 和 我 | 住在 | 同一條 巷子: the NP->N unary chain collapses, the final ， is gone
    assert g.words == ["嘉珍", "和", "我", "住在", "同一條", "巷子"]
    assert g.tree == [["嘉珍", "和", "我"], "住在", ["同一條", "巷子"]]
    assert g.labeled_spans == [("S", 0, 6), ("NP", 0, 3), ("N", 0, 3), ("NP", 4, 6)]
    # the enumeration comma 、 (tagged Caa) is punctuation: removed as the PTB's commas are
    g = gold(trees[2], "fixture")
    assert g is not None and g.words == ["有", "國王", "商人"]
    assert g.tree == ["有", ["國王", "商人"]]
    assert is_punctuation("Caa", "、") and is_punctuation("PERIODCATEGORY", "。")
    assert not is_punctuation("Caa", "和") and not is_punctuation("Neu", "１２")
    # the role goes, the category stays (…‧的 phrases are categories of their own)
    g = gold(trees[3], "fixture")
    assert g is not None and g.tree == [["鵝掌形", "的"], "葉子"]
    assert ("N‧的", 0, 2) in g.labeled_spans


@pytest.mark.parametrize("line,message", [
    ("S(theme:NP(Head:Nab:我)|Head:VC1:住在)#。", "malformed Sinica line"),        # no id
    ("#1 S(theme:NP(Head:Nab:我)|Head:VC1:住在)", "no '#'"),
    ("#1 S(theme:NP(Head:Nab:我)|Head:VC1:住在#。", "unclosed"),
    ("#1 S(theme:NP(Head:Nab:我))|Head:VC1:住在)#。", "text after the tree"),
    ("#1 S(theme:NP(Head:Nab:我)||Head:VC1:住在)#。", "empty child"),
    ("#1 S(theme:NP(Nab:我)|Head:VC1:住在)#。", "role:POS:word"),
    ("#1 S()#。", "empty child"),
    ("#1 Head:Nab:我#。", "phrase LABEL"),
    ("#1 S(Head:Nab:我 Head:Nab:你)#。", "role:POS:word"),
])
def test_malformed_input_names_file_and_line(line, message):
    with pytest.raises(TreebankError, match=rf"^fixture:2: .*{message}"):
        read_parsed(LINES[1] + "\n" + line + "\n", "fixture")


# ----------------------------------------------------------------------------- a whole sample
LEXICON = {"Nab": ["蘋果", "顏色", "勇氣", "巷子", "書"], "Nhaa": ["我", "你", "他們"],
           "VC2": ["需要", "看", "喜歡"], "Dbb": ["真的", "也"]}


def _clause(i: int) -> str:
    """Clause ``i`` of the synthetic sample: a few shapes over a small lexicon, Su Jianlin's two
    sentences among them (in the treebank's Traditional characters), a one-word clause now and
    then (dropped from evaluation, kept in the LM's text)."""
    n, h, v, d = (LEXICON[k][i % len(LEXICON[k])] for k in ("Nab", "Nhaa", "VC2", "Dbb"))
    shapes = [
        "S(theme:NP(property:N‧的(head:Nab:蘋果|Head:DE:的)|Head:Nab:顏色)|Head:V_11:是|"
        "range:NP(Head:Nep:什麼))#？(QUESTIONCATEGORY)",
        "S(theme:NP(Head:Nad:愛)|evaluation:Dbb:真的|Head:VC2:需要|goal:NP(Head:Nad:勇氣))"
        "#。(PERIODCATEGORY)",
        f"S(agent:NP(Head:Nhaa:{h})|evaluation:Dbb:{d}|Head:VC2:{v}|goal:NP(Head:Nab:{n}))"
        f"#，(COMMACATEGORY)",
        f"VP(Head:VC2:{v}|goal:NP(DUMMY1:Nab:{n}|Head:Caa:、|DUMMY2:Nab:書))#。(PERIODCATEGORY)",
        f"NP(Head:Nab:{n})#，(COMMACATEGORY)",
    ]
    return f"#{i + 1}:{i + 1}.[{i}] " + shapes[i % len(shapes)]


def write_sample(root: Path) -> Path:
    """``root`` made an NLTK_DATA directory holding a 1,000-clause sample (every part of the
    split: lines 701-750 LM validation, 751-800 LM test, 801-900 dev, 901-1000 test)."""
    folder = root / "corpora" / "sinica_treebank"
    folder.mkdir(parents=True)
    (folder / "parsed").write_text("\n".join(_clause(i) for i in range(1000)) + "\n",
                                   encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def nltk_data(tmp_path_factory) -> Path:
    return write_sample(tmp_path_factory.mktemp("nltk_data"))


def test_split_is_fixed_disjoint_and_keeps_lm_text_apart(nltk_data, monkeypatch):
    monkeypatch.setenv("NLTK_DATA", str(nltk_data))
    # the cycle: 14 blocks of LM training text, then LM valid, LM test, 2 of dev, 2 of test
    assert [part_of(b * BLOCK) for b in range(20)] == list(CYCLE)
    assert [part_of(i) for i in (0, 699, 700, 750, 800, 899, 900, 999, 1000)] == [
        "lm-train", "lm-train", "lm-valid", "lm-test", "dev", "dev", "test", "test", "lm-train"]
    assert sorted(set(CYCLE)) == sorted(PARTS)
    dev, test, whole = (load_golds(n) for n in ("sinica-dev", "sinica-test", "sinica"))
    lines = lambda golds: {int(g.source.rsplit(":", 1)[1]) for g in golds}  # noqa: E731
    assert lines(dev) and lines(test) and not lines(dev) & lines(test)
    assert lines(dev) == {n for n in lines(whole) if part_of(n - 1) == "dev"}
    assert lines(test) == {n for n in lines(whole) if 900 < n <= 1000}
    assert all(len(g.words) >= 2 for g in whole)              # one-word clauses are dropped
    assert len(whole) == 800 and len(dev) == 80 and len(test) == 80
    assert load_golds("sinica-test", max_len=3) == [g for g in test if len(g.words) <= 3]
    train, valid, lm_test = lm_lines()
    assert (len(train), len(valid), len(lm_test)) == (700, 50, 50)     # one-word clauses kept
    assert "蘋果 的 顏色 是 什麼" in train and not any("、" in ln for ln in train)
    assert load_sinica("sinica-dev") == dev


def test_missing_sample_is_a_one_line_error(tmp_path, monkeypatch):
    import nltk

    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(TreelmError, match="NLTK_DATA"):
        load_golds("sinica-dev")


def test_baselines_score_the_same_sentences(nltk_data, monkeypatch, capsys):
    monkeypatch.setenv("NLTK_DATA", str(nltk_data))
    assert main(["eval-parse", "--treebank", "sinica-test", "--baseline", "all",
                 "--format", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["n_sentences"] == 80 and rep["treebank"] == "sinica-test"
    assert {"left_branching", "right_branching", "balanced", "random",
            "random_levels_official"} <= set(rep["baselines"])
    assert main(["eval-parse", "--treebank", "sinica-dev", "--baseline", "right"]) == 0
    table = capsys.readouterr().out
    assert "sinica-dev, 80 sentences" in table and "NP" in table and "ADJP" not in table
