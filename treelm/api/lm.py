"""The language-model methods of :class:`~treelm.api.model.TreelmModel`: ``score``,
``generate`` (and ``generate_stream``, what ``treelm generate`` writes) and ``probe`` (what
``treelm probe`` prints).

A prompt or prefix is read with the run's tokenizer and primed as ``<eos>`` + text from the zero
state, so that it is read as the start of a line, as every training line starts after an
``<eos>``. Symbols outside the vocabulary follow the caller's policy
(:mod:`treelm.api.base`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from treelm.api.base import ModelBase
from treelm.api.values import Generation, Unk, check_positive, sentences_of
from treelm.errors import TreelmError


class LMMethods(ModelBase):
    """``score``, ``generate``, ``generate_stream`` and ``probe`` (task ``lm``)."""

    def score(self, sentences: str | Sequence[str], *, batch_size: int = 128) -> list[float]:
        """``log p(s)`` in nats of each sentence, read as ``<eos> w_1 … w_n <eos>`` (the final
        ``<eos>`` included; :mod:`treelm.decode.score`, as ``treelm suite`` scores); symbols
        outside the vocabulary count as ``<unk>``."""
        from treelm.decode.score import sentence_logprobs

        check_positive("batch_size", batch_size)
        items = sentences_of(sentences)
        with self._calling("score"):
            logp, _ = sentence_logprobs(self.run.model, self.run.vocab, self.run.tokenizer,
                                        items, batch_size)
            return [float(x) for x in logp]

    def _prime(self, method: str, text: str, unk: Unk, what: str,
               where: str | None) -> tuple[Any, Any, Any]:
        """``<eos>`` + ``text`` through the model from the zero state: the step function, the
        next-symbol logits and the state. A symbol outside the vocabulary follows ``unk``: a
        verb's policy names ``where``; a policy by name, the symbol (``what``)."""
        import torch

        from treelm.decode.lm import LMStep

        self.require(method)
        vocab = self.run.vocab
        symbols = self.run.tokenizer.encode(text)
        if not isinstance(unk, str):
            self._check(method, unk, [symbols[i] for i in vocab.unknown(symbols)],
                        where or what)
        device = next(self.run.model.parameters()).device
        step = LMStep(self.run.model)
        with self._calling(method, unk):
            ids = vocab.encode(symbols, unk if isinstance(unk, str) else "map", what=what)
            logits, state = step.prime(torch.tensor([vocab.eos, *ids],
                                                    device=device).unsqueeze(1))
        return step, logits, state

    def generate_stream(self, prompt: str = "", length: int = 50, *, temperature: float = 1.0,
                        top_k: int | None = None, top_p: float | None = None, seed: int = 0,
                        beam: int | None = None, alpha: float = 0.0, unk: Unk = "map",
                        where: str | None = None) -> Generation:
        """:meth:`generate`, piece by piece as the symbols are drawn (``treelm generate``
        writes each as it comes). The prompt is read at once (an error comes before any
        piece); ``where`` names the prompt in a verb's unknown-symbol messages."""
        from treelm.decode.beam import beam_search
        from treelm.decode.sampling import sample_stream

        if not isinstance(prompt, str):
            raise TreelmError("prompt must be text")
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise TreelmError(f"length must be an integer >= 0, got {length!r}")
        if not 0 <= temperature < math.inf:
            raise TreelmError(f"temperature must be a finite number >= 0, got {temperature}")
        check_positive("top_k", top_k)
        if top_p is not None and not 0 < top_p <= 1:
            raise TreelmError(f"top_p must be in (0, 1], got {top_p}")
        check_positive("beam", beam)
        step, logits, state = self._prime("generate", prompt, unk, "prompt symbol", where)
        vocab, tok = self.run.vocab, self.run.tokenizer
        line_start = True          # after the prompt's own text, as a writer leaves it
        for s in tok.encode(prompt):
            line_start = tok.piece_text(s, line_start).endswith("\n")
        if beam is not None:
            with self._calling("generate", unk):
                best = beam_search(step, logits, state, beam, length, eos=vocab.eos,
                                   alpha=alpha)[0][0]
            return Generation(iter(vocab.decode(best.tokens)), tok.piece_text, line_start,
                              best.logprob)

        def sampled() -> Iterator[str]:
            import torch

            gen = torch.Generator(device=logits.device).manual_seed(seed)
            ids = sample_stream(step, logits, state, length, temperature, top_k, top_p, gen)
            while True:        # the lock, precision and no_grad held per symbol, not between
                with self._calling("generate", unk):
                    t = next(ids, None)
                if t is None:
                    return
                yield vocab.itos[int(t[0])]

        return Generation(sampled(), tok.piece_text, line_start)

    def generate(self, prompt: str = "", length: int = 50, *, temperature: float = 1.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int = 0,
                 beam: int | None = None, alpha: float = 0.0, unk: str = "map") -> str:
        """The text that follows ``prompt`` (not repeated), ``length`` symbols, as ``treelm
        generate`` writes it after the prompt: sampled from softmax(logits / ``temperature``)
        (``0``: greedy), optionally cut to the ``top_k`` symbols or the ``top_p`` nucleus, from
        a generator seeded with ``seed``; or, with ``beam``, the most probable continuation found
        by beam search (ranked by log p / ((5+n)/6)^``alpha``, stopping at ``<eos>``). A prompt
        symbol outside the vocabulary is read as ``<unk>`` (``unk="error"`` refuses it)."""
        return "".join(self.generate_stream(prompt, length, temperature=temperature,
                                            top_k=top_k, top_p=top_p, seed=seed, beam=beam,
                                            alpha=alpha, unk=unk))

    def probe(self, prefix: str, k: int = 5, *, unk: Unk = "map",
              where: str | None = None) -> list[tuple[str, float]]:
        """The ``k`` most likely symbols after ``prefix`` (read as the start of a line) with
        their probabilities, most likely first (``treelm probe``; ``where`` names the prefix in
        a verb's unknown-symbol messages)."""
        if not isinstance(prefix, str):
            raise TreelmError("prefix must be text")
        check_positive("k", k)
        _, logits, _ = self._prime("probe", prefix, unk, "prefix symbol", where)
        with self._calling("probe", unk):
            probs = logits[0].float().softmax(-1)
            p, i = probs.topk(min(k, probs.numel()))
            return [(self.run.vocab.itos[j], float(q)) for q, j in zip(p.tolist(), i.tolist())]
