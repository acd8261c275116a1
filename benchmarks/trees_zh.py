"""Su Jianlin's Chinese experiment, measured (issue 39): the tree study of ``benchmarks/trees.py``
on the Sinica Treebank, the trees of Su's two sentences from each run, and the page
``docs/syntax-zh.md``.

    NLTK_DATA=../shared/data/nltk_data python benchmarks/trees_zh.py \\
        [--tokens 2000000 --eval-every-tokens 68780 | --minutes M] [--seeds 3] \\
        [--gates paper symmetric] [--runs runs/trees-zh] [trees.py options] [key=value ...]
    python benchmarks/trees_zh.py --page          # the page from the newest trees-zh record

The study is ``benchmarks/trees.py`` with the Chinese defaults: ``--config
configs/sinica-onlstm.yaml --dev sinica-dev --test sinica-test --runs runs/trees-zh`` and its
record ``benchmarks/results/trees-zh-<YYYYMMDD>.json`` (the date of the study's first day: a rerun
finds the record of its ``--runs``); every option of trees.py passes through (a rerun skips
finished runs and resumes killed ones, as there). Without a budget flag a run trains for the
config's own budget (2,000,000 tokens, a validation at each epoch's end: the config's comments
give the measured curve it was chosen from). Each finished run is trained on the treebank's
``lm-train`` text only, its layer chosen on ``sinica-dev`` per gate and rule over the seeds, and
reported on ``sinica-test`` beside the baselines and the rule control on the same sentences.

Then each scored run's best checkpoint parses 苹果的颜色是什么 and 爱真的需要勇气, Su's
sentences, in Simplified characters as he wrote them, through ``treelm.load(run).levels``
(jieba segmentation, OpenCC's conversion to the treebank's Traditional characters:
:mod:`treelm.text.chinese`): their tokens, unknown words and trees at every layer under both
rules go into the record under ``su``.

The page (:func:`render`) is a copy of the record: the verdict (the mean sentence F1 of the best
configuration on dev, official rule, layer chosen on dev, against the strongest trivial baseline on
``sinica-test``; "not met" said plainly, with the curves), the table, English and Chinese side by
side (:func:`english_record`: the newest record of the tree config's study,
``configs/ptb-onlstm-trees.yaml``, else the newest English record of ``benchmarks/trees.py``, the
page naming which), and Su's trees: as text per seed, and the first seed's as PNG pictures, each
captioned with its gate, seed, layer and rule. The pictures are drawn only where a CJK font is
installed (Debian's ``fonts-noto-cjk``; clear matplotlib's font cache after installing one);
elsewhere they are left as they were and stderr says so: the page's text is the same on any
machine. Without a record the page says so and how to make one. ``python benchmarks/report.py``
renders it with the other pages.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402
import syntax_results as english  # noqa: E402
from common import RESULTS, repo_path, result_path, write_result  # noqa: E402
from syntax_results import (  # noqa: E402
    BASELINE_TITLES,
    GATE_TITLES,
    baseline_f1,
    budget,
    finished_line,
    pct,
    per_run,
    pm,
)

DOC = ROOT / "docs" / "syntax-zh.md"
SCRIPT = "trees-zh"
DEFAULTS = {"--config": "configs/sinica-onlstm.yaml", "--dev": "sinica-dev",
            "--test": "sinica-test", "--runs": "runs/trees-zh"}
#: Su Jianlin's two sentences, as he wrote them (Simplified characters).
SU_SENTENCES = ("苹果的颜色是什么", "爱真的需要勇气")
#: The trivial baselines; the strongest of them on the test treebank is the target to beat.
TRIVIAL = ("left_branching", "right_branching", "balanced", "random")


class ZhError(Exception):
    """A problem with the arguments or the record; printed as one line."""


# ----------------------------------------------------------------------------- the study
def study_argv(argv: Sequence[str]) -> tuple[list[str], Path]:
    """``argv`` with the Chinese defaults of the options it does not give, and the record:
    ``--out``, or the trees-zh record of the study's ``--runs``, or today's."""
    ap = argparse.ArgumentParser(add_help=False)
    for flag in DEFAULTS:
        ap.add_argument(flag)
    ap.add_argument("--out")
    given, _ = ap.parse_known_args(argv)
    argv = [*(a for flag, value in DEFAULTS.items()
              if getattr(given, flag[2:]) is None for a in (flag, value)), *argv]
    runs = Path(given.runs or DEFAULTS["--runs"])
    out = Path(given.out) if given.out else find_record(runs) or result_path(SCRIPT)
    if not given.out:
        argv = ["--out", str(out), *argv]
    return argv, out


def find_record(runs: Path, results: Path = RESULTS) -> Path | None:
    """The newest trees-zh record of the study whose runs are in ``runs``."""
    return common.find_record(runs, f"{SCRIPT}-*.json", results)


def su_trees(run_dir: str | Path, sentences: Sequence[str] = SU_SENTENCES) -> dict[str, Any]:
    """Su's sentences through a run's best checkpoint, as ``treelm parse`` reads them: per
    sentence its tokens and unknown words, and per rule and layer its tree."""
    import treelm
    from treelm.syntax.trees import TREE_STYLES

    model = treelm.load(run_dir)
    levels = [model.levels(s) for s in sentences]
    return {"tokens": [lv.tokens for lv in levels],
            "unknown": [[lv.tokens[i] for i in lv.unknown] for lv in levels],
            "trees": {rule: {str(k): [lv.tree(k, rule) for lv in levels] for k in model.layers}
                      for rule in TREE_STYLES}}


def add_su(rec: dict[str, Any], before: dict[str, Any] | None = None) -> dict[str, Any]:
    """``rec`` with Su's trees from each of its scored runs (those of ``before``, the record's
    earlier ``su``, kept)."""
    from treelm.text.chinese import SCRIPTS

    old = (before or {}).get("runs", {})
    runs = {key: old.get(key) or su_trees(r["run_dir"]) for key, r in rec["runs"].items()}
    return {**rec, "su": {"sentences": list(SU_SENTENCES), "runs": runs,
                          "reading": "treelm.load(RUN).levels(sentence): jieba segmentation of "
                                     "what the vocabulary lacks, OpenCC "
                                     f"{SCRIPTS['taiwan']} conversion to the treebank's script"}}


def run_study(argv: Sequence[str]) -> dict[str, Any]:
    """The study through benchmarks/trees.py, then Su's trees; the record written."""
    import trees

    args, out = study_argv(argv)
    before = json.loads(out.read_text(encoding="utf-8")).get("su") if out.exists() else None
    rec = trees.main(args)           # writes the record without "su": added back below
    ours = shlex.join(["python", "benchmarks/trees_zh.py", *argv])   # the study's own command
    rec = {k: v for k, v in rec.items() if k not in ("script", "date", "machine")}
    rec = add_su({**rec, "command": ours,
                  "commands": [c for c in rec.get("commands", []) if c != rec.get("command")]
                  + [ours]}, before)
    return write_result(SCRIPT.replace("-", "_"), rec, path=out, echo=False)


# ----------------------------------------------------------------------------- the page
def newest(results: Path = RESULTS) -> tuple[Path, dict[str, Any]] | None:
    return common.newest_record(f"{SCRIPT}-[0-9]*.json", results)


def _mean(res: dict[str, Any]) -> float:
    value = res["sentence_f1"]
    return value["mean"] if isinstance(value, dict) else value


def strongest(baselines: dict[str, Any]) -> tuple[str, float]:
    """The trivial baseline with the best (mean) sentence F1 and that F1."""
    name = max((b for b in TRIVIAL if b in baselines), key=lambda b: _mean(baselines[b]))
    return name, _mean(baselines[name])


def best_entry(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The best configuration (gate with the best mean dev F1, official rule, layer chosen on
    dev) against the strongest trivial baseline on test: None before any run finished."""
    configs = rec["summary"]["configs"]
    if not configs:
        return None
    gate = max(configs, key=lambda g: configs[g]["rules"]["official"]["dev"]["mean"])
    official = configs[gate]["rules"]["official"]
    name, f1 = strongest(rec["baselines"]["test"]["baselines"])
    return {"gate": gate, "layer": official["layer"], "test": official["test"],
            "baseline": name, "baseline_f1": f1, "margin": official["test"]["mean"] - f1,
            "seeds": len(rec.get("seeds") or []) or official["test"]["n"]}


def head(path: Path, rec: dict[str, Any]) -> list[str]:
    study, base = rec["study"], rec["baselines"]
    m = rec.get("machine", {})
    extra = "".join(f", `{o}`" for o in study.get("overrides") or [])
    return [
        "# Trees beyond English: ON-LSTM on the Sinica Treebank", "",
        f"Generated by `python benchmarks/trees_zh.py --page` (or `benchmarks/report.py`) from "
        f"`{repo_path(path)}` (do not edit: every figure is a copy of the record). "
        "Commands: " + "; ".join(f"`{c}`" for c in rec.get("commands", [rec["command"]])) + ".",
        "",
        f"- Training: `{study['config']}` on the treebank's `lm-train` text (never the dev or "
        f"test trees), {budget(study)}{extra}, gates "
        f"{', '.join(GATE_TITLES.get(g, g) for g in rec['gates'])}, seeds "
        f"{', '.join(map(str, rec['seeds']))}; checkpoints chosen on validation perplexity "
        f"alone; {m.get('cpu', '?')}" + (f", {m['gpu']}" if m.get("gpu") else "")
        + f", torch {m.get('torch', '?')}.",
        f"- Trees: every layer under both rules, sentence F1 (unlabeled, without the "
        f"whole-sentence span). The layer is chosen per gate and rule on `{study['dev']}` "
        f"({base['dev']['n_sentences']:,} clauses); the figures are those of `{study['test']}` "
        f"({base['test']['n_sentences']:,} clauses). The split and the preprocessing: "
        "[syntax.md](syntax.md#chinese-the-sinica-treebank).",
        "- Baselines and the rule control on the same clauses (random trees and random levels: "
        "mean ± std over seeds).", ""]


def verdict(rec: dict[str, Any]) -> list[str]:
    best = best_entry(rec)
    if best is None:
        return ["## Result", "", "No run has finished yet: there is no test figure.", "",
                finished_line(rec), ""]
    control = rec["baselines"]["test"]["baselines"].get("random_levels_official")
    above = best["margin"] > 0
    if not above:
        met = "**not met**"
    elif best["test"]["n"] < best["seeds"]:
        met = f"**not decided yet** ({best['test']['n']} of {best['seeds']} seeds finished)"
    else:
        met = "**met**"
    sign = "+" if best["margin"] >= 0 else "−"
    lines = ["## Result", "",
             f"The best configuration on `{rec['study']['dev']}` under the official rule, the "
             f"{GATE_TITLES.get(best['gate'], best['gate'])} with layer {best['layer']}, gives "
             f"**{pm(best['test'])}** sentence F1 on `{rec['study']['test']}` over "
             f"{best['test']['n']} seed(s), against the strongest trivial baseline there, "
             f"{BASELINE_TITLES[best['baseline']]} {pct(best['baseline_f1'])} ({sign}"
             f"{pct(abs(best['margin']))} points)"
             + (f", and the official rule's control {baseline_f1(control)}" if control else "")
             + f": the target, the mean above the strongest trivial baseline, is {met}.", "",
             finished_line(rec), ""]
    if not above:
        lines += [f"The mean stays below {BASELINE_TITLES[best['baseline']]} at this budget "
                  f"({budget(rec['study'])}); the curves below show where each layer's dev F1 "
                  f"stood at every validation.", ""]
    return lines


def table(rec: dict[str, Any]) -> list[str]:
    study, base = rec["study"], rec["baselines"]
    lines = [f"## Sentence F1 on `{study['test']}` (%)", "",
             f"Layer chosen on `{study['dev']}`; mean ± std over seeds; validation perplexity of "
             "the same runs (best checkpoints, `lm-valid`).", "",
             "| configuration | rule | layer | seeds | valid ppl | dev F1 | test F1 | "
             "test corpus F1 |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for gate, cfg in rec["summary"]["configs"].items():
        for rule, r in cfg["rules"].items():
            lines.append(f"| {GATE_TITLES.get(gate, gate)} | {rule} | {r['layer']} | "
                         f"{len(cfg['seeds'])} | {pm(cfg['valid_ppl'], 1.0)} | {pm(r['dev'])} | "
                         f"{pm(r['test'])} | {pm(r['test_corpus'])} |")
    for name, title in BASELINE_TITLES.items():
        dev, test = base["dev"]["baselines"].get(name), base["test"]["baselines"].get(name)
        if dev is None or test is None:
            continue
        lines.append(f"| {title} | | | | | {baseline_f1(dev)} | {baseline_f1(test)} | "
                     f"{baseline_f1(test, 'corpus_f1')} |")
    name, f1 = strongest(base["test"]["baselines"])
    lines += ["", f"Strongest trivial baseline on `{study['test']}`: {BASELINE_TITLES[name]} "
              f"({pct(f1)}).", ""]
    return lines


#: The English tree study the side-by-side table prefers: the study of the tree config.
TREE_CONFIG = "configs/ptb-onlstm-trees.yaml"


def english_record(results: Path = RESULTS) -> tuple[Path, dict[str, Any], str] | None:
    """The English record of ``benchmarks/trees.py`` to set beside the Chinese one: the newest
    whose study trained :data:`TREE_CONFIG`, else the newest of any config; (path, record, why),
    None when there is none."""
    files = sorted(results.glob("trees-[0-9]*.json"), reverse=True)
    records = [(f, json.loads(f.read_text(encoding="utf-8"))) for f in files]
    for f, rec in records:
        if rec.get("study", {}).get("config") == TREE_CONFIG:
            return f, rec, f"the newest record of the tree config's study (`{TREE_CONFIG}`)"
    if not records:
        return None
    f, rec = records[0]
    return f, rec, (f"no record of the tree config's study (`{TREE_CONFIG}`) yet: the newest "
                    f"English record, whose study trained `{rec['study']['config']}`")


def side_by_side(rec: dict[str, Any], results: Path) -> list[str]:
    """English (:func:`english_record`) and Chinese: which layer parses, by how much the best
    configuration beats its treebank's strongest trivial baseline."""
    rows = [("Chinese", rec)]
    found = english_record(results)
    if found is not None:
        rows.insert(0, ("English", found[1]))
    lines = ["## English and Chinese side by side", "",
             "The best configuration of each study on its dev treebank (official rule, layer "
             "chosen on dev), on its test treebank: mean sentence F1 over seeds against the "
             "strongest trivial baseline on the same sentences.", "",
             "| language | treebank (test) | config | gate | layer | seeds | F1 | strongest "
             "trivial baseline | F1 − baseline |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | --- | ---: |"]
    for lang, r in rows:
        best = best_entry(r)
        if best is None:
            lines.append(f"| {lang} | `{r['study']['test']}` | `{r['study']['config']}` | "
                         "no finished run | | | | | |")
            continue
        sign = "+" if best["margin"] >= 0 else "−"
        lines.append(f"| {lang} | `{r['study']['test']}` | `{r['study']['config']}` | "
                     f"{best['gate']} | {best['layer']} | {best['test']['n']} | "
                     f"{pm(best['test'])} | {BASELINE_TITLES[best['baseline']]} "
                     f"{pct(best['baseline_f1'])} | {sign}{pct(abs(best['margin']))} |")
    if found is None:
        lines += ["", "No English record of `benchmarks/trees.py` yet."]
    else:
        path, english_rec, why = found
        lines += ["", f"English: `{repo_path(path)}`, {why}"
                  + ("" if english_rec["study"]["config"] == TREE_CONFIG else
                     f" (the budget and recipe differ from the tree config's: "
                     f"{budget(english_rec['study'])}"
                     + "".join(f", `{o}`" for o in english_rec["study"].get("overrides") or [])
                     + ")") + "."]
    return lines + [""]


def cjk_font() -> str | None:
    """An installed font with Chinese glyphs (:data:`treelm.syntax.render.CJK_FONTS`), if any:
    without one, matplotlib draws Chinese words as empty boxes."""
    from matplotlib import font_manager

    from treelm.syntax.render import CJK_FONTS

    installed = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


def su_section(rec: dict[str, Any], img: Path, prefix: str) -> list[str]:
    """Su's sentences: per seed of the best gate, the tokens read and the tree at the layer
    chosen on dev under the official rule; pictures of the first seed's where a CJK font is."""
    from treelm.syntax.trees import ascii_tree, tree_to_brackets

    su = rec.get("su")
    best = best_entry(rec)
    lines = ["## Su Jianlin's two sentences", ""]
    if not su or best is None:
        return lines + ["No scored run has parsed them yet.", ""]
    gate, layer = best["gate"], str(best["layer"])
    lines += [f"{', '.join(su['sentences'])}, in Simplified characters as Su wrote them, read by "
              f"{su['reading']}. Trees of the {GATE_TITLES.get(gate, gate)}, layer {layer} (chosen "
              f"on dev), official rule, one per seed.", ""]
    keys = sorted((k for k in su["runs"] if rec["runs"][k]["gate"] == gate),
                  key=lambda k: rec["runs"][k]["seed"])
    from treelm.syntax.render import CJK_FONTS

    font = cjk_font()
    for i, sentence in enumerate(su["sentences"]):
        first = su["runs"][keys[0]] if keys else None
        if first is None:
            break
        unknown = first["unknown"][i]
        lines += [f"### {sentence}", "",
                  f"Tokens: {' '.join(first['tokens'][i])}"
                  + (f" (read as <unk>: {', '.join(unknown)})" if unknown else
                     " (all in the vocabulary)") + ".", ""]
        for key in keys:
            tree = su["runs"][key]["trees"]["official"][layer][i]
            seed = rec["runs"][key]["seed"]
            lines += [f"Seed {seed}: `{tree_to_brackets(tree)}`", "", "```",
                      ascii_tree(tree), "```", ""]
        name = f"{prefix}-su{i + 1}.png"
        seed = rec["runs"][keys[0]]["seed"]
        shown = (f"{GATE_TITLES.get(gate, gate)}, seed {seed}, layer {layer} (chosen on dev), "
                 f"official rule")
        if font is not None:
            from treelm.syntax.render import plot_tree

            plot_tree(su["runs"][keys[0]]["trees"]["official"][layer][i], img / name,
                      title=f"{sentence}: {gate} gate, seed {seed}, layer {layer}, official rule")
        lines += [f"Drawn: the tree of the {shown}.", "", f"![{sentence}: {shown}](img/{name})",
                  ""]
    if font is None:        # the page is the same text; its pictures are left as they were
        print(f"trees_zh.py: no CJK font ({', '.join(CJK_FONTS[:2])}, ...) installed: Su's "
              f"trees not drawn (install fonts-noto-cjk and clear matplotlib's font cache)",
              file=sys.stderr)
    return lines


def plot_curves(rec: dict[str, Any], path: Path) -> None:
    """Dev F1 against tokens seen: a panel per gate, a line per layer and rule and seed, the
    strongest trivial baseline and the official rule's control across."""
    from matplotlib.figure import Figure

    runs = english._curved(rec)
    gates = [g for g in rec["gates"] if any(r["gate"] == g for r, _ in runs)]
    dev = rec["baselines"]["dev"]["baselines"]
    name, f1 = strongest(dev)
    keys = english._curve_keys(rec)
    layers = sorted({k.split("/L")[1] for k in keys}, key=int)
    colours = {k: f"C{i}" for i, k in enumerate(layers)}
    fig = Figure(figsize=(5.5 * max(1, len(gates)), 4.2))
    axes = fig.subplots(1, max(1, len(gates)), squeeze=False, sharey=True)[0]
    for ax, gate in zip(axes, gates):
        shown: set[str] = set()
        for r, done in runs:
            if r["gate"] != gate:
                continue
            xs = [p["tokens"] / 1e6 for p in r["curve"]]
            for key in keys:
                rule, layer = key.split("/L")
                ax.plot(xs, [100.0 * p[key] if key in p else float("nan") for p in r["curve"]],
                        english.RULE_STYLE.get(rule, ":"), color=colours[layer], lw=1.0,
                        alpha=0.85 if done else 0.5, marker="." if done else "x", ms=3,
                        label=None if key in shown else f"layer {layer}, {rule}")
                shown.add(key)
        ax.axhline(100.0 * f1, color="black", lw=1.0, ls=":",
                   label=f"{BASELINE_TITLES[name]} {100.0 * f1:.1f}")
        if "random_levels_official" in dev:
            c = 100.0 * _mean(dev["random_levels_official"])
            ax.axhline(c, color="grey", lw=1.0, ls="-.", label=f"rule control, official {c:.1f}")
        ax.set_title(GATE_TITLES.get(gate, gate))
        ax.set_xlabel("tokens seen (millions)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"sentence F1 on {rec['study']['dev']} (%)")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", facecolor="white")


def no_record() -> str:
    return "\n".join([
        "# Trees beyond English: ON-LSTM on the Sinica Treebank", "",
        "Generated by `python benchmarks/trees_zh.py --page` (do not edit).", "",
        "**No record exists yet**: no `benchmarks/results/trees-zh-<date>.json` has been "
        "written, so this page has no trained model's figures and no trees of Su Jianlin's "
        "sentences. The study that writes it (3 seeds per gate of `configs/sinica-onlstm.yaml`, "
        "layer chosen on `sinica-dev`, both tree rules, reported on `sinica-test` with the "
        "baselines and the rule control):", "",
        "```",
        "NLTK_DATA=../shared/data/nltk_data python benchmarks/trees_zh.py --seeds 3 --threads 1 "
        "--tokens 2000000 --eval-every-tokens 68780 train.threads=1",
        "python benchmarks/trees_zh.py --page",
        "```", "",
        "The baselines alone need no model: `treelm eval-parse --baseline all --treebank "
        "sinica-test` (figures and the split: [syntax.md](syntax.md#chinese-the-sinica-treebank))."
        , ""])


def render(path: Path | None, rec: dict[str, Any] | None, doc: Path = DOC,
           img: Path | None = None, prefix: str = "syntax-zh",
           results: Path = RESULTS) -> str:
    """Write the page of ``rec`` (read from ``path``; None: the page without a record) to
    ``doc``, its pictures to ``img`` (default ``doc``'s ``img/``); returns the page."""
    img = img or doc.parent / "img"
    if rec is None or path is None:
        text = no_record()
    else:
        lines = head(path, rec) + verdict(rec) + table(rec) + side_by_side(rec, results)
        if rec["runs"] or rec.get("in_progress"):
            plot_curves(rec, img / f"{prefix}-f1.png")
            lines += [f"## Sentence F1 against tokens seen (`{rec['study']['dev']}`)", "",
                      f"![sentence F1 on {rec['study']['dev']} against tokens seen]"
                      f"(img/{prefix}-f1.png)", "",
                      "Logged at every validation by `train.eval_parse` (never used to choose a "
                      "checkpoint).", ""]
        if rec["runs"]:
            lines += per_run(rec)
        lines += su_section(rec, img, prefix)
        text = "\n".join(lines).rstrip() + "\n"
    return common.write_page(doc, [text])


def main(results: Path = RESULTS, doc: Path = DOC) -> Path:
    """Render the newest trees-zh record, or the page that says there is none."""
    found = newest(results)
    render(*(found or (None, None)), doc, results=results)
    print(f"wrote {doc}" + ("" if found else " (no trees-zh record yet)"))
    return doc


def cli(argv: Sequence[str] | None = None) -> int:
    from treelm.errors import TreelmError

    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    ap.add_argument("--page", action="store_true")
    known, rest = ap.parse_known_args(argv)
    try:
        if known.page:
            if rest:
                raise ZhError(f"--page takes no other argument, got {' '.join(rest)}")
            main()
            return 0
        import trees

        try:
            run_study(rest)
        except trees.StudyError as e:
            raise ZhError(str(e)) from None
        main()
    except (ZhError, TreelmError) as e:
        print(f"trees_zh.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
