"""YAML configs: load, apply ``key=value`` overrides from the command line, validate sections.

A config has these top-level keys (see ``configs/*.yaml`` for commented defaults): ``seed``,
``task`` (the kind of work, :data:`treelm.tasks.TASKS`; default ``lm``), ``data`` (read by the
task), ``model`` (:mod:`treelm.models`) and ``train`` (the loop's
:class:`treelm.train.config.TrainConfig` plus the task's own options, such as batch sizes).
Overrides use dotted keys and YAML values: ``train.lr=0.002 model.sizes=[200,200]``;
``key=null`` removes a key (e.g. ``data.file=null data.train=a.txt ...``).

A key written twice, in one mapping of a config file (``yes`` and ``true`` are one key) or as two
overrides with different values, is an error (YAML and a plain dict would keep the last one and
lose the first without a word); so are overrides of a section and of a key under it that say
different things about that key (one would undo the other).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from treelm.errors import ConfigError, TreelmError, read_text

SECTIONS = ("seed", "task", "data", "model", "train")


class DuplicateKey(yaml.YAMLError):
    """A mapping that gives ``key`` (a dotted path from the top) at two lines (1-based)."""

    def __init__(self, key: str, first: int, second: int, spelled: str | None = None) -> None:
        # spelled: how the first one was written, where it differs (yes against true)
        also = f" (first as {spelled!r})" if spelled is not None else ""
        super().__init__(f"key {key!r} given twice{also}, at lines {first} and {second}")
        self.key, self.first, self.second = key, first, second


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (:class:`DuplicateKey`).

    It checks the composed node tree before the document is built, where each key still has its
    line and its place under the top (``train.lr``, not only ``lr``). Keys are compared as the
    values they construct, as the dict they go into compares them: ``yes`` and ``true`` are both
    the boolean True, ``1``, ``01`` and ``1.0`` the same number, so each pair is one key given
    twice, while ``1`` and ``'1'`` are two keys. Merge keys (``<<: *base``) are YAML's way to
    override on purpose: their keys are not compared with the mapping's own.
    """

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            _refuse_duplicates(self, node, "", set())
        return node


def _refuse_duplicates(loader: yaml.SafeLoader, node: yaml.Node, where: str,
                       seen: set[int]) -> None:
    if id(node) in seen:      # an alias: the anchored node was checked where it was written
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        # constructed key -> (its text, its line); a dict, so that keys the mapping's dict would
        # merge (True and 1, 1 and 1.0) meet here too
        first: dict[Any, tuple[str, int]] = {}
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                continue
            name = f"{where}.{key.value}" if where else str(key.value)
            if isinstance(key, yaml.ScalarNode):    # (a list or mapping as a key: not ours)
                # the constructor caches the object by node, so the document's own key is this
                # very object: the check costs no second construction
                built = loader.construct_object(key)     # (a scalar's value is hashable)
                line = key.start_mark.line + 1
                if built in first:
                    spelled, at = first[built]
                    raise DuplicateKey(name, at, line, None if spelled == key.value else spelled)
                first[built] = (str(key.value), line)
            _refuse_duplicates(loader, value, name, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicates(loader, item, f"{where}[{i}]", seen)


def load_config(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such config file")
    try:
        text = read_text(str(p), "config file")
    except TreelmError as e:
        raise ConfigError(str(e)) from None
    try:
        cfg = yaml.load(text, Loader=UniqueKeyLoader)
    except DuplicateKey as e:
        raise ConfigError(f"{p}: {e}; keep one") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{p}: a config must be a mapping with sections {SECTIONS}")
    unknown = set(cfg) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"{p}: unknown top-level keys {sorted(unknown)}; expected {SECTIONS}")
    return cfg


def apply_overrides(cfg: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``cfg`` with the ``key=value`` overrides applied in order. A key given twice with two
    values is refused (naming both): which one was meant is not ours to guess. The same value
    twice is harmless, as from a command line built up by a script."""
    cfg = copy.deepcopy(cfg)
    given: dict[str, tuple[str, Any]] = {}
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
        if key in given and given[key][1] != value:
            raise ConfigError(f"override {key} given twice with different values: "
                              f"{given[key][0]} and {item}; keep one")
        for other, (other_item, other_value) in given.items():
            _refuse_disagreement(other, other_item, other_value, key, item, value)
        given[key] = (item, value)
        node = cfg
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p} is not a section")
        if value is None:   # key=null removes the key (its default applies again)
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return cfg


def _refuse_disagreement(earlier: str, earlier_item: str, earlier_value: Any, key: str,
                         item: str, value: Any) -> None:
    """Refuse an override ``key`` and an ``earlier`` one of which one names a section above the
    other's key (``model.cell_options={impl: cpu}`` and ``model.cell_options.impl=fused``) when
    applying both in order would drop what one of them says there: the section's value names the
    key with another value, or the section comes last and replaces a key set before it. A
    section given first and a key it does not name, added after, is a plain edit of it
    (``model.cell_options={chunk_size: 4} model.cell_options.impl=fused``). A value of null
    means the key is absent (``key=null`` removes it)."""
    pa, pb = earlier.split("."), key.split(".")
    if len(pa) == len(pb):
        return
    section_first = len(pa) < len(pb)
    (parent, p_item, p_value), (child, c_item, c_value) = (
        ((pa, earlier_item, earlier_value), (pb, item, value)) if section_first
        else ((pb, item, value), (pa, earlier_item, earlier_value)))
    if child[:len(parent)] != parent:
        return
    there: Any = p_value        # what the section's override says at the child's key
    named = True
    for part in child[len(parent):]:
        named = isinstance(there, dict) and part in there
        there = there.get(part) if named else None
        if not named:
            break
    # section first: the key edits it, so only a value the section names is overruled;
    # section last: it replaces the key's value, so anything but that same value is lost
    if (named or not section_first) and there != c_value:
        raise ConfigError(f"overrides {p_item} and {c_item} disagree about {'.'.join(child)} "
                          f"({_said(there)} against {_said(c_value)}); keep one")


def _said(value: Any) -> str:
    """An override's value as its disagreement says it (null: the key is absent)."""
    return "absent" if value is None else repr(value)


def dump_config(cfg: dict[str, Any]) -> str:
    return yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)


def parse_section(cls: type[Any], d: dict[str, Any] | None, section: str,
                  others: Iterable[str] = ()) -> Any:
    """The dataclass ``cls`` from the mapping ``d`` of a config section, every value checked.

    Keys that are neither fields of ``cls`` (given ones: a field of ``init=False`` is derived from
    the others) nor in ``others`` (claimed by another reader of the same section) are an error
    naming them. Each value must have its field's type (an int where
    a float is wanted is taken; ``2.5`` for an int, ``"abc"`` for a number or a bool are not)
    and satisfy the rule in the class's ``RULES`` mapping, if any: ``"> 0"``, ``">= 1"``,
    ``"[0, 1)"``, ``"(0, 1]"`` or a tuple of allowed values. Every error is one line naming
    ``section.key``, the value and what is allowed.
    """
    if d is not None and not isinstance(d, dict):
        raise ConfigError(f"{section}: expected a section of key: value pairs, got {d!r}")
    d = dict(d or {})
    names = {f.name for f in dataclasses.fields(cls) if f.init}   # (not what is derived)
    known = names | set(others)
    unknown = sorted(set(d) - known)
    if unknown:
        raise ConfigError(f"unknown {section} options {unknown}; known: {sorted(known)}")
    hints = typing.get_type_hints(cls)
    rules = getattr(cls, "RULES", {})
    values = {}
    for k, v in d.items():
        if k not in names:
            continue
        v = _typed(f"{section}.{k}", v, hints[k])
        if k in rules and v is not None:
            _check_rule(f"{section}.{k}", v, rules[k])
        values[k] = v
    return cls(**values)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _typed(key: str, v: Any, tp: Any) -> Any:
    """``v`` as type ``tp`` (int → float widening only), or a ConfigError."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _typed(key, v, inner[0])
        return v
    if tp is Any:
        return v
    if tp is bool:
        if isinstance(v, bool):
            return v
    elif tp is int:
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    elif tp is float:
        if isinstance(v, str):
            v = _float_text(v)      # YAML 1.1 reads 1e-3 (no dot) as a string
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    elif tp is str:
        if isinstance(v, str):
            return v
    elif origin is list:
        if isinstance(v, list):
            return [_typed(key, x, args[0]) for x in v] if args else v
    elif origin is dict or tp is dict:
        if isinstance(v, dict):
            return v
    else:
        return v
    want = {"bool": "true or false", "int": "an integer", "float": "a finite number",
            "str": "a string"}.get(_type_name(tp), _type_name(tp))
    if origin is list:
        want = f"a list of {_type_name(args[0]) if args else 'values'}s, e.g. [1, 2]"
    elif origin is dict or tp is dict:
        want = "a mapping, e.g. {key: value}"
    raise ConfigError(f"{key} = {v!r}: expected {want}")


def _float_text(v: str) -> float | str:
    """``v`` as a float when it is written as one (``1e-3``, ``2E+4``), else ``v`` unchanged."""
    try:
        return float(v.strip())
    except ValueError:
        return v


def _check_rule(key: str, v: Any, rule: Any) -> None:
    if isinstance(rule, tuple):
        if v not in rule:
            raise ConfigError(f"{key} = {v!r}: choose one of {', '.join(map(str, rule))}")
        return
    values = v if isinstance(v, list) else [v]
    for x in values:
        ok = {"> 0": x > 0, ">= 0": x >= 0, ">= 1": x >= 1, "[0, 1)": 0 <= x < 1,
              "(0, 1]": 0 < x <= 1, "[0, 1]": 0 <= x <= 1}[rule]
        if not ok:
            want = _RULE_TEXT[rule]
            if isinstance(x, float):    # ">= 1" of a float field: a number, not an integer
                want = want.removeprefix("an integer ")
            raise ConfigError(f"{key} = {v!r}: must be {want}")


_RULE_TEXT = {"> 0": "> 0", ">= 0": ">= 0", ">= 1": "an integer >= 1" , "[0, 1)": "in [0, 1)",
              "(0, 1]": "in (0, 1]", "[0, 1]": "in [0, 1]"}


def check_kwargs(fn: Any, spec: dict[str, Any], section: str,
                 rules: dict[str, Any] | None = None) -> dict[str, Any]:
    """``spec`` checked against the annotated parameters of ``fn`` (e.g. a model's
    ``__init__``) and ``rules`` as in :func:`parse_section`; unknown keys are an error.
    Keywords typed ``**kw: Unpack[SomeTypedDict]`` count as the TypedDict's keys (a group that
    several models take, declared once: :class:`treelm.nn.dropout.Dropouts`)."""
    import inspect

    hints = typing.get_type_hints(fn)
    params: set[str] = set()
    for n, p in inspect.signature(fn).parameters.items():
        if p.kind is p.VAR_KEYWORD and typing.get_origin(hints.get(n)) is typing.Unpack:
            group = typing.get_type_hints(typing.get_args(hints.pop(n))[0])
            params |= set(group)
            hints.update(group)
        elif n != "self":
            params.add(n)
    unknown = sorted(set(spec) - params)
    if unknown:
        raise ConfigError(f"unknown {section} options {unknown}; known: {sorted(params)}")
    out = {}
    for k, v in spec.items():
        v = _typed(f"{section}.{k}", v, hints.get(k, Any))
        if rules and k in rules and v is not None:
            _check_rule(f"{section}.{k}", v, rules[k])
        out[k] = v
    return out
