"""Errors the command line reports as one line (``treelm: error: ...``) instead of a traceback."""

from __future__ import annotations


class TreelmError(ValueError):
    """A user-facing problem: bad config, missing or corrupt file, wrong run directory."""


class ConfigError(TreelmError):
    pass


class CheckpointError(TreelmError):
    pass


IMAGE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def check_output(path: str, suffixes: tuple[str, ...] | None = None, what: str = "output") -> None:
    """Refuse, before any work, an output path that cannot be written as asked: an existing
    directory, or a suffix the writer does not make. Missing parent folders are made by the
    writers."""
    import os

    if os.path.isdir(path):
        raise TreelmError(f"{path}: is a directory; give a file name for the {what}")
    if suffixes and not path.lower().endswith(suffixes):
        raise TreelmError(f"{path}: the {what} must end in {', '.join(suffixes)}")
