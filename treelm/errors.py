"""Errors the command line reports as one line (``treelm: error: ...``) instead of a traceback."""

from __future__ import annotations


class TreelmError(ValueError):
    """A user-facing problem: bad config, missing or corrupt file, wrong run directory."""


class ConfigError(TreelmError):
    pass


class CheckpointError(TreelmError):
    pass
