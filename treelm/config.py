"""YAML configs: load, apply ``key=value`` overrides from the command line, validate sections.

A config has four sections (see ``configs/*.yaml`` for commented defaults): ``seed``, ``data``
(:mod:`treelm.data.corpus`), ``model`` (:mod:`treelm.models`) and ``train``
(:class:`treelm.train.trainer.TrainConfig`). Overrides use dotted keys and YAML values:
``train.lr=0.002 model.sizes=[200,200] train.max_minutes=60``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from treelm.errors import ConfigError

SECTIONS = ("seed", "data", "model", "train")


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
