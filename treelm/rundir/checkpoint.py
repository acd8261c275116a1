"""Crash-safe checkpoints of a run directory (layout and file names: :mod:`treelm.rundir`).

A save writes a new ``ckpt/N`` completely (each file via a temporary name, fsync, ``os.replace``),
then atomically replaces ``checkpoint.json`` to point at it, then removes directories no longer
pointed at. A kill at any moment therefore leaves ``checkpoint.json`` naming complete checkpoints.
Weights are safetensors; the trainer state is read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_model
from torch import nn

from treelm.errors import CheckpointError
from treelm.rundir.files import AVERAGED, CKPT, POINTER, TRAINER, WEIGHTS, atomic_write_text

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
        raise CheckpointError(f"{run}: no such run directory")
    if not p.exists():
        raise CheckpointError(f"{run}: not a treelm run directory (no {POINTER}; was it trained?)")
    try:
        ptr = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise CheckpointError(f"{p}: corrupted (not JSON)") from None
    if ptr.get("format") != FORMAT:
        raise CheckpointError(f"{p}: checkpoint format {ptr.get('format')} is not {FORMAT}")
    return ptr


def _save_weights(model: nn.Module, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    save_model(model, str(tmp))
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(
    run: Path,
    model: nn.Module,
    trainer_state: dict[str, Any],
    signature: dict[str, Any],
    best: bool,
    averager: Any = None,
    precision: str | None = None,
) -> None:
    """Write a new checkpoint as ``last`` (and ``best`` when ``best``).

    With an active NT-ASGD ``averager`` the averaged weights go to ``averaged.safetensors`` too:
    evaluation uses them, a resume the live ones. ``precision`` (``fp32`` | ``bf16``, what the run
    trains in) is noted in the pointer, so that evaluation and inference follow it.
    """
    ckdir = run / CKPT
    ckdir.mkdir(exist_ok=True)
    try:
        ptr = read_pointer(run)
    except CheckpointError:
        ptr = {"format": FORMAT, "model": signature}
    n = 1 + max([int(d.name) for d in ckdir.iterdir() if d.name.isdigit()], default=0)
    new = ckdir / f"{n:06d}"
    new.mkdir()
    _save_weights(model, new / WEIGHTS)
    if averager is not None:
        averager.swap()
        try:
            _save_weights(model, new / AVERAGED)
        finally:
            averager.swap()
    tmp = new / f".{TRAINER}.tmp"
    torch.save(trainer_state, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, new / TRAINER)
    _fsync_dir(new)
    if precision:
        ptr["precision"] = precision
    ptr["last"] = f"{CKPT}/{new.name}"
    if best or "best" not in ptr:
        ptr["best"] = ptr["last"]
    atomic_write_text(run / POINTER, json.dumps(ptr, indent=1))
    _fsync_dir(run)
    keep = {ptr["last"], ptr["best"]}
    for d in ckdir.iterdir():
        if f"{CKPT}/{d.name}" not in keep:
            shutil.rmtree(d, ignore_errors=True)


def load_weights(run: Path, model: nn.Module, which: str = "best",
                 signature: dict[str, Any] | None = None) -> None:
    ptr = read_pointer(run)
    if signature is not None and ptr.get("model", {}).get("type") != signature.get("type"):
        raise CheckpointError(
            f"{run}: holds a {ptr.get('model', {}).get('type')!r} model, "
            f"not a {signature.get('type')!r} model"
        )
    path = run / ptr[which] / WEIGHTS
    if which == "best" and (path.parent / AVERAGED).exists():
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


def load_trainer_state(run: Path) -> dict[str, Any]:
    ptr = read_pointer(run)
    path = run / ptr["last"] / TRAINER
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing (the run directory is incomplete)") from None
    except Exception as e:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CheckpointError(f"{path}: corrupted or not a treelm trainer state ({e})") from None
