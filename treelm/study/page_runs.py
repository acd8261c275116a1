"""The runs' part of a study's page (:mod:`treelm.study.page`): the curves and what they say,
every run (its directory, tokens, minutes, threads and what the record notes of it), every
layer's F1, and the trees of the sentences every run parsed. Markdown lines from the record;
the pictures drawn only with ``draw`` (the text is the same either way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from treelm.study import curves as cv
from treelm.study.markdown import f1, mtok, part_title, pct, runs_of, test_parts
from treelm.study.spec import LOWER_IS_BETTER


def _g(x: float) -> str:
    return f"{x:.4g}"


def _name(key: str) -> str:
    return cv.SCORE_NAMES.get(key, key)


def curve_section(record: dict[str, Any], name: str, img: Path, draw: bool) -> list[str]:
    from treelm.study import plots

    d = record["study"]
    trees = d["score"]["trees"]
    every = [r["curve"] for r in record["runs"].values()]
    lines = ["## Curves", ""]
    if trees and cv.tree_keys(every):
        if draw:
            plots.plot_tree_f1(record, img / f"{name}-f1.png")
        lines += [f"![sentence F1 on {trees['dev']} against training tokens, per layer and "
                  f"rule, a panel per variant](img/{name}-f1.png)", "",
                  f"Dev sentence F1 (`{trees['dev']}`) at every validation (`train.eval_parse`, "
                  "never used to choose a checkpoint): a panel per variant, a colour per layer, "
                  "the official rule solid and the split rule dashed, the mean over seeds bold "
                  "and each seed faint; right-branching (dotted) and the official rule's control "
                  "(dash-dotted) on the same sentences.", ""]
    keys = cv.score_keys(every)
    if trees:
        keys = [k for k in ("ppl", "loss") if k in keys][:1] + \
            [k for k in ("tree_loss",) if k in keys]
    if keys:
        what = f"{name}-ppl.png" if trees else f"{name}-valid.png"
        if draw:
            plots.plot_scores(record, img / what, keys)
        names = ", ".join(_name(k) if cv.kind(k) == "validation" else
                          f"the training {_name(k)} logged before it" for k in keys)
        lines += [f"![validation {names} against training tokens, per variant](img/{what})", "",
                  f"Validation {names} at every validation: a colour per variant, the "
                  "mean over seeds bold and each seed faint.", ""]
    if trees and cv.tree_keys(every):
        lines += along_trees(record)
    for key in keys:
        lines += along_score(record, key)
    return lines


def along_trees(record: dict[str, Any]) -> list[str]:
    """Per variant and rule at the chosen layer (every layer where there is one variant): where
    the mean curve crossed right-branching, peaked, ended, and whether it levelled off."""
    s = record["summary"]["trees"]
    dev = (record.get("baselines") or {}).get("dev", {}).get("baselines", {})
    rb = f1(dev["right_branching"]) if "right_branching" in dev else None
    one = len(s["variants"]) == 1
    lines = [f"Along the curves ({over_seeds(record)}"
             + ("; every layer" if one else "; the layer chosen per variant and rule")
             + "): the first validation above right-branching"
             + (f" ({pct(rb)})" if rb is not None else "") + ", seed by seed; the peak; the "
             "last validation; the mean over the last quarter of the tokens against the "
             f"quarter before (levelled off: within {100 * cv.LEVEL:.0f} point, and from where "
             "the trailing quarter's mean stays so).", "",
             "| variant | rule | layer | above right-branching from | first | peak (tokens) | "
             "last | last quarter | on the quarter before |",
             "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
    for v, e in s["variants"].items():
        runs = runs_of(record, v)
        for rule, r in e["rules"].items():
            layers = list(r["dev_by_layer"]) if one else [r["layer"]]
            for k in layers:
                key = f"{rule}/L{k}"
                pts = cv.mean_series([x["curve"] for x in runs], key)
                if not pts:
                    continue
                c = cv.summary(pts)
                cross = ("–" if rb is None else " ".join(
                    mtok(t) if (t := cv.first_above(x["curve"], key, rb)) is not None else "–"
                    for x in runs))
                change = "–" if c["change"] is None else (
                    f"{100 * c['change']:+.1f}: {c['trend']}"
                    + (f" from {mtok(c['level_from'])}" if c["level_from"] else ""))
                lines.append(f"| `{v}` | {rule} | {k} | {cross} | {pct(c['first'][1])} | "
                             f"{pct(c['best'][1])} ({mtok(c['best'][0])}) | {pct(c['last'][1])} "
                             f"| {'–' if c['last_window'] is None else pct(c['last_window'])} "
                             f"| {change} |")
    return lines + [""]


def along_score(record: dict[str, Any], key: str) -> list[str]:
    """A validation score's mean curve per variant: first, best, last, the last quarter."""
    lower = key in LOWER_IS_BETTER
    rows = []
    for v in record["study"]["variants"]:
        runs = runs_of(record, v)
        pts = cv.mean_series([r["curve"] for r in runs], key) if runs else []
        if not pts:
            continue
        c = cv.summary(pts, higher=not lower)
        change = "–" if c["change"] is None else (
            (f"{100 * c['change'] / (c['last_window'] - c['change']):+.1f}%" if lower
             else f"{c['change']:+.3g}") + f": {c['trend']}")
        rows.append(f"| `{v}` | {_g(c['first'][1])} ({mtok(c['first'][0])}) | "
                    f"{_g(c['best'][1])} ({mtok(c['best'][0])}) | {_g(c['last'][1])} | "
                    f"{_g(c['last_window'])} | {change} |")
    if not rows:
        return []
    return [f"{cv.kind(key).capitalize()} {_name(key)} along the curves "
            f"({over_seeds(record)}):", "",
            f"| variant | first (tokens) | {'lowest' if lower else 'highest'} (tokens) | last | "
            "last quarter | on the quarter before |", "| --- |" + " ---: |" * 4 + " --- |",
            *rows, ""]


def over_seeds(record: dict[str, Any]) -> str:
    """What a curve of the page is: a mean over seeds, or the one run of each variant."""
    many = any(len(runs_of(record, v)) > 1 for v in record["study"]["variants"])
    return "the mean over seeds" if many else "one run per variant"


def _notes(r: dict[str, Any], config: str) -> str:
    m = r.get("migrated") or {}
    out = []
    if m.get("config") and m["config"] != config:
        out.append(("trained by another study" if m.get("adopted_from") else "trained")
                   + f" from `{m['config']}` and the overrides the record keeps")
    elif m.get("adopted_from"):
        out.append(f"trained by another study in `{m['adopted_from']}`")
    if m.get("continued_from"):
        c = m["continued_from"]
        out.append(f"continued from `{c['run_dir']}` at {c['tokens']:,} tokens")
    if "asgd_start" in r:
        a = r["asgd_start"]
        out.append("NT-ASGD never averaged" if a is None else
                   f"NT-ASGD averaged from {a['tokens']:,} tokens")
    if r.get("best_tokens"):
        out.append(f"`best` at {r['best_tokens']:,} tokens")
    for w, c in (r.get("checkpoints") or {}).items():
        out.append(f"`{w}` at {c['tokens']:,} tokens (valid ppl {c['valid_ppl']:.1f}"
                   + (", averaged" if c.get("averaged") else "") + ")")
    return "; ".join(out)


def runs_section(record: dict[str, Any]) -> list[str]:
    d = record["study"]
    runs = [r for v in d["variants"] for r in runs_of(record, v)]
    cols = [("tokens", lambda r: f"{r['tokens']:,}"),
            ("epochs", lambda r: str(r["epochs"]) if r.get("epochs") is not None else "–"),
            ("minutes", lambda r: f"{r['minutes']:.1f}"),
            ("threads", lambda r: str(r["threads"]) if r.get("threads") else "–"),
            ("precision", lambda r: r.get("precision") or "–"),
            ("valid ppl", lambda r: f"{r['best_valid_ppl']:.1f}" if r.get("best_valid_ppl")
             else "–"),
            ("notes", lambda r: _notes(r, d["config"]))]
    cols = [(n, f) for n, f in cols if any(f(r) not in ("–", "") for r in runs)]
    lines = ["## Runs", "", "| run | directory | " + " | ".join(n for n, _ in cols) + " |",
             "| --- | --- |" + "".join(" --- |" if n == "notes" else " ---: |" for n, _ in cols)]
    for r in runs:
        lines.append(f"| `{r['variant']}/{r['seed']}` | `{r['run_dir']}` | "
                     + " | ".join(f(r) for _, f in cols) + " |")
    lines.append("")
    if d["score"]["trees"]:
        lines += every_layer(record, runs)
    return lines


def every_layer(record: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    trees = record["study"]["score"]["trees"]
    checkpoints = [c for c in trees["checkpoints"] if any(c in r["trees"] for r in runs)]
    rules = trees["rules"]
    layers = sorted({k for r in runs for sc in r["trees"].values() for rule in rules
                     for k in sc.get(rule, {}).get("dev", {})}, key=int)
    cols = [(rule, k) for rule in rules for k in layers]
    many = len(checkpoints) > 1
    lines = ["## Every run, every layer", "",
             "Sentence F1 (%) per rule and layer of each run's "
             + ("checkpoints" if many else f"checkpoint `{checkpoints[0]}`")
             + ", on each treebank part.", "",
             "| run | " + ("checkpoint | " if many else "") + "part | "
             + " | ".join(f"{rule} L{k}" for rule, k in cols) + " |",
             "| --- | " + ("--- | " if many else "") + "--- |" + " ---: |" * len(cols)]
    for r in runs:
        for c in checkpoints:
            sc = r["trees"].get(c)
            if sc is None:
                continue
            for part in ["dev", *test_parts(trees)]:
                if part not in sc[rules[0]]:
                    continue
                cells = [pct(sc[rule][part][k]["sentence_f1"]) if k in sc[rule][part] else "–"
                         for rule, k in cols]
                lines.append(f"| `{r['variant']}/{r['seed']}` | " + (f"`{c}` | " if many else "")
                             + f"{part_title(part, trees)} | " + " | ".join(cells) + " |")
    return lines + [""]


def sentences(record: dict[str, Any], name: str, img: Path, draw: bool) -> list[str]:
    """The trees of the chosen configuration, one per seed, of every sentence its runs parsed
    (the study's first); the gold tree where the record has it; the first seed's drawn."""
    from treelm.study import plots
    from treelm.syntax.trees import ascii_tree, tree_to_brackets

    ch = ((record["summary"].get("trees") or {}).get("chosen")) or {}
    runs = [r for r in runs_of(record, ch.get("variant", "")) if r.get("sentences")]
    if not runs:
        return []
    v, rule, layer = ch["variant"], ch["rule"], ch["layer"]
    listed = record["study"]["score"]["trees"]["sentences"]
    texts = [t for t in listed if t in runs[0]["sentences"]]
    texts += [t for t in runs[0]["sentences"] if t not in texts]
    shown = f"`{v}`, {rule} rule, layer {layer} (chosen on dev)"
    lines = ["## Sentences", "",
             f"Every run parses these at the end; here the trees of {shown}, one per seed, and "
             "the first seed's drawn.", ""]
    gold = record.get("gold") or {}
    for i, text in enumerate(texts, 1):
        lines += [f"### {text}", ""]
        if text in gold:
            g = gold[text]
            lines += [f"Gold tree (`{g['source']}`: {g['choice']}): "
                      f"`{tree_to_brackets(g['tree'])}`", "",
                      f"![gold tree of “{text}”](img/{name}-sentence{i}-gold.png)", ""]
            if draw:
                plots.draw_tree(g["tree"], img / f"{name}-sentence{i}-gold.png", "gold tree")
        read = (runs[0].get("sentence_tokens") or {}).get(text)
        if read:
            lines += [f"Read as: {' '.join(read['tokens'])}"
                      + (f" (unknown to the vocabulary: {', '.join(read['unknown'])})"
                         if read["unknown"] else " (every word in the vocabulary)") + ".", ""]
        for r in runs:
            tree = r["sentences"][text][rule][layer]
            lines += [f"Seed {r['seed']}: `{tree_to_brackets(tree)}`", "", "```",
                      ascii_tree(tree), "```", ""]
        first = runs[0]
        caption = f"{v}, seed {first['seed']}, {rule} rule, layer {layer}"
        lines += [f"![{text}: {caption}](img/{name}-sentence{i}.png)", ""]
        if draw:
            plots.draw_tree(first["sentences"][text][rule][layer],
                            img / f"{name}-sentence{i}.png", f"{text}: {caption}")
    return lines
