"""Language modelling: next-symbol prediction over one long token stream (truncated BPTT).

Batches (Zaremba et al. 2014; Merity et al. 2018): the training stream (N,) is cut into ``B``
columns, (N // B, B), so column ``b`` continues across batches and the hidden state is *carried*
from one batch to the next (detached). Each batch takes ``seq_len`` rows, drawn by AWD-LSTM's
variable BPTT (:class:`~treelm.data.batching.BPTTSchedule`), and scales the learning rate by
``seq_len / bptt`` so that every token weighs the same. Under DDP each process reads its own
contiguous 1/N of the stream (same length for all), with the same length schedule.

Loss per batch (Merity et al. 2018, Sec. 4.6):

    L = CE(logits, targets) + α · mean(h_dropped²) + β · mean((h_t − h_{t−1})²)

with AR on the last layer's dropped output and TAR on its raw output. Evaluation carries the
hidden state through the whole split (batch ``eval_batch_size``, or ``test_batch_size`` on test)
and reports the mean loss per token in nats with perplexity ``exp(loss)``, or bits per character
``loss / ln 2`` for a character tokenizer; it reads 4096 tokens per forward pass whatever
``bptt`` is (the carried state makes the length irrelevant to the numbers), so that a batch-1
test set costs no Python per token (:func:`evaluate_stream`). The position in the epoch, the
carried states and the length schedule's RNG are the task's checkpoint state.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from treelm.cells import State
from treelm.data.batching import BPTTSchedule, batchify, check_columns, get_batch
from treelm.data.corpus import Corpus, LMData, load_corpus, read_stream
from treelm.errors import TreelmError
from treelm.nn.fixed import fixed_weights
from treelm.progress import Ticker
from treelm.rundir.files import RunFiles
from treelm.tasks.base import Batch, Evaluation, LossOut, RunConfig, Task, TaskOptions
from treelm.tasks.tree_teacher import TeacherStream, TreeTeacher, check_teacher_layer
from treelm.text.tokenizers import Tokenizer
from treelm.text.vocab import Vocab
from treelm.threads import recurrence_threads


@dataclass
class LMOptions(TaskOptions):
    bptt: int = 70                   # truncated BPTT length (the mean with variable_bptt)
    variable_bptt: bool = True       # AWD-LSTM's random lengths, lr scaled by seq_len / bptt
    batch_size: int = 20             # columns of the training stream
    eval_batch_size: int = 10        # columns when validating
    test_batch_size: int = 1         # columns for `treelm eval --split test`
    alpha: float = 0.0               # activation regularisation (AR)
    beta: float = 0.0                # temporal activation regularisation (TAR)
    tree_teacher: dict[str, Any] | None = None   # a teacher's trees taught to the master gates
                                     # (TreeTeacher's keys: tasks/tree_teacher.py)

    RULES: ClassVar[dict[str, Any]] = {
        "bptt": ">= 1", "batch_size": ">= 1", "eval_batch_size": ">= 1",
        "test_batch_size": ">= 1", "alpha": ">= 0", "beta": ">= 0"}

    def __post_init__(self) -> None:
        self.tree_teacher = TreeTeacher.parse(self.tree_teacher)  # type: ignore[assignment]


def detach_states(states: list[State] | None) -> list[State] | None:
    if states is None:
        return None
    return [tuple(s.detach() for s in st) for st in states]


def metric(loss: float, level: str) -> tuple[str, float]:
    """('ppl', exp(loss)) for words and pieces, ('bpc', loss / ln 2) for characters."""
    if level == "char":
        return "bpc", loss / math.log(2)
    return "ppl", math.exp(min(loss, 50.0))


def shard(data: Tensor, rank: int, world: int) -> Tensor:
    """This process's contiguous part of a token stream (all parts the same length)."""
    n = data.size(0) // world
    return data[rank * n : (rank + 1) * n]


#: Tokens (rows × columns) read per forward pass in evaluation. The state is carried across
#: passes, so the length changes no number (up to float rounding); long passes make one output
#: GEMM per block of rows and leave nothing per token to Python. At batch 1 (test) a pass is
#: 4096 steps, at 10 or 64 columns the ``bptt`` rows or more.
EVAL_TOKENS = 4096
#: Logits made at once by the output layer: at most this many floats (64 MiB in float32).
EVAL_LOGITS = 1 << 24


def evaluate_stream(model: nn.Module, data: Tensor, batch_size: int, bptt: int, vocab_size: int,
                    what: str = "evaluating", tokens: int = EVAL_TOKENS,
                    key: str = "batch_size") -> float:
    """Mean cross-entropy per token (nats) over the whole stream ``data`` (N,).

    ``data`` is cut into ``batch_size`` columns (:func:`batchify`) read top to bottom with the
    state carried, ``max(bptt, tokens // batch_size)`` rows per pass; the output layer's
    −log p(y) (the model's ``target_nll``: the full softmax's cross-entropy of its logits, or a
    layer's own sum that makes no logits) runs on blocks of rows of at most :data:`EVAL_LOGITS`
    logits (``vocab_size`` V per token), on every thread; a recurrence of small steps on one
    (:func:`~treelm.threads.recurrence_threads`). Losses are summed in float64. Progress
    on stderr (:class:`treelm.progress.Ticker`, as ``what``). A ``batch_size`` too large for
    ``data`` is refused in one line naming ``key`` (:func:`~treelm.data.batching.batchify`)."""
    device = next(model.parameters()).device
    source = batchify(data, batch_size, key, what).to(device)
    rows = max(bptt, tokens // batch_size)
    block = max(1, EVAL_LOGITS // vocab_size)         # rows of logits made at once
    total = torch.zeros((), dtype=torch.float64, device=device)
    states = None
    n = max(0, source.size(0) - 1)                    # rows that have a next token
    was_training = model.training
    model.eval()
    try:
        # fixed_weights: nothing steps them here, so the output layer may keep what it makes
        # from them for every block (the adaptive tail's word matrix)
        with torch.inference_mode(), fixed_weights(model), \
                Ticker(what, n * batch_size, "tokens") as tick:
            for i in range(0, n, rows):
                x, y = get_batch(source, i, rows)
                with recurrence_threads(model, batch_size):     # small steps: 1 thread
                    out = model.features(x, states)
                states = out.states
                h = out.out.reshape(-1, out.out.size(-1))
                y = y.reshape(-1)
                for lo in range(0, h.size(0), block):
                    total += model.target_nll(h[lo:lo + block], y[lo:lo + block]).double()
                tick.update(y.numel())
    finally:
        model.train(was_training)
    return total.item() / max(1, n * batch_size)


class LMTask(Task):
    name = "lm"
    Options = LMOptions
    DATA = LMData
    DATA_FORMAT = "a text file, one sentence a line"
    options: LMOptions

    def __init__(self, config: RunConfig, tokenizer: Tokenizer, vocab: Vocab,
                 device: torch.device, corpus: Corpus | None = None, rank: int = 0,
                 world: int = 1) -> None:
        super().__init__(config)
        options = self.options
        self.tokenizer, self.vocab, self.device = tokenizer, vocab, device
        tokenizer.restrict(vocab.itos)      # a piece model emits only the run's pieces
        self._corpus = corpus
        self.schedule = BPTTSchedule(options.bptt, options.variable_bptt, config.seed)
        self.row = 0                                 # next row of the batched training stream
        self.states: list[State] | None = None       # carried from batch to batch
        self.train_data: Tensor | None = None
        if corpus is not None:
            # the batch sizes checked now, not hours later at the first validation
            part = shard(corpus.train, rank, world)
            what = (f"each of the {world} processes' share of the training split" if world > 1
                    else "the training split")
            check_columns(part.numel(), options.batch_size, "train.batch_size", what, rows=3)
            check_columns(corpus.valid.numel(), options.eval_batch_size,
                          "train.eval_batch_size", "the valid split")
            self.train_data = batchify(part, options.batch_size).to(device)
        self.teacher: TeacherStream | None = None     # train.tree_teacher's trees, if any
        self.teacher_row = 0                          # the aux row of its layer
        if corpus is not None and options.tree_teacher is not None:
            if world > 1:
                raise TreelmError("train.tree_teacher trains on one process; run it without "
                                  "torchrun")
            self.teacher = TeacherStream(options.tree_teacher, vocab, vocab.eos, config.seed,
                                         device)

    @classmethod
    def create(cls, config: RunConfig, device: torch.device, rank: int = 0,
               world: int = 1) -> LMTask:
        corpus = load_corpus(config.data)
        return cls(config, corpus.tokenizer, corpus.vocab, device, corpus, rank, world)

    @classmethod
    def open(cls, config: RunConfig, files: RunFiles, device: torch.device, rank: int = 0,
             world: int = 1, with_data: bool = False) -> LMTask:
        tokenizer = files.read_tokenizer(legacy_kind=files.legacy_level())
        vocab = files.read_vocab()
        corpus = load_corpus(config.data, tokenizer, vocab) if with_data else None
        return cls(config, tokenizer, vocab, device, corpus, rank, world)

    def save(self, files: RunFiles) -> None:
        files.write_tokenizer(self.tokenizer)
        files.write_vocab(self.vocab)

    @property
    def corpus(self) -> Corpus:
        if self._corpus is None:
            self._corpus = load_corpus(self.config.data, self.tokenizer, self.vocab)
        return self._corpus

    @property
    def level(self) -> str:
        return self.tokenizer.level

    def model_dims(self) -> dict[str, Any]:
        return {"vocab_size": len(self.vocab)}

    def check_model(self, model: nn.Module) -> None:
        if self.options.tree_teacher is not None:
            self.teacher_row = check_teacher_layer(self.options.tree_teacher, model)

    def describe(self) -> str:
        return (f"{len(self.vocab):,} {self.level} types, {self.corpus.train.numel():,} "
                "training tokens")

    # -------------------------------------------------------------- training
    def batches(self) -> Iterator[Batch]:
        assert self.train_data is not None, "the task was opened without its training data"
        n = self.train_data.size(0)
        while self.row < n - 2:
            x, y = get_batch(self.train_data, self.row, self.schedule.next_len())
            self.row += x.size(0)
            yield Batch((x, y), y.numel(), x.size(0) / self.schedule.bptt, self.row >= n - 2)

    def progress(self) -> tuple[int, int]:
        assert self.train_data is not None
        rows, cols = self.train_data.shape
        return self.row * cols, rows * cols

    def new_epoch(self) -> None:
        self.row, self.states = 0, None

    def loss(self, model: nn.Module, batch: Batch) -> LossOut:
        x, y = batch.data
        out = model(x, self.states, targets=y)     # the loss without the (T, B, V) logits
        ce = out.nll
        assert ce is not None
        loss = ce
        if self.options.alpha:
            loss = loss + self.options.alpha * out.dropped.pow(2).mean()
        if self.options.beta:
            raw = out.raw[-1]
            loss = loss + self.options.beta * (raw[1:] - raw[:-1]).pow(2).mean()
        self.states = detach_states(out.states)
        if self.teacher is None:
            return LossOut(loss, ce)
        tree = self.teacher.loss(model, self.teacher_row)
        return LossOut(loss + self.teacher.options.weight * tree, ce, {"tree_loss": tree})

    def train_scores(self, loss: float) -> dict[str, float]:
        name, value = metric(loss, self.level)
        return {name: value}

    def evaluate(self, model: nn.Module, split: str = "valid",
                 batch_size: int | None = None) -> Evaluation:
        data = getattr(self.corpus, split)
        key = "--batch-size"        # given: `treelm eval --batch-size`, the one caller that does
        if batch_size is None:
            key = "train.test_batch_size" if split == "test" else "train.eval_batch_size"
            batch_size = (self.options.test_batch_size if split == "test"
                          else self.options.eval_batch_size)
        return self._score(model, data, batch_size, f"{split} set", key)

    def _score(self, model: nn.Module, data: Tensor, batch_size: int,
               what: str = "scoring", key: str = "batch_size") -> Evaluation:
        loss = evaluate_stream(model, data, batch_size, self.options.bptt, len(self.vocab), what,
                               key=key)
        return Evaluation({"loss": loss, **self.train_scores(loss)}, "loss", size=data.numel())

    def evaluate_file(self, model: nn.Module, path: str, batch_size: int | None = None,
                      **options: Any) -> Evaluation:
        """A text file scored as the test split is (``test_batch_size`` columns unless
        ``batch_size``); its symbols outside the vocabulary are read as ``<unk>`` and counted
        (``unk_tokens``)."""
        data, unknown = read_stream(path, self.tokenizer, self.vocab)
        key = "--batch-size" if batch_size else "train.test_batch_size"
        ev = self._score(model, data, batch_size or self.options.test_batch_size, path, key)
        ev.details["unk_tokens"] = unknown
        return ev

    # -------------------------------------------------------------- checkpoint state
    def state_dict(self) -> dict[str, Any]:
        state = {"row": self.row, "states": detach_states(self.states),
                 "bptt_rng": self.schedule.rng.getstate()}
        if self.teacher is not None:
            state["teacher"] = self.teacher.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any], same_shards: bool = True) -> None:
        self.row = state["row"]
        self.schedule.rng.setstate(state["bptt_rng"])
        if self.teacher is not None and "teacher" in state:
            self.teacher.load_state_dict(state["teacher"])
        states = state.get("states")
        self.states = None
        if same_shards and states is not None:
            self.states = [tuple(t.to(self.device) for t in st) for st in states]
