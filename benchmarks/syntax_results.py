"""Render ``docs/syntax-results.md`` from a record of ``benchmarks/trees.py`` (the newest
``benchmarks/results/trees-*.json``), with its pictures in ``docs/img/``; ``python
benchmarks/report.py`` calls :func:`main`.

Everything on the page is a copy of the record or a sentence made from it (whether the best
configuration beats right-branching is the record's comparison): nothing is written by hand, so
regenerating the page after more runs cannot leave a stale remark. The pictures:

* ``syntax-results-f1.png``: sentence F1 on the dev treebank against tokens seen, one panel per
  gate, one line per layer and rule and seed (colour: layer; solid: official rule, dashed: split),
  right-branching on the same sentences as a horizontal line, the official rule's control (random
  levels) as another;
* ``syntax-results-tree-gold.png`` and ``syntax-results-tree-<gate>.png``: the gold tree of the
  record's test sentence and, per gate, the tree of the gate's first seed at the layer chosen on
  dev under the official rule.

When the newest record is the study of another config than the perplexity config
(:data:`PERPLEXITY_CONFIG`, the Adam study of ``trees-20261123.json``), the newest record of the
perplexity config's study stays on the page as a control (the same columns, per gate), with a
paragraph made from the two records and the newest screen record (``trees-screen-*.json``: the
perplexity config's own recipe against the paper's at equal tokens) on why the two configs
differ; where the numbers show no difference it says so. Runs a study adopted (``trees.py
--adopt``) are marked, with a note on what their minutes mean.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import from_repo, newest_record, render_newest, repo_path, write_page  # noqa: E402
from tree_runs import mean_std  # noqa: E402

RESULTS = HERE / "results"
DOC = HERE.parent / "docs" / "syntax-results.md"
#: The config tuned for validation perplexity (Adam; the study of ``trees-20261123.json``): a
#: newer study of another config shows it as its control.
PERPLEXITY_CONFIG = "configs/ptb-onlstm-cpu.yaml"
ADOPTED = "†"       # marks a run (or a gate with runs) adopted from another directory
GATE_TITLES = {"paper": "paper's master input gate", "symmetric": "symmetric master input gate"}
BASELINE_TITLES = {"right_branching": "right-branching", "left_branching": "left-branching",
                   "balanced": "balanced trees", "random": "random trees",
                   "random_levels_official": "rule control: random levels, official rule",
                   "random_levels_split": "rule control: random levels, split rule"}
RULE_STYLE = {"official": "-", "split": "--"}


def newest(results: Path = RESULTS) -> tuple[Path, dict[str, Any]] | None:
    return newest_record("trees-[0-9]*.json", results)


def perplexity_study(results: Path = RESULTS) -> tuple[Path, dict[str, Any]] | None:
    """The newest record of the perplexity config's study (:data:`PERPLEXITY_CONFIG`)."""
    return newest_record("trees-[0-9]*.json", results,
                         where=lambda r: r.get("study", {}).get("config") == PERPLEXITY_CONFIG)


def newest_screen(results: Path = RESULTS) -> tuple[Path, dict[str, Any]] | None:
    return newest_record("trees-screen-[0-9]*.json", results)


# ----------------------------------------------------------------------------- numbers
def pct(x: float) -> str:
    return f"{100.0 * x:.1f}"


def pm(ms: dict[str, Any], scale: float = 100.0, digits: int = 1) -> str:
    """``mean ± std`` of a :func:`trees.mean_std` entry (``mean`` alone for one run)."""
    mean = f"{scale * ms['mean']:.{digits}f}"
    return mean if ms["n"] < 2 else f"{mean} ± {scale * ms['std']:.{digits}f}"


def baseline_f1(res: dict[str, Any], key: str = "sentence_f1") -> str:
    value = res[key]
    if isinstance(value, dict):     # random trees, rule controls: over seeds
        return f"{pct(value['mean'])} ± {pct(value['std'])}"
    return pct(value)


def millions(tokens: float) -> str:
    return f"{tokens / 1e6:.2f}M"


def budget(study: dict[str, Any]) -> str:
    """The budget per run as the study set it: tokens (``train.max_units``) when given, the
    minutes then only a cap. A record's ``budget`` is the one its runs resolved (flags, the
    config's keys, overrides); a record older than that key has ``--minutes`` and maybe a
    ``train.max_units=`` override."""
    if "budget" in study:
        units, minutes = study["budget"].get("max_units"), study["budget"].get("max_minutes")
    else:
        units = next((o.split("=", 1)[1] for o in study.get("overrides") or []
                      if o.startswith("train.max_units=")), None)
        minutes = study.get("minutes")
    if units is None:
        return f"{minutes:g} min per run"
    cap = f", at most {minutes:g} min" if minutes is not None else ""
    return f"{int(float(units)):,} training tokens per run{cap}"


def finished_line(rec: dict[str, Any]) -> str:
    """How far the study is: runs finished of those planned, and which are still training."""
    planned = len(rec["gates"]) * len(rec["seeds"])
    live = _sorted(rec.get("in_progress") or {})
    line = f"Runs finished: {len(rec['runs'])} of {planned}"
    if live:
        line += ("; still training when the record was written: "
                 + ", ".join(f"{_run_title(r)} ({millions(r['tokens'])} tokens)" for r in live))
    return line + "."


# ----------------------------------------------------------------------------- sections
def head(path: Path, rec: dict[str, Any]) -> list[str]:
    study, base = rec["study"], rec["baselines"]
    m = rec.get("machine", {})
    n_seeds = len(base["test"]["baselines"]["random"]["sentence_f1"]["runs"])
    extra = f", `train.precision={study['precision']}`" if study.get("precision") else ""
    ran = sorted({r.get("precision") for r in rec["runs"].values()} - {None})
    extra += f" (trained in {' and '.join(ran)})" if ran else ""
    extra += "".join(f", `{o}`" for o in study.get("overrides") or [])
    lines = ["# The tree result: ON-LSTM trees against right-branching, over seeds and gates", "",
             f"Generated by `python benchmarks/report.py` from `{repo_path(path)}` (do not edit: "
             f"every figure is a copy of the record). Commands: "
             + "; ".join(f"`{c}`" for c in rec.get("commands", [rec["command"]])) + ".", "",
             f"- Training: `{study['config']}`, {budget(study)}{extra}, "
             f"gates {', '.join(GATE_TITLES.get(g, g) for g in rec['gates'])} "
             f"(`model.cell_options.master_input`), seeds "
             f"{', '.join(map(str, rec['seeds']))}; checkpoints chosen on the validation loss "
             f"alone; {m.get('cpu', '?')}" + (f", {m['gpu']}" if m.get("gpu") else "")
             + f", torch {m.get('torch', '?')}.",
             f"- Trees: every ON-LSTM layer under both tree rules (`official`, `split`), scored "
             f"by sentence F1 (the paper's number, unlabeled, without the whole-sentence span). "
             f"The layer is chosen per gate and rule on `{study['dev']}` "
             f"({base['dev']['n_sentences']:,} sentences): "
             f"{rec['summary']['layer_choice']}. The figures are those of `{study['test']}` "
             f"({base['test']['n_sentences']:,} sentences at all lengths, "
             f"{base['test_10']['n_sentences']:,} of at most 10 words).",
             f"- Baselines and the rule control on the same sentences; random trees and random "
             f"levels over {n_seeds} seeds (mean ± std). The rule control passes random levels "
             f"through each tree rule: what a rule gives by itself.", ""]
    return lines


def _study_seeds(rec: dict[str, Any], best: dict[str, Any]) -> int:
    """How many seeds the study trains per configuration (the best one's count if unrecorded)."""
    return len(rec.get("seeds") or []) or best["test"]["n"]


def _met(rec: dict[str, Any], best: dict[str, Any]) -> str:
    """Met, not met, or not decided while the best configuration lacks some of its seeds (a mean
    over fewer seeds than the study's is not the target's figure)."""
    seeds = _study_seeds(rec, best)
    if not best["beats_right_branching"]:
        return "**not met**"
    if best["test"]["n"] < seeds:
        return f"**not decided yet** ({best['test']['n']} of {seeds} seeds finished)"
    return "**met**"


def verdict(rec: dict[str, Any]) -> list[str]:
    summary = rec["summary"]
    best = summary.get("best")
    if best is None:
        running = rec.get("in_progress") or {}
        more = (f" Still training: {', '.join(_run_title(r) for r in _sorted(running))}; their "
                f"curves so far are drawn below." if running else "")
        return ["## Result", "", f"No run has finished yet: there is no test figure.{more}", "",
                finished_line(rec), ""]
    gate, layer = best["gate"], best["layer"]
    cfg = summary["configs"][gate]
    test = best["test"]
    met = _met(rec, best)
    control = rec["baselines"]["test"]["baselines"]
    split = cfg["rules"]["split"]
    lines = ["## Result", "",
             f"The best configuration on `{rec['study']['dev']}` under the official rule, the "
             f"{GATE_TITLES.get(gate, gate)} with layer {layer}, gives **{pm(test)}** sentence F1 "
             f"on `{rec['study']['test']}` at all lengths over {test['n']} seed(s), against "
             f"right-branching {pct(best['right_branching_test'])} "
             f"({'+' if best['margin'] >= 0 else '−'}{pct(abs(best['margin']))} points) and the "
             f"official rule's control {baseline_f1(control['random_levels_official'])}: the "
             f"target, above right-branching, is {met}. The same runs under the split rule (layer "
             f"{split['layer']}, chosen on dev): {pm(split['test'])}, against its control "
             f"{baseline_f1(control['random_levels_split'])}.", "",
             *seeds_line(rec, gate, layer, best['right_branching_test']), finished_line(rec), ""]
    return lines


def seeds_line(rec: dict[str, Any], gate: str, layer: int, rb: float) -> list[str]:
    """Seed by seed, the best configuration against right-branching at its layer; a seed below
    it is named with the layer its own dev run would choose (what a user holding that one run
    would parse with), and the minutes of the runs this study trained itself."""
    runs = [r for r in _sorted(rec["runs"]) if r["gate"] == gate]
    if not runs:
        return []
    at = str(layer)
    official = [(r, r["scores"]["official"]) for r in runs]
    below = [(r, sc) for r, sc in official if sc["test"][at]["sentence_f1"] <= rb]
    words = [f"Seed by seed at layer {layer} (official rule): "
             + ", ".join(pct(sc["test"][at]["sentence_f1"]) for _, sc in official)
             + f"; {len(official) - len(below)} of {len(official)} above right-branching."]
    for r, sc in below:
        own = max(sc["dev"], key=lambda k: sc["dev"][k]["sentence_f1"])
        words.append(f"Below it: seed {r['seed']} ({pct(sc['test'][at]['sentence_f1'])}); "
                     f"that run's own dev scores choose layer {own} "
                     f"({pct(sc['dev'][own]['sentence_f1'])} on dev), "
                     f"{pct(sc['test'][own]['sentence_f1'])} on test.")
    alone = [r["minutes"] for r in runs if not r.get("adopted_from")]
    if alone:
        words.append(f"Minutes per run trained by this study itself (not adopted): "
                     f"{min(alone):.1f}–{max(alone):.1f}.")
    return [" ".join(words), ""]


def table(rec: dict[str, Any],
          screen: tuple[Path, dict[str, Any]] | None = None) -> list[str]:
    study, base = rec["study"], rec["baselines"]
    lines = [f"## Sentence F1 on `{study['test']}` (%)", "",
             "Layer chosen on the dev treebank; mean ± std over seeds; validation perplexity of "
             "the same runs (best checkpoints).", "",
             "| configuration | rule | layer | seeds | valid ppl | F1 all lengths | "
             "F1 ≤ 10 words | corpus F1 all | corpus F1 ≤ 10 |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for gate, cfg in rec["summary"]["configs"].items():
        for rule, r in cfg["rules"].items():
            lines.append(f"| {GATE_TITLES.get(gate, gate)}{_gate_mark(rec, gate)} | {rule} | "
                         f"{r['layer']} | "
                         f"{len(cfg['seeds'])} | {pm(cfg['valid_ppl'], 1.0)} | "
                         f"{pm(r['test'])} | {pm(r['test_10'])} | {pm(r['test_corpus'])} | "
                         f"{pm(r['test_10_corpus'])} |")
    for name, title in BASELINE_TITLES.items():
        all_, ten = base["test"]["baselines"].get(name), base["test_10"]["baselines"].get(name)
        if all_ is None or ten is None:
            continue
        lines.append(f"| {title} | | | | | {baseline_f1(all_)} | {baseline_f1(ten)} | "
                     f"{baseline_f1(all_, 'corpus_f1')} | {baseline_f1(ten, 'corpus_f1')} |")
    return lines + [""] + adopted_note(rec, screen)


# ----------------------------------------------------------------------------- adopted runs
def _mark(r: dict[str, Any]) -> str:
    return ADOPTED if r.get("adopted_from") else ""


def _gate_mark(rec: dict[str, Any], gate: str) -> str:
    return ADOPTED if any(r["gate"] == gate and r.get("adopted_from")
                          for r in rec["runs"].values()) else ""


def adopted_note(rec: dict[str, Any],
                 screen: tuple[Path, dict[str, Any]] | None = None) -> list[str]:
    """The note on the runs the study adopted (``trees.py --adopt``): which, from where (the
    tree screen's runs when ``screen``'s record has them there), and what their minutes are."""
    adopted = [r for r in _sorted(rec["runs"]) if r.get("adopted_from")]
    if not adopted:
        return []
    dirs = sorted({from_repo(r["adopted_from"]).parent for r in adopted}, key=str)
    screen_dir = from_repo(screen[1]["runs_dir"]) if screen else None
    where = ", ".join(f"`{repo_path(d)}`" + (f" (the tree screen's runs, `{repo_path(screen[0])}`)"
                                             if screen and d == screen_dir else "")
                      for d in dirs)
    threads = sorted({r.get("adopted_threads") for r in adopted}, key=str)
    each = " or ".join("torch's default number of threads" if t is None
                       else f"{t} thread{'s' * (t != 1)}" for t in threads)
    return [f"{ADOPTED} Adopted runs ({len(adopted)} of {len(rec['runs'])}: "
            f"{'; '.join(_run_title(r) for r in adopted)}): trained in {where} and scored "
            f"there (`benchmarks/trees.py --adopt`), their saved configs equal to the one this "
            f"study trains for that gate and seed, `train.threads` and "
            f"`train.save_every_minutes` aside. Their minutes were measured with {each} "
            f"each, beside another run training on the same machine: not the time of "
            f"a run alone.", ""]


# ----------------------------------------------------------------------------- the control
def _minutes(rec: dict[str, Any], gate: str) -> dict[str, Any]:
    return mean_std([r["minutes"] for r in _sorted(rec["runs"]) if r["gate"] == gate])


def control(rec: dict[str, Any], found: tuple[Path, dict[str, Any]]) -> list[str]:
    """This study beside the perplexity config's (``found``): per gate, the layer chosen on dev
    and the test F1 under each rule, validation perplexity, tokens and minutes per run."""
    cpath, crec = found
    study = rec["study"]
    lines = ["## The perplexity config as a control", "",
             f"The study of `{PERPLEXITY_CONFIG}` (`{repo_path(cpath)}`: {budget(crec['study'])}) "
             f"beside this one (`{study['config']}`: {budget(study)}): per gate and rule the layer "
             f"chosen on `{study['dev']}`, sentence F1 (%) on `{study['test']}` at all lengths "
             f"(mean ± std over seeds), validation perplexity (best checkpoints), training "
             f"tokens and minutes per run (mean ± std).", "",
             "| config | gate | seeds | layer (official) | F1 official | layer (split) | "
             "F1 split | valid ppl | tokens | minutes per run |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for title, r in ((f"`{study['config']}` (this study)", rec),
                     (f"`{PERPLEXITY_CONFIG}` (control)", crec)):
        for gate, cfg in r["summary"]["configs"].items():
            official, split = cfg["rules"]["official"], cfg["rules"]["split"]
            lines.append(f"| {title} | {GATE_TITLES.get(gate, gate)}{_gate_mark(r, gate)} | "
                         f"{len(cfg['seeds'])} | {official['layer']} | {pm(official['test'])} | "
                         f"{split['layer']} | {pm(split['test'])} | "
                         f"{pm(cfg['valid_ppl'], 1.0)} | {millions(cfg['tokens']['mean'])} | "
                         f"{pm(_minutes(r, gate), 1.0)} |")
        if not r["summary"]["configs"]:
            lines.append(f"| {title} | no finished run | | | | | | | | |")
    return lines + [""]


def _order(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """``higher`` or ``lower`` (a against b) when the ranges mean ± std do not overlap, else
    None: the seeds' spread covers the difference."""
    if abs(a["mean"] - b["mean"]) <= a["std"] + b["std"]:
        return None
    return "higher" if a["mean"] > b["mean"] else "lower"


def _best(rec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The study's best configuration (official rule, gate chosen on dev) and its summary."""
    best = rec["summary"].get("best")
    return None if best is None else (best, rec["summary"]["configs"][best["gate"]])


def _described(rec: dict[str, Any]) -> str:
    best, cfg = _best(rec)       # type: ignore[misc]
    return (f"the {GATE_TITLES.get(best['gate'], best['gate'])} at layer {best['layer']}: "
            f"validation perplexity {pm(cfg['valid_ppl'], 1.0)} after "
            f"{millions(cfg['tokens']['mean'])} training tokens, sentence F1 "
            f"{pm(best['test'])} on `{rec['study']['test']}` over {_seeds(best['test']['n'])}")


def _seeds(n: int) -> str:
    return f"{n} seed{'s' * (n != 1)}"


def why(rec: dict[str, Any], found: tuple[Path, dict[str, Any]],
        screen: tuple[Path, dict[str, Any]] | None) -> list[str]:
    """Why the perplexity config and this study's config differ, from the two records and the
    screen's: each study's best configuration, and the two recipes at equal tokens."""
    _, crec = found
    config = rec["study"]["config"]
    said = [f"`{PERPLEXITY_CONFIG}` is the config tuned for validation perplexity; the tree "
            f"config, `{config}`, is the one this study trains. The best configuration of each "
            f"study (layer and gate chosen on `{rec['study']['dev']}`, official rule): the "
            f"perplexity config's ({budget(crec['study'])}) "
            + (_described(crec) if _best(crec) else "has no finished run")
            + f"; the tree config's ({budget(rec['study'])}) "
            + (_described(rec) if _best(rec) else "has no finished run yet") + "."]
    if _best(rec) and _best(crec):
        (tree, tcfg), (ppl, pcfg) = _best(rec), _best(crec)     # type: ignore[misc]
        diff = 100.0 * (tree["test"]["mean"] - ppl["test"]["mean"])
        order = _order(tree["test"], ppl["test"])
        said.append(
            f"In test F1 the tree config does not differ from the perplexity config: "
            f"{diff:+.1f} points, within the spread of the seeds (the ranges mean ± std overlap)."
            if order is None else
            f"In test F1 the tree config is {order} by {abs(diff):.1f} points, beyond the spread "
            f"of the seeds (the ranges mean ± std do not overlap).")
        order = _order(tcfg["valid_ppl"], pcfg["valid_ppl"])
        said.append(
            "In validation perplexity the two do not differ beyond the spread of the seeds."
            if order is None else
            f"Its validation perplexity is {order} ({pm(tcfg['valid_ppl'], 1.0)} against "
            f"{pm(pcfg['valid_ppl'], 1.0)}), at "
            f"{millions(tcfg['tokens']['mean'])} against "
            f"{millions(pcfg['tokens']['mean'])} training tokens.")
    said.append(screen_sentence(screen))
    return ["## Why the perplexity config and the tree config differ", "", " ".join(said), ""]


def screen_sentence(screen: tuple[Path, dict[str, Any]] | None) -> str:
    """The perplexity config's own recipe (``control``) against the paper's at the screen's
    equal token budget: validation perplexity and dev F1 (official rule), and the screen's
    choice."""
    if screen is None:
        return "No tree screen record yet: no comparison of the recipes at equal tokens."
    path, srec = screen
    recipes = srec["summary"]["recipes"]
    if "control" not in recipes or "paper" not in recipes:
        return (f"The tree screen (`{repo_path(path)}`) has no finished run of both the `control` "
                f"and the `paper` recipe yet.")
    c, p = recipes["control"], recipes["paper"]

    def figures(e: dict[str, Any]) -> str:
        return (f"validation perplexity {pm(e['valid_ppl'], 1.0)} and dev F1 "
                f"{pm(e['official']['dev'])} (layer {e['official']['layer']}, "
                f"{_seeds(len(e['seeds']))})")

    ppl, f1 = _order(p["valid_ppl"], c["valid_ppl"]), _order(p["official"]["dev"],
                                                             c["official"]["dev"])
    chosen = srec["summary"].get("chosen")
    return (f"In the tree screen (`{repo_path(path)}`), at an equal budget of "
            f"{srec['screen']['budget']:,} training tokens per run and a constant rate, with "
            f"F1 on `{srec['screen']['dev']}` under the official rule, the perplexity config's "
            f"own recipe (`control`: {c['what']}) reaches {figures(c)}; the paper's recipe "
            f"(`paper`: {p['what']}) reaches {figures(p)}. At equal tokens the paper's recipe "
            + ("has a validation perplexity that does not differ beyond the spread of the seeds"
               if ppl is None else f"has the {ppl} validation perplexity")
            + ("; its dev F1 does not differ beyond the spread of the seeds." if f1 is None
               else f" and the {f1} dev F1.")
            + (f" The screen's choice ({srec['summary']['choice_rule']}): `{chosen}`."
               if chosen else " The screen has chosen no recipe yet (none has every seed done).")
            )


def curves(rec: dict[str, Any], image: str) -> list[str]:
    study = rec["study"]
    rb = rec["baselines"]["dev"]["baselines"]["right_branching"]["sentence_f1"]
    lines = [f"## Sentence F1 against tokens seen (`{study['dev']}`)", "",
             f"![sentence F1 on {study['dev']} against tokens seen, per layer and rule]"
             f"(img/{image})", "",
             f"Logged at every validation by `train.eval_parse` (never used to choose a "
             f"checkpoint); right-branching on these sentences: {pct(rb)}. First validation "
             f"above it, in tokens seen (– : never):", "",
             "| run | tokens seen | minutes | valid ppl | "
             + " | ".join(k.replace("/", " ") for k in _curve_keys(rec)) + " |",
             "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in _curve_keys(rec)) + " |"]
    for key, cross in rec["summary"]["crossings"].items():
        r = rec["runs"][key]
        lines.append(f"| {r['gate']} gate, seed {r['seed']}{_mark(r)} | "
                     f"{millions(r['tokens'])} | {r['minutes']:.1f} | {r['best_valid_ppl']:.1f} | "
                     + " | ".join(millions(cross[k]) if cross.get(k) is not None else "–"
                                  for k in _curve_keys(rec)) + " |")
    return lines + [""]


def closing(rec: dict[str, Any]) -> list[str]:
    """The closing note: the verdict again, and where the curves cross right-branching."""
    best = rec["summary"]["best"]
    crossed = {run: {k: t for k, t in keys.items() if t is not None}
               for run, keys in rec["summary"]["crossings"].items()}
    crossed = {run: keys for run, keys in crossed.items() if keys}
    seeds = _study_seeds(rec, best)
    if best["beats_right_branching"] and best["test"]["n"] < seeds:
        first = (f"The target is not decided yet: the best configuration's test F1 under the "
                 f"official rule, {pm(best['test'])}, is above right-branching "
                 f"({pct(best['right_branching_test'])}), but over {best['test']['n']} of its "
                 f"{seeds} seeds.")
    elif best["beats_right_branching"]:
        first = (f"The target is met: the best configuration's mean test F1 under the official "
                 f"rule, {pm(best['test'])}, is above right-branching "
                 f"({pct(best['right_branching_test'])}).")
    else:
        first = (f"The target is not met: the best configuration's mean test F1 under the "
                 f"official rule, {pm(best['test'])}, is below right-branching "
                 f"({pct(best['right_branching_test'])}) at this budget "
                 f"({budget(rec['study'])}).")
    if crossed:
        where = "; ".join(f"{run.replace('/', ' gate, seed ')}: "
                          + ", ".join(f"{k.replace('/', ' ')} at {millions(t)} tokens"
                                      for k, t in keys.items())
                          for run, keys in crossed.items())
        second = f"On the dev treebank, curves above right-branching at some validation: {where}."
    else:
        second = ("On the dev treebank no run's curve rose above right-branching at any "
                  "validation, for any layer or rule.")
    return ["## Closing note", "", first + " " + second, ""]


def _sorted(runs: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(runs.values(), key=lambda r: (r["gate"], r["seed"]))


def _run_title(r: dict[str, Any]) -> str:
    return f"{r['gate']} gate, seed {r['seed']}"


def _curved(rec: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    """Every run with a curve: (entry, finished), finished runs first."""
    return ([(r, True) for r in _sorted(rec["runs"])]
            + [(r, False) for r in _sorted(rec.get("in_progress") or {})])


def _crossing(points: list[dict[str, Any]], key: str, rb: float) -> float | None:
    return next((p["tokens"] for p in points if p.get(key, 0.0) > rb), None)


def running(rec: dict[str, Any]) -> list[str]:
    """The runs still training when the record was written: where their curves stand."""
    live = _sorted(rec.get("in_progress") or {})
    if not live:
        return []
    rb = rec["baselines"]["dev"]["baselines"]["right_branching"]["sentence_f1"]
    keys = _curve_keys(rec)
    lines = ["## Runs still training", "",
             f"As the record was written: the latest validation of each unfinished run (dev "
             f"sentence F1 %, `{rec['study']['dev']}`; right-branching {pct(rb)}), and in "
             f"brackets the tokens seen at its first validation above right-branching. These "
             f"runs have no test figure yet.", "",
             "| run | tokens seen | minutes | valid ppl | "
             + " | ".join(k.replace("/", " ") for k in keys) + " |",
             "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in keys) + " |"]
    for r in live:
        last = r["curve"][-1]
        cells = []
        for k in keys:
            cross = _crossing(r["curve"], k, rb)
            cells.append((pct(last[k]) if k in last else "–")
                         + (f" ({millions(cross)})" if cross is not None else ""))
        ppl = f"{last['ppl']:.1f}" if last.get("ppl") is not None else "–"
        lines.append(f"| {_run_title(r)} | {millions(r['tokens'])} | {r['minutes']:.1f} | {ppl} | "
                     + " | ".join(cells) + " |")
    return lines + [""]


def _curve_keys(rec: dict[str, Any]) -> list[str]:
    keys = {k for r, _ in _curved(rec) for p in r["curve"] for k in p if "/L" in k}
    return sorted(keys, key=lambda k: (k.split("/")[0] != "official", k))


def per_run(rec: dict[str, Any]) -> list[str]:
    study = rec["study"]
    layers = sorted({k for r in rec["runs"].values()
                     for k in r["scores"]["official"]["dev"]}, key=int)
    cols = [f"{rule} L{k}" for rule in rec["rules"] for k in layers]
    lines = ["## Every run (best checkpoint, sentence F1 %)", "",
             f"Dev (`{study['dev']}`) and test (`{study['test']}`, all lengths), per layer and "
             f"rule.",
             "", "| run | part | " + " | ".join(cols) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in cols) + " |"]
    for key in sorted(rec["runs"], key=lambda k: (rec["runs"][k]["gate"], rec["runs"][k]["seed"])):
        r = rec["runs"][key]
        for part in ("dev", "test"):
            cells = [pct(r["scores"][rule][part][k]["sentence_f1"])
                     if k in r["scores"][rule][part] else "–"
                     for rule in rec["rules"] for k in layers]
            lines.append(f"| {r['gate']} gate, seed {r['seed']}{_mark(r)} | {part} | "
                         + " | ".join(cells) + " |")
    return lines + [""]


def example(rec: dict[str, Any], images: dict[str, str]) -> list[str]:
    ex = rec["example"]
    lines = ["## A test sentence", "",
             f"{ex['choice'][0].upper()}{ex['choice'][1:]} (`{ex['source']}`): "
             f"*{' '.join(ex['words'])}*.", "",
             f"![gold tree](img/{images['gold']})", ""]
    for gate, (title, _) in _drawn(rec).items():
        lines += [f"![{title}](img/{images[gate]})", ""]
    return lines


def _drawn(rec: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Per gate: (title, run key) of the drawn tree: the first seed, the official rule's layer."""
    out = {}
    for gate, cfg in rec["summary"]["configs"].items():
        seed = min(cfg["seeds"])
        layer = cfg["rules"]["official"]["layer"]
        out[gate] = (f"{GATE_TITLES.get(gate, gate)}, seed {seed}, layer {layer}, official rule",
                     f"{gate}/{seed}")
    return out


# ----------------------------------------------------------------------------- pictures
def plot_curves(rec: dict[str, Any], path: Path) -> None:
    """F1 on the dev treebank against tokens seen: a panel per gate, right-branching across."""
    from matplotlib.figure import Figure

    gates = [g for g in rec["gates"] if any(r["gate"] == g for r, _ in _curved(rec))]
    dev = rec["baselines"]["dev"]["baselines"]
    rb = 100.0 * dev["right_branching"]["sentence_f1"]
    control = (100.0 * dev["random_levels_official"]["sentence_f1"]["mean"]
               if "random_levels_official" in dev else None)
    keys = _curve_keys(rec)
    layers = sorted({k.split("/L")[1] for k in keys}, key=int)
    colours = {k: f"C{i}" for i, k in enumerate(layers)}
    fig = Figure(figsize=(5.5 * max(1, len(gates)), 4.2))
    axes = fig.subplots(1, max(1, len(gates)), squeeze=False, sharey=True)[0]
    for ax, gate in zip(axes, gates):
        shown = set()
        for r, done in _curved(rec):
            if r["gate"] != gate:
                continue
            xs = [p["tokens"] / 1e6 for p in r["curve"]]
            for key in keys:
                rule, layer = key.split("/L")
                label = None if key in shown else f"layer {layer}, {rule}"
                shown.add(key)
                ax.plot(xs, [100.0 * p[key] if key in p else float("nan") for p in r["curve"]],
                        RULE_STYLE.get(rule, ":"), color=colours[layer], lw=1.2 if done else 0.8,
                        alpha=0.85 if done else 0.5, marker="." if done else "x", ms=3,
                        label=label)
        if any(not done and r["gate"] == gate for r, done in _curved(rec)):
            ax.plot([], [], "x", color="grey", ms=3, label="× : run still training")
        ax.axhline(rb, color="black", lw=1.0, ls=":", label=f"right-branching {rb:.1f}")
        if control is not None:
            ax.axhline(control, color="grey", lw=1.0, ls="-.",
                       label=f"rule control, official {control:.1f}")
        ax.set_title(GATE_TITLES.get(gate, gate))
        ax.set_xlabel("tokens seen (millions)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"sentence F1 on {rec['study']['dev']} (%)")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # off the curves
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", facecolor="white")


def draw_trees(rec: dict[str, Any], img: Path, prefix: str) -> dict[str, str]:
    """The example's gold tree and each gate's tree, drawn; ``{gold|gate: file name}``."""
    from treelm.syntax.render import plot_tree

    names = {"gold": f"{prefix}-tree-gold.png"}
    plot_tree(rec["example"]["gold"], img / names["gold"], title="gold tree (preprocessed)")
    for gate, (title, key) in _drawn(rec).items():
        layer = str(rec["summary"]["configs"][gate]["rules"]["official"]["layer"])
        names[gate] = f"{prefix}-tree-{gate}.png"
        plot_tree(rec["runs"][key]["example_trees"]["official"][layer], img / names[gate],
                  title=title)
    return names


# ----------------------------------------------------------------------------- page
def render(path: Path, rec: dict[str, Any], doc: Path, img: Path | None = None,
           prefix: str = "syntax-results", results: Path = RESULTS) -> str:
    """Write the page for ``rec`` (read from ``path``) to ``doc`` and its pictures to ``img``
    (default ``doc``'s ``img/``); returns the page. ``results``: where the control study's and
    the screen's records are found."""
    img = img or doc.parent / "img"
    screen = newest_screen(results)
    lines = head(path, rec) + verdict(rec) + table(rec, screen)
    found = (perplexity_study(results)
             if rec["study"]["config"] != PERPLEXITY_CONFIG else None)
    if found is not None:
        lines += control(rec, found) + why(rec, found, screen)
    if rec["runs"]:
        plot_curves(rec, img / f"{prefix}-f1.png")
        lines += curves(rec, f"{prefix}-f1.png") + running(rec) + per_run(rec)
        lines += example(rec, draw_trees(rec, img, prefix)) + closing(rec)
    elif rec.get("in_progress"):
        plot_curves(rec, img / f"{prefix}-f1.png")
        lines += [f"## Sentence F1 against tokens seen (`{rec['study']['dev']}`)", "",
                  f"![sentence F1 on {rec['study']['dev']} against tokens seen, per layer and "
                  f"rule, runs still training](img/{prefix}-f1.png)", ""] + running(rec)
    return write_page(doc, lines)


def main(results: Path = RESULTS, doc: Path = DOC) -> Path | None:
    """Render the newest trees record, if there is one; the page's path, or None."""
    return render_newest(newest(results), render, doc, 'trees')


if __name__ == "__main__":
    main()
