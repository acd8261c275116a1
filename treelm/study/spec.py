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
file is checked before anything is read or trained.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from treelm.config import ConfigError, UniqueKeyLoader, load_config, parse_section
from treelm.errors import read_text
from treelm.run import CHECKPOINTS
from treelm.rundir.trees import checkpoint_rule
from treelm.syntax.trees import TREE_STYLES as TREE_RULES

#: What a study's dev scores may decide.
CHOICES = ("variant", "layer", "rule")
#: Validation scores where lower is better (every other score: higher is better).
LOWER_IS_BETTER = ("loss", "ppl", "bpc", "wer")


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
        compared every variant)."""
        common = self.overrides + self.budget.overrides() + self.tree_overrides()
        return [RunSpec(f"{v}/{s}", v, s, self.runs / f"{v}-seed{s}",
                        [*common, *over, f"seed={s}"])
                for s in self.seeds for v, over in self.variants.items()]

    def tree_overrides(self) -> list[str]:
        if self.trees is None:
            return []
        t = self.trees
        layers = t.layers if isinstance(t.layers, str) else "[" + ",".join(map(str, t.layers)) + "]"
        return [f"train.eval_parse={{treebank: {_abs_or_name(t.dev)}, layers: {layers}, "
                f"rules: [{', '.join(t.rules)}]}}"]


#: A study's name: it names ``runs/<name>`` and the record's file.
PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]+")
#: The project's folders no study writes into.
SOURCE_FOLDERS = ("treelm", "tests", "configs")

STUDY_KEYS = ("name", "config", "variants", "seeds", "budget", "overrides", "score", "choose",
              "page", "runs", "record", "launcher", "env")


def _abs_or_name(treebank: str) -> str:
    """A treebank path made absolute for the jobs; a name (``nltk-dev``) kept as it is."""
    p = Path(treebank)
    return str(p.resolve()) if (p.suffix or os.sep in treebank) else treebank


def _overrides(where: str, value: Any) -> list[str]:
    """``{key: value}`` or ``[key=value, ...]`` -> ``key=value`` strings, YAML-spelled."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [f"{k}={_yaml_value(v)}" for k, v in value.items()]
    if isinstance(value, list) and all(isinstance(x, str) and "=" in x for x in value):
        return list(value)
    raise ConfigError(f"{where}: expected a mapping of key: value overrides, got {value!r}")


def _yaml_value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, str):
        return v
    return yaml.safe_dump(v, default_flow_style=True, width=10_000).strip().removesuffix("...")\
        .strip()


def load_study(path: str | os.PathLike[str]) -> Study:
    """The study file ``path``, checked whole (its config included) before anything runs."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such study file" if not p.exists() else f"{p}: not a file")
    try:
        raw = yaml.load(read_text(str(p), "study file"), Loader=UniqueKeyLoader)
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: a study is a mapping with keys {', '.join(STUDY_KEYS)}")
    unknown = sorted(set(raw) - set(STUDY_KEYS))
    if unknown:
        raise ConfigError(f"{p}: unknown study keys {unknown}; known: {list(STUDY_KEYS)}")
    if "config" not in raw:
        raise ConfigError(f"{p}: no config: the base config every run trains")
    config = Path(raw["config"]).resolve()
    load_config(config)                   # missing, not YAML, unknown sections: said now
    variants_raw = raw.get("variants") or {"default": {}}
    if isinstance(variants_raw, list):    # a list of names: the config as it is under each
        variants_raw = {str(v): {} for v in variants_raw}
    if not isinstance(variants_raw, dict):
        raise ConfigError(f"{p}: variants: expected a mapping name: overrides")
    variants = {str(k): _overrides(f"variants.{k}", v) for k, v in variants_raw.items()}
    for name in variants:
        if not name or "/" in name or name.startswith("."):
            raise ConfigError(f"{p}: variant name {name!r}: a plain name for a directory")
    seeds = raw.get("seeds", 1)
    if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds >= 1:
        seeds = list(range(1, seeds + 1))
    elif not (isinstance(seeds, list) and seeds and all(
            isinstance(s, int) and not isinstance(s, bool) for s in seeds)
            and len(set(seeds)) == len(seeds)):
        raise ConfigError(f"{p}: seeds = {seeds!r}: a count >= 1 or a list of distinct integers")
    score = raw.get("score") or {}
    if not isinstance(score, dict) or set(score) - {"trees", "eval", "choose_on"}:
        raise ConfigError(f"{p}: score: expected the keys trees and/or eval, and choose_on, "
                          f"got {score!r}")
    choose_on = score.get("choose_on")
    if choose_on is not None and not (isinstance(choose_on, str) and choose_on):
        raise ConfigError(f"{p}: score.choose_on = {choose_on!r}: a validation score's name "
                          f"(f1, accuracy, bleu...; default loss)")
    trees = parse_section(Trees, score["trees"], "score.trees") if score.get("trees") else None
    if trees is not None:
        bad = [r for r in trees.rules if r not in TREE_RULES]
        if bad or not trees.rules:
            raise ConfigError(f"{p}: score.trees.rules = {trees.rules!r}: expected a list of "
                              f"{' and '.join(TREE_RULES)}")
        known = [c for c in CHECKPOINTS if checkpoint_rule(c) in (None, *trees.rules)]
        bad = [c for c in trees.checkpoints if c not in known]
        if bad or not trees.checkpoints:
            raise ConfigError(f"{p}: score.trees.checkpoints: unknown {bad}; "
                              f"{', '.join(known)} (a rule's own for the rules scored)")
        names = trees.ensemble if isinstance(trees.ensemble, list) else [trees.ensemble]
        bad = [g for g in names if g != "all" and g not in variants_raw]
        if bad or (isinstance(trees.ensemble, str) and trees.ensemble != "all"):
            raise ConfigError(f"{p}: score.trees.ensemble: unknown {bad or trees.ensemble!r}; "
                              f"a list of the variants ({', '.join(variants_raw)}) and all, "
                              "or all")
    evals = [parse_section(Eval, e, f"score.eval[{i}]")
             for i, e in enumerate(score.get("eval") or [])]
    for i, e in enumerate(evals):
        if sum(getattr(e, k) is not None for k in Eval.KINDS) != 1:
            raise ConfigError(f"{p}: score.eval[{i}]: give one of {', '.join(Eval.KINDS)}")
        if e.split not in (None, "valid", "test"):
            raise ConfigError(f"{p}: score.eval[{i}].split = {e.split!r}: valid or test")
        if e.data is not None:           # (a translation stem names files beside it)
            e.data = str(Path(e.data).resolve())
    choose = raw.get("choose", ["layer"] if trees else [])
    if isinstance(choose, str):
        choose = [choose]
    if not isinstance(choose, list) or any(c not in CHOICES for c in choose):
        raise ConfigError(f"{p}: choose = {raw.get('choose')!r}: a list of {', '.join(CHOICES)}")
    if trees is None and set(choose) - {"variant"}:
        raise ConfigError(f"{p}: choose {choose}: layer and rule are chosen on tree scores; "
                          f"add score.trees")
    name = str(raw.get("name") or p.stem)
    if not PLAIN_NAME.fullmatch(name) or name in (".", ".."):
        raise ConfigError(f"{p}: name {name!r}: a plain name (letters, digits, '.', '_', '-'; "
                          f"not '.' or '..'), used for runs/<name> and the record's file")
    env = raw.get("env") or {}
    if not isinstance(env, dict):
        raise ConfigError(f"{p}: env: expected a mapping NAME: value")
    study = Study(
        name=name, file=p.resolve(), config=config, variants=variants, seeds=seeds,
        budget=parse_section(Budget, raw.get("budget"), "budget"),
        overrides=_overrides("overrides", raw.get("overrides")),
        trees=trees, evals=evals, choose=choose,
        page=Path(raw["page"]) if raw.get("page") else None,
        runs=Path(raw.get("runs") or f"runs/{name}").resolve(),
        record=Path(raw["record"]) if raw.get("record") else None,
        launcher=parse_section(Launcher, raw.get("launcher"), "launcher"),
        env={str(k): str(v) for k, v in env.items()}, raw=raw, choose_on=choose_on)
    study.budget.overrides()              # both kinds of one budget: said now
    _outside_sources(p, "runs", study.runs)
    if study.record is not None:
        _outside_sources(p, "record", study.record)
    _check_runs(study)
    return study


def _outside_sources(p: Path, key: str, path: Path) -> None:
    """A study writes its runs and record nowhere inside the project's own source folders."""
    root = Path(__file__).resolve().parents[2]
    where = path.resolve()
    for folder in SOURCE_FOLDERS:
        if where.is_relative_to(root / folder):
            raise ConfigError(f"{p}: {key}: {path} lies inside the project's {folder}/; a study "
                              f"writes outside {', '.join(f + '/' for f in SOURCE_FOLDERS)}")


def _check_runs(study: Study) -> None:
    """Every run's config, overrides applied and checked whole as ``treelm train`` checks it
    (:func:`treelm.train.builders.read_config`), before any run starts."""
    from treelm.config import apply_overrides
    from treelm.errors import TreelmError
    from treelm.train.builders import read_config

    cfg = load_config(study.config)
    for spec in study.run_specs():
        try:
            read_config(apply_overrides(cfg, [*spec.overrides, "train.threads=1"]))
        except TreelmError as e:
            raise ConfigError(f"{study.file.name}: run {spec.key}: {e}") from None


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
            "score": {"trees": dataclasses.asdict(study.trees) if study.trees else None,
                      "eval": [dataclasses.asdict(e) for e in study.evals],
                      **({"choose_on": study.choose_on} if study.choose_on else {})},
            "choose": study.choose}
