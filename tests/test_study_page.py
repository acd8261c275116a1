"""``treelm study --page``: each committed study page is what its record renders, byte for byte;
the committed records name their runs from the checkout's root; the page of a tree study and of
a study scored by the task's own metrics, from hand-made records (every section, every picture
linked and drawn); the curves' reading (levelled off, rising, from where)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from treelm.cli import main
from treelm.errors import TreelmError
from treelm.study import curves as cv
from treelm.study import plots
from treelm.study.load import load_study
from treelm.study.page import page_text, render_page
from treelm.study.record import new_record, newest_record, read_record, write_record
from treelm.study.spec import describe

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
STUDIES = sorted(p for p in (ROOT / "studies").glob("*.yaml")
                 if "page:" in p.read_text(encoding="utf-8"))


def _committed(path: Path) -> tuple[Any, Path, Path] | None:
    study = load_study(path)
    record = newest_record(RESULTS, study.name)
    if study.page is None or record is None or not (ROOT / study.page).exists():
        return None
    return study, record, ROOT / study.page


@pytest.mark.parametrize("path", STUDIES, ids=[p.stem for p in STUDIES])
def test_committed_page_is_what_its_record_renders(path, monkeypatch):
    """Paths on the page are from the checkout's root, as ``treelm study`` is run there."""
    monkeypatch.chdir(ROOT)
    found = _committed(path)
    if found is None:
        pytest.skip(f"{path.name}: no committed page or record")
    study, record, page = found
    text = page_text(read_record(record), study, str(record.relative_to(ROOT)), page,
                     draw=False)
    assert text == page.read_text(encoding="utf-8"), \
        f"{page.relative_to(ROOT)} differs from its record: treelm study {path.name} --page"


def test_committed_study_records_name_their_runs_from_the_checkout_root():
    """A record naming ``/work/main/runs/...`` renders another page in a clone elsewhere (CI's
    checkout): a run inside the checkout is named from its root (one outside keeps its path)."""
    for path in sorted(RESULTS.glob("*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        if rec.get("script") != "study":
            continue
        for key, r in rec["runs"].items():
            m = r.get("migrated") or {}
            named = [r.get("run_dir"), m.get("adopted_from"),
                     (m.get("continued_from") or {}).get("run_dir")]
            for p in filter(None, named):
                assert not Path(p).is_relative_to(ROOT), f"{path.name}: {key} names {p}"


# ----------------------------------------------------------------------------- hand-made records
def _curve(top: float, ppl0: float) -> list[dict[str, Any]]:
    """Five validations: F1 of layer 2 rising to ``top`` and staying; perplexity falling."""
    out = []
    for i, t in enumerate((400, 800, 1200, 1600, 2000)):
        rise = min(1.0, (i + 1) / 3)
        out.append({"tokens": t, "minutes": 0.1 * (i + 1), "loss": 6.0 - 0.2 * i,
                    "ppl": ppl0 - 40 * i, "official/L1": 0.2, "official/L2": top * rise,
                    "split/L1": 0.25, "split/L2": 0.3 * rise})
    return out


def _scores(dev: list[float], test: list[float]) -> dict[str, Any]:
    def layers(xs: list[float]) -> dict[str, Any]:
        return {str(i + 1): {"sentence_f1": x, "corpus_f1": x - 0.05} for i, x in enumerate(xs)}
    return {rule: {"dev": layers(dev if rule == "official" else [0.25, 0.3]),
                   "test": layers(test if rule == "official" else [0.24, 0.29])}
            for rule in ("official", "split")}


def _run(variant: str, seed: int, dev: list[float], test: list[float],
         **extra: Any) -> dict[str, Any]:
    return {"variant": variant, "seed": seed, "run_dir": f"runs/tiny/{variant}-seed{seed}",
            "tokens": 2000, "minutes": 0.5, "epochs": 1, "precision": "fp32",
            "best_valid_loss": 5.2, "best_valid_ppl": 180.0 + seed, "curve": _curve(dev[1], 400),
            "trees": {"best": _scores(dev, test)},
            "sentences": {"the market fell": {rule: {"1": ["the", ["market", "fell"]],
                                                      "2": [["the", "market"], "fell"]}
                                              for rule in ("official", "split")}},
            "machine": {"cpu": "Test CPU", "cores": 2, "torch": "2.x"}, **extra}


def _study(tmp_path: Path, score: str, name: str = "tiny") -> Any:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""\
name: {name}
config: {ROOT / 'configs/tiny-lm.yaml'}
variants: {{paper: {{}}, symmetric: {{model.cell_options.master_input: symmetric}}}}
seeds: 2
budget: {{max_units: 2000, eval_every_units: 400}}
score: {score}
page: {tmp_path / 'docs' / 'tiny.md'}
record: {tmp_path / 'record.json'}
""", encoding="utf-8")
    return load_study(path)


def _baselines() -> dict[str, Any]:
    rnd = {"mean": 0.18, "std": 0.01, "runs": [0.17, 0.19]}
    part = {"n_sentences": 3, "n_words": 9, "baselines": {
        "right_branching": {"sentence_f1": 0.4, "corpus_f1": 0.35},
        "balanced": {"sentence_f1": 0.3, "corpus_f1": 0.25},
        "random": {"sentence_f1": rnd, "corpus_f1": rnd},
        "random_levels_official": {"sentence_f1": rnd, "corpus_f1": rnd}}}
    return {"dev": part, "test": part}


@pytest.fixture
def tree_study(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = _study(tmp_path, "{trees: {dev: nltk-dev, test: nltk-test, test_max_len: [null], "
                             "sentences: [the market fell]}}")
    rec = new_record(describe(study), "treelm study tiny.yaml", {"cpu": "Test CPU"})
    rec["baselines"] = _baselines()
    rec["gold"] = {"the market fell": {"tree": [["the", "market"], "fell"], "source": "x:1",
                                       "choice": "a sentence"}}
    rec["runs"] = {"paper/1": _run("paper", 1, [0.2, 0.5, 0.3], [0.2, 0.48, 0.3]),
                   "paper/2": _run("paper", 2, [0.2, 0.35, 0.45], [0.2, 0.38, 0.44]),
                   "symmetric/1": _run("symmetric", 1, [0.2, 0.3, 0.3], [0.2, 0.3, 0.3]),
                   "symmetric/2": _run("symmetric", 2, [0.2, 0.32, 0.3], [0.2, 0.31, 0.3],
                                       threads=1, migrated={"adopted_from": "runs/other/x"})}
    write_record(study.record, rec)
    return study


def test_page_of_a_tree_study(tree_study, tmp_path):
    """Every section from the record; the chosen configuration against right-branching, the
    seed below it with its own choice; the pictures drawn into the page's img/ and linked."""
    out = render_page(tree_study)
    page = Path(out)
    text = page.read_text(encoding="utf-8")
    for head in ("## The study", "## Reproduce", "## Machine and minutes", "## Result",
                 "## Per variant and rule", "## Each run's own choice",
                 "## Baselines on the same sentences", "## Curves", "## Runs",
                 "## Every run, every layer", "## Sentences"):
        assert f"\n{head}\n" in text, head
    assert "NLTK_DATA=../shared/data/nltk_data treelm study tiny.yaml" in text
    # dev: paper L2 mean 42.5 beats symmetric's 31.0; layer 2 chosen (42.5 > L3's 37.5)
    assert "Chosen on `nltk-dev`: **`paper`, official rule, layer 2**" in text
    assert "**43.0 ± 7.1** over 2 seeds (48.0, 38.0), against right-branching 40.0 (+3.0" in text
    assert ("Below it: seed 2 (38.0), whose own dev scores choose the official rule, layer 3 "
            "(45.0 on dev): 44.0 on `nltk-test`.") in text
    assert "`symmetric` 30.5 ± 0.7 (layer 2)" in text
    assert "| `paper` | official L2, official L3 |" in text
    assert "trained by another study in `runs/other/x`" in text
    assert "Gold tree (`x:1`: a sentence): `((the market) fell)`" in text
    for name in ("tiny-f1.png", "tiny-ppl.png", "tiny-sentence1.png", "tiny-sentence1-gold.png"):
        assert f"(img/{name})" in text and (page.parent / "img" / name).exists(), name
    # the text depends on the record alone
    assert page_text(read_record(tree_study.record), tree_study,
                     str(tree_study.record.relative_to(tmp_path)), page, draw=False) == text


def test_page_through_the_command_line(tree_study, tmp_path, capsys):
    assert main(["study", str(tree_study.file), "--page", "-o", str(tmp_path / "o.md")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "o.md")
    assert (tmp_path / "img" / "tiny-f1.png").exists()


def test_cjk_trees_linked_whatever_the_font(tree_study, tmp_path, monkeypatch, capsys):
    """A tree in Chinese is drawn only where a CJK font is; the page's text is the same."""
    rec = read_record(tree_study.record)
    for r in rec["runs"].values():
        r["sentences"] = {"爱真的需要勇气": {rule: {"1": ["愛", ["真的", "需要"]],
                                                   "2": [["愛", "真的"], "需要"]}
                                            for rule in ("official", "split")}}
    rec["gold"] = {}
    monkeypatch.setattr(plots, "cjk_font", lambda: None)
    page = tmp_path / "a" / "zh.md"
    text = page_text(rec, tree_study, "record.json", page)
    assert "no CJK font installed" in capsys.readouterr().err
    assert "(img/tiny-sentence1.png)" in text and not (page.parent / "img/tiny-sentence1.png"
                                                       ).exists()
    monkeypatch.setattr(plots, "cjk_font", lambda: "DejaVu Sans")
    assert page_text(rec, tree_study, "record.json", tmp_path / "b" / "zh.md") == text
    assert (tmp_path / "b" / "img" / "tiny-sentence1.png").exists()


def test_page_of_a_study_scored_by_the_task(tmp_path, monkeypatch):
    """No trees: the task's scores per variant (mean ± std, each seed's) and the validation
    curves of its scores."""
    monkeypatch.chdir(tmp_path)
    study = _study(tmp_path, "{eval: [{split: test}]}", name="plain")
    rec = new_record(describe(study), "", {})
    for v in ("paper", "symmetric"):
        for seed in (1, 2):
            r = _run(v, seed, [0.2, 0.3], [0.2, 0.3])
            del r["trees"], r["sentences"]
            r["eval"] = {"test": {"loss": 5.0 + seed / 10, "ppl": 150.0 + seed, "tokens": 99}}
            rec["runs"][f"{v}/{seed}"] = r
    write_record(study.record, rec)
    text = Path(render_page(study)).read_text(encoding="utf-8")
    assert "## The task's scores" in text and "## Result" not in text
    assert "NLTK_DATA" not in text
    assert "| `paper` | 2 | 5.2 | 181.5 ± 0.71 (181 182) | 5.15 ± 0.071 (5.1 5.2) |" in text
    assert "(img/plain-valid.png)" in text
    assert (tmp_path / "docs" / "img" / "plain-valid.png").exists()


def test_page_needs_a_record_and_a_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = _study(tmp_path, "{eval: [{split: test}]}")
    with pytest.raises(TreelmError, match="no record yet"):
        render_page(study)
    study.page = None
    with pytest.raises(TreelmError, match="no page"):
        render_page(study)


def test_curve_reading():
    flat = [(t, 0.5 + (0.2 if t < 5 else 0.001 * (t % 2))) for t in range(1, 21)]
    s = cv.summary(flat)
    assert s["trend"] == "levelled off" and s["level_from"] == 9
    assert s["best"] == (1, 0.7) and s["last"] == (20, 0.5)
    rising = [(t, 0.01 * t) for t in range(1, 21)]
    assert cv.summary(rising)["trend"] == "rising"
    assert cv.summary(rising)["level_from"] is None
    ppl = [(t, 100.0 - t) for t in range(1, 21)]
    assert cv.summary(ppl, higher=False)["best"] == (20, 80.0)
    # seeds with the same validations: point by point; with others: on one grid
    a, b = [{"tokens": 1, "x": 0.0}, {"tokens": 3, "x": 1.0}], [{"tokens": 2, "x": 1.0},
                                                                  {"tokens": 4, "x": 2.0}]
    assert cv.mean_series([a, b], "x") == [(1.5, 0.5), (3.5, 1.5)]
    assert cv.mean_series([a, [*b, {"tokens": 5, "x": 3.0}]], "x") == [(2.0, 0.75)]
