"""A study file: one config trained over variants and seeds, scored and chosen on dev.

A study is the grid ``variants × seeds`` of one base config. Run ``(v, s)`` trains

    config  ⊕  overrides  ⊕  variants[v]  ⊕  budget  ⊕  score's per-validation keys  ⊕  seed=s

(``⊕``: later ``key=value`` overrides earlier ones, as on ``treelm train``'s command line), into
the run directory ``runs/<v>-seed<s>``: an ordinary run, which ``parse``, ``eval`` and ``serve``
open like any other. What dev decides (``choose``) is decided on dev scores alone; the test
scores are read only to report the choice. The YAML (``studies/*.yaml`` are commented examples)::

    name: trees-seeds            # the record's and the runs' name (default: the file's stem)
    config: configs/ptb-onlstm-trees.yaml
    variants:                    # name: overrides ({} = the config as it is)
      symmetric: {}
      paper: {model.cell_options.master_input: paper}
    seeds: 5                     # 1..5, or a list [1, 7]
    budget: {max_units: 2000000, eval_every_units: 400000}   # train.* keys
    score:
      trees: {dev: nltk-dev, test: nltk-test, rules: [official, split], test_max_len: [null, 10]}
      eval: [{split: test}]      # the task's own `treelm eval` scores at the end
    choose: [variant, layer]     # what dev decides (of variant, layer, rule)
    page: docs/syntax-results.md

Paths are read from the directory the command runs in (as ``treelm train --config``'s are) and
handed to every job absolute. Every section is a dataclass that refuses unknown keys, and the whole
file is checked before anything is read or trained (:func:`treelm.study.load.load_study`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from treelm.config import ConfigError
from treelm.syntax.trees import TREE_STYLES as TREE_RULES

#: What a study's dev scores may decide.
CHOICES = ("variant", "layer", "rule")
#: Validation scores where lower is better (every other score: higher is better).
LOWER_IS_BETTER = ("loss", "ppl", "bpc", "wer", "tree_loss")


@dataclass
class Budget:
    """``budget:``: how long each run trains and how often it validates (``train.*`` keys). One of
    ``max_units`` (training tokens: the same point of training on any machine, however loaded)
    and ``max_minutes`` (wall time); with neither, the config's own. The other kind is set to
    null, so that the budget is the one named."""

    max_units: int | None = None          # training tokens per run (train.max_units)
    max_minutes: float | None = None      # wall-clock minutes per run (train.max_minutes)
    eval_every_units: int | None = None   # validate at multiples of these tokens
    eval_every_minutes: float | None = None

    RULES: ClassVar[dict[str, Any]] = {"max_units": ">= 1", "max_minutes": "> 0",
                                       "eval_every_units": ">= 1", "eval_every_minutes": "> 0"}

    def overrides(self) -> list[str]:
        if self.max_units is not None and self.max_minutes is not None:
            raise ConfigError("budget: give max_units or max_minutes, not both")
        out: list[str] = []
        if self.max_units is not None:
            out += [f"train.max_units={self.max_units}", "train.max_minutes=null"]
        if self.max_minutes is not None:
            out += [f"train.max_minutes={self.max_minutes}", "train.max_units=null"]
        if self.eval_every_units is not None and self.eval_every_minutes is not None:
            raise ConfigError("budget: give eval_every_units or eval_every_minutes, not both")
        if self.eval_every_units is not None:
            out += [f"train.eval_every_units={self.eval_every_units}",
                    "train.eval_every_minutes=null"]
        if self.eval_every_minutes is not None:
            out += [f"train.eval_every_minutes={self.eval_every_minutes}",
                    "train.eval_every_units=null"]
        return out


@dataclass
class Trees:
    """``score.trees``: sentence F1 of every ON-LSTM layer's trees under each rule. ``dev`` is
    scored at every validation (``train.eval_parse``) and at the end; ``test`` at the end only,
    once per ``test_max_len`` (``null``: every sentence; 10: WSJ10)."""

    dev: str = "nltk-dev"                 # a treebank name (eval-parse --treebank) or a path
    test: str | None = "nltk-test"
    rules: list[str] = field(default_factory=lambda: list(TREE_RULES))
    layers: list[int] | str = "all"
    test_max_len: list[int | None] = field(default_factory=lambda: [None, 10])
    sentences: list[str] = field(default_factory=list)   # parsed by every run at the end
    # scored at the end: best, last, best-trees, best-trees-<rule> (treelm.run.CHECKPOINTS)
    checkpoints: list[str] = field(default_factory=lambda: ["best"])
    # tree averages of the runs' readings (treelm.study.ensemble): variant names, each its
    # seeds, and `all` (every run); `ensemble: all` is every variant and `all`. [] : none
    ensemble: list[str] | str = field(default_factory=list)
    #: ``ensemble`` expanded when the study is read (:func:`ensemble_groups`): the groups
    #: averaged, in order. Derived, so neither in the file nor in the record's description.
    ensemble_groups: list[str] = field(default_factory=list, init=False)

    def as_written(self) -> dict[str, Any]:
        """The section as the study file gives it (what the record describes)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "ensemble_groups"}

    def for_jobs(self) -> dict[str, Any]:
        """What each run's job scores (:class:`treelm.study.job.RunJob`): the section as
        written, its treebank paths absolute."""
        out = self.as_written()
        out["dev"] = _abs_or_name(out["dev"])
        if out["test"]:
            out["test"] = _abs_or_name(out["test"])
        return out


@dataclass
class Eval:
    """One entry of ``score.eval``, at the end, of the ``best`` checkpoint: the task's ``treelm
    eval`` scores on a split of the run's config or on a ``--data`` file (translation: with the
    beam and length penalty given); or, for a language model, what ``treelm generate`` and
    ``treelm probe`` print (a sample; the likeliest next symbols after each prefix), kept as
    text beside the scores. One of ``split``, ``data``, ``generate`` and ``probe``."""

    split: str | None = None              # valid | test
    data: str | None = None               # a file in the task's own format
    name: str | None = None               # the scores' name in the record (default: split/data)
    beam: int | None = None               # translation: beam size
    length_penalty: float | None = None   # translation: the beam's length penalty alpha
    generate: int | None = None           # LM: a sample of this many symbols
    prompt: str = ""                      #   generate: its prompt (not repeated in the sample)
    temperature: float = 1.0              #   generate: softmax temperature (0: greedy)
    seed: int = 0                         #   generate: the sampling seed
    probe: list[str] | None = None        # LM: prefixes, each read as the start of a line
    top_k: int = 5                        #   probe: the likeliest next symbols kept

    RULES: ClassVar[dict[str, Any]] = {"beam": ">= 1", "length_penalty": ">= 0",
                                       "generate": ">= 1", "temperature": ">= 0",
                                       "top_k": ">= 1"}
    #: The fields of which each entry gives exactly one.
    KINDS: ClassVar[tuple[str, ...]] = ("split", "data", "generate", "probe")

    def key(self) -> str:
        if self.name or self.split:
            return str(self.name or self.split)
        return Path(self.data).name if self.data else "generate" if self.generate else "probe"


@dataclass
class Launcher:
    """``launcher:``: where the runs go (flags of ``treelm study`` override these)."""

    name: str = "local"                   # local | slurm
    jobs: int | None = None               # local: runs at once (default: one per core)
    threads: int | None = None            # threads per run (default: cores / runs at once)
    time: float | None = None             # minutes a job may run before it is stopped, saved
    #                                       and requeued (local default: 7 days)
    partition: str | None = None          # slurm
    cpus_per_task: int | None = None      # slurm (default: threads)
    gpus: int | None = None               # slurm: GPUs per job
    mem_gb: float | None = None           # slurm
    array: bool = True                    # slurm: submit what is left as one job array
    array_parallelism: int | None = None  # slurm: array tasks at once
    extra: dict[str, Any] = field(default_factory=dict)   # slurm: more sbatch options

    RULES: ClassVar[dict[str, Any]] = {"name": ("local", "slurm"), "jobs": ">= 1",
                                       "threads": ">= 1", "time": "> 0",
                                       "cpus_per_task": ">= 1", "gpus": ">= 0", "mem_gb": "> 0",
                                       "array_parallelism": ">= 1"}


@dataclass
class RunSpec:
    """One run of the study: where it lives and what ``treelm train`` is given."""

    key: str                              # "variant/seed", the record's key
    variant: str
    seed: int
    run_dir: Path
    overrides: list[str]


@dataclass
class Study:
    name: str
    file: Path
    config: Path
    variants: dict[str, list[str]]
    seeds: list[int]
    budget: Budget
    overrides: list[str]
    trees: Trees | None
    evals: list[Eval]
    choose: list[str]
    page: Path | None
    runs: Path
    record: Path | None
    launcher: Launcher
    env: dict[str, str]
    raw: dict[str, Any]
    choose_on: str | None = None          # the validation score choose: [variant] decides on

    def run_specs(self) -> list[RunSpec]:
        """Every run, seed by seed (every variant's seed 1 first: a study stopped early has
        compared every variant). ``{seed}`` in an override is the run's seed (a run that
        starts from the same seed of another study's runs: ``train.init_from``)."""
        common = self.overrides + self.budget.overrides() + self.tree_overrides()
        return [RunSpec(f"{v}/{s}", v, s, self.runs / f"{v}-seed{s}",
                        [o.replace("{seed}", str(s)) for o in [*common, *over, f"seed={s}"]])
                for s in self.seeds for v, over in self.variants.items()]

    def tree_overrides(self) -> list[str]:
        if self.trees is None:
            return []
        t = self.trees
        layers = t.layers if isinstance(t.layers, str) else "[" + ",".join(map(str, t.layers)) + "]"
        return [f"train.eval_parse={{treebank: {_abs_or_name(t.dev)}, layers: {layers}, "
                f"rules: [{', '.join(t.rules)}]}}"]


def _abs_or_name(treebank: str) -> str:
    """A treebank path made absolute for the jobs; a name (``nltk-dev``) kept as it is."""
    p = Path(treebank)
    return str(p.resolve()) if (p.suffix or os.sep in treebank) else treebank


def ensemble_groups(ensemble: list[str] | str, variants: Iterable[str]) -> list[str]:
    """``score.trees.ensemble`` as the groups of runs averaged, in order: each variant named (its
    seeds) and ``all`` (every run); ``all`` alone is every variant, then ``all``."""
    return [*variants, "all"] if ensemble == "all" else list(ensemble or [])


def from_cwd(path: Path) -> str:
    """``path`` relative to the current directory where it lies below it (records name runs
    so, which makes them read the same in any clone), else as it is."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def describe(study: Study) -> dict[str, Any]:
    """The study as the record keeps it: what was trained and scored, paths as given."""
    return {"name": study.name, "file": from_cwd(study.file),
            "config": study.raw["config"], "variants": study.variants, "seeds": study.seeds,
            "budget": {k: v for k, v in dataclasses.asdict(study.budget).items()
                       if v is not None},
            "overrides": study.overrides,
            "score": {"trees": study.trees.as_written() if study.trees else None,
                      "eval": [dataclasses.asdict(e) for e in study.evals],
                      **({"choose_on": study.choose_on} if study.choose_on else {})},
            "choose": study.choose}
