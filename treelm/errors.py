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
    directory, a suffix the writer does not make, or a place where the file cannot be made (a
    parent that is a file, no permission, a read-only file system): every verb's ``-o`` comes
    here first. Missing parent folders are made by the writers; this check makes them and the
    file to see that it can, then removes what it made."""
    import os

    if os.path.isdir(path):
        raise TreelmError(f"{path}: is a directory; give a file name for the {what}")
    if suffixes and not path.lower().endswith(suffixes):
        raise TreelmError(f"{path}: the {what} must end in {', '.join(suffixes)}")
    _probe_writable(path, what)


def _probe_writable(path: str, what: str) -> None:
    """Make ``path`` (and its missing parents) as the writer will, then remove what was made: a
    path that cannot be written fails here, in one line, instead of after the work as a
    traceback. An existing file is opened for appending, which changes nothing in it; a symbolic
    link is written through, as the writer will, and the file made at its end is removed."""
    import os

    target = os.path.abspath(path)
    missing: list[str] = []
    parent = os.path.dirname(target)
    while not os.path.lexists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise TreelmError(f"{path}: cannot write the {what}: {parent} is not a directory")
    made: list[str] = []
    try:
        for d in reversed(missing):
            os.mkdir(d)
            made.append(d)
        # open() follows symbolic links, a dangling one included: it makes the file the link
        # points to, which is what must be removed again (the link itself was there before)
        made_file = os.path.realpath(target)
        existed = os.path.lexists(made_file)
        with open(target, "ab"):
            pass
        if not existed:
            os.unlink(made_file)
    except OSError as e:
        raise TreelmError(f"{path}: cannot write the {what} ({e.strerror or e})") from None
    finally:
        for d in reversed(made):
            try:
                os.rmdir(d)
            except OSError:
                pass


def decode_text(raw: bytes, where: str) -> str:
    """``raw`` as UTF-8 text, or a one-line error naming ``where`` and the line: bytes that are
    not UTF-8, or a NUL byte (binary data that happens to decode: an image, a checkpoint)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise TreelmError(f"{where}:{line}: not UTF-8 text ({e.reason}); is it a binary "
                          "file?") from None
    nul = text.find("\0")
    if nul >= 0:
        raise TreelmError(f"{where}:{text[:nul].count(chr(10)) + 1}: binary data (a NUL byte), "
                          "not text")
    return text


def read_text(path: str, what: str = "file") -> str:
    """The text of a UTF-8 file, or a one-line :class:`TreelmError` naming it: missing, a
    directory, unreadable, or not text (:func:`decode_text`). The one reader of every text file
    a user names (configs, verbs' inputs)."""
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        raise TreelmError(f"{path}: is a directory, not a {what}")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise TreelmError(f"{path}: no such {what}") from None
    except OSError as e:
        raise TreelmError(f"{path}: cannot read ({e.strerror})") from None
    return decode_text(raw, path)
