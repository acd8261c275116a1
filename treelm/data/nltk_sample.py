"""Where NLTK's WSJ treebank sample lies, found without importing nltk.

NLTK's ``data.find("corpora/treebank/combined/")`` looks in every directory of ``NLTK_DATA``
(then of ``nltk.data.path``) for the folder, then for ``corpora/treebank.zip``. The same lookup
is done here by hand: ``import nltk`` imports scipy and took 1.5-2.8 s of every training run's
start for a file listing. nltk is imported only when ``NLTK_DATA`` does not hold the sample, for
its own default directories. The files are read afresh on every call (no module-level cache).
The treebank reader (:mod:`treelm.data.treebank`) parses what is found here.
"""

from __future__ import annotations

import functools
import os
import re
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

#: The sample's files, as NLTK's corpus reader names them (``fileids()``).
_SAMPLE_FILE = re.compile(r"wsj_.*\.mrg")

#: A file of the sample: its NLTK file id and a function reading its bytes.
SampleFile = tuple[str, Callable[[], bytes]]


def sample_files() -> list[SampleFile] | None:
    """The sample's files in sorted order, from ``NLTK_DATA`` as it is now, else from NLTK's
    default directories; None when neither holds it."""
    env = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    found = sample_in(env)
    if found is None:
        import nltk  # its default directories: only here, when NLTK_DATA has no sample

        found = sample_in(list(nltk.data.path))
    return found


def sample_in(dirs: Sequence[str]) -> list[SampleFile] | None:
    """The sample's files in the first of ``dirs`` that holds ``corpora/treebank/combined`` (a
    directory, or inside ``corpora/treebank.zip``), in NLTK's order of looking; None when no
    directory holds it."""
    for d in dirs:          # NLTK's order: the folder in every directory, then the archive
        folder = Path(d) / "corpora" / "treebank" / "combined"
        if folder.is_dir():
            return [(p.name, p.read_bytes) for p in sorted(folder.iterdir())
                    if p.is_file() and _SAMPLE_FILE.fullmatch(p.name)]
    for d in dirs:
        archive = Path(d) / "corpora" / "treebank.zip"
        if archive.is_file():
            # one open archive serves every member: reading its directory (about 800 entries)
            # anew for each of the files read cost about as much as parsing their trees
            z = zipfile.ZipFile(archive)        # closed with the last reader that holds it
            inside = sorted(n for n in z.namelist() if n.startswith("treebank/combined/")
                            and _SAMPLE_FILE.fullmatch(n.rpartition("/")[2]))
            return [(n.rpartition("/")[2], functools.partial(z.read, n)) for n in inside]
    return None
