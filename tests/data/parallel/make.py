"""Writes the tiny German -> English sample used by the tests (``train``, ``val`` and
``test_2016_flickr`` as ``.de`` / ``.en`` files, the Multi30k layout): sentences of a small
template grammar translated word by word. Deterministic: ``python tests/data/parallel/make.py``
rewrites the same files.
"""

from __future__ import annotations

import random
from pathlib import Path

NOUNS = [("Hund", "dog"), ("Katze", "cat"), ("Mann", "man"), ("Frau", "woman"),
         ("Kind", "child"), ("Junge", "boy"), ("Vogel", "bird"), ("Pferd", "horse"),
         ("Fahrer", "driver"), ("Maler", "painter"), ("Lehrer", "teacher"),
         ("Spieler", "player")]
ADJECTIVES = [("kleine", "small"), ("große", "big"), ("junge", "young"), ("alte", "old"),
              ("schwarze", "black"), ("weiße", "white"), ("rote", "red")]
VERBS = [("läuft", "runs"), ("springt", "jumps"), ("schläft", "sleeps"), ("spielt", "plays"),
         ("sitzt", "sits"), ("wartet", "waits"), ("arbeitet", "works")]
PLACES = [("im Park", "in the park"), ("am Strand", "on the beach"),
          ("auf der Straße", "on the street"), ("im Garten", "in the garden"),
          ("vor dem Haus", "in front of the house")]
SIZES = {"train": 600, "val": 40, "test_2016_flickr": 40}


def sentence(rng: random.Random) -> tuple[str, str]:
    n_de, n_en = rng.choice(NOUNS)
    a_de, a_en = rng.choice(ADJECTIVES)
    v_de, v_en = rng.choice(VERBS)
    p_de, p_en = rng.choice(PLACES)
    if rng.random() < 0.5:
        return f"Der {a_de} {n_de} {v_de} {p_de}.", f"The {a_en} {n_en} {v_en} {p_en}."
    return f"Der {n_de} {v_de} {p_de}.", f"The {n_en} {v_en} {p_en}."


def main() -> None:
    here = Path(__file__).resolve().parent
    rng = random.Random(1)
    for stem, n in SIZES.items():
        pairs = [sentence(rng) for _ in range(n)]
        for lang, k in (("de", 0), ("en", 1)):
            (here / f"{stem}.{lang}").write_text("".join(p[k] + "\n" for p in pairs),
                                                 encoding="utf-8")


if __name__ == "__main__":
    main()
