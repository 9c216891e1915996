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
    assert "remove-cell" in injected[0].metadata["tags"]  # the values show once in the book
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


def test_the_built_page_shows_its_parameters_once(tmp_path):
    """papermill's injected cell is removed from the book; a note names only the overrides."""
    page = tmp_path / "page.py"
    page.write_text(
        '# %% [markdown]\n# # T\n\n# %% tags=["parameters"]\npreset: str = "embedded"\n'
        "n: int = 2\nlr: float = 0.1\n\n# %%\nx = n\n"
    )
    out = tmp_path / "out" / "page.ipynb"
    execute_page(page, out, preset="smoke", parameters={"n": 2, "lr": 0.5}, cwd=tmp_path)
    cells = nbformat.read(out, as_version=4).cells
    tags = [c.metadata.get("tags", []) for c in cells]
    injected = next(i for i, t in enumerate(tags) if "injected-parameters" in t)
    assert "remove-cell" in tags[injected] and "parameters" in tags[injected - 1]
    note = cells[injected + 1]
    assert note.cell_type == "markdown"
    assert note.source == "Overridden for this build: `preset='smoke', lr=0.5`"
    execute_page(page, out, preset="embedded", cwd=tmp_path)
    cells = nbformat.read(out, as_version=4).cells
    assert not [c for c in cells if "Overridden for this build" in c.source]
    assert any("remove-cell" in c.metadata.get("tags", []) for c in cells)


def test_page_times_are_written_after_every_page(tmp_path, monkeypatch):
    """A page late in the book reads the times of the pages before it in the same build."""
    import audiorepro.pages as pages

    seen = []

    def fake_execute(page, output, **kw):
        times = tmp_path / "page_times.json"
        seen.append(json.loads(times.read_text()) if times.exists() else None)
        return 1.25

    listed = {REPO / "book" / "a.py": {"preset": "smoke"}, REPO / "book" / "b.py": {}}
    monkeypatch.setattr(pages, "build_parameters", lambda *a, **k: listed)
    monkeypatch.setattr(pages, "execute_page", fake_execute)
    times = pages.execute_pages("smoke", root=REPO, stage=tmp_path / "src")
    assert seen[0] is None and list(seen[1].values()) == [1.2]
    assert json.loads((tmp_path / "page_times.json").read_text()) == times


def _timed_book(root, chapters, log):
    """A book under ``root`` of one page per chapter (a key ``chapter``) or of the named pages
    (``chapter/page``): each page runs its ``code`` (raises, where that is None), then appends
    ``key start end`` to ``log``."""
    toc = {"format": "jb-book", "root": "book/intro", "parts": []}
    for chapter, code in chapters.items():
        page = root / "book" / (chapter if "/" in chapter else f"{chapter}/page")
        page = page.with_suffix(".py")
        page.parent.mkdir(parents=True, exist_ok=True)
        body = (
            'raise ValueError("broken chapter")'
            if code is None
            else f"import pathlib, time\nstart = time.time()\n{code}\n"
            f"with open({str(log)!r}, 'a') as f:\n"
            f"    f.write(f'{chapter} {{start}} {{time.time()}}\\n')"
        )
        page.write_text(f'# %% tags=["parameters"]\npreset: str = "embedded"\n\n# %%\n{body}\n')
        file = str(page.relative_to(root).with_suffix(""))
        toc["parts"].append({"caption": chapter, "chapters": [{"file": file}]})
    (root / "_toc.yml").write_text(yaml.safe_dump(toc))


def test_a_chapter_needed_for_one_page_splits_after_it_and_its_rest_starts_last(monkeypatch):
    from audiorepro import pages

    book = [Path(f"book/{p}.py") for p in (
        "00_data/01_audio", "01_retrieval/01_data", "01_retrieval/02_pretrain",
        "01_retrieval/03_finetune", "01_retrieval/04_evaluate", "02_distillation/01_teachers",
        "03_zerospeech/01_data",
    )]  # fmt: skip
    parts, waits = pages.side_by_side_parts(book)
    assert {k: [p.stem for p in v] for k, v in parts.items()} == {
        "00_data": ["01_audio"],
        "01_retrieval": ["01_data", "02_pretrain"],
        "02_distillation": ["01_teachers"],
        "03_zerospeech": ["01_data"],
        "01_retrieval/03_finetune": ["03_finetune", "04_evaluate"],
    }
    assert waits == {
        "00_data": (),
        "01_retrieval": ("00_data",),
        "02_distillation": ("00_data", "01_retrieval"),
        "03_zerospeech": ("00_data",),
        "01_retrieval/03_finetune": ("00_data", "01_retrieval"),
    }
    # a chapter that needs all of a split one waits for both its parts
    needs = {**pages.CHAPTER_NEEDS, "03_zerospeech": ("01_retrieval",)}
    monkeypatch.setattr(pages, "CHAPTER_NEEDS", needs)
    assert pages.side_by_side_parts(book)[1]["03_zerospeech"] == (
        "00_data", "01_retrieval", "01_retrieval/03_finetune",
    )  # fmt: skip
    monkeypatch.undo()
    # without the needed page (--only), chapter 02 waits for what there is of chapter 01
    parts, waits = pages.side_by_side_parts([book[0], book[3], book[5]])
    assert list(parts) == ["00_data", "01_retrieval", "02_distillation"]
    assert waits["02_distillation"] == ("00_data", "01_retrieval")


@pytest.mark.processes
def test_chapters_run_side_by_side_in_the_order_they_need(tmp_path):
    """``build --jobs 2``: chapters 01 and 03 run at once after the data chapter (chapter 01's
    page waits until chapter 03's has started), chapter 02 after chapter 01's page 02_pretrain
    and beside the page after it (which waits until chapter 02 has started), the Reference part
    after all of them; page times in book order. A failing chapter stops the build, naming its
    page, once the chapter beside it has ended."""
    from audiorepro import pages

    root, log = tmp_path / "book1", tmp_path / "log.txt"

    def wait_for(marker):
        return (
            f"while not pathlib.Path({str(marker)!r}).exists() and time.time() < start + 120:\n"
            "    time.sleep(0.05)"
        )

    def touch(marker):
        return f"pathlib.Path({str(marker)!r}).touch()"

    code = {
        "00_data": "pass",
        "01_retrieval/02_pretrain": wait_for(tmp_path / "03-started"),
        "01_retrieval/03_finetune": wait_for(tmp_path / "02-started"),
        "02_distillation": touch(tmp_path / "02-started"),
        "03_zerospeech": touch(tmp_path / "03-started"),
        "reference": "pass",
    }
    _timed_book(root, code, log)
    times = pages.execute_pages("smoke", root=root, stage=root / "_build/src", jobs=2)
    assert list(times) == [f"book/{k if '/' in k else f'{k}/page'}.py" for k in code]
    lines = log.read_text().splitlines()
    span = {name: (float(a), float(b)) for name, a, b in map(str.split, lines)}
    pretrain, finetune = span["01_retrieval/02_pretrain"], span["01_retrieval/03_finetune"]
    assert pretrain[1] - pretrain[0] < 100  # 03 started beside it
    assert finetune[1] - finetune[0] < 100  # 02 started beside it
    assert span["00_data"][1] < min(pretrain[0], span["03_zerospeech"][0])
    assert span["02_distillation"][0] > pretrain[1]
    others = [end for name, (_, end) in span.items() if name != "reference"]
    assert span["reference"][0] > max(others)
    assert json.loads((root / "_build/page_times.json").read_text()) == times

    root, log = tmp_path / "book2", tmp_path / "log2.txt"  # 01 outlasts 03 failing, even busy
    _timed_book(
        root, {"01_retrieval": "time.sleep(8)", "03_zerospeech": None, "04_awe": "pass"}, log
    )
    with pytest.raises(PageError, match="03_zerospeech/page.py .* ValueError: broken chapter"):
        pages.execute_pages("smoke", root=root, stage=root / "_build/src", jobs=2)
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["01_retrieval"]
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        pages.execute_pages("smoke", root=root, jobs=0)
