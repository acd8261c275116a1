"""The minutes a study spends scoring one finished run (issue 54: the levels read once).

    NLTK_DATA=../shared/data/nltk_data python benchmarks/study_scoring.py \
        studies/trees-seeds.yaml runs/trees-seeds/light-dropouts-seed1 [--label NAME] [--out F]

Times :func:`treelm.study.score.score_run` (what a study's job does once its run has trained:
every checkpoint of ``score.trees`` on dev and test, every layer under every rule, its example
sentences and kept trees) on one thread, as the study's jobs score. Run it alone. The same script
times an older treelm: ``PYTHONPATH=OLD_CHECKOUT python benchmarks/study_scoring.py ...`` (its
record says which treelm it imported, and the commit where that is a git checkout).
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import write_result  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study", help="the study file whose score.trees is timed")
    p.add_argument("run", help="a finished run of it")
    p.add_argument("--label", default="", help="a name for this treelm in the record")
    p.add_argument("--out", type=Path, help="the record (default: the dated file)")
    args = p.parse_args(argv)
    import torch

    import treelm
    from treelm.study.score import score_run
    try:
        from treelm.study.load import load_study
    except ImportError:                     # a treelm from before the study package's split
        from treelm.study.spec import load_study  # type: ignore[no-redef]

    torch.set_num_threads(1)
    study = load_study(args.study)
    t = study.trees
    trees = t.for_jobs() if hasattr(t, "for_jobs") else dataclasses.asdict(t)
    where = Path(treelm.__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or None
    t0 = time.perf_counter()
    entry = score_run(Path(args.run), trees, [])
    seconds = time.perf_counter() - t0
    write_result("study_scoring", {
        "label": args.label, "treelm": str(where), "commit": commit, "run": args.run,
        "study": args.study, "threads": 1, "checkpoints": trees["checkpoints"],
        "minutes": round(seconds / 60, 3),
        "dev_f1": {c: entry["trees"][c]["official"]["dev"] for c in trees["checkpoints"]}},
        path=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
