"""The names of a run directory's files and the metrics log (layout in :mod:`treelm.rundir`).

Every module that reads or writes a run goes through :class:`RunFiles`, so a file name is spelled
once. Writes are atomic (temporary name, fsync, ``os.replace``): a kill at any moment leaves either
the old or the new file, never half of one. ``metrics.jsonl`` is appended one JSON line per event;
its byte length goes into every checkpoint so that a resume can drop what was logged after it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any, overload

from treelm.errors import CheckpointError
from treelm.text.tokenizers import Tokenizer, tokenizer_from_spec
from treelm.text.vocab import Vocab

CONFIG = "config.yaml"
DATA = "data.json"
METRICS = "metrics.jsonl"
POINTER = "checkpoint.json"
CKPT = "ckpt"
WEIGHTS = "model.safetensors"
AVERAGED = "averaged.safetensors"
TRAINER = "trainer.pt"
LOCK = "train.lock"
TB = "tb"
TREES = "trees.json"


#: The errors of a full disk: no space, over quota, over the file-size limit.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def write_file(path: Path, data: bytes) -> None:
    """``data`` as the new file ``path``, on disk (fsync) when this returns. The one low-level
    write of a run's files: a test makes it fail as a full disk would."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``path`` via a temporary name and ``os.replace``: a kill leaves the old file or the
    new one. A failed write (a full disk) removes the temporary file and raises an ``OSError``
    naming ``path``: the error of a write has no file name of its own."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write_file(tmp, data)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror or str(e), str(path)) from e
    os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _role(name: str, role: str) -> str:
    return f"{role}.{name}" if role else name


class _InRun:
    """A read-only attribute of :class:`RunFiles`: the path of the run's file ``name``."""

    def __init__(self, name: str, doc: str | None = None) -> None:
        self.name = name
        self.__doc__ = doc or f"``{name}`` in the run directory."

    @overload
    def __get__(self, files: None, owner: type[RunFiles]) -> _InRun: ...
    @overload
    def __get__(self, files: RunFiles, owner: type[RunFiles]) -> Path: ...
    def __get__(self, files: RunFiles | None, owner: type[RunFiles]) -> Path | _InRun:
        return self if files is None else files.path / self.name

    def __set__(self, files: RunFiles, value: Any) -> None:
        raise AttributeError(f"a run's file names are fixed ({self.name})")   # as a property


class RunFiles:
    """The files of the run directory ``path`` (which need not exist yet)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    # ------------------------------------------------------------------ names
    config = _InRun(CONFIG)
    data = _InRun(DATA)
    metrics = _InRun(METRICS)
    pointer = _InRun(POINTER)
    ckpt = _InRun(CKPT)
    lock = _InRun(LOCK, "The writer's lock (:mod:`treelm.rundir.lock`), present while a writer "
                        "holds it.")
    tb = _InRun(TB, "TensorBoard's event files of the run's scalars "
                    "(:mod:`treelm.train.tensorboard`), where ``tensorboard`` is installed.")
    trees = _InRun(TREES, "The layer and tree rule chosen on dev trees for each checkpoint "
                          "(:mod:`treelm.rundir.trees`).")

    def vocab_path(self, role: str = "") -> Path:
        return self.path / _role("vocab.json", role)

    def tokenizer_path(self, role: str = "") -> Path:
        return self.path / _role("tokenizer.json", role)

    def tokenizer_model_path(self, role: str = "") -> Path:
        return self.path / _role("tokenizer.model", role)

    # ------------------------------------------------------------------ symbol tables
    def write_vocab(self, vocab: Vocab, role: str = "") -> None:
        atomic_write_text(self.vocab_path(role), vocab.to_json())

    def read_vocab(self, role: str = "") -> Vocab:
        p = self.vocab_path(role)
        try:
            return Vocab.load(p)
        except (OSError, ValueError, KeyError) as e:
            raise CheckpointError(f"{p}: missing or corrupted ({e})") from None

    def write_tokenizer(self, tok: Tokenizer, role: str = "") -> None:
        model = tok.model_bytes()
        if model is not None:
            atomic_write_bytes(self.tokenizer_model_path(role), model)
        atomic_write_text(self.tokenizer_path(role), json.dumps(tok.spec()))

    def read_tokenizer(self, role: str = "", legacy_kind: str | None = None) -> Tokenizer:
        """The saved tokenizer; runs written before tokenizers were saved name ``legacy_kind``
        (their vocabulary's level) instead."""
        p = self.tokenizer_path(role)
        if not p.exists():
            if legacy_kind is None:
                raise CheckpointError(f"{p}: missing (the run directory is incomplete)")
            return tokenizer_from_spec({"kind": legacy_kind})
        try:
            spec = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{p}: corrupted ({e})") from None
        mp = self.tokenizer_model_path(role)
        return tokenizer_from_spec(spec, mp.read_bytes() if mp.exists() else None)

    def legacy_level(self) -> str | None:
        """The ``level`` stored in ``vocab.json`` by runs older than the text layer."""
        try:
            return json.loads(self.vocab_path().read_text(encoding="utf-8")).get("level")
        except (OSError, ValueError):
            return None


    # ------------------------------------------------------------------ data fingerprints
    def write_fingerprints(self, paths: list[str]) -> None:
        """Size and SHA-256 of each data file, so later readers notice a changed corpus."""
        atomic_write_text(self.data, json.dumps(
            {p: fingerprint(Path(p)) for p in paths}, indent=1))

    def changed_data(self) -> list[str]:
        """One line per data file that differs from when the run was trained."""
        try:
            saved = json.loads(self.data.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []                       # runs from before fingerprints were kept
        lines = []
        for path, fp in saved.items():
            now = fingerprint(Path(path))
            if now != fp:
                what = "is missing" if now is None else "changed since the run was trained"
                lines.append(f"{path} {what} (size {fp['size']:,} bytes then"
                             + (f", {now['size']:,} now)" if now else ")"))
        return lines


def fingerprint(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        return {"size": path.stat().st_size, "sha256": digest}
    except OSError:
        return None


class MetricsLog:
    """Appends events to ``metrics.jsonl`` and knows its length in bytes."""

    def __init__(self, files: RunFiles, nbytes: int = 0) -> None:
        self.path = files.metrics
        self.nbytes = nbytes

    def start(self) -> None:
        self.path.write_text("")
        self.nbytes = 0

    def append(self, record: dict[str, Any]) -> None:
        """Add one line. A failed write (a full disk) cuts what it wrote of the line, so that
        readers of the log never meet half a line, and raises an ``OSError`` naming the log."""
        line = memoryview((json.dumps(record) + "\n").encode())
        n = len(line)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            try:
                while line:                 # a write may take part of the line, then fail
                    line = line[os.write(fd, line):]
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, end)
                raise OSError(e.errno, e.strerror or str(e), str(self.path)) from e
        finally:
            os.close(fd)
        self.nbytes += n

    def truncate(self, nbytes: int) -> None:
        """Forget what was logged after a checkpoint (at ``nbytes``)."""
        with open(self.path, "r+b") as f:
            f.truncate(nbytes)
        self.nbytes = nbytes


def read_metrics(run: str | Path | RunFiles, event: str | None = None) -> list[dict[str, Any]]:
    """The events of a run's ``metrics.jsonl`` (only those named ``event`` if given). A last
    line without its newline is an append still being written, or one a kill or a full disk
    cut short (a resume cuts it off): it is left out. Any other line that is not an event is
    a one-line error naming it."""
    files = run if isinstance(run, RunFiles) else RunFiles(run)
    try:
        text = files.metrics.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8"
        raise CheckpointError(f"{files.metrics}: cannot read ({why})") from None
    lines = text.split("\n")[:-1]          # the text after the last newline is unfinished
    records = []
    for i, ln in enumerate(lines, 1):
        if not ln.strip():
            continue
        try:
            records.append(json.loads(ln))
        except json.JSONDecodeError:
            raise CheckpointError(f"{files.metrics}:{i}: not a metrics event (the log was "
                                  f"edited or damaged)") from None
    return [r for r in records if event is None or r.get("event") == event]
