"""A study's record: every scored run, the baselines, and what dev chose, in one JSON file.

The driver is the record's only writer: it gathers each finished run's ``RUN/study.json`` and
keeps the entries of runs whose directories are gone (``runs/`` is not committed). The summary is
recomputed from the entries at every write, so it never disagrees with them:

    per variant and rule:  dev[k] = mean ± std over seeds of layer k's dev sentence F1;
                           the layer chosen = argmax_k dev[k] (ties: the lower layer), or the
                           last-but-one when the study does not let dev choose the layer;
                           test at that layer, mean ± std, and each seed's figure;
    per run:               its own (rule, layer) = argmax of its dev F1 (ties: official, then
                           the lower layer), and its test figure there;
    the study's choice:    the variant (and rule) whose chosen layer has the best dev mean,
                           where ``choose`` names them; test is only reported.

``schema: 1`` marks this layout; ``script: "study"`` tells it from other benchmark records. The
runs' kept trees (every reading as bits, megabytes for a study of ten runs) are not in it but
in an xz file beside it that it names (``kept_trees``: ``<study>-<date>.trees.json.xz``), so
that the record stays a small file to read; :func:`read_record` reads them back into the runs.
"""

from __future__ import annotations

import gzip
import json
import lzma
import statistics
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from treelm.rundir.files import atomic_write_bytes, atomic_write_text

SCHEMA = 1


def mean_std(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample standard deviation (0 for one value), count and the values."""
    vals = [float(v) for v in values]
    return {"mean": statistics.fmean(vals), "std": statistics.stdev(vals) if len(vals) > 1
            else 0.0, "n": len(vals), "runs": vals}


def default_layer(layers: Sequence[str]) -> str:
    """:func:`treelm.syntax.levels.default_layer` of the record's layer names."""
    from treelm.syntax.levels import default_layer as layer

    return str(layer(sorted(int(k) for k in layers)))


def _sf1(scores: dict[str, Any], rule: str, part: str, layer: str) -> float:
    return scores[rule][part][layer]["sentence_f1"]


def run_choice(scores: dict[str, Any], rules: Sequence[str]) -> dict[str, Any]:
    """One run's own choice on its dev scores, as a run makes it while it trains
    (:func:`treelm.syntax.tracking.choose`: the (rule, layer) of the highest sentence F1; ties
    to the official rule, then the lower layer); per rule, the best layer."""
    from treelm.syntax.tracking import by_rule, choose, score_key

    dev = {score_key(r, int(k)): v["sentence_f1"] for r in rules
           for k, v in scores[r]["dev"].items()}
    per_rule = {r: str(choose(mine)[1]) for r, mine in by_rule(dev).items()}
    rule, layer, _ = choose(dev)
    return {"rule": rule, "layer": str(layer), "per_rule": per_rule}


def _tree_summary(runs: list[dict[str, Any]], study: dict[str, Any],
                  checkpoint: str | None = None) -> dict[str, Any]:
    trees = study["score"]["trees"]
    rules, choose = trees["rules"], study["choose"]
    checkpoint = checkpoint or trees["checkpoints"][0]
    parts = sorted({p for r in runs for p in r["trees"][checkpoint][rules[0]]
                    if not p.startswith("oov_") and p != "dev"})
    variants: dict[str, Any] = {}
    for v in study["variants"]:
        mine = sorted((r for r in runs if r["variant"] == v), key=lambda r: r["seed"])
        if not mine:
            continue
        scores = [r["trees"][checkpoint] for r in mine]
        entry: dict[str, Any] = {"seeds": [r["seed"] for r in mine],
                                 "tokens": mean_std([r["tokens"] for r in mine]),
                                 "minutes": mean_std([r["minutes"] for r in mine]),
                                 "rules": {}}
        if all("best_valid_ppl" in r for r in mine):
            entry["valid_ppl"] = mean_std([r["best_valid_ppl"] for r in mine])
        for rule in rules:
            layers = sorted(scores[0][rule]["dev"], key=int)
            dev = {k: mean_std([_sf1(s, rule, "dev", k) for s in scores]) for k in layers}
            layer = (max(layers, key=lambda k: (dev[k]["mean"], -int(k))) if "layer" in choose
                     else default_layer(layers))
            own = [run_choice(s, [rule])["layer"] for s in scores]
            entry["rules"][rule] = {
                "layer": layer, "dev_by_layer": dev, "dev": dev[layer],
                **{p: mean_std([_sf1(s, rule, p, layer) for s in scores]) for p in parts},
                "per_run": {"layers": own, "dev": mean_std(
                    [_sf1(s, rule, "dev", k) for s, k in zip(scores, own)]),
                    **{p: mean_std([_sf1(s, rule, p, k) for s, k in zip(scores, own)])
                       for p in parts}}}
        both = [run_choice(s, rules) for s in scores]
        entry["per_run_choice"] = {
            "choices": [{"rule": c["rule"], "layer": c["layer"]} for c in both],
            "dev": mean_std([_sf1(s, c["rule"], "dev", c["layer"]) for s, c in zip(scores, both)]),
            **{p: mean_std([_sf1(s, c["rule"], p, c["layer"]) for s, c in zip(scores, both)])
               for p in parts}}
        variants[v] = entry
    summary: dict[str, Any] = {"checkpoint": checkpoint, "parts": parts, "variants": variants}
    if variants:
        cands = [(v, rule) for v in variants for rule in
                 (rules if "rule" in choose else rules[:1])]
        if "variant" not in choose:
            first = next(iter(variants))
            cands = [(v, r) for v, r in cands if v == first]
        v, rule = max(cands, key=lambda c: variants[c[0]]["rules"][c[1]]["dev"]["mean"])
        summary["chosen"] = {"variant": v, "rule": rule,
                             "layer": variants[v]["rules"][rule]["layer"],
                             "dev": variants[v]["rules"][rule]["dev"]["mean"],
                             **{p: variants[v]["rules"][rule][p]["mean"] for p in parts}}
    return summary


def _eval_summary(runs: list[dict[str, Any]], study: dict[str, Any]) -> dict[str, Any]:
    variants: dict[str, Any] = {}
    for v in study["variants"]:
        mine = sorted((r for r in runs if r["variant"] == v), key=lambda r: r["seed"])
        if not mine:
            continue
        entry: dict[str, Any] = {"seeds": [r["seed"] for r in mine],
                                 "minutes": mean_std([r["minutes"] for r in mine])}
        valid = {k: mean_std([r[k] for r in mine]) for k in mine[0]
                 if k.startswith("best_valid_") and all(k in r for r in mine)}
        entry["valid"] = {k.removeprefix("best_valid_"): x for k, x in valid.items()}
        for name in mine[0].get("eval", {}):
            entry.setdefault("eval", {})[name] = {
                k: mean_std([r["eval"][name][k] for r in mine]) for k in mine[0]["eval"][name]
                if all(isinstance(r["eval"][name].get(k), int | float) for r in mine)}
        variants[v] = entry
    summary: dict[str, Any] = {"variants": variants}
    if variants and "variant" in study["choose"]:
        from treelm.study.spec import LOWER_IS_BETTER

        metric = study["score"].get("choose_on") or "loss"     # (score.choose_on)
        if all(metric in e["valid"] for e in variants.values()):
            sign = -1 if metric in LOWER_IS_BETTER else 1
            best = max(variants, key=lambda v: sign * variants[v]["valid"][metric]["mean"])
            summary["chosen"] = {"variant": best, "on": f"valid {metric}"}
    return summary


def summarize(record: dict[str, Any]) -> dict[str, Any]:
    """The summary of ``record``'s runs (see the module's docstring)."""
    runs = list(record["runs"].values())
    study = record["study"]
    out: dict[str, Any] = {"runs_done": len(runs),
                           "runs_planned": len(study["variants"]) * len(study["seeds"])}
    if study["score"].get("trees") and runs:
        out["trees"] = _tree_summary(runs, study)
        others = study["score"]["trees"].get("checkpoints", ["best"])[1:]
        if others:      # the same summary of each other checkpoint scored (e.g. best-trees)
            out["trees_by_checkpoint"] = {c: _tree_summary(runs, study, c) for c in others}
    if runs:
        out["scores"] = _eval_summary(runs, study)
    return out


def new_record(study_desc: dict[str, Any], command: str, machine: dict[str, Any]
               ) -> dict[str, Any]:
    return {"script": "study", "schema": SCHEMA, "date": date.today().strftime("%Y%m%d"),
            "command": command, "machine": machine, "study": study_desc, "baselines": {},
            "runs": {}, "summary": {}}


def kept_trees_path(path: Path) -> Path:
    """The file of a record's kept trees, beside it: ``<study>-<date>.trees.json.xz``."""
    return path.with_name(f"{path.stem}.trees.json.xz")


def read_record(path: Path) -> dict[str, Any]:
    """The record at ``path`` with its runs' kept trees (``readings``) read back into them from
    the file it names (``kept_trees``, a detail of the files that :func:`write_record` sets
    again, dropped here); a record written before that file existed keeps them inline."""
    from treelm.errors import TreelmError

    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise TreelmError(f"{path}: cannot read the study's record ({e})") from None
    if rec.get("script") != "study" or rec.get("schema") != SCHEMA:
        raise TreelmError(f"{path}: not a study record of schema {SCHEMA}")
    if rec.get("kept_trees"):
        kept = path.with_name(rec.pop("kept_trees"))
        try:
            unpack = gzip.decompress if kept.suffix == ".gz" else lzma.decompress
            runs = json.loads(unpack(kept.read_bytes()))["runs"]
        except (OSError, EOFError, ValueError, KeyError, lzma.LZMAError) as e:
            raise TreelmError(f"{kept}: cannot read the study's kept trees ({e})") from None
        for key, readings in runs.items():
            if key in rec["runs"]:
                rec["runs"][key]["readings"] = readings
    return rec


def record_contents(record: dict[str, Any], name: str) -> tuple[str, bytes | None]:
    """What :func:`write_record` writes for ``record`` (its summary recomputed and its runs
    sorted, in place) under the file name ``name``: the small JSON's text and the kept trees'
    JSON before compression (None where no run keeps readings)."""
    record["summary"] = summarize(record)
    record["runs"] = dict(sorted(record["runs"].items(),
                                 key=lambda kv: (kv[1]["seed"], kv[1]["variant"])))
    kept = {k: r["readings"] for k, r in record["runs"].items() if r.get("readings")}
    small = {**record, "runs": {k: {f: v for f, v in r.items() if f != "readings"}
                                for k, r in record["runs"].items()}}
    small.pop("kept_trees", None)
    if kept:
        small["kept_trees"] = kept_trees_path(Path(name)).name
    text = json.dumps(small, indent=1, ensure_ascii=False) + "\n"
    return text, json.dumps({"runs": kept}, separators=(",", ":")).encode() if kept else None


def write_record(path: Path, record: dict[str, Any]) -> None:
    """The record with its summary recomputed, written atomically: a small readable JSON file,
    its runs' kept trees (``readings``, megabytes of bits) in a compressed file beside it
    (:func:`kept_trees_path`, written deterministically: the same trees, the same bytes) that
    it names (``kept_trees``). ``record`` keeps its readings."""
    text, kept = record_contents(record, path.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kept is not None:
        trees = kept_trees_path(path)
        # xz, not gzip: the readings of one run repeat each other at long range, which xz's
        # window finds (a 2 x 5-seed record's trees: 1.6 MB against gzip's 3.5 MB)
        data = lzma.compress(kept, preset=9 | lzma.PRESET_EXTREME)
        if not trees.exists() or trees.read_bytes() != data:
            atomic_write_bytes(trees, data)
    atomic_write_text(path, text)


def newest_record(results: Path, name: str) -> Path | None:
    """The newest committed record of study ``name`` under ``results`` (by its date)."""
    found = []
    for p in results.glob(f"{name}-*.json"):
        stem = p.stem.removeprefix(f"{name}-")
        if stem.isdigit() and len(stem) == 8:
            found.append((stem, p))
    return max(found)[1] if found else None


#: What makes two versions of a study train or score other runs.
TRAINED = ("config", "variants", "seeds", "budget", "overrides", "score")


def _trained(desc: dict[str, Any]) -> dict[str, Any]:
    """What of a study's description decides its runs and scores: its keys of ``TRAINED``, the
    seeds aside (more seeds extend a study) and each eval entry without its default fields (a
    field added to ``score.eval`` later changes nothing that was scored)."""
    import dataclasses

    from treelm.study.spec import Eval

    defaults = {f.name: f.default for f in dataclasses.fields(Eval)}
    out = {k: desc.get(k) for k in TRAINED}
    out["seeds"] = None
    score = dict(out.get("score") or {})
    if score.get("trees"):              # ensembles are made of the runs' trees: no run changes
        score["trees"] = {k: v for k, v in score["trees"].items() if k != "ensemble"}
    score["eval"] = [{k: v for k, v in e.items() if defaults.get(k, object()) != v}
                     for e in score.get("eval") or []]
    out["score"] = score
    return out


def other_version(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """None where the study described by ``new`` trains and scores the runs that the one
    described by ``old`` (a record's ``study``) did, so that its record may be extended; else
    the first key of ``TRAINED`` that differs (``definition`` where none differs as written)."""
    if _trained(old) == _trained(new):
        return None
    return next((k for k in TRAINED if k != "seeds" and old.get(k) != new.get(k)), "definition")


def resummarized(record: dict[str, Any]) -> str:
    """The record as it would be written now (what dev chooses may have changed)."""
    return json.dumps({**record, "summary": summarize(record)}, sort_keys=True)
