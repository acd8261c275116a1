"""YAML configs: load, apply ``key=value`` overrides from the command line, validate sections.

A config has these top-level keys (see ``configs/*.yaml`` for commented defaults): ``seed``,
``task`` (the kind of work, :data:`treelm.tasks.TASKS`; default ``lm``), ``data`` (read by the
task), ``model`` (:mod:`treelm.models`) and ``train`` (the loop's
:class:`treelm.train.config.TrainConfig` plus the task's own options, such as batch sizes).
Overrides use dotted keys and YAML values: ``train.lr=0.002 model.sizes=[200,200]``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from treelm.errors import ConfigError

SECTIONS = ("seed", "task", "data", "model", "train")


def load_config(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such config file")
    try:
        cfg = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{p}: a config must be a mapping with sections {SECTIONS}")
    unknown = set(cfg) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"{p}: unknown top-level keys {sorted(unknown)}; expected {SECTIONS}")
    return cfg


def apply_overrides(cfg: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    cfg = copy.deepcopy(cfg)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. train.lr=3)")
        key, raw = item.split("=", 1)
        parts = key.split(".")
        if parts[0] not in SECTIONS:
            raise ConfigError(f"override {item!r}: the key must start with one of {SECTIONS}")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        node = cfg
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p} is not a section")
        node[parts[-1]] = value
    return cfg


def dump_config(cfg: dict[str, Any]) -> str:
    return yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)


def parse_section(cls: type[Any], d: dict[str, Any] | None, section: str,
                  others: Iterable[str] = ()) -> Any:
    """The dataclass ``cls`` from the mapping ``d`` of a config section; keys that are neither
    fields of ``cls`` nor in ``others`` (claimed by another reader of the same section) are an
    error naming them."""
    d = dict(d or {})
    names = {f.name for f in dataclasses.fields(cls)}
    known = names | set(others)
    unknown = sorted(set(d) - known)
    if unknown:
        raise ConfigError(f"unknown {section} options {unknown}; known: {sorted(known)}")
    return cls(**{k: v for k, v in d.items() if k in names})
