"""Translation on Multi30k for the same wall time per model: BLEU at beam 1 and 5, decoding speed.

    python benchmarks/translate_budget.py --minutes 60 [--pair de-en|en-de]
        [--configs configs/multi30k-convs2s.yaml configs/multi30k-rnn-attn.yaml]
        [--runs runs/translate_budget]
        [--threads 2] [--no-train] [--out FILE] [key=value ...]

Each config is trained alone (one after the other: two jobs on two cores halve each other) by
``treelm train ... train.max_minutes=M`` into ``--runs/<config>-<pair>``, with ``data.src`` /
``data.tgt`` set from ``--pair``. Its best checkpoint (by validation BLEU, greedy, as the configs
say) then translates ``test_2016_flickr`` with beam 1 and beam 5 through the task's own search
(the one ``treelm translate`` and ``treelm eval`` run), scored by sacreBLEU (corpus BLEU, 13a,
cased; the signature is recorded) and chrF. Decoding speed is timed on the first ``--speed-n``
test sentences, batches of ``--speed-batch``, in sentences per second: with the incremental
decoder state (each new symbol costs one decoder step) and without it (each new symbol recomputes
the decoder over the whole prefix, and the encoder too), greedy and beam 5.

Writes ``benchmarks/results/translate_budget-<YYYYMMDD>.json`` (entries merged by name, so
configs can be run in parts) and prints a Markdown table. Run alone: the figures are wall-clock.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from treelm.rundir.files import read_metrics  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIGS = ["configs/multi30k-convs2s.yaml", "configs/multi30k-rnn-attn.yaml"]


def speed(task: Any, model: Any, sentences: list[str], beam: int, batch: int,
          incremental: bool) -> float:
    """Sentences translated per second (one untimed warm-up batch first)."""
    task.translate(model, sentences[:batch], beam, batch_size=batch, incremental=incremental)
    t0 = time.perf_counter()
    task.translate(model, sentences, beam, batch_size=batch, incremental=incremental)
    return len(sentences) / (time.perf_counter() - t0)


def score(run: Path, args: argparse.Namespace) -> dict[str, Any]:
    from treelm.run import load_run

    r = load_run(run)
    out: dict[str, Any] = {"parameters": sum(p.numel() for p in r.model.parameters())}
    for beam in (1, 5):
        ev = r.task.evaluate(r.model, "test", beam=beam)
        out[f"test_beam{beam}"] = {k: round(v, 2) for k, v in ev.scores.items()}
        out["bleu_signature"] = ev.details["bleu_signature"]
        out["chrf_signature"] = ev.details["chrf_signature"]
    sents = r.task.split("test").src[: args.speed_n]
    out["speed_sentences"] = len(sents)
    out["speed_batch"] = args.speed_batch
    out["sentences_per_s"] = {
        f"beam{beam}_{'incremental' if inc else 'recompute'}":
            round(speed(r.task, r.model, sents, beam, args.speed_batch, inc), 2)
        for beam in (1, 5) for inc in (True, False)}
    return out


def summarize(run: Path) -> dict[str, Any]:
    valid = read_metrics(run, "valid")
    done = read_metrics(run, "done")
    train = read_metrics(run, "train")
    end = done[-1] if done else {}
    return {
        "elapsed_s": end.get("elapsed", valid[-1]["elapsed"] if valid else 0.0),
        "target_tokens_seen": end.get("tokens", train[-1]["tokens"] if train else 0),
        "epochs_completed": sum(1 for m in valid if m.get("epoch_end")),
        "valid_curve": [[round(m["elapsed"] / 60, 2), round(m["bleu"], 2), round(m["ppl"], 2)]
                        for m in valid],
        "best_valid_bleu": max((m["bleu"] for m in valid), default=None),
    }


def table(entries: dict[str, dict[str, Any]]) -> str:
    rows = ["| run | params | minutes | valid BLEU | test BLEU b1 | test BLEU b5 | chrF b5 | "
            "sent/s b1 inc / full | sent/s b5 inc / full |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, e in entries.items():
        s = e["sentences_per_s"]
        rows.append(
            f"| {name} | {e['parameters'] / 1e6:.1f}M | {e['elapsed_s'] / 60:.0f} | "
            f"{e['best_valid_bleu']:.2f} | {e['test_beam1']['bleu']:.2f} | "
            f"{e['test_beam5']['bleu']:.2f} | {e['test_beam5']['chrf']:.2f} | "
            f"{s['beam1_incremental']:.1f} / {s['beam1_recompute']:.1f} | "
            f"{s['beam5_incremental']:.1f} / {s['beam5_recompute']:.1f} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, required=True, help="wall-time budget per config")
    ap.add_argument("--pair", choices=["de-en", "en-de"], default="de-en")
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS)
    ap.add_argument("--runs", default="runs/translate_budget")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-every", type=float, default=None,
                    help="minutes between validations inside an epoch (default: minutes / 6)")
    ap.add_argument("--speed-n", type=int, default=200, help="test sentences timed")
    ap.add_argument("--speed-batch", type=int, default=50, help="sentences per timed batch")
    ap.add_argument("--no-train", action="store_true", help="only score runs already in --runs")
    ap.add_argument("--out", type=Path, help="the record's path (default: the dated results file)")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every config")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    src, tgt = args.pair.split("-")
    entries: dict[str, Any] = {}
    for cfg in args.configs:
        name = f"{Path(cfg).stem}-{args.pair}"
        run = (Path(args.runs) / name).resolve()
        every = args.eval_every or max(1.0, args.minutes / 6)
        cmd = [sys.executable, "-m", "treelm.cli", "train", "--config", str(Path(cfg).resolve()),
               "--out", str(run), "--force", f"data.src={src}", f"data.tgt={tgt}",
               f"train.max_minutes={args.minutes}", f"train.eval_every_minutes={every}",
               f"train.threads={args.threads}", "train.epochs=100000", *args.overrides]
        if not args.no_train:
            print("+", " ".join(cmd[2:]), file=sys.stderr, flush=True)
            subprocess.run(cmd, check=True, cwd=ROOT)
        entries[name] = {"config": cfg, "pair": args.pair, "run_dir": str(run),
                         "train_command": " ".join(["python -m treelm.cli", *cmd[3:]]),
                         "overrides": args.overrides, **summarize(run), **score(run, args)}
    rec = write_result("translate_budget", {"minutes": args.minutes, "entries": entries},
                       merge_key="entries", path=args.out, echo=False)
    print(table(rec["entries"]))


if __name__ == "__main__":
    main()
