"""``treelm study --status``: the table of runs and the summary so far, as plain text.

Runs are listed from the study file, each with its state (done, running, queued, left, failed;
``recorded`` for a run the record holds whose directory is not on this machine) and its figures;
the summary gives, per variant and rule, the layer dev chose and the mean ± std of the tree F1 on
dev and test (or the task's scores), then what dev chose for the study.
"""

from __future__ import annotations

from typing import Any

from treelm.study.markdown import f1, pct
from treelm.study.spec import Study


def _ms(m: dict[str, Any], percent: bool = True) -> str:
    if percent:
        return f"{pct(m['mean'])} ± {pct(m['std'])}"
    return f"{m['mean']:.4g} ± {m['std']:.2g}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def run_rows(study: Study, record: dict[str, Any], states: dict[str, str],
             progress: dict[str, dict[str, Any]]) -> list[str]:
    rows = [["run", "state", "tokens", "valid ppl", "minutes", "directory"]]
    for spec in study.run_specs():
        entry = record["runs"].get(spec.key)
        state = states.get(spec.key, "left")
        if state == "left" and entry is not None and not spec.run_dir.exists():
            state = "recorded"
        info = entry or progress.get(spec.key) or {}
        ppl = info.get("best_valid_ppl", info.get("ppl"))
        rows.append([spec.key, state, f"{info['tokens']:,}" if "tokens" in info else "",
                     f"{ppl:.1f}" if isinstance(ppl, int | float) else "",
                     f"{info['minutes']:.1f}" if "minutes" in info else "",
                     entry["run_dir"] if entry else ""])
    return _table(rows)


def tree_lines(record: dict[str, Any]) -> list[str]:
    """The tree summary of each checkpoint scored, then the baselines."""
    summary = record["summary"].get("trees")
    if not summary:
        return []
    lines = checkpoint_lines(record, summary)
    for other in (record["summary"].get("trees_by_checkpoint") or {}).values():
        lines += ["", *checkpoint_lines(record, other)]
    parts = summary["parts"]
    base = record.get("baselines") or {}
    for part in ["dev", *parts]:
        b = base.get(part, {}).get("baselines", {})
        if "right_branching" in b:
            others = "; ".join(f"{k.replace('_', ' ')} {pct(f1(b[k]))}" for k in b
                               if k != "right_branching")
            lines.append(f"baselines on {part} ({base[part]['n_sentences']:,} sentences): "
                         f"right branching {pct(f1(b['right_branching']))}; {others}")
    return lines


def checkpoint_lines(record: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    """One checkpoint's summary: per variant and rule the layer dev chose, dev and test, each
    run's own choice, and what dev chose for the study."""
    trees = record["study"]["score"]["trees"]
    parts = summary["parts"]
    lines = [f"sentence F1 (%), mean ± std over seeds, checkpoint {summary['checkpoint']}; "
             f"layer chosen on {trees['dev']}" + (f"; reported on {trees['test']}" if parts
                                                  else "")]
    first = parts[0] if parts else "dev"
    rows = [["variant", "rule", "seeds", "layer", "dev", *parts, f"{first} per seed",
             f"per-run layer: {first}"]]
    for v, e in summary["variants"].items():
        for rule, r in e["rules"].items():
            own = r["per_run"]
            rows.append([v, rule, str(len(e["seeds"])), r["layer"], _ms(r["dev"]),
                         *[_ms(r[p]) for p in parts],
                         " ".join(pct(x) for x in r[first]["runs"]),
                         f"{_ms(own[first])} (layers {' '.join(own['layers'])})"])
    lines += _table(rows)
    for v, e in summary["variants"].items():
        pc = e["per_run_choice"]
        part = parts[0] if parts else "dev"
        seeds = ", ".join(f"{c['rule']} L{c['layer']}" for c in pc["choices"])
        lines.append(f"{v}: each run's own rule and layer on dev ({seeds}): {part} "
                     f"{_ms(pc[part])}; per seed " + " ".join(pct(x) for x in pc[part]["runs"]))
    ch = summary.get("chosen")
    if ch:
        lines.append(f"chosen on dev: {ch['variant']}, {ch['rule']} rule, layer {ch['layer']} "
                     f"(dev {pct(ch['dev'])})" + "".join(f"; {p} {pct(ch[p])}" for p in parts))
    return lines


def score_lines(record: dict[str, Any]) -> list[str]:
    summary = record["summary"].get("scores")
    if not summary or record["summary"].get("trees"):
        return []
    lines = []
    for v, e in summary["variants"].items():
        parts = [f"valid {k} {_ms(m, False)}" for k, m in e["valid"].items()]
        for name, scores in e.get("eval", {}).items():
            parts += [f"{name} {k} {_ms(m, False)}" for k, m in scores.items()]
        lines.append(f"{v} ({len(e['seeds'])} seeds): " + "; ".join(parts))
    if summary.get("chosen"):
        lines.append(f"chosen on dev: {summary['chosen']['variant']} "
                     f"(best {summary['chosen']['on']})")
    return lines


def status_text(study: Study, record: dict[str, Any], record_path: str,
                states: dict[str, str], progress: dict[str, dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for spec in study.run_specs():
        s = states.get(spec.key, "left")
        if s == "left" and spec.key in record["runs"] and not spec.run_dir.exists():
            s = "recorded"
        counts[s] = counts.get(s, 0) + 1
    head = (f"study {study.name}: {len(study.variants)} variant(s) × {len(study.seeds)} seed(s) "
            f"of {study.raw['config']}; record {record_path}; "
            + ", ".join(f"{n} {s}" for s, n in counts.items()))
    lines = [head, "", *run_rows(study, record, states, progress)]
    from treelm.study.ensemble import status_lines

    summary = tree_lines(record) + status_lines(record) + score_lines(record)
    if summary:
        lines += ["", *summary]
    return "\n".join(lines)
