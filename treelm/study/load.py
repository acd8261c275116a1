"""A study file read and checked whole, one reader per section, before anything is read or
trained: the file's keys, ``config`` (loaded), ``variants``, ``seeds``, ``score`` (``trees``,
``eval``, ``choose_on``), ``choose``, ``name``, ``env``, then ``budget`` and ``launcher`` (each a
dataclass of :mod:`treelm.study.spec` that refuses unknown keys), where the runs and the record
are written, and every run's config with its overrides applied, as ``treelm train`` checks it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from treelm.config import ConfigError, UniqueKeyLoader, load_config, parse_section
from treelm.errors import read_text
from treelm.run import CHECKPOINTS
from treelm.rundir.trees import checkpoint_rule
from treelm.study.spec import CHOICES, Budget, Eval, Launcher, Study, Trees, ensemble_groups
from treelm.syntax.trees import TREE_STYLES as TREE_RULES

#: A study's name: it names ``runs/<name>`` and the record's file.
PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]+")
#: The project's folders no study writes into.
SOURCE_FOLDERS = ("treelm", "tests", "configs")

STUDY_KEYS = ("name", "config", "variants", "seeds", "budget", "overrides", "score", "choose",
              "page", "runs", "record", "launcher", "env")


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
    """The study file ``path`` (:mod:`treelm.study.spec` describes it), checked whole, its
    config included, before anything runs."""
    p = Path(path)
    raw = _read_file(p)
    if "config" not in raw:
        raise ConfigError(f"{p}: no config: the base config every run trains")
    config = Path(raw["config"]).resolve()
    load_config(config)                   # missing, not YAML, unknown sections: said now
    variants = _read_variants(p, raw.get("variants"))
    seeds = _read_seeds(p, raw.get("seeds", 1))
    trees, evals, choose_on = _read_score(p, raw.get("score") or {}, variants)
    choose = _read_choose(p, raw.get("choose", ["layer"] if trees else []), trees)
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


def _read_file(p: Path) -> dict[str, Any]:
    """The study file's mapping, its keys checked (the sections are read each by its own)."""
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
    return raw


def _read_variants(p: Path, value: Any) -> dict[str, list[str]]:
    """``variants:``: name -> overrides (a list of names: the config as it is under each)."""
    value = value or {"default": {}}
    if isinstance(value, list):
        value = {str(v): {} for v in value}
    if not isinstance(value, dict):
        raise ConfigError(f"{p}: variants: expected a mapping name: overrides")
    variants = {str(k): _overrides(f"variants.{k}", v) for k, v in value.items()}
    for name in variants:
        if not name or "/" in name or name.startswith("."):
            raise ConfigError(f"{p}: variant name {name!r}: a plain name for a directory")
    return variants


def _read_seeds(p: Path, seeds: Any) -> list[int]:
    """``seeds:``: a count n (seeds 1..n) or a list of distinct integers."""
    if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds >= 1:
        return list(range(1, seeds + 1))
    if not (isinstance(seeds, list) and seeds and all(
            isinstance(s, int) and not isinstance(s, bool) for s in seeds)
            and len(set(seeds)) == len(seeds)):
        raise ConfigError(f"{p}: seeds = {seeds!r}: a count >= 1 or a list of distinct integers")
    return seeds


def _read_score(p: Path, score: Any, variants: dict[str, list[str]]
                ) -> tuple[Trees | None, list[Eval], str | None]:
    """``score:``: its ``trees``, its ``eval`` entries and ``choose_on``."""
    if not isinstance(score, dict) or set(score) - {"trees", "eval", "choose_on"}:
        raise ConfigError(f"{p}: score: expected the keys trees and/or eval, and choose_on, "
                          f"got {score!r}")
    choose_on = score.get("choose_on")
    if choose_on is not None and not (isinstance(choose_on, str) and choose_on):
        raise ConfigError(f"{p}: score.choose_on = {choose_on!r}: a validation score's name "
                          f"(f1, accuracy, bleu...; default loss)")
    trees = _read_trees(p, score["trees"], variants) if score.get("trees") else None
    evals = [parse_section(Eval, e, f"score.eval[{i}]")
             for i, e in enumerate(score.get("eval") or [])]
    for i, e in enumerate(evals):
        if sum(getattr(e, k) is not None for k in Eval.KINDS) != 1:
            raise ConfigError(f"{p}: score.eval[{i}]: give one of {', '.join(Eval.KINDS)}")
        if e.split not in (None, "valid", "test"):
            raise ConfigError(f"{p}: score.eval[{i}].split = {e.split!r}: valid or test")
        if e.data is not None:           # (a translation stem names files beside it)
            e.data = str(Path(e.data).resolve())
    return trees, evals, choose_on


def _read_trees(p: Path, section: Any, variants: dict[str, list[str]]) -> Trees:
    """``score.trees``: its rules, checkpoints and ensembles checked, the ensembles' groups
    expanded once (:attr:`Trees.ensemble_groups`)."""
    trees: Trees = parse_section(Trees, section, "score.trees")
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
    bad = [g for g in names if g != "all" and g not in variants]
    if bad or (isinstance(trees.ensemble, str) and trees.ensemble != "all"):
        raise ConfigError(f"{p}: score.trees.ensemble: unknown {bad or trees.ensemble!r}; "
                          f"a list of the variants ({', '.join(variants)}) and all, or all")
    trees.ensemble_groups = ensemble_groups(trees.ensemble, variants)
    return trees


def _read_choose(p: Path, choose: Any, trees: Trees | None) -> list[str]:
    """``choose:``: what dev decides (default: the layer where trees are scored)."""
    given = choose
    if isinstance(choose, str):
        choose = [choose]
    if not isinstance(choose, list) or any(c not in CHOICES for c in choose):
        raise ConfigError(f"{p}: choose = {given!r}: a list of {', '.join(CHOICES)}")
    if trees is None and set(choose) - {"variant"}:
        raise ConfigError(f"{p}: choose {choose}: layer and rule are chosen on tree scores; "
                          f"add score.trees")
    return choose


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
