"""Writes the synthetic slot-filling sample used by the tests (train/valid/test in the ATIS layout:
seq.in, seq.out, label). Deterministic: ``python tests/data/slots/make.py`` rewrites the same files.
"""

from __future__ import annotations

import random
from pathlib import Path

CITIES = ["boston", "denver", "dallas", "atlanta", "new york", "salt lake city", "pittsburgh",
          "san francisco", "baltimore", "oakland", "washington", "philadelphia"]
DAYS = ["monday", "tuesday", "friday", "sunday"]
DATES = ["tomorrow", "today"]
TIMES = ["morning", "afternoon", "evening"]
AIRLINES = ["delta", "united", "american airlines"]

# (intent, template): {slot} is filled with a phrase of that slot's vocabulary
FROM, TO = "{fromloc.city_name}", "{toloc.city_name}"
DATE, DAY, TIME = ("{depart_date.date_relative}", "{depart_date.day_name}",
                   "{depart_time.period_of_day}")
TEMPLATES = [
    ("atis_flight", f"show me flights from {FROM} to {TO} {DATE}"),
    ("atis_flight", f"i want to fly from {FROM} to {TO} on {DAY}"),
    ("atis_flight", f"list {{airline_name}} flights to {TO} in the {TIME}"),
    ("atis_flight", f"flights from {FROM} to {TO} {DATE} {TIME}"),
    ("atis_airfare", f"what is the lowest fare going from {FROM} to {TO}"),
    ("atis_airfare", f"how much is a ticket to {TO} on {DAY}"),
    ("atis_ground_service", "which ground transport can i get in {city_name}"),
    ("atis_ground_service", f"is there a limousine service in {{city_name}} {DATE}"),
]
VALUES = {"city_name": CITIES, "depart_date.date_relative": DATES,
          "depart_date.day_name": DAYS, "depart_time.period_of_day": TIMES,
          "airline_name": AIRLINES}


def values(slot: str) -> list[str]:
    return VALUES.get(slot) or VALUES[slot.split(".", 1)[1]]


def utterance(rng: random.Random) -> tuple[list[str], list[str], str]:
    intent, template = rng.choice(TEMPLATES)
    words, tags = [], []
    for token in template.split():
        if token.startswith("{"):
            slot = token[1:-1]
            phrase = rng.choice(values(slot)).split()
            words += phrase
            tags += [f"B-{slot}"] + [f"I-{slot}"] * (len(phrase) - 1)
        else:
            words.append(token)
            tags.append("O")
    return words, tags, intent


def main() -> None:
    rng = random.Random(7)
    here = Path(__file__).parent
    for split, n in (("train", 300), ("valid", 60), ("test", 60)):
        rows = [utterance(rng) for _ in range(n)]
        d = here / split
        d.mkdir(exist_ok=True)
        (d / "seq.in").write_text("".join(" ".join(w) + "\n" for w, _, _ in rows))
        (d / "seq.out").write_text("".join(" ".join(t) + "\n" for _, t, _ in rows))
        (d / "label").write_text("".join(i + "\n" for _, _, i in rows))


if __name__ == "__main__":
    main()
