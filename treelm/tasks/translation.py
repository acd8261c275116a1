"""Translation: a sentence in, its translation out, with any encoder-decoder of the seq2seq
interface (:mod:`treelm.decode.seq2seq`; :class:`~treelm.models.rnn_attn.RNNAttention`, ConvS2S).

Data and checks: :mod:`treelm.data.parallel`. Text becomes symbols by a sentencepiece model
(BPE by default) learned on the training side, one for both languages (``data.joint``) or one per
language, saved in the run directory with the vocabularies (specials ``<pad> <bos> <eos> <unk>``,
so ``<pad>`` is 0 on both sides). A pair becomes

    source   x = x_1 … x_m <eos>                     (B, S) batch-first, <pad> after the end
    target   y_in = <bos> y_1 … y_n,  y_out = y_1 … y_n <eos>      (B, T)

Training batches hold pairs of similar length up to ``max_tokens`` padded tokens
(:func:`~treelm.data.parallel.token_batches`: shuffled, sorted by length within ``bucket_pool``
pairs, batches shuffled; the order is drawn from the run's seed and the epoch, so the position
``pos`` in it is all a resume needs). Under DDP each process takes every ``world``-th batch.
``Batch.size`` is the number of target symbols (``<eos>`` included).

Loss per batch, label-smoothed cross-entropy (Szegedy et al. 2016) with the smoothing mass spread
uniformly over the V target symbols, as a mean over the N non-padding target positions:

    L = (1/N) Σ_t [ (1 − ε) · −log p(y_t | y_<t, x)  +  ε · (1/V) Σ_v −log p(v | y_<t, x) ]

The logged loss is the plain ``−log p(y_t | …)`` mean (nats per target symbol), its perplexity
``exp``. Evaluation translates the split with the same search as ``treelm translate``
(:meth:`TranslationTask.translate`: greedy, or beam search with ``eval_beam`` beams and length
penalty ``alpha``; at most ``max_len_a · |x| + max_len_b`` target symbols, ``|x|`` counting the
source's symbols with its ``<eos>``), detokenises, and scores against the split's target lines as
read: sacreBLEU's corpus BLEU (tokenisation ``13a``, cased, by default; the primary score, higher
is better, unless ``select_by: loss``) and chrF, the percentage of exact matches, and the
teacher-forced loss and perplexity.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
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
from treelm.decode.beam import beam_search
from treelm.decode.greedy import greedy_decode
from treelm.decode.seq2seq import RecomputeStep, Seq2SeqStep
from treelm.rundir.files import RunFiles
from treelm.tasks.base import Batch, Evaluation, LossOut, Task, TaskOptions
from treelm.text.tokenizers import SentencePieceTokenizer, Tokenizer, make_tokenizer
from treelm.text.vocab import BOS, EOS, PAD, UNK, Vocab

SPECIALS = (PAD, BOS, EOS, UNK)
Pair = tuple[list[int], list[int]]       # source ids (with <eos>), target ids (with <eos>)


@dataclass
class TranslationOptions(TaskOptions):
    max_tokens: int = 4000           # padded tokens per training batch (the longer side counts)
    bucket_pool: int = 0             # pairs sorted by length together; 0 = the whole epoch
    label_smoothing: float = 0.1     # ε
    eval_batch_size: int = 64        # sentences per decoding batch (validation, translate)
    eval_max_tokens: int = 8000      # padded tokens per batch of the teacher-forced eval loss
    eval_beam: int = 1               # beams when validating (1 = greedy, the fastest)
    alpha: float = 0.0               # beam search length penalty α (Wu et al. 2016)
    max_len_a: float = 1.5           # longest translation: a · source length + b symbols
    max_len_b: int = 10
    select_by: str = "bleu"          # the best checkpoint by bleu (higher) or loss (lower)
    bleu_tokenize: str = "13a"       # sacreBLEU tokenisation: 13a | intl | zh | char | none
    bleu_lowercase: bool = False     # case-insensitive BLEU

    RULES: ClassVar[dict[str, Any]] = {
        "max_tokens": ">= 1", "bucket_pool": ">= 0", "label_smoothing": "[0, 1)",
        "eval_batch_size": ">= 1", "eval_max_tokens": ">= 1", "eval_beam": ">= 1",
        "alpha": ">= 0", "max_len_a": ">= 0", "max_len_b": ">= 1",
        "select_by": ("bleu", "loss"),
        "bleu_tokenize": ("13a", "intl", "zh", "char", "none")}


@dataclass
class Translation:
    source: str
    text: str                        # detokenised
    symbols: list[str]               # target symbols, without <eos>
    logprob: float | None = None     # Σ log p of the symbols and <eos> (beam search only)


def smoothed_loss(logits: Tensor, target: Tensor, pad: int, eps: float
                  ) -> tuple[Tensor, Tensor, int]:
    """Label-smoothed cross-entropy (see the module docstring): (mean smoothed loss, mean plain
    −log p, number of non-padding positions) over ``target`` (…) with ``logits`` (…, V)."""
    logp = F.log_softmax(logits.float(), -1)
    keep = target.ne(pad)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)[keep]
    n = int(keep.sum())
    if eps == 0.0:
        return nll.mean(), nll.mean(), n
    uniform = -logp.mean(-1)[keep]
    return ((1.0 - eps) * nll + eps * uniform).mean(), nll.mean(), n


def pad_rows(rows: Sequence[Sequence[int]], pad: int) -> Tensor:
    """Ragged id lists -> (B, L) padded on the right."""
    out = torch.full((len(rows), max(len(r) for r in rows)), pad, dtype=torch.long)
    for b, r in enumerate(rows):
        out[b, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


class TranslationTask(Task):
    name = "translation"
    Options = TranslationOptions
    PATH_KEYS = ParallelData.PATH_KEYS
    EVAL_OPTIONS = ("beam", "alpha")
    DATA_FORMAT = "a file stem STEM: STEM.<src> and STEM.<tgt>, aligned lines, plain or .gz"
    options: TranslationOptions

    @classmethod
    def check_data(cls, data: dict[str, Any] | None) -> None:
        ParallelData.parse(data)

    def __init__(self, cfg: dict[str, Any], options: TranslationOptions,
                 tokenizers: tuple[Tokenizer, Tokenizer], vocabs: tuple[Vocab, Vocab],
                 device: torch.device, train: Pairs | None = None, rank: int = 0,
                 world: int = 1) -> None:
        super().__init__(cfg, options)
        self.spec = ParallelData.parse(cfg.get("data"))
        self.src_tok, self.tgt_tok = tokenizers
        self.src_vocab, self.tgt_vocab = vocabs
        # a piece model emits only pieces of the run's vocabulary (text.spm), for runs saved
        # before their vocabulary held every piece too
        self.src_tok.restrict(self.src_vocab.itos)
        if self.tgt_tok is not self.src_tok:
            self.tgt_tok.restrict(self.tgt_vocab.itos)
        self.device, self.seed, self.rank, self.world = device, int(cfg.get("seed", 0)), rank, world
        self._splits: dict[str, Pairs] = {}
        self._encoded: dict[str, list[Pair]] = {}
        self.dropped = 0                    # training pairs longer than data.max_len
        if train is not None:
            self._splits["train"] = train
        self.epoch, self.pos = 0, 0         # epochs begun before this one; next batch
        self._batches: list[list[int]] | None = None

    # -------------------------------------------------------------- construction
    @classmethod
    def create(cls, cfg: dict[str, Any], options: TranslationOptions, device: torch.device,
               rank: int = 0, world: int = 1) -> TranslationTask:
        spec = ParallelData.parse(cfg.get("data"))
        train = load_pairs(spec, "train")
        kind = spec.tokenizer_kind
        if kind == "word":
            src_tok: Tokenizer = make_tokenizer("word")
            tgt_tok: Tokenizer = src_tok
        elif spec.joint:
            src_tok = tgt_tok = SentencePieceTokenizer.train(train.src + train.tgt, kind,
                                                             spec.vocab_size)
        else:
            src_tok = SentencePieceTokenizer.train(train.src, kind, spec.vocab_size)
            tgt_tok = SentencePieceTokenizer.train(train.tgt, kind, spec.vocab_size)
        src_syms = [src_tok.encode_line(s) for s in train.src]
        tgt_syms = [tgt_tok.encode_line(t) for t in train.tgt]
        # every character of the piece model too, so that only characters the model does not
        # know are unknown once the segmenter is restricted to the vocabulary (text.spm)
        if spec.joint:
            src_vocab = tgt_vocab = Vocab.build(src_syms + tgt_syms, SPECIALS,
                                                extra=src_tok.alphabet())
        else:
            src_vocab = Vocab.build(src_syms, SPECIALS, extra=src_tok.alphabet())
            tgt_vocab = Vocab.build(tgt_syms, SPECIALS, extra=tgt_tok.alphabet())
        task = cls(cfg, options, (src_tok, tgt_tok), (src_vocab, tgt_vocab), device, train,
                   rank, world)
        for split in ("valid", "test"):      # bad data fails now, not after an epoch
            task.split(split)
        return task

    @classmethod
    def open(cls, cfg: dict[str, Any], options: TranslationOptions, files: RunFiles,
             device: torch.device, rank: int = 0, world: int = 1,
             with_data: bool = False) -> TranslationTask:
        if ParallelData.parse(cfg.get("data")).joint:
            tok, vocab = files.read_tokenizer(), files.read_vocab()
            toks, vocabs = (tok, tok), (vocab, vocab)
        else:
            toks = (files.read_tokenizer("src"), files.read_tokenizer("tgt"))
            vocabs = (files.read_vocab("src"), files.read_vocab("tgt"))
        task = cls(cfg, options, toks, vocabs, device, None, rank, world)
        if with_data:
            task.split("train")
        return task

    def save(self, files: RunFiles) -> None:
        if self.spec.joint:
            files.write_tokenizer(self.src_tok)
            files.write_vocab(self.src_vocab)
            return
        for role, tok, vocab in (("src", self.src_tok, self.src_vocab),
                                 ("tgt", self.tgt_tok, self.tgt_vocab)):
            files.write_tokenizer(tok, role)
            files.write_vocab(vocab, role)

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

    def split(self, name: str) -> Pairs:
        """The pairs of a split (text), read or generated once."""
        if name not in self._splits:
            self._splits[name] = load_pairs(self.spec, name)
        return self._splits[name]

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

    def epoch_batches(self) -> list[list[int]]:
        """This process's batches of pair indices for the current epoch, in order."""
        if self._batches is None:
            rows = self.encoded("train")
            rng = random.Random(self.seed * 1_000_003 + self.epoch)
            batches = token_batches([len(s) for s, _ in rows], [len(t) for _, t in rows],
                                    self.options.max_tokens, rng, self.options.bucket_pool)
            if self.world > 1:     # every process the same number of steps (DDP lockstep)
                batches = batches[: len(batches) // self.world * self.world]
            self._batches = batches[self.rank::self.world]
        return self._batches

    def batches(self) -> Iterator[Batch]:
        rows, batches = self.encoded("train"), self.epoch_batches()
        while self.pos < len(batches):
            chosen = [rows[i] for i in batches[self.pos]]
            self.pos += 1
            data = tuple(t.to(self.device) for t in self._tensors(chosen))
            yield Batch(data, sum(len(t) for _, t in chosen), last=self.pos >= len(batches))

    def progress(self) -> tuple[int, int]:
        rows, batches = self.encoded("train"), self.epoch_batches()
        sizes = [sum(len(rows[i][1]) for i in b) for b in batches]
        return sum(sizes[: self.pos]), sum(sizes)

    def new_epoch(self) -> None:
        self.epoch, self.pos, self._batches = self.epoch + 1, 0, None

    def loss(self, model: nn.Module, batch: Batch) -> LossOut:
        src, tgt_in, tgt_out = batch.data
        loss, nll, _ = smoothed_loss(model(src, tgt_in), tgt_out, self.tgt_vocab.pad,
                                     self.options.label_smoothing)
        return LossOut(loss, nll)

    def train_scores(self, loss: float) -> dict[str, float]:
        return {"ppl": math.exp(min(loss, 50.0))}

    # -------------------------------------------------------------- translation
    @torch.no_grad()
    def _search(self, model: nn.Module, rows: Sequence[list[int]], beam: int, alpha: float,
                incremental: bool) -> list[tuple[list[int], float | None]]:
        """Target ids (without <eos>) and log-probability of each source row, one batch."""
        src = pad_rows(rows, self.src_vocab.pad).to(self.device)
        v = self.tgt_vocab
        cls = Seq2SeqStep if incremental else RecomputeStep
        step = cls(model, v.bos, banned=(v.pad, v.bos))
        limits = [int(self.options.max_len_a * len(r) + self.options.max_len_b) for r in rows]
        logits, state = step.prime(src)
        if beam == 1:
            out = greedy_decode(step, logits, state, max(limits), v.eos).t().tolist()
            found: list[tuple[list[int], float | None]] = [(ids, None) for ids in out]
        else:
            hyps = beam_search(step, logits, state, beam, max(limits), v.eos, alpha)
            found = [(h[0].tokens, h[0].logprob) for h in hyps]
        result = []
        for (ids, lp), limit in zip(found, limits, strict=True):
            ids = ids[:limit]
            if v.eos in ids:
                ids = ids[: ids.index(v.eos)]
            result.append((ids, lp))
        return result

    def translate(self, model: nn.Module, sentences: Sequence[str], beam: int = 1,
                  alpha: float | None = None, batch_size: int | None = None,
                  incremental: bool = True) -> list[Translation]:
        """Translations of ``sentences`` (text, one sentence each), in their order: batches of
        ``batch_size`` sentences of similar length, greedy (``beam`` 1) or beam search with
        length penalty ``alpha`` (default the config's). ``incremental=False`` recomputes the
        whole prefix at every step (same translations, slower; for measurements). An empty
        sentence translates to an empty one without running the model."""
        from torch.nn.utils import parametrize

        alpha = self.options.alpha if alpha is None else alpha
        bs = batch_size or self.options.eval_batch_size
        rows = [self.encode_source(s) for s in sentences]
        todo = sorted((i for i, s in enumerate(sentences) if s.strip()),
                      key=lambda i: len(rows[i]))
        out = [Translation(s, "", []) for s in sentences]
        was = model.training
        model.eval()
        try:
            # weight-normalised models compute each weight once per search, not once per step
            with parametrize.cached():
                for lo in range(0, len(todo), bs):
                    idx = todo[lo:lo + bs]
                    found = self._search(model, [rows[i] for i in idx], beam, alpha,
                                         incremental)
                    for i, (ids, lp) in zip(idx, found, strict=True):
                        symbols = self.tgt_vocab.decode(ids)
                        out[i] = Translation(sentences[i], self.tgt_tok.decode_line(symbols),
                                             symbols, lp)
        finally:
            model.train(was)
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
        was = model.training
        model.eval()
        weights = model.attention(src, tgt_in)[:, 0].float().cpu()
        model.train(was)
        return weights, self.source_symbols(t.source), [*t.symbols, EOS]

    # -------------------------------------------------------------- scores
    @torch.no_grad()
    def _teacher_forced(self, model: nn.Module, rows: Sequence[Pair]) -> tuple[float, int]:
        """Summed −log p of every target symbol of ``rows`` and their number."""
        was = model.training
        model.eval()
        total, count = 0.0, 0
        batches = token_batches([len(s) for s, _ in rows], [len(t) for _, t in rows],
                                self.options.eval_max_tokens)
        for b in batches:
            src, tgt_in, tgt_out = (x.to(self.device) for x in self._tensors([rows[i]
                                                                            for i in b]))
            _, nll, n = smoothed_loss(model(src, tgt_in), tgt_out, self.tgt_vocab.pad, 0.0)
            total += float(nll) * n
            count += n
        model.train(was)
        return total, count

    def evaluate(self, model: nn.Module, split: str = "valid", batch_size: int | None = None,
                 beam: int | None = None, alpha: float | None = None) -> Evaluation:
        """Translate the split and score it (module docstring); ``beam`` defaults to
        ``eval_beam``."""
        from sacrebleu.metrics import BLEU, CHRF

        if split not in SPLITS and split not in self._splits:
            raise ValueError(f"unknown split {split!r}")
        pairs = self.split(split)
        hyps = [t.text for t in self.translate(model, pairs.src, beam or self.options.eval_beam,
                                               alpha, batch_size)]
        bleu = BLEU(tokenize=self.options.bleu_tokenize, lowercase=self.options.bleu_lowercase)
        chrf = CHRF()
        b = bleu.corpus_score(hyps, [pairs.tgt])
        c = chrf.corpus_score(hyps, [pairs.tgt])
        total, count = self._teacher_forced(model, self.encoded(split))
        loss = total / count
        exact = 100.0 * sum(h == r for h, r in zip(hyps, pairs.tgt, strict=True)) / len(hyps)
        scores = {"bleu": b.score, "chrf": c.score, "exact": exact, "loss": loss,
                  "ppl": math.exp(min(loss, 50.0))}
        bsig, csig = str(bleu.get_signature()), str(chrf.get_signature())
        return Evaluation(scores, "bleu" if self.options.select_by == "bleu" else "loss",
                          higher_is_better=self.options.select_by == "bleu", size=len(hyps),
                          unit="sentences",
                          details={"bleu_signature": bsig, "chrf_signature": csig},
                          lines=[b.format(signature=bsig), c.format(signature=csig)])

    def evaluate_file(self, model: nn.Module, path: str, batch_size: int | None = None,
                      beam: int | None = None, alpha: float | None = None,
                      **options: Any) -> Evaluation:
        """The pairs of ``path``.<src> / ``path``.<tgt> (plain or ``.gz``, checked as a split's
        files are) translated and scored as :meth:`evaluate` scores a split: the same search
        and scores; ``unk_tokens`` counts the source symbols read as ``<unk>``."""
        key = f"file:{path}"
        pairs = read_stem(path, self.spec)
        self._splits[key] = pairs
        self._encoded.pop(key, None)
        ev = self.evaluate(model, key, batch_size, beam, alpha)
        ev.details["unk_tokens"] = sum(len(self.unknown_source(s)) for s in pairs.src)
        return ev

    # -------------------------------------------------------------- checkpoint state
    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict[str, Any], same_shards: bool = True) -> None:
        self.epoch, self.pos, self._batches = state["epoch"], state["pos"], None
        if not same_shards:        # another number of processes: restart the epoch
            self.pos = 0
