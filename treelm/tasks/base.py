"""The Task seam: everything a kind of work owns, so that one training loop serves them all.

A task (language modelling, translation, tagging, pair classification) owns

* its **data** and **symbol tables**: given the run's checked config
  (:class:`RunConfig`: seed, parsed ``data:`` section, options), it
  reads the data and builds tokenizers and vocabularies for a new run (``create``) and saves them
  into the run directory (``save``), or reads them back for inference and resumes (``open``,
  which reads no corpus);
* **batching with a resumable position**: ``batches()`` yields the rest of the current epoch from
  where it stopped; ``state_dict()`` holds that position and whatever is carried from batch to
  batch (the LM's hidden states), so a checkpoint taken between two steps resumes exactly;
* the **loss** of one batch (regularisers included) and the plain loss that is logged;
* **evaluation**: named scores with one primary score and its direction;
* the sizes the model needs (``model_dims``) and its own options of the ``train:`` section
  (``Options``: batch sizes, sequence lengths, loss weights).

The trainer (:mod:`treelm.train.trainer`) sees only this interface, so a new task is a module in
this package and a row in :data:`treelm.tasks.TASKS`, with no change to the loop.

Shapes are the task's business; the loop only moves a :class:`Batch` to the model and back. One
convention keeps progress figures comparable: ``Batch.size`` counts the task's *units* (tokens for
language models and translation targets, examples for classification), and the loss returned by
``loss`` is a mean per unit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from treelm.errors import TreelmError
from treelm.rundir.files import RunFiles


@dataclass
class Batch:
    """One training batch: the task's own ``data`` (any tensors) and what the loop needs."""

    data: Any
    size: int                  # units in the batch on this process (tokens, examples)
    lr_scale: float = 1.0      # multiplies the learning rate for this step (variable BPTT)
    last: bool = False         # the last batch of the epoch


@dataclass
class LossOut:
    loss: Tensor               # what is minimised (scalar)
    value: Tensor              # the plain loss per unit that is logged (scalar, no regularisers)
    logs: dict[str, Tensor] = field(default_factory=dict)   # more terms to log (scalars), by
                                                            # name: the loop averages them


@dataclass
class Evaluation:
    """Named scores of one evaluation; ``primary`` selects the best checkpoint."""

    scores: dict[str, float]   # e.g. {"loss": 4.51, "ppl": 90.9}
    primary: str               # key of ``scores``
    higher_is_better: bool = False
    size: int = 0              # units evaluated
    unit: str = "tokens"
    details: dict[str, Any] = field(default_factory=dict)   # other facts for the record, e.g.
                                                            # a metric's signature
    lines: list[str] = field(default_factory=list)          # the task's own report, printed by
                                                            # `treelm eval` before the JSON line

    @property
    def badness(self) -> float:
        """The primary score signed so that lower is better (for min-tracking and patience)."""
        v = self.scores[self.primary]
        return -v if self.higher_is_better else v


@dataclass
class TaskOptions:
    """The task's own keys of the ``train:`` section (subclasses add fields with defaults)."""


@dataclass(frozen=True)
class RunConfig:
    """A run's configuration, read once (:func:`treelm.tasks.read_run_config`): the sections a
    config's five top-level keys hold, as checked values rather than a dict every consumer reads
    again::

        seed   ->  seed      an int: every generator of the run starts from it
        task   ->  task      the Task class (TASKS)
        data   ->  data      Task.DATA.parse(cfg["data"]): the checked data section
        train  ->  options   Task.Options: the task's keys of train: (the loop's keys are the
                             trainer's TrainConfig, read beside this)
        model  ->  model     model: checked against the model class's signature

    Everything is checked before anything is read or made, so a typo anywhere (``model:``
    included) costs no corpus load and no BPE training: the model's sizes that come from the data
    (vocabulary sizes) are the only part of the model left to the task (``Task.model_dims``).
    Tasks, the model builder and ``run.load_run`` receive this object; nothing reads ``cfg``
    again. ``raw`` is the config as written (with absolute data paths, for a new run), which the
    run saves and whose ``model:`` section signs its checkpoints."""

    raw: dict[str, Any]          # the config as written (saved with the run)
    task: type[Task]
    seed: int
    data: Any                    # the task's DATA dataclass, parsed
    options: TaskOptions         # the task's own keys of train:
    model: dict[str, Any]        # model: with its type, every option checked

    def data_paths(self) -> list[str]:
        """The files the data section names (``Task.PATH_KEYS``), as given."""
        get = self.data.get if isinstance(self.data, dict) else \
            (lambda k: getattr(self.data, k, None))
        return [v for k in self.task.PATH_KEYS if (v := get(k))]


class Task:
    """Base class of tasks; subclasses implement every method that raises here."""

    name: ClassVar[str]
    Options: ClassVar[type[TaskOptions]] = TaskOptions
    PATH_KEYS: ClassVar[tuple[str, ...]] = ()   # keys of ``data:`` that name files (default:
                                                # the ``DATA`` section's ``PATH_KEYS``)
    EVAL_OPTIONS: ClassVar[tuple[str, ...]] = ()   # keywords of ``evaluate`` beyond the batch
    RENAMED_OPTIONS: ClassVar[dict[str, str]] = {}  # old -> new train: keys (saved runs)
                                                   # size (translation: beam, alpha)
    DATA_FORMAT: ClassVar[str] = ""             # what ``evaluate_file`` reads, for messages
    DATA: ClassVar[Any] = None                  # the ``data:`` section's dataclass, whose
                                                # ``parse(section)`` checks and reads it
                                                # (:class:`RunConfig`)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # the data section knows which of its keys name files; a task need not say it again
        if "PATH_KEYS" not in cls.__dict__ and cls.DATA is not None:
            cls.PATH_KEYS = cls.DATA.PATH_KEYS

    def __init__(self, config: RunConfig) -> None:
        self.config = config            # the run's checked config: seed, data, options, model
        self.options = config.options
        self.device = torch.device("cpu")

    # -------------------------------------------------------------- construction
    @classmethod
    def create(cls, config: RunConfig, device: torch.device, rank: int = 0,
               world: int = 1) -> Task:
        """A new run: read the training data, build the symbol tables. ``rank``/``world``: this
        process's share of the training data under DDP."""
        raise NotImplementedError

    @classmethod
    def open(cls, config: RunConfig, files: RunFiles, device: torch.device, rank: int = 0,
             world: int = 1, with_data: bool = False) -> Task:
        """A saved run: its symbol tables from ``files``; the training data too with
        ``with_data`` (a resume); evaluation data is read when first needed."""
        raise NotImplementedError

    def save(self, files: RunFiles) -> None:
        """Write the symbol tables into a new run directory."""
        raise NotImplementedError

    def model_dims(self) -> dict[str, Any]:
        """Keyword arguments the model builder needs, e.g. ``{"vocab_size": 10000}``."""
        raise NotImplementedError

    def check_model(self, model: nn.Module) -> None:
        """Refuse, in one line, a model this task's options cannot train (called once the
        model is built, before any step)."""

    def data_files(self) -> list[str]:
        """The files this task's data comes from (their fingerprints go into the run)."""
        return self.config.data_paths()

    def describe(self) -> str:
        """One line on the data, for the start of training."""
        return self.name

    # -------------------------------------------------------------- training
    def batches(self) -> Iterator[Batch]:
        """The rest of the current epoch's batches, advancing the position as they are taken."""
        raise NotImplementedError

    def progress(self) -> tuple[int, int]:
        """(units done, units in the epoch) on this process."""
        raise NotImplementedError

    def new_epoch(self) -> None:
        """Reset the position (and anything carried) for the next epoch."""
        raise NotImplementedError

    def loss(self, model: nn.Module, batch: Batch) -> LossOut:
        raise NotImplementedError

    def train_scores(self, loss: float) -> dict[str, float]:
        """Scores of a mean training loss for progress lines (e.g. perplexity)."""
        return {}

    def evaluate(self, model: nn.Module, split: str = "valid",
                 batch_size: int | None = None) -> Evaluation:
        raise NotImplementedError

    def evaluate_file(self, model: nn.Module, path: str, batch_size: int | None = None,
                      **options: Any) -> Evaluation:
        """Score the data at ``path``, in the task's own format (``DATA_FORMAT``), as
        ``evaluate`` scores a split: the same code after the reading. Bad data is a one-line
        error naming the file."""
        raise TreelmError(f"a {self.name} run cannot score a data file")

    # -------------------------------------------------------------- checkpoint state
    def state_dict(self) -> dict[str, Any]:
        """The position and carried state (tensors, numbers, lists; ``weights_only`` safe)."""
        return {}

    def load_state_dict(self, state: dict[str, Any], same_shards: bool = True) -> None:
        """Restore ``state_dict()``; ``same_shards`` is false when the number of processes
        changed, so that per-process carried state no longer applies."""

