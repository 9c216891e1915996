"""The README fits one screen and points into the book; the reference lives in the book."""

from __future__ import annotations

import re

from audiorepro.pages import toc_entries
from conftest import REPO

README = REPO / "README.md"


def test_the_readme_fits_one_screen_and_holds_no_dated_measurement():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", text), "dated measurements go to commits"
    for heading in ("## The two commands", "## Layout", "## Where data, runs and results live"):
        assert heading in text
    assert "make book" in text and "make test" in text


def test_every_path_the_readme_links_exists_and_every_reference_page_is_in_the_toc():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links, "the README links into the book"
    assert not [link for link in links if not (REPO / link).exists()]
    pages = sorted((REPO / "book" / "reference").glob("*.*"))
    assert len(pages) >= 4
    toc = set(toc_entries(REPO))
    missing = [p.name for p in pages if str(p.relative_to(REPO).with_suffix("")) not in toc]
    assert not missing, f"reference pages not in _toc.yml: {missing}"
    assert all(f"book/reference/{p.name}" in text for p in pages)
