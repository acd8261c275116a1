"""What is refused before a study's runs are submitted, each in one line: a run directory trained
for other values than the study now asks (:func:`check_run_dir`), and whatever ``treelm train``
or the run's job would refuse after its submission (:func:`check_runs`), so that a study never
waits in a queue for a run that is bound to fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from treelm.errors import TreelmError
from treelm.rundir.files import RunFiles
from treelm.study.spec import RunSpec, Study


def check_run_dir(spec: RunSpec) -> None:
    """A run directory trained for other values than the study now asks is refused: its scores
    would be another study's. Compared on the keys the study sets."""
    import yaml

    from treelm.config import apply_overrides
    from treelm.train.builders import absolute_data_paths

    files = RunFiles(spec.run_dir)
    if not files.config.exists():
        return
    saved = yaml.safe_load(files.config.read_text(encoding="utf-8")) or {}
    # the paths a new run saves absolute (its data, treebank and teacher files), compared so
    want = apply_overrides({}, spec.overrides)
    task = {"task": want.get("task", saved.get("task", "lm"))}
    want = {k: v for k, v in absolute_data_paths({**want, **task}).items()
            if k != "task" or "task" in want}
    for key, value in _flat(want):
        node: Any = saved
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node != value and not (key == "train.threads"):
            raise TreelmError(f"{spec.run_dir}: trained with {key} = {node!r}, but the study "
                              f"now asks {value!r}; move the run away or restore the study")


def check_runs(study: Study, specs: list[RunSpec] | None = None) -> None:
    """Each run of ``specs`` (those about to be submitted; default all) refused now, in one
    line, where ``treelm train`` or its job would refuse it after its submission: its config
    checked whole (``treelm train``'s ``read_config``), then what depends on the task
    (``train.eval_parse`` and ``score.trees`` score a language model's trees), the data files it
    names, and each treebank it would read (``train.eval_parse``'s at the start,
    ``score.trees.test`` at the end: missing or malformed)."""
    from treelm.config import apply_overrides, load_config
    from treelm.syntax.report import MissingTreebankError, load_golds
    from treelm.train.builders import read_config
    from treelm.train.trees import check_task

    cfg = load_config(study.config)
    read: set[tuple[str, int | None]] = set()
    for spec in study.run_specs() if specs is None else specs:
        where = f"{study.file.name}: run {spec.key}"
        try:
            tc, config = read_config(apply_overrides(cfg, [*spec.overrides, "train.threads=1"]))
            task = config.task.name
            if study.trees is not None and task != "lm":
                raise TreelmError(f"score.trees scores a language model's trees; "
                                  f"{study.raw['config']} is a {task!r} run (drop score.trees)")
            check_task(tc.eval_parse, task)
            for path in config.data_paths():
                if not Path(path).exists():
                    raise TreelmError(f"{path}: no such file or directory (the config's data)")
            banks: list[tuple[str, int | None, bool]] = []
            if tc.eval_parse is not None:
                ep = tc.eval_parse
                banks.append((str(ep.treebank), ep.max_len, ep.if_missing == "skip"))
            if study.trees is not None and study.trees.test:
                banks += [(study.trees.test, n, False) for n in study.trees.test_max_len]
            for bank, max_len, skip in banks:
                if (bank, max_len) not in read:
                    try:
                        load_golds(bank, max_len)
                    except MissingTreebankError:
                        if not skip:
                            raise
                    read.add((bank, max_len))
        except TreelmError as e:
            raise TreelmError(f"{where}: {e}") from None


def _flat(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and k != "eval_parse" and v:
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out
