"""Which layer and tree rule the syntax verbs read: ``--layer`` and ``--style`` as given, else
the run's own choice on dev trees, else the last-but-one layer and the official rule.

Apart from the verbs (:mod:`treelm.parsing.commands`) because it is one idea with two sides:

* reading: :class:`LayerArg` checks ``--layer``'s form as it is parsed, :func:`parse_layer`
  turns it into a run's layers, and :func:`tree_defaults` fills in what was not given from the
  run's choice (``TreelmModel.choice``, from ``trees.json``: :mod:`treelm.rundir.trees`), saying
  so on stderr in one line (stdout keeps the result alone); a flag given wins, silently;
* writing: :func:`record_choice` is what ``eval-parse`` on a dev treebank (``nltk-dev``,
  ``sinica-dev``; never a test one, never a file it cannot tell from one) leaves for the
  checkpoint it scored: the layer of the highest sentence F1 under the rule it scored, merged
  with an earlier ``eval-parse`` of the same checkpoint and treebank under the other rule, so
  that both rules can be chosen among (ties: official before split, the lower layer first).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from treelm.errors import TreelmError

STYLES = ("official", "split")


class LayerArg:
    """The ``type=`` of ``--layer``: a layer number from 1, or ``all`` where every layer can be
    used. Its form is checked as the flag is parsed, so ``--layer abc`` or ``--layer 0`` is a
    one-line usage error naming the flag before a run is opened; whether the run has that layer
    is :func:`parse_layer`'s to say, once it is. The text is kept as given, for it."""

    def __init__(self, allow_all: bool = True) -> None:
        self.allow_all = allow_all
        self.__name__ = "layer"        # argparse's "invalid layer value" (never reached)

    def __call__(self, text: str) -> str:
        if text == "all":
            if not self.allow_all:
                raise argparse.ArgumentTypeError("'all' is not possible here; give one layer "
                                                 "number")
            return text
        try:
            k = int(text)
        except ValueError:
            either = " or 'all'" if self.allow_all else ""
            raise argparse.ArgumentTypeError(f"must be a layer number{either}, got {text}"
                                             ) from None
        if k < 1:
            raise argparse.ArgumentTypeError(f"layers are numbered from 1, got {text}")
        return text


def parse_layer(text: str | None, layers: Sequence[int], allow_all: bool = True,
                default: int | None = None) -> list[int]:
    """``--layer`` value -> the 1-based layers to use (``None``: ``default``, else the
    last-but-one layer)."""
    from treelm.syntax.levels import default_layer

    if text is None:
        return [default if default is not None else default_layer(layers)]
    if text == "all":
        if not allow_all:
            raise TreelmError("--layer all is not possible here; give one layer number")
        return list(layers)
    try:
        k = int(text)
    except ValueError:
        raise TreelmError(f"--layer must be a layer number or 'all', got {text!r}") from None
    if k not in layers:
        raise TreelmError(f"--layer {k}: this model's ON-LSTM layers are "
                          f"{', '.join(map(str, layers))}")
    return [k]


def tree_defaults(verb: str, model: Any, args: argparse.Namespace,
                  allow_all: bool = True) -> tuple[list[int], str]:
    """The layers and the rule ``verb`` reads with ``model`` (a
    :class:`~treelm.api.model.TreelmModel`): ``args.layer`` and ``args.style`` where given,
    else the run's choice on dev trees for the loaded checkpoint, said in one line on stderr
    (``treelm parse: layer 3, split rule, chosen on nltk-dev (sentence F1 47.6 at the best
    checkpoint)``); without one (or for a translation encoder's backward stack, which no dev
    choice covers), the last-but-one layer and the official rule, said nothing of."""
    direction = getattr(args, "direction", "forward")
    chosen = model.choice.chosen if model.choice is not None and direction == "forward" else None
    layers = parse_layer(args.layer, model.layers_of(direction), allow_all,
                         chosen.layer if chosen else None)
    style = args.style or (chosen.rule if chosen else "official")
    if chosen is not None and (args.layer is None or args.style is None):
        if args.layer is None and args.style is None:
            what = f"layer {chosen.layer}, {chosen.rule} rule"
        elif args.layer is None:
            what = f"layer {chosen.layer} (as with the {chosen.rule} rule)"
        else:
            what = f"{chosen.rule} rule (as at layer {chosen.layer})"
        print(f"treelm {verb}: {what}, {chosen.describe()}", file=sys.stderr, flush=True)
    return layers, style


def record_choice(run: Any, report: dict[str, Any], checkpoint: str) -> None:
    """After ``eval-parse`` of ``run``'s ``checkpoint`` on a dev treebank (``report``: what
    :func:`~treelm.syntax.report.parsing_report` gave, already printed): its layer and rule go
    to ``trees.json`` for that checkpoint, said in one line on stderr (a write that fails, in a
    warning). Another treebank writes nothing."""
    from treelm.rundir.checkpoint import load_trainer_state, read_pointer
    from treelm.rundir.trees import HOW_EVAL_PARSE, TreeChoice, read_choices, write_choices
    from treelm.syntax.tracking import choose, chooses, score_key

    treebank, max_len = report["treebank"], report["max_len"]
    if not chooses(treebank, paths=False) or not report["layers"]:
        return
    path = read_pointer(run.path)[checkpoint]
    scores = {score_key(report["style"], int(k)): res["sentence_f1"]
              for k, res in report["layers"].items()}
    try:
        old = read_choices(run.path).get(checkpoint)
    except TreelmError:             # damaged: replaced by this one
        old = None
    if old and (old.path, old.treebank, old.max_len) == (path, treebank, max_len):
        scores = {**old.scores, **scores}       # the other rule's scores of the same weights
    rule, layer, f1 = choose(scores)
    state = load_trainer_state(run.path, checkpoint)
    loop = state.get("loop", state)             # (a run of the layout before the Task seam)
    choice = TreeChoice(checkpoint=checkpoint, path=path, treebank=treebank, layer=layer,
                        rule=rule, sentence_f1=f1, step=loop.get("step", 0),
                        tokens=loop.get("tokens", loop.get("tokens_seen", 0)),
                        how=HOW_EVAL_PARSE, max_len=max_len, scores=scores)
    try:
        write_choices(run.path, {checkpoint: choice})
    except OSError as e:        # someone else's run, a full disk: the scores stand as printed
        print(f"treelm eval-parse: warning: the choice is not recorded ({e.filename}: "
              f"{e.strerror or e})", file=sys.stderr, flush=True)
        return
    print(f"treelm eval-parse: {run.path}'s {checkpoint} checkpoint now parses with layer "
          f"{layer}, {rule} rule, {choice.describe()} (trees.json)", file=sys.stderr, flush=True)


__all__ = ["STYLES", "LayerArg", "parse_layer", "record_choice", "tree_defaults"]
