"""Crash-safe checkpoints of a run directory (layout and file names: :mod:`treelm.rundir`).

A save writes a new ``ckpt/N`` completely (each file via a temporary name, fsync, ``os.replace``),
then atomically replaces ``checkpoint.json`` to point at it, then removes directories no longer
pointed at. A kill at any moment therefore leaves ``checkpoint.json`` naming complete checkpoints.
A write that fails (a full disk) removes the unfinished ``ckpt/N`` and raises
:class:`CheckpointWriteError`, naming the file and the last good checkpoint, which stays as it was.
Weights are safetensors; the trainer state is read with ``torch.load(weights_only=True)``. Both are
made in memory and written by :func:`~treelm.rundir.files.write_file`, whose errors carry their
``errno`` (safetensors' own writer reports a full disk as a ``SafetensorError`` with the number in
its text, ``torch.save`` as a ``RuntimeError`` without it).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes
from torch import Tensor, nn

from treelm.errors import CheckpointError
from treelm.rundir.files import (
    AVERAGED,
    CKPT,
    POINTER,
    TRAINER,
    WEIGHTS,
    atomic_write_bytes,
    atomic_write_text,
)

FORMAT = 1


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def model_signature(cfg: dict[str, Any]) -> dict[str, Any]:
    """What identifies a model's weights: its type and architecture options."""
    return {"type": cfg.get("model", {}).get("type", "lm"), **cfg.get("model", {})}


def read_pointer(run: Path) -> dict[str, Any]:
    p = run / POINTER
    if not run.is_dir():
        raise CheckpointError(f"{run}: " + ("not a directory" if run.exists()
                                            else "no such run directory"))
    if not p.exists():
        raise CheckpointError(f"{run}: not a treelm run directory (no {POINTER}; was it trained?)")
    try:
        ptr = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise CheckpointError(f"{p}: corrupted (not JSON)") from None
    if ptr.get("format") != FORMAT:
        raise CheckpointError(f"{p}: checkpoint format {ptr.get('format')} is not {FORMAT}")
    return ptr


class CheckpointWriteError(OSError):
    """A checkpoint that could not be written: ``filename`` the file being written, ``removed``
    the unfinished checkpoint's directory (already deleted; None if none was made)."""

    removed: Path | None


def weights_bytes(model: nn.Module) -> bytes:
    """``model``'s state dict as a safetensors file, in memory. A tensor that is the same view of
    the same memory as one already kept (tied weights) is stored once, under the first name in
    sorted order, the others named in the metadata, as ``safetensors.torch.save_model`` does;
    :func:`load_weights` fills them back. Any other shared memory is stored as a copy."""
    tensors: dict[str, Tensor] = {}
    metadata: dict[str, str] = {}
    views: dict[tuple[Any, ...], str] = {}
    storages: set[int] = set()
    for name, t in sorted(model.state_dict().items()):
        ptr = t.untyped_storage().data_ptr()
        view = (ptr, t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, t.device)
        if t.numel() and view in views:
            metadata[name] = views[view]
            continue
        if t.numel() and ptr in storages:
            t = t.clone()
        views[view] = name
        storages.add(ptr)
        tensors[name] = t.contiguous()
    return safetensors_bytes(tensors, metadata or None)


def _state_bytes(state: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def save_checkpoint(
    run: Path,
    model: nn.Module,
    trainer_state: dict[str, Any],
    signature: dict[str, Any],
    best: bool,
    averager: Any = None,
    precision: str | None = None,
    fresh: bool = False,
    trees: Collection[str] = (),
) -> None:
    """Write a new checkpoint as ``last`` (and ``best`` when ``best``, or when ``fresh``: the
    first checkpoint of a new run, whose pointer forgets one a replaced run left behind; and
    each name in ``trees``, ``best-trees`` or ``best-trees-<rule>``: the checkpoints of
    ``train.eval_parse``'s best dev trees, :mod:`treelm.train.trees`). A run never given such
    a name has none. Every directory a name points to is kept, the others go.

    With an active NT-ASGD ``averager`` the averaged weights go to ``averaged.safetensors`` too:
    evaluation uses them, a resume the live ones. ``precision`` (``fp32`` | ``bf16``, what the run
    trains in) is noted in the pointer, so that evaluation and inference follow it.
    """
    ckdir = run / CKPT
    ptr: dict[str, Any] = {"format": FORMAT, "model": signature}
    if not fresh:
        try:
            ptr = read_pointer(run)
        except CheckpointError:
            pass
    new: Path | None = None
    writing = ckdir
    try:
        ckdir.mkdir(exist_ok=True)
        n = 1 + max([int(d.name) for d in ckdir.iterdir() if d.name.isdigit()], default=0)
        writing = new = ckdir / f"{n:06d}"
        new.mkdir()
        # one file's bytes in memory at a time
        writing = new / WEIGHTS
        atomic_write_bytes(writing, weights_bytes(model))
        if averager is not None:
            averager.swap()
            try:
                data = weights_bytes(model)
            finally:
                averager.swap()
            writing = new / AVERAGED
            atomic_write_bytes(writing, data)
            del data
        writing = new / TRAINER
        atomic_write_bytes(writing, _state_bytes(trainer_state))
        writing = new
        _fsync_dir(new)
        if precision:
            ptr["precision"] = precision
        ptr["last"] = f"{CKPT}/{new.name}"
        if best or "best" not in ptr:
            ptr["best"] = ptr["last"]
        for name in trees:
            ptr[name] = ptr["last"]
        writing = run / POINTER
        atomic_write_text(writing, json.dumps(ptr, indent=1))
    except OSError as e:
        # the pointer still names the last good checkpoint: the unfinished one goes
        if new is not None:
            shutil.rmtree(new, ignore_errors=True)
        err = CheckpointWriteError(e.errno, e.strerror or str(e), str(writing))
        err.removed = new
        raise err from e
    _fsync_dir(run)
    keep = {v for v in ptr.values() if isinstance(v, str) and v.startswith(f"{CKPT}/")}
    for d in ckdir.iterdir():
        if f"{CKPT}/{d.name}" not in keep:
            shutil.rmtree(d, ignore_errors=True)


def load_weights(run: Path, model: nn.Module, which: str = "best",
                 signature: dict[str, Any] | None = None, averaged: bool | None = None) -> None:
    """Load checkpoint ``which`` (``best`` | ``best-trees`` | ``best-trees-<rule>`` | ``last``)
    of ``run`` into ``model``. Where NT-ASGD was averaging, ``averaged`` picks the averaged
    weights (what the run's validations scored, trees included) over the live ones (what a
    resume continues from); None: the averaged ones for every checkpoint but ``last`` (each
    chosen on what a validation scored), the live ones for ``last``."""
    ptr = read_pointer(run)
    if signature is not None and ptr.get("model", {}).get("type") != signature.get("type"):
        raise CheckpointError(
            f"{run}: holds a {ptr.get('model', {}).get('type')!r} model, "
            f"not a {signature.get('type')!r} model"
        )
    if which not in ptr:
        raise CheckpointError(f"{run} has no {which} checkpoint")
    path = run / ptr[which] / WEIGHTS
    chosen = which != "last"
    if (chosen if averaged is None else averaged) and (path.parent / AVERAGED).exists():
        path = path.parent / AVERAGED   # NT-ASGD: evaluate the averaged iterate
    if not path.exists():
        raise CheckpointError(f"{path}: missing (the run directory is incomplete)")
    try:
        tensors = load_file(str(path))
        missing, unexpected = model.load_state_dict(tensors, strict=False)
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{path}: corrupted weights file ({e})") from None
    except RuntimeError as e:  # shape mismatch: the weights are for another architecture
        raise CheckpointError(f"{path}: weights do not fit this model "
                              f"({str(e).splitlines()[-1].strip()})") from None
    missing = _untied_missing(model, missing)
    if missing or unexpected:
        raise CheckpointError(
            f"{path}: weights are from another model (missing {sorted(missing)[:3]}, "
            f"unexpected {sorted(unexpected)[:3]})"
        )


def _untied_missing(model: nn.Module, missing: list[str]) -> list[str]:
    """Drop from ``missing`` the names of tied tensors (safetensors stores a shared tensor once)
    whose storage was loaded under another name."""
    groups: dict[int, list[str]] = {}
    for name, t in model.state_dict(keep_vars=True).items():
        groups.setdefault(t.data_ptr(), []).append(name)
    gone = set(missing)
    return [m for names in groups.values() for m in names
            if m in gone and all(n in gone for n in names)]


def load_trainer_state(run: Path, which: str = "last") -> dict[str, Any]:
    """The trainer state of checkpoint ``which`` (a resume reads ``last``'s; the others are
    read for their step, mapped rather than read whole)."""
    ptr = read_pointer(run)
    if which not in ptr:
        raise CheckpointError(f"{run} has no {which} checkpoint")
    path = run / ptr[which] / TRAINER
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=which != "last")
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing (the run directory is incomplete)") from None
    except Exception as e:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CheckpointError(f"{path}: corrupted or not a treelm trainer state ({e})") from None
