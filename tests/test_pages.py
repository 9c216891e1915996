"""Every book page is a test: executed with papermill under preset="smoke"."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
import yaml

from audiorepro.pages import (
    PageError,
    book_pages,
    execute_page,
    execute_pages,
    page_graph,
    page_parameters,
    read_page,
    toc_entries,
)
from audiorepro.parallel import Task
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


def test_page_graph_orders_pages_within_a_chapter_and_chapters_after_what_they_read():
    pages = [
        Path(p)
        for p in (
            "book/00_data/a.py",
            "book/00_data/b.py",
            "book/01_retrieval/a.py",
            "book/01_retrieval/b.py",
            "book/02_distillation/a.py",
            "book/03_zerospeech/a.py",
            "book/05_new/a.py",
        )
    ]
    graph = page_graph(pages)
    after = {str(p): [str(d) for d in t.after] for p, t in graph.items()}
    assert after == {
        "book/00_data/a.py": [],
        "book/00_data/b.py": ["book/00_data/a.py"],
        "book/01_retrieval/a.py": ["book/00_data/b.py"],
        "book/01_retrieval/b.py": ["book/01_retrieval/a.py"],
        "book/02_distillation/a.py": ["book/01_retrieval/b.py"],
        "book/03_zerospeech/a.py": ["book/00_data/b.py"],
        # not in CHAPTER_AFTER: after every chapter before it
        "book/05_new/a.py": [
            "book/00_data/b.py",
            "book/01_retrieval/b.py",
            "book/02_distillation/a.py",
            "book/03_zerospeech/a.py",
        ],
    }
    assert all(t.item == p for p, t in graph.items())
    # chapter 01 not selected: chapter 02 waits for what 01 waits for
    partial = page_graph([pages[0], pages[4], pages[5]])
    assert [str(d) for d in partial[pages[4]].after] == ["book/00_data/a.py"]
    assert page_graph(pages[4:6]) == {p: Task(p) for p in pages[4:6]}
    with pytest.raises(PageError, match="cycle through"):
        page_graph(
            pages[4:5],
            {
                "02_distillation": ("01_retrieval",),
                "01_retrieval": ("02_x",),
                "02_x": ("01_retrieval",),
            },
        )


def _rendezvous_page(
    tmp_path, mine: str, other: str | None, needs: str | None, wait_s: int = 90
) -> str:
    """A page that checks ``needs`` exists, writes ``mine``, then waits up to ``wait_s`` for
    ``other`` (written by a page that must run at the same time)."""
    lines = [
        '# %% tags=["parameters"]',
        'preset: str = "embedded"',
        "# %%",
        "import pathlib, time",
        f"d = pathlib.Path({str(tmp_path)!r})",
    ]
    if needs:
        lines.append(f"assert (d / {needs!r}).is_file(), 'started before {needs}'")
    lines.append(f"(d / {mine!r}).write_text('done')")
    if other:
        lines += [
            f"for _ in range({10 * wait_s}):",
            f"    if (d / {other!r}).is_file():",
            "        break",
            "    time.sleep(0.1)",
            "else:",
            f"    raise RuntimeError('{other} never ran beside this page')",
        ]
    return "\n".join(lines) + "\n"


@pytest.mark.notebook
def test_two_jobs_run_chapters_that_do_not_read_each_other_side_by_side(tmp_path):
    root = tmp_path / "repo"
    pages = {
        "00_data/a": ("data", None, None),
        "01_retrieval/a": ("retrieval", "speech", "data"),
        "03_zerospeech/a": ("speech", "retrieval", "data"),
    }
    toc = {"format": "jb-book", "root": "book/intro", "chapters": []}
    for name, (mine, other, needs) in pages.items():
        path = root / "book" / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_rendezvous_page(tmp_path, mine, other, needs))
        toc["chapters"].append({"file": f"book/{name}"})
    (root / "_toc.yml").write_text(yaml.safe_dump(toc))
    stage = root / "_build" / "src"
    times = execute_pages("smoke", root=root, stage=stage, jobs=2)
    assert list(times) == [f"book/{name}.py" for name in pages]
    assert all(stage.joinpath(f"book/{name}.ipynb").is_file() for name in pages)
    assert json.loads((root / "_build" / "page_times.json").read_text()) == times
    # one at a time, chapter 01's page would wait for chapter 03's in vain
    for name in ("retrieval", "speech"):
        (tmp_path / name).unlink()
    (tmp_path / "data").unlink()
    retrieval = root / "book" / "01_retrieval" / "a.py"
    retrieval.write_text(_rendezvous_page(tmp_path, "retrieval", "speech", "data", wait_s=3))
    with pytest.raises(PageError, match="never ran beside this page"):
        execute_pages("smoke", root=root, stage=stage, only=["00_data", "01_retr"], jobs=2)
