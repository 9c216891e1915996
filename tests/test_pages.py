"""Every book page is a test: executed with papermill under preset="smoke"."""

from __future__ import annotations

import json

import nbformat
import pytest

from audiorepro.pages import (
    PageError,
    book_pages,
    execute_page,
    page_parameters,
    read_page,
    toc_entries,
)
from audiorepro.reporting import read_ledger
from conftest import REPO

PAGES = book_pages(REPO)


def test_every_page_is_in_the_toc_and_has_a_typed_preset_parameter():
    assert PAGES, "no book pages found"
    for page in PAGES:
        nb = read_page(REPO / page)
        first = next(iter(page_parameters(REPO / page).values()))
        assert (first.name, first.annotation, first.default) == ("preset", "str", "embedded"), (
            f"{page}: first parameter is {first}"
        )
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), page
        assert "In this notebook we will" in nb.cells[0].source, page
        assert "In this notebook we have" in nb.cells[-1].source, page
    assert toc_entries(REPO)[0] == "book/intro"


def test_page_code_fits_the_book_column():
    """Every code line of every page fits the length book/ruff.toml sets (the book's column)."""
    import tomllib

    limit = tomllib.loads((REPO / "book" / "ruff.toml").read_text())["line-length"]
    assert limit <= 88
    long = [
        f"{page}: {len(line)} characters: {line.strip()[:60]}"
        for page in PAGES
        for cell in read_page(REPO / page).cells
        if cell.cell_type == "code"
        for line in cell.source.splitlines()
        if len(line) > limit
    ]
    assert not long, "\n".join(long)


def test_page_without_parameters_cell_is_refused(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("# %%\nx = 1\n")
    with pytest.raises(PageError, match="no cell tagged 'parameters'"):
        read_page(page)


def test_executed_copy_never_overwrites_the_source_pair(tmp_path):
    page = tmp_path / "page.py"
    page.write_text('# %% tags=["parameters"]\npreset: str = "embedded"\n')
    with pytest.raises(PageError, match="must not sit next to its source"):
        execute_page(page, tmp_path / "page.ipynb", preset="smoke")


def test_failing_page_names_page_and_error(tmp_path):
    page = tmp_path / "bad.py"
    page.write_text(
        '# %% tags=["parameters"]\npreset: str = "embedded"\n\n# %%\nraise ValueError("boom")\n'
    )
    with pytest.raises(
        PageError, match=r"bad.py \(preset=smoke\) failed in cell .*ValueError: boom"
    ):
        execute_page(page, tmp_path / "out" / "bad.ipynb", preset="smoke", cwd=tmp_path)


@pytest.mark.notebook
@pytest.mark.parametrize("page", PAGES, ids=[f"{p.parent.name}/{p.stem}" for p in PAGES])
def test_page_runs_under_smoke(page, tmp_path):
    out = tmp_path / page.with_suffix(".ipynb").name
    execute_page(REPO / page, out, preset="smoke")
    nb = nbformat.read(out, as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and 'preset = "smoke"' in injected[0].source
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, json.dumps(errors)[:2000]
    # finding sentences are shown whole: no column cut by pandas' 50-character default
    cut = [
        line
        for c in nb.cells
        if c.cell_type == "code" and "findings(" in c.source
        for o in c.get("outputs", [])
        for line in o.get("data", {}).get("text/html", "").splitlines()
        if "...</td>" in line
    ]
    assert not cut, cut[:3]
    assert all(r["preset"] == "smoke" for r in read_ledger())
    # the source page is untouched by execution
    assert "injected-parameters" not in (REPO / page).read_text()


def test_page_script_overrides_parameters_and_runs_in_process(tmp_path):
    from audiorepro.pages import page_script, run_script

    page = tmp_path / "page.py"
    page.write_text(
        '# %% [markdown]\n# # T\n\n# %% tags=["parameters"]\npreset: str = "embedded"\nn: int = 2\n\n'
        "# %%\nresult = (preset, n * 10)\n"
    )
    code = page_script(page, {"preset": "paper", "n": 5})
    assert "preset = 'paper'\nn = 5" in code
    assert run_script(page, {"preset": "paper", "n": 5})["result"] == ("paper", 50)
    page.write_text('# %% tags=["parameters"]\npreset: str = "embedded"\n\n# %%\n%time x = 1\n')
    with pytest.raises(PageError, match="IPython magic"):
        page_script(page)
