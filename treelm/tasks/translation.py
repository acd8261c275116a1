"""Translation: a sentence in, its translation out, with any encoder-decoder of the seq2seq
interface (:mod:`treelm.decode.seq2seq`; :class:`~treelm.models.rnn_attn.RNNAttention`, ConvS2S).

Data and checks: :mod:`treelm.data.parallel`. Text becomes symbols by a sentencepiece model
(BPE by default) learned on the training side, one for both languages (``data.joint``) or one per
language, saved in the run directory with the vocabularies (specials ``<pad> <bos> <eos> <unk>``,
so ``<pad>`` is 0 on both sides): :mod:`treelm.tasks.bilingual_tables`. A pair becomes

    source   x = x_1 … x_m <eos>                     (B, S) batch-first, <pad> after the end
    target   y_in = <bos> y_1 … y_n,  y_out = y_1 … y_n <eos>      (B, T)

Training batches hold pairs of similar length up to ``max_tokens`` padded tokens
(shuffled, sorted by length within ``bucket_pool``
pairs, batches shuffled: :class:`~treelm.tasks.examples.EpochIterator`, drawn from the run's
seed and the epoch, so the position in it is all a resume needs). Under DDP each process takes
every ``world``-th batch.
``Batch.size`` is the number of target symbols (``<eos>`` included).

Loss per batch, label-smoothed cross-entropy (Szegedy et al. 2016) with the smoothing mass spread
uniformly over the V target symbols, as a mean over the N non-padding target positions
(:mod:`treelm.tasks.label_smoothing`):

    L = (1/N) Σ_t [ (1 − ε) · −log p(y_t | y_<t, x)  +  ε · (1/V) Σ_v −log p(v | y_<t, x) ]

The logged loss is the plain ``−log p(y_t | …)`` mean (nats per target symbol), its perplexity
``exp``. Evaluation translates the split with the same search as ``treelm translate``
(:meth:`TranslationTask.translate`: greedy, or beam search with ``eval_beam`` beams and length
penalty ``length_penalty``; at most ``max_len_a · |x| + max_len_b`` target symbols, ``|x|``
counting the source's symbols with its ``<eos>``: :mod:`treelm.tasks.seq2seq_search`),
detokenises, and scores against the split's target lines as read (:mod:`treelm.tasks.bleu`):
sacreBLEU's corpus BLEU (tokenisation ``13a``, cased, by default; the
primary score, higher is better, unless ``select_by: loss``) and chrF, the percentage of exact
matches, and the teacher-forced loss and perplexity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from treelm.data.parallel import (
    SPLITS,
    Pairs,
    ParallelData,
    load_pairs,
    read_stem,
    split_files,
    token_batches,
)
from treelm.progress import Ticker
from treelm.rundir.files import RunFiles
from treelm.tasks.base import Batch, Evaluation, LossOut, RunConfig, TaskOptions
from treelm.tasks.bilingual_tables import SPECIALS, build_tables, read_tables, write_tables
from treelm.tasks.bleu import corpus_scores
from treelm.tasks.examples import EpochIterator, ExampleTask, eval_mode, pad_ids
from treelm.tasks.label_smoothing import smoothed_loss
from treelm.tasks.seq2seq_search import length_limit, search
from treelm.text.tokenizers import Tokenizer
from treelm.text.vocab import EOS, Vocab

__all__ = ["SPECIALS", "Translation", "TranslationOptions", "TranslationTask", "pad_rows",
           "smoothed_loss"]

Pair = tuple[list[int], list[int]]       # source ids (with <eos>), target ids (with <eos>)


@dataclass
class TranslationOptions(TaskOptions):
    max_tokens: int = 4000           # padded tokens per training batch (the longer side counts)
    bucket_pool: int = 0             # pairs sorted by length together; 0 = the whole epoch
    label_smoothing: float = 0.1     # ε
    eval_batch_size: int = 64        # sentences per decoding batch (validation, translate)
    eval_max_tokens: int = 8000      # padded tokens per batch of the teacher-forced eval loss
    eval_beam: int = 1               # beams when validating (1 = greedy, the fastest)
    length_penalty: float = 0.0      # beam search length penalty α (Wu et al. 2016)
    max_len_a: float = 1.5           # longest translation: a · source length + b symbols
    max_len_b: int = 10
    select_by: str = "bleu"          # the best checkpoint by bleu (higher) or loss (lower)
    bleu_tokenize: str = "13a"       # sacreBLEU tokenisation: 13a | intl | zh | char | none
    bleu_lowercase: bool = False     # case-insensitive BLEU

    RULES: ClassVar[dict[str, Any]] = {
        "max_tokens": ">= 1", "bucket_pool": ">= 0", "label_smoothing": "[0, 1)",
        "eval_batch_size": ">= 1", "eval_max_tokens": ">= 1", "eval_beam": ">= 1",
        "length_penalty": ">= 0", "max_len_a": ">= 0", "max_len_b": ">= 1",
        "select_by": ("bleu", "loss"),
        "bleu_tokenize": ("13a", "intl", "zh", "char", "none")}


@dataclass
class Translation:
    source: str
    text: str                        # detokenised
    symbols: list[str]               # target symbols, without <eos>
    logprob: float | None = None     # Σ log p of the symbols and <eos> (beam search only)


def pad_rows(rows: Sequence[Sequence[int]], pad: int) -> Tensor:
    """Ragged id lists -> (B, L) padded on the right."""
    return pad_ids(rows, pad, batch_first=True)[0]


class TranslationTask(ExampleTask):
    name = "translation"
    Options = TranslationOptions
    DATA = ParallelData
    EVAL_OPTIONS = ("beam", "length_penalty")
    #: keys of ``train:`` renamed since, read under their new name in a run saved before
    RENAMED_OPTIONS = {"alpha": "length_penalty"}
    DATA_FORMAT = "a file stem STEM: STEM.<src> and STEM.<tgt>, aligned lines, plain or .gz"
    options: TranslationOptions
    spec: ParallelData
    _splits: dict[str, Pairs]
    _encoded: dict[str, list[Pair]]

    def __init__(self, config: RunConfig, tokenizers: tuple[Tokenizer, Tokenizer],
                 vocabs: tuple[Vocab, Vocab], device: torch.device, train: Pairs | None = None,
                 rank: int = 0, world: int = 1) -> None:
        super().__init__(config, device, rank, world, train)
        self.src_tok, self.tgt_tok = tokenizers
        self.src_vocab, self.tgt_vocab = vocabs
        # a piece model emits only pieces of the run's vocabulary (text.spm), for runs saved
        # before their vocabulary held every piece too
        self.src_tok.restrict(self.src_vocab.itos)
        if self.tgt_tok is not self.src_tok:
            self.tgt_tok.restrict(self.tgt_vocab.itos)
        self.dropped = 0                    # training pairs longer than data.max_len

    # -------------------------------------------------------------- construction
    @classmethod
    def create(cls, config: RunConfig, device: torch.device, rank: int = 0,
               world: int = 1) -> TranslationTask:
        spec: ParallelData = config.data
        train = load_pairs(spec, "train")
        tokenizers, vocabs = build_tables(spec, train)
        return cls(config, tokenizers, vocabs, device, train, rank, world).read_all()

    @classmethod
    def open(cls, config: RunConfig, files: RunFiles, device: torch.device, rank: int = 0,
             world: int = 1, with_data: bool = False) -> TranslationTask:
        tokenizers, vocabs = read_tables(files, config.data.joint)
        return cls(config, tokenizers, vocabs, device, None, rank, world).opened(with_data)

    def save(self, files: RunFiles) -> None:
        write_tables(files, (self.src_tok, self.tgt_tok), (self.src_vocab, self.tgt_vocab),
                     self.spec.joint)

    def model_dims(self) -> dict[str, Any]:
        return {"src_vocab_size": len(self.src_vocab), "tgt_vocab_size": len(self.tgt_vocab),
                "padding_idx": self.tgt_vocab.pad}

    def data_files(self) -> list[str]:
        return [str(f) for f in split_files(self.spec)]

    def describe(self) -> str:
        pairs = self.encoded("train")
        sides = (f"{len(self.src_vocab):,} symbols (joint)" if self.spec.joint else
                 f"{len(self.src_vocab):,} source / {len(self.tgt_vocab):,} target symbols")
        dropped = (f", {self.dropped:,} longer than {self.spec.max_len} dropped"
                   if self.dropped else "")
        return (f"{len(pairs):,} training pairs{dropped} ({sum(len(t) for _, t in pairs):,} "
                f"target symbols), {self.spec.tokenizer_kind} {sides}")

    def read_split(self, name: str) -> Pairs:
        """The pairs of a split (text), read or generated."""
        return load_pairs(self.spec, name)

    # -------------------------------------------------------------- symbols
    def encode_source(self, text: str) -> list[int]:
        return [*self.src_vocab.encode(self.src_tok.encode_line(text)), self.src_vocab.eos]

    def encode_target(self, text: str) -> list[int]:
        return [*self.tgt_vocab.encode(self.tgt_tok.encode_line(text)), self.tgt_vocab.eos]

    def unknown_source(self, text: str) -> list[str]:
        """The source symbols of ``text`` outside the run's vocabulary (characters its piece
        model never saw, or unknown words with ``tokenizer: word``), read as ``<unk>``."""
        syms = self.src_tok.encode_line(text)
        return [syms[i] for i in self.src_vocab.unknown(syms)]

    def source_symbols(self, text: str) -> list[str]:
        return [*self.src_tok.encode_line(text), EOS]

    def encoded(self, name: str) -> list[Pair]:
        """Ids of a split's pairs, made once; training pairs longer than ``data.max_len``
        symbols on either side are dropped (counted in ``dropped``)."""
        if name not in self._encoded:
            pairs = self.split(name)
            rows = [(self.encode_source(s), self.encode_target(t))
                    for s, t in zip(pairs.src, pairs.tgt, strict=True)]
            if name == "train" and self.spec.max_len is not None:
                limit = self.spec.max_len + 1                     # + <eos>
                kept = [r for r in rows if len(r[0]) <= limit and len(r[1]) <= limit]
                self.dropped = len(rows) - len(kept)
                rows = kept
            self._encoded[name] = rows
        return self._encoded[name]

    # -------------------------------------------------------------- batches
    def _tensors(self, rows: Sequence[Pair]) -> tuple[Tensor, Tensor, Tensor]:
        """src (B, S), tgt_in (B, T) = <bos> y, tgt_out (B, T) = y <eos>, padded."""
        pad, bos = self.tgt_vocab.pad, self.tgt_vocab.bos
        src = pad_rows([r[0] for r in rows], pad)
        tgt_out = pad_rows([r[1] for r in rows], pad)
        tgt_in = pad_rows([[bos, *r[1][:-1]] for r in rows], pad)
        return src, tgt_in, tgt_out

    def make_epochs(self) -> EpochIterator:
        """Pairs of similar length under a budget of padded tokens (the longer side counts),
        sorted by (source, target) length within ``bucket_pool`` pairs; a batch counts its
        target symbols."""
        rows = self.encoded("train")
        return EpochIterator(len(rows), self.seed, self.rank, self.world,
                             max_tokens=self.options.max_tokens, window=self.options.bucket_pool,
                             keys=[(len(s), len(t)) for s, t in rows],
                             lengths=[max(len(s), len(t)) for s, t in rows],
                             units=[len(t) for _, t in rows])

    def collate(self, indices: list[int]) -> tuple[Tensor, Tensor, Tensor]:
        rows = self.encoded("train")
        return tuple(t.to(self.device)                  # type: ignore[return-value]
                     for t in self._tensors([rows[i] for i in indices]))

    def loss(self, model: nn.Module, batch: Batch) -> LossOut:
        src, tgt_in, tgt_out = batch.data
        loss, nll, _ = smoothed_loss(model(src, tgt_in), tgt_out, self.tgt_vocab.pad,
                                     self.options.label_smoothing)
        return LossOut(loss, nll)

    def train_scores(self, loss: float) -> dict[str, float]:
        return {"ppl": math.exp(min(loss, 50.0))}

    # -------------------------------------------------------------- translation
    def translate(self, model: nn.Module, sentences: Sequence[str], beam: int = 1,
                  length_penalty: float | None = None, batch_size: int | None = None,
                  incremental: bool = True) -> list[Translation]:
        """Translations of ``sentences`` (text, one sentence each), in their order: batches of
        ``batch_size`` sentences of similar length, greedy (``beam`` 1) or beam search with
        ``length_penalty`` α (default the config's). ``incremental=False`` recomputes the
        whole prefix at every step (same translations, slower; for measurements). An empty
        sentence translates to an empty one without running the model."""
        from torch.nn.utils import parametrize

        if length_penalty is None:
            length_penalty = self.options.length_penalty
        bs = batch_size or self.options.eval_batch_size
        rows = [self.encode_source(s) for s in sentences]
        todo = sorted((i for i, s in enumerate(sentences) if s.strip()),
                      key=lambda i: len(rows[i]))
        out = [Translation(s, "", []) for s in sentences]
        # weight-normalised models compute each weight once per search, not once per step
        with eval_mode(model), parametrize.cached(), Ticker("translating", len(todo),
                                                            "sentences") as tick:
            for lo in range(0, len(todo), bs):
                idx = todo[lo:lo + bs]
                src = pad_rows([rows[i] for i in idx], self.src_vocab.pad).to(self.device)
                limits = [length_limit(len(rows[i]), self.options.max_len_a,
                                       self.options.max_len_b) for i in idx]
                found = search(model, src, limits, self.tgt_vocab, beam, length_penalty,
                               incremental)
                for i, (ids, lp) in zip(idx, found, strict=True):
                    symbols = self.tgt_vocab.decode(ids)
                    out[i] = Translation(sentences[i], self.tgt_tok.decode_line(symbols),
                                         symbols, lp)
                tick.update(len(idx))
        return out

    @torch.no_grad()
    def attention_map(self, model: nn.Module, t: Translation
                      ) -> tuple[Tensor, list[str], list[str]]:
        """Attention weights of ``t`` (its source read, its symbols forced), (layers, T, S), with
        the source symbols (columns, <eos> last) and the target symbols predicted at each row
        (<eos> last)."""
        src = torch.tensor([self.encode_source(t.source)], device=self.device)
        ids = self.tgt_vocab.encode(t.symbols)
        tgt_in = torch.tensor([[self.tgt_vocab.bos, *ids]], device=self.device)
        with eval_mode(model):
            weights = model.attention(src, tgt_in)[:, 0].float().cpu()
        return weights, self.source_symbols(t.source), [*t.symbols, EOS]

    # -------------------------------------------------------------- scores
    @torch.no_grad()
    def _teacher_forced(self, model: nn.Module, rows: Sequence[Pair]) -> tuple[float, int]:
        """Summed −log p of every target symbol of ``rows`` and their number."""
        total, count = 0.0, 0
        batches = token_batches([len(s) for s, _ in rows], [len(t) for _, t in rows],
                                self.options.eval_max_tokens)
        with eval_mode(model), Ticker("scoring references", len(rows), "sentences") as tick:
            for b in batches:
                src, tgt_in, tgt_out = (x.to(self.device)
                                        for x in self._tensors([rows[i] for i in b]))
                _, nll, n = smoothed_loss(model(src, tgt_in), tgt_out, self.tgt_vocab.pad, 0.0)
                total += float(nll) * n
                count += n
                tick.update(len(b))
        return total, count

    def evaluate(self, model: nn.Module, split: str = "valid", batch_size: int | None = None,
                 beam: int | None = None, length_penalty: float | None = None) -> Evaluation:
        """Translate the split and score it (module docstring); ``beam`` defaults to
        ``eval_beam``."""
        if split not in SPLITS and split not in self._splits:
            raise ValueError(f"unknown split {split!r}")
        pairs = self.split(split)
        hyps = [t.text for t in self.translate(model, pairs.src, beam or self.options.eval_beam,
                                               length_penalty, batch_size)]
        corpus = corpus_scores(hyps, pairs.tgt, self.options.bleu_tokenize,
                               self.options.bleu_lowercase)
        total, count = self._teacher_forced(model, self.encoded(split))
        loss = total / count
        scores = {**corpus.scores, "loss": loss, "ppl": math.exp(min(loss, 50.0))}
        return Evaluation(scores, "bleu" if self.options.select_by == "bleu" else "loss",
                          higher_is_better=self.options.select_by == "bleu", size=len(hyps),
                          unit="sentences", details=corpus.details, lines=corpus.lines)

    def evaluate_file(self, model: nn.Module, path: str, batch_size: int | None = None,
                      beam: int | None = None, length_penalty: float | None = None,
                      **options: Any) -> Evaluation:
        """The pairs of ``path``.<src> / ``path``.<tgt> (plain or ``.gz``, checked as a split's
        files are) translated and scored as :meth:`evaluate` scores a split: the same search
        and scores; ``unk_tokens`` counts the source symbols read as ``<unk>``."""
        pairs = read_stem(path, self.spec)
        ev = self.evaluate(model, self.file_split(path, pairs), batch_size, beam, length_penalty)
        ev.details["unk_tokens"] = sum(len(self.unknown_source(s)) for s in pairs.src)
        return ev

