"""Corpus scores of translations against references: sacreBLEU's BLEU and chrF, and the share of
exact matches, with the signatures that say how BLEU and chrF were computed.

Translations are scored detokenised, against the reference lines as read, so that the figures do
not depend on the run's own segmentation and compare with published ones; sacreBLEU's signature
(tokenisation, case, version) goes with each figure into the record for the same reason. BLEU is
tokenised ``13a`` and cased unless the options say otherwise (``bleu_tokenize``,
``bleu_lowercase``); chrF takes sacreBLEU's defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class CorpusScores:
    scores: dict[str, float]          # bleu, chrf, exact (all in %)
    details: dict[str, str] = field(default_factory=dict)   # bleu_signature, chrf_signature
    lines: list[str] = field(default_factory=list)          # sacreBLEU's report lines


def corpus_scores(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a",
                  lowercase: bool = False) -> CorpusScores:
    """BLEU, chrF and exact matches of ``hyps`` against ``refs`` (one reference each)."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu = BLEU(tokenize=tokenize, lowercase=lowercase)
    chrf = CHRF()
    b = bleu.corpus_score(list(hyps), [list(refs)])
    c = chrf.corpus_score(list(hyps), [list(refs)])
    exact = 100.0 * sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(hyps)
    bsig, csig = str(bleu.get_signature()), str(chrf.get_signature())
    return CorpusScores({"bleu": b.score, "chrf": c.score, "exact": exact},
                        {"bleu_signature": bsig, "chrf_signature": csig},
                        [b.format(signature=bsig), c.format(signature=csig)])
