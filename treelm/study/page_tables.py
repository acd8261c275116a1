"""The tables of a study's page (:mod:`treelm.study.page`): what dev chose and by how much it
beats the baselines, per variant and rule, each run's own choice, the baselines, the task's
scores. Each is a list of markdown lines made from the record alone.
"""

from __future__ import annotations

from typing import Any

from treelm.rundir.trees import checkpoint_rule
from treelm.study.markdown import (
    BASELINES,
    TRIVIAL,
    bf1,
    f1,
    ms,
    part_title,
    pct,
    runs_of,
    s_,
    test_parts,
)


# ----------------------------------------------------------------------------- trees
def chosen_rule(summary: dict[str, Any], d: dict[str, Any], v: str) -> str:
    """The rule a variant is read under: the study's choice for the chosen variant, else the
    rule with the best dev mean where dev chooses the rule, else the first rule."""
    ch = summary.get("chosen") or {}
    if ch.get("variant") == v:
        return ch["rule"]
    rules = summary["variants"][v]["rules"]
    if "rule" in d["choose"]:
        return max(rules, key=lambda r: rules[r]["dev"]["mean"])
    return next(iter(rules))


def result(record: dict[str, Any]) -> list[str]:
    s, d = record["summary"]["trees"], record["study"]
    trees, ch = d["score"]["trees"], s.get("chosen")
    if not ch:
        return []
    v, rule, layer = ch["variant"], ch["rule"], ch["layer"]
    e = s["variants"][v]["rules"][rule]
    part = "test" if "test" in s["parts"] else "dev"
    base = record.get("baselines", {}).get(part, {}).get("baselines", {})
    m = e[part]
    words = [f"Chosen on `{trees['dev']}`: **`{v}`, {rule} rule, layer {layer}**: sentence F1 "
             f"on {part_title(part, trees)} **{ms(m)}** over {s_(m['n'], 'seed')}"
             + (f" ({', '.join(pct(x) for x in m['runs'])})" if m["n"] > 1 else "")]
    if "right_branching" in base:
        rb = f1(base["right_branching"])
        words[0] += f", against right-branching {pct(rb)} ({100 * (m['mean'] - rb):+.1f} points)"
        control = base.get(f"random_levels_{rule}")
        if control:
            words[0] += (f" and the {rule} rule's control (random levels through the rule) "
                         f"{bf1(control)}")
        strong = max((b for b in TRIVIAL if b in base), key=lambda b: f1(base[b]))
        if strong != "right_branching":
            sf = f1(base[strong])
            words[0] += (f"; the strongest trivial baseline there is {BASELINES[strong]}, "
                         f"{pct(sf)} ({100 * (m['mean'] - sf):+.1f} points)")
        words[0] += "."
        above = [x for x in m["runs"] if x > rb]
        if m["n"] > 1:
            words.append(f"{len(above)} of {m['n']} seeds above right-branching.")
        runs = runs_of(record, v)
        for r, x in zip(runs, m["runs"]):
            if x > rb:
                continue
            from treelm.study.record import run_choice

            sc = r["trees"][s["checkpoint"]]
            own = run_choice(sc, trees["rules"])
            words.append(f"Below it: seed {r['seed']} ({pct(x)}), whose own dev scores choose "
                         f"the {own['rule']} rule, layer {own['layer']} "
                         f"({pct(sc[own['rule']]['dev'][own['layer']]['sentence_f1'])} on dev): "
                         f"{pct(sc[own['rule']][part][own['layer']]['sentence_f1'])} on "
                         f"{part_title(part, trees)}.")
    else:
        words[0] += "."
    for p in s["parts"][1:]:
        b = record.get("baselines", {}).get(p, {}).get("baselines", {})
        words.append(f"On {part_title(p, trees)}: {ms(e[p])}"
                     + (f" against right-branching {pct(f1(b['right_branching']))}"
                        if "right_branching" in b else "") + ".")
    others = sorted((o for o in s["variants"] if o != v and rule in s["variants"][o]["rules"]),
                    key=lambda o: -s["variants"][o]["rules"][rule]["dev"]["mean"])
    if others:
        words.append(f"The other variants under the {rule} rule, each at its own layer chosen on "
                     f"dev, by their dev mean: " + "; ".join(
                         f"`{o}` {ms(s['variants'][o]['rules'][rule][part])} "
                         f"(layer {s['variants'][o]['rules'][rule]['layer']})" for o in others)
                     + ".")
    if part == "dev":
        words.append("The study reads no test treebank.")
    return ["## Result", "", " ".join(words), ""]


def per_variant(record: dict[str, Any]) -> list[str]:
    s, trees = record["summary"]["trees"], record["study"]["score"]["trees"]
    parts = ["dev", *s["parts"]]
    lines = ["## Per variant and rule", "",
             f"Sentence F1 (%) of the checkpoint `{s['checkpoint']}`: mean ± std over seeds and, "
             f"in brackets, each seed's; the layer chosen on `{trees['dev']}` per variant and "
             "rule, beside the dev mean of every layer (chosen in bold). Validation perplexity: "
             "each run's best.", "",
             "| variant | rule | layer | dev by layer | "
             + " | ".join(part_title(p, trees) for p in parts) + " | valid ppl |",
             "| --- | --- | ---: | --- | " + " | ".join("---" for _ in parts) + " | ---: |"]
    for v, e in s["variants"].items():
        for rule, r in e["rules"].items():
            by = " / ".join(f"**{pct(m['mean'])}**" if k == r["layer"] else pct(m["mean"])
                            for k, m in r["dev_by_layer"].items())
            lines.append(f"| `{v}` | {rule} | {r['layer']} | {by} | "
                         + " | ".join(ms(r[p], seeds=True) for p in parts) + " | "
                         + (ms(e["valid_ppl"], 1.0) if "valid_ppl" in e else "–") + " |")
    return lines + [""]


def per_run_choice(record: dict[str, Any]) -> list[str]:
    s, d = record["summary"]["trees"], record["study"]
    trees = d["score"]["trees"]
    parts = ["dev", *s["parts"]]
    lines = ["## Each run's own choice", "",
             "What one run alone would be read with: its own rule and layer, chosen on its own "
             "dev scores (ties: official, then the lower layer), and its figures there; beside "
             "them, the variant's configuration (rule and layer chosen over the seeds, above).",
             "", "| variant | each seed's rule and layer | "
             + " | ".join(part_title(p, trees) for p in parts) + " | the configuration |",
             "| --- | --- | " + " | ".join("---" for _ in parts) + " | --- |"]
    for v, e in s["variants"].items():
        pc = e["per_run_choice"]
        rule = chosen_rule(s, d, v)
        r = e["rules"][rule]
        main = parts[1] if len(parts) > 1 else "dev"
        lines.append(f"| `{v}` | " + ", ".join(f"{c['rule']} L{c['layer']}"
                                               for c in pc["choices"]) + " | "
                     + " | ".join(ms(pc[p], seeds=True) for p in parts)
                     + f" | {rule} L{r['layer']}: {ms(r[main])} on {part_title(main, trees)} |")
    return lines + [""]


def checkpoint_says(checkpoint: str) -> str:
    """What a tree checkpoint is, said after its name (nothing for ``best`` and ``last``)."""
    if checkpoint == "best-trees":
        return (" (the validation with the best dev sentence F1 under either rule: a choice made "
                "on labelled dev data)")
    rule = checkpoint_rule(checkpoint)
    if rule:
        return (f" (the validation with the best dev sentence F1 under the {rule} rule alone: a "
                f"choice made on labelled dev data; read its rows of that rule)")
    return ""


def other_checkpoints(record: dict[str, Any]) -> list[str]:
    """The same figures for every other checkpoint the study scored (``best-trees``: the
    validation with the best dev tree F1, a choice made on labelled dev data; ``best-trees-<rule>``
    the same under one rule), per rule: the
    configuration's layer, and each run's own layer (then rule and layer) chosen on dev."""
    d = record["study"]
    trees = d["score"]["trees"]
    lines: list[str] = []
    for checkpoint, s in (record["summary"].get("trees_by_checkpoint") or {}).items():
        parts = ["dev", *s["parts"]]
        lines += [f"## The checkpoint `{checkpoint}`", "",
                  f"Each run scored again at its checkpoint `{checkpoint}`"
                  + checkpoint_says(checkpoint)
                  + ". Per rule: the layer chosen over the seeds, then each run's own layer "
                  "chosen on its dev scores; last, each run's own rule and layer.", "",
                  "| variant | rule | layers | " + " | ".join(part_title(p, trees) for p in parts)
                  + " |", "| --- | --- | --- | " + " | ".join("---" for _ in parts) + " |"]
        for v, e in s["variants"].items():
            for rule, r in e["rules"].items():
                own = r["per_run"]
                lines.append(f"| `{v}` | {rule} | L{r['layer']} | "
                             + " | ".join(ms(r[p], seeds=True) for p in parts) + " |")
                lines.append(f"| `{v}` | {rule} | each run's: {' '.join(own['layers'])} | "
                             + " | ".join(ms(own[p], seeds=True) for p in parts) + " |")
            pc = e["per_run_choice"]
            lines.append(f"| `{v}` | each run's | " + ", ".join(
                f"{c['rule']} L{c['layer']}" for c in pc["choices"]) + " | "
                + " | ".join(ms(pc[p], seeds=True) for p in parts) + " |")
        lines.append("")
    return lines


def baselines(record: dict[str, Any]) -> list[str]:
    base, trees = record.get("baselines") or {}, record["study"]["score"]["trees"]
    parts = [p for p in ("dev", *test_parts(trees)) if p in base]
    if not parts:
        return []
    names = [n for n in BASELINES if any(n in base[p]["baselines"] for p in parts)]
    names += sorted({n for p in parts for n in base[p]["baselines"]} - set(names))
    corpus = any("corpus_f1" in b for p in parts for b in base[p]["baselines"].values())
    seeds = next((len(b["sentence_f1"]["runs"]) for p in parts
                  for b in base[p]["baselines"].values() if isinstance(b["sentence_f1"], dict)),
                 None)
    cols = [f"{part_title(p, trees)} ({base[p]['n_sentences']:,})" for p in parts]
    if corpus:
        cols += [f"corpus F1, {part_title(p, trees)}" for p in parts]
    lines = ["## Baselines on the same sentences", "",
             "Sentence F1 (%)" + (" and corpus F1" if corpus else "") + " of trees that read no "
             "model, on the sentences the runs are scored on (their number in brackets)"
             + (f"; random trees and random levels: mean ± std over {seeds} seeds" if seeds
                else "") + ". The rule control passes random levels through each tree rule: "
             "what a rule gives by itself.", "",
             "| baseline | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
    for n in names:
        cells = [bf1(base[p]["baselines"][n]) if n in base[p]["baselines"] else "–"
                 for p in parts]
        if corpus:
            cells += [bf1(base[p]["baselines"][n], "corpus_f1") if n in base[p]["baselines"]
                      else "–" for p in parts]
        lines.append(f"| {BASELINES.get(n, n.replace('_', ' '))} | " + " | ".join(cells) + " |")
    return lines + [""]


def ensembles(record: dict[str, Any]) -> list[str]:
    """The tree averages of the study's runs (:mod:`treelm.study.ensemble`): every group and
    reading set on dev and test, beside each run's own choice the same runs read alone, and the
    ensemble dev chose."""
    ens, trees = record.get("ensembles") or {}, record["study"]["score"]["trees"]
    if not ens.get("groups"):
        return []
    first = next(iter(next(iter(ens["groups"].values())).values()))
    parts = [p for p in ("dev", *test_parts(trees)) if p in first]
    main = parts[1] if len(parts) > 1 else parts[0]
    lines = ["## Tree averages of the runs", "",
             "Per sentence, the binary tree with the most span votes of a group's readings (tree "
             "averaging, Shayegh et al., ICLR 2024; `treelm ensemble`, docs/syntax.md). A "
             "reading is one run's trees at a checkpoint, a rule and a layer: `own` is each "
             "run's own dev-chosen rule and layer, `layers` its layers but the first under its "
             "own rule, `rules` its own layer per rule under each rule, `layers+rules` both, "
             "`all-layers` every layer under each rule; `@` names the checkpoints. Sentence F1 "
             "(%); for each run's own choice, the same runs read alone on "
             f"{part_title(main, trees)} (mean ± std) beside the average. Dev chooses the "
             "ensemble; test only reports it.",
             "", "| group | readings | runs | sources | "
             + " | ".join(part_title(p, trees) for p in parts) + " | runs alone |",
             "| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in parts) + " | ---: |"]
    ch = ens.get("chosen") or {}
    for g, sets in ens["groups"].items():
        for name, e in sets.items():
            alone = e.get("single", {}).get(main)
            cells = [pct(e[p]["sentence_f1"]) for p in parts]
            if (g, name) == (ch.get("group"), ch.get("readings")):
                cells = [f"**{c}**" for c in cells]
            lines.append(f"| `{g}` | `{name}` | {e['runs']} | {e['sources']} | "
                         + " | ".join(cells) + " | "
                         + (f"{pct(alone['mean'])} ± {pct(alone['std'])}" if alone else "")
                         + " |")
    if ch:
        lines += ["", f"Chosen on {part_title('dev', trees)}: `{ch['group']}`, "
                  f"`{ch['readings']}` ({s_(ch['sources'], 'source')}), "
                  + "; ".join(f"{part_title(p, trees)} {pct(ch[p]['sentence_f1'])}"
                              for p in parts) + "."]
    if ens.get("missing"):
        lines += ["", "Runs whose trees the record does not keep (scored before readings were "
                  "kept) are left out: " + ", ".join(f"`{k}`" for k in ens["missing"]) + "."]
    return lines + [""]


# ----------------------------------------------------------------------------- the task's scores
def scores(record: dict[str, Any]) -> list[str]:
    s = record["summary"].get("scores")
    if not s or not s["variants"]:
        return []
    names = [(f"valid {k}", ("valid", None, k)) for k in
             next(iter(s["variants"].values()))["valid"]]
    for e in s["variants"].values():
        for ev, figures in e.get("eval", {}).items():
            names += [(f"{ev} {k}", ("eval", ev, k)) for k in figures
                      if (f"{ev} {k}", ("eval", ev, k)) not in names]
    if record["summary"].get("trees") and len(names) <= 2:
        return []                       # (the per-variant table has the perplexity)
    lines = ["## The task's scores", "",
             "Each run's best validation figures and its `treelm eval` scores of `best`: mean ± "
             "std over seeds and, in brackets, each seed's.", "",
             "| variant | seeds | " + " | ".join(n for n, _ in names) + " |",
             "| --- | ---: |" + " ---: |" * len(names)]
    for v, e in s["variants"].items():
        cells = []
        for _, (kind, ev, k) in names:
            m = e["valid"].get(k) if kind == "valid" else e.get("eval", {}).get(ev, {}).get(k)
            cells.append("–" if m is None else _plain(m))
        lines.append(f"| `{v}` | {len(e['seeds'])} | " + " | ".join(cells) + " |")
    if s.get("chosen"):
        lines += ["", f"Chosen on validation: `{s['chosen']['variant']}` (the best mean "
                  f"{s['chosen']['on']})."]
    return lines + [""]


def _plain(m: dict[str, Any]) -> str:
    def g(x: float) -> str:
        return f"{x:.4g}"
    if len(set(m["runs"])) == 1:          # one run, or the same figure (a test set's size)
        return g(m["mean"])
    return f"{g(m['mean'])} ± {m['std']:.2g} (" + " ".join(g(x) for x in m["runs"]) + ")"
