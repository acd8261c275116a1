"""``treelm study STUDY.yaml``: every run of a study trained, scored, gathered in one record."""

from __future__ import annotations

import argparse
from typing import Any

from treelm.verb import Number, add_verb

STUDY_EPILOG = """examples:
  treelm study studies/trees-seeds.yaml                 # train what is left, here
  treelm study studies/trees-seeds.yaml --status        # runs and figures so far
  treelm study studies/trees-seeds.yaml --page          # the page with its curves
  treelm study studies/trees-screen.yaml --launcher slurm --partition gpu --time 60 --gpus 1
"""

#: Command-line flags that override the study file's ``launcher:`` section.
LAUNCHER_FLAGS = ("jobs", "threads", "time", "partition", "cpus_per_task", "gpus", "mem_gb",
                  "array_parallelism")


def cmd_study(args: argparse.Namespace) -> int:
    """run a study: a config over variants and seeds, scored, chosen on dev, one record

    Train every run of STUDY_FILE that is not finished (variants × seeds of one config, each an
    ordinary run directory), score each as the study says (tree F1 per layer and rule on dev and
    test, the task's eval scores), and gather the scores into the study's record, where the
    summary says what dev chose. Runs go to submitit's local subprocesses (default: one run per
    core) or to Slurm (--launcher slurm); the study remembers its launcher and options, so after
    the first submission `treelm study STUDY_FILE` alone is the whole command (a launcher flag
    then decides for new submissions only). Run it again after a kill, a reboot or a crash:
    finished runs are kept, killed ones resume from their last checkpoint, and runs queued or in
    progress (asked of the launcher that submitted them) are not started twice. See
    docs/studies.md.
    """
    from treelm.errors import TreelmError, check_output
    from treelm.study.load import load_study

    if args.output is not None:
        check_output(args.output, (".md",), "page")
        if not args.page:
            raise TreelmError("-o/--output names where --page writes the page; add --page")
    study = load_study(args.study)
    flags = {k: getattr(args, k) for k in LAUNCHER_FLAGS if getattr(args, k) is not None}
    if args.launcher:
        flags["name"] = args.launcher
    if args.no_array:
        flags["array"] = False
    if args.status:
        print(status(study))
        return 0
    if args.page:
        from treelm.study.page import render_page

        print(render_page(study, args.output))
        return 0
    from treelm.study.driver import Driver

    driver = Driver(study, flags=flags)
    driver.run(wait=not args.no_wait, retries=args.retries)
    print(status(study))
    return 1 if driver.failed else 0


def status(study: Any) -> str:
    """The status table and summary of ``study`` from its record and its runs on disk."""
    from treelm.study.driver import Driver
    from treelm.study.record import new_record, read_record
    from treelm.study.score import curve
    from treelm.study.spec import describe
    from treelm.study.status import status_text

    driver = Driver(study)
    path = driver.record_path()
    record = read_record(path) if path.exists() else new_record(describe(study), "", {})
    states = driver.states() if driver.state["jobs"] or study.runs.exists() else {}
    progress: dict[str, dict[str, Any]] = {}
    for spec in study.run_specs():
        if states.get(spec.key) in ("running", "left", "failed") and spec.run_dir.exists():
            points = curve(spec.run_dir)
            if points:
                progress[spec.key] = points[-1]
    return status_text(study, record, str(path) if path.exists() else f"{path} (not yet)",
                       states, progress)


def add_study(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "study", cmd_study, epilog=STUDY_EPILOG)
    p.add_argument("study", metavar="STUDY_FILE", help="the study (a YAML file, see studies/)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--status", action="store_true",
                      help="print the runs (done, running, queued, left) and the summary so far")
    what.add_argument("--page", action="store_true",
                      help="render the study's page (markdown and PNG curves) from its record")
    p.add_argument("-o", "--output", metavar="FILE.md", help="--page: write the page here "
                   "instead of where the study's page: says")
    p.add_argument("--launcher", choices=["local", "slurm"],
                   help="local subprocesses or Slurm jobs, for new submissions (default: the "
                   "study's, as it was first submitted; else its launcher:, else local)")
    p.add_argument("--jobs", type=Number(int, at_least=1),
                   help="local: runs at once (default: one per core)")
    p.add_argument("--threads", type=Number(int, at_least=1),
                   help="threads per new run, pinned in its config (default: cores / runs at "
                   "once; Slurm: --cpus-per-task)")
    p.add_argument("--time", type=Number(float, above=0), metavar="MIN",
                   help="minutes a job may run; then it saves and is requeued (local default "
                   "7 days, Slurm 60)")
    p.add_argument("--partition", help="slurm: the partition")
    p.add_argument("--cpus-per-task", type=Number(int, at_least=1), help="slurm: CPUs per job")
    p.add_argument("--gpus", type=Number(int, at_least=0), help="slurm: GPUs per job")
    p.add_argument("--mem-gb", type=Number(float, above=0), help="slurm: memory per job")
    p.add_argument("--array-parallelism", type=Number(int, at_least=1),
                   help="slurm: array tasks at once")
    p.add_argument("--no-array", action="store_true",
                   help="slurm: one job per run instead of one job array")
    p.add_argument("--no-wait", action="store_true",
                   help="submit what is left and exit (run again to gather the record)")
    p.add_argument("--retries", type=Number(int, at_least=0), default=1,
                   help="resubmit a run whose job ended without scores this many times "
                   "(default 1; never one whose training refused its config)")
    return p
