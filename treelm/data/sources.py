"""Data sets that are generated or read from files (``source: generate | files``): the one check
of a ``data:`` section's source against its file keys, and the validation split held out of a
training file.

The logical inference pairs (:mod:`treelm.data.logic`) and ListOps (:mod:`treelm.data.listops`)
are both drawn by a generator of their own or read from the original files, under the same keys
(``source``, ``train``, ``valid``, ``test``, ``valid_every``) and the same rules: a generated set
names no file; a read set names its training and test files, and without a validation file holds
out every ``valid_every``-th training example (the layout of the original experiments' code). The
rules live here once, so that the two sections cannot come to read the same keys differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from treelm.errors import ConfigError

SPLITS = ("train", "valid", "test")
SOURCES = ("generate", "files")                  # the values of data.source
T = TypeVar("T")


def check_source(spec: Any) -> None:
    """``spec.source`` against the split paths of a parsed section: ``generate`` with a path,
    or ``files`` without ``train`` or ``test``, is a one-line ConfigError."""
    given = [k for k in SPLITS if getattr(spec, k) is not None]
    if spec.source == "generate" and given:
        named = ", ".join("data." + k for k in given)
        raise ConfigError(f"data.source = 'generate' and {named} contradict each other "
                          "(data.source=files reads files)")
    if spec.source == "files":
        missing = [k for k in ("train", "test") if getattr(spec, k) is None]
        if missing:
            raise ConfigError("data.source = 'files' needs data.train and data.test; "
                              f"missing: {', '.join('data.' + k for k in missing)}")


def held_out(examples: Sequence[T], every: int, split: str) -> list[T]:
    """The ``split`` of a training file read without a validation file: ``valid`` holds every
    ``every``-th example, ``train`` all the others, both in the file's order."""
    held = split == "valid"
    return [x for i, x in enumerate(examples) if (i % every == every - 1) == held]
