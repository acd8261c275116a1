"""The docs a newcomer reads: no section twice on a page, no leftover placeholder, every image
and relative link pointing at a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_is_clean(page):
    text = page.read_text(encoding="utf-8")
    body = re.sub(r"```.*?```", "", text, flags=re.S)          # code blocks may repeat lines
    heads = [ln for ln in body.splitlines() if ln.startswith("## ")]
    assert len(heads) == len(set(heads)), f"a section appears twice: {heads}"
    # placeholders: an upper-case token glued to text (GRADFLOW_From) or a line of capitals alone
    # (an environment variable in inline code, `TREELM_GEMM`, is a name, not a placeholder)
    prose = re.sub(r"`[A-Z][A-Z0-9_]*`", "", body)
    assert not re.search(r"\b[A-Z]{4,}_[A-Za-z]", prose), "leftover placeholder"
    assert not re.search(r"^[A-Z_]{5,}$", body, flags=re.M), "leftover placeholder line"
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", body):
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
