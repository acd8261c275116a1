"""Open a trained run directory: its config, vocabulary and model (see
:mod:`treelm.train.checkpoint` for the layout)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from treelm.config import load_config
from treelm.data.vocab import Vocab
from treelm.errors import CheckpointError
from treelm.models import build_model
from treelm.train.checkpoint import load_weights, model_signature, read_pointer


@dataclass
class Run:
    path: Path
    cfg: dict[str, Any]
    vocab: Vocab
    model: nn.Module


def load_run(path: str | Path, which: str = "best", expect: str | None = None) -> Run:
    """Load a run's model in eval mode. ``expect`` (e.g. ``"lm"``) refuses other model types."""
    run = Path(path)
    read_pointer(run)  # clear error if this is not a run directory
    cfg = load_config(run / "config.yaml")
    kind = cfg.get("model", {}).get("type", "lm")
    if expect is not None and kind != expect:
        raise CheckpointError(f"{run}: holds a {kind!r} model; this command needs a {expect!r}")
    try:
        vocab = Vocab.load(run / "vocab.json")
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"{run / 'vocab.json'}: missing or corrupted ({e})") from None
    model = build_model(cfg.get("model", {}), len(vocab))
    load_weights(run, model, which, model_signature(cfg))
    model.eval()
    return Run(run, cfg, vocab, model)
