"""A study's ensembles: the tree average of its runs' readings, chosen on dev, reported on test.

Tree averaging (Shayegh et al., "Ensemble Distillation for Unsupervised Constituency Parsing",
ICLR 2024; :mod:`treelm.syntax.ensemble`) gives, per sentence, the binary tree with the most span
votes of its sources. A *source* here is one reading of one run: a checkpoint, a rule and a layer,
whose trees on dev and test the study keeps as bits (``runs[key]["readings"]``, written by
:func:`treelm.study.score.score_trees`; in the kept-trees file beside the record,
:mod:`treelm.study.record`), so every ensemble below is computed from them, with no model
loaded.

For each group of runs (``score.trees.ensemble``: a variant's seeds, or ``all``: every run) and
each scored checkpoint ``c``, the reading sets are

    own        each run at its own dev-chosen (rule, layer) of ``c`` (the run's choice);
    layers     each run under its own rule, at every layer but the first (layers 2..L);
    rules      each run at its own dev-chosen layer per rule, under every rule;
    layers+rules   every layer but the first under every rule;
    all layers     every layer under every rule;

and, across the tree checkpoints (``best-trees``, ``best-trees-<rule>``), ``own`` and
``layers+rules`` of all of them together. Every set is scored on dev and test (sentence and
corpus F1, by :mod:`treelm.syntax.metrics`, as ``eval-parse``), test at all lengths and at each
``test_max_len``; the ensemble dev chooses (best dev sentence F1; ties: the first in the order
above) is the study's, and test only reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from treelm.study.markdown import pct
from treelm.study.record import mean_std, run_choice

Reading = tuple[str, str, str]     # (checkpoint, rule, layer)


def reading_sets(run: dict[str, Any], rules: Sequence[str], checkpoints: Sequence[str]
                 ) -> dict[str, list[Reading]]:
    """The reading sets of one run (see the module's docstring), by name."""
    out: dict[str, list[Reading]] = {}
    tree_ckpts = [c for c in checkpoints if c.startswith("best-trees")]
    for c in checkpoints:
        scores = run["trees"][c]
        own = run_choice(scores, rules)
        layers = sorted(scores[rules[0]]["dev"], key=int)
        upper = layers[1:] or layers
        out[f"own@{c}"] = [(c, own["rule"], own["layer"])]
        out[f"layers@{c}"] = [(c, own["rule"], k) for k in upper]
        out[f"rules@{c}"] = [(c, r, own["per_rule"][r]) for r in rules]
        out[f"layers+rules@{c}"] = [(c, r, k) for r in rules for k in upper]
        out[f"all-layers@{c}"] = [(c, r, k) for r in rules for k in layers]
    if len(tree_ckpts) > 1:
        joined = "+".join(tree_ckpts)
        out[f"own@{joined}"] = [x for c in tree_ckpts for x in out[f"own@{c}"]]
        out[f"layers+rules@{joined}"] = [x for c in tree_ckpts
                                         for x in out[f"layers+rules@{c}"]]
    return out


def groups(study: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """``score.trees.ensemble``'s groups: run keys per variant named, ``all`` for every run;
    a group whose planned runs (the study's seeds) are not all in is left out until they are,
    so that a record never reports a partial ensemble as the study's."""
    wanted = study["score"]["trees"].get("ensemble") or []
    if wanted == "all":
        wanted = [*study["variants"], "all"]
    seeds = study.get("seeds")
    out = {}
    for g in wanted:
        keys = sorted((k for k, r in runs.items() if g == "all" or r["variant"] == g),
                      key=lambda k: (runs[k]["seed"], runs[k]["variant"]))
        planned = len(seeds) * (len(study["variants"]) if g == "all" else 1) if seeds else 0
        if keys and len(keys) >= planned:   # a group is averaged once all its runs are in
            out[g] = keys
    return out


def study_ensembles(record: dict[str, Any], golds: dict[str, list[Any]],
                    ensemble: Callable[..., list[Any]] | None = None) -> dict[str, Any]:
    """The ensembles of ``record`` (module docstring) against ``golds`` (``{"dev": [...],
    "test": [...]}``, the treebanks' gold trees in the record's order). Runs without readings
    (recorded before they were kept) are left out, and said so in ``missing``."""
    from treelm.study.parts import test_part
    from treelm.syntax.metrics import brackets, span_prf
    from treelm.syntax.tree_codes import decode_trees

    if ensemble is None:
        from treelm.syntax.ensemble import ensemble_trees as ensemble
    study = record["study"]
    trees = study["score"]["trees"]
    rules, checkpoints = trees["rules"], trees["checkpoints"]
    lengths = {p: [len(g.words) for g in gs] for p, gs in golds.items()}
    decoded: dict[tuple[str, Reading, str], list[Any]] = {}

    def trees_of(key: str, reading: Reading, part: str) -> list[Any]:
        if (key, reading, part) not in decoded:
            c, rule, layer = reading
            code = record["runs"][key]["readings"][c][rule][layer][part]
            decoded[key, reading, part] = decode_trees(code, lengths[part])
        return decoded[key, reading, part]

    gold_spans = {p: [brackets(g.tree if hasattr(g, "labeled_spans") else g) for g in gs]
                  for p, gs in golds.items()}
    # what each part is scored as: dev; test at all lengths and at each test_max_len
    cuts = {"dev": [("dev", None)],
            "test": [("test", None), *((test_part(n), n) for n in trees.get("test_max_len") or []
                                       if n is not None)]}

    def score(pred: list[Any], part: str) -> dict[str, dict[str, float]]:
        """Sentence and corpus F1 by :func:`treelm.syntax.metrics.span_prf`, the gold
        brackets read once."""
        out = {}
        spans = [brackets(t) for t in pred]
        for name, n in cuts[part]:
            keep = [i for i, g in enumerate(golds[part]) if n is None or len(g.words) <= n]
            sent, corpus = span_prf((spans[i], gold_spans[part][i]) for i in keep)
            out[name] = {"sentence_f1": sent.f1, "corpus_f1": corpus.f1}
        return out

    result: dict[str, Any] = {"groups": {}, "missing": []}
    usable = {k: r for k, r in record["runs"].items() if r.get("readings")}
    result["missing"] = sorted(set(record["runs"]) - set(usable))
    for g, keys in groups(study, usable).items():
        sets: dict[str, list[tuple[str, Reading]]] = {}
        for key in keys:
            for name, readings in reading_sets(usable[key], rules, checkpoints).items():
                sets.setdefault(name, []).extend((key, x) for x in readings)
        entry = {}
        for name, sources in sets.items():
            scores: dict[str, Any] = {"runs": len(keys), "sources": len(sources)}
            for part in [p for p in ("dev", "test") if p in golds]:
                pred = ensemble([trees_of(k, x, part) for k, x in sources])
                scores.update(score(pred, part))
            if name.startswith("own@") and "+" not in name:
                # beside it, the mean ± std of the same runs read alone (each its own choice)
                c = name.removeprefix("own@")
                scores["single"] = {
                    part: mean_std([usable[k]["trees"][c][rule][part][layer]["sentence_f1"]
                                    for k, (_, rule, layer) in sources])
                    for part in scores if part in [name for c in cuts.values() for name, _ in c]
                    and all(part in usable[k]["trees"][c][rule] for k, (_, rule, _) in sources)}
            entry[name] = scores
        result["groups"][g] = entry
    cands = [(g, s) for g, e in result["groups"].items() for s in e]
    if cands:
        g, s = max(cands, key=lambda c: result["groups"][c[0]][c[1]]["dev"]["sentence_f1"])
        result["chosen"] = {"group": g, "readings": s, **result["groups"][g][s]}
    return result


def status_lines(record: dict[str, Any]) -> list[str]:
    """``--status``'s lines of the ensembles: every group and reading set, with the mean ± std
    of the same runs read alone beside each run's own choice, then what dev chose."""
    ens = record.get("ensembles")
    if not ens or not ens.get("groups"):
        return []
    parts = [p for p in next(iter(next(iter(ens["groups"].values())).values()))
             if p == "dev" or p.startswith("test")]
    main = parts[1] if len(parts) > 1 else parts[0]
    rows = [["group", "readings", "runs", "sources", *parts, f"{main}: runs alone"]]
    for g, sets in ens["groups"].items():
        for name, e in sets.items():
            single = e.get("single", {})
            rows.append([g, name, str(e["runs"]), str(e["sources"]),
                         *[pct(e[p]["sentence_f1"]) for p in parts],
                         (f"{pct(single[main]['mean'])} ± {pct(single[main]['std'])}"
                          if main in single else "")])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["tree averages (Shayegh et al. 2024), sentence F1 (%): per sentence the binary tree "
             "with the most span votes of the group's readings; beside each run's own choice, "
             "the same runs read alone (mean ± std)"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    ch = ens.get("chosen")
    if ch:
        lines.append(f"ensemble chosen on dev: {ch['group']}, {ch['readings']} ({ch['sources']} "
                     "sources): " + "; ".join(f"{p} {pct(ch[p]['sentence_f1'])}" for p in parts))
    if ens.get("missing"):
        lines.append("runs without kept trees (scored before readings were kept): "
                     + ", ".join(ens["missing"]))
    return lines


def refresh(record: dict[str, Any]) -> bool:
    """Recompute ``record["ensembles"]`` where the runs with kept trees, or the study's
    ``score.trees.ensemble``, changed since it was made; whether it changed. The study is read
    from the record's copy of it (``record["study"]``), as :func:`study_ensembles` reads it; the
    gold trees from its dev and test treebanks."""
    from treelm.syntax.report import load_golds

    trees = record["study"]["score"]["trees"]
    have = sorted(k for k, r in record["runs"].items() if r.get("readings"))
    want = {"runs": have, "ensemble": trees["ensemble"]}
    old = record.get("ensembles") or {}
    if {k: old.get(k) for k in want} == want:
        return False
    golds = {"dev": load_golds(trees["dev"])}
    if trees["test"]:
        golds["test"] = load_golds(trees["test"])
    record["ensembles"] = {**want, **study_ensembles(record, golds)}
    return True
