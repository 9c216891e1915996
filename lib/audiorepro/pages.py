"""Execute the book's pages headlessly and stage the Jupyter Book source.

The ``book/**/*.py`` percent files are the notebooks (jupytext). This module turns one into a
notebook in memory, runs it with papermill under a preset, and writes the *executed copy*
somewhere else: the ``.py`` source is never touched, so a papermill-injected parameters cell can
never leak back into it.

``make book`` calls :func:`stage_book` then :func:`execute_pages`, which lay out the book under
``_build/src`` (configuration, markdown pages and executed notebooks, in the order of
``_toc.yml``); ``jupyter-book build _build/src`` then renders them with execution off. The
tests call :func:`execute_page` on every page under ``preset="smoke"``.

Command line::

    python -m audiorepro.pages list
    python -m audiorepro.pages build --preset embedded [--only 03_zerospeech] [-p seed 1] [--jobs 2]
    python -m audiorepro.pages run book/00_data/01_audio_features.py out.ipynb -p preset smoke
    accelerate launch -m audiorepro.pages script book/03_zerospeech/02_train_vqvae.py -p preset paper

``script`` runs a page's code in this process, as a plain Python program, with the parameters
cell overridden: that is how a page runs under ``accelerate launch`` on several GPUs, where each
process executes the page and the training loop shares the work.

Every command checks the given parameters against the page's parameters cell before anything
runs (:mod:`audiorepro.page_parameters`): an unknown name or a value that does not fit the
field's annotation is an error naming the page, the field, the expected type and the value, and
the command exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from audiorepro.book_assets import BookAssetError, stage_mathjax
from audiorepro.page_parameters import (
    PageParameter,
    ParameterError,
    read_parameters,
    validate_parameters,
)
from audiorepro.paths import repo_root

PAGE_GLOB = "book/**/*.py"
STAGE_DIR = Path("_build/src")
STAGED_FILES = ("_config.yml", "_toc.yml")
ASSET_SUFFIXES = (".md", ".png", ".jpg", ".svg", ".bib", ".yaml", ".yml")
PAGE_TIMES = "page_times.json"
"""The build's page times (seconds per page, in reading order), next to the stage folder."""


class PageError(RuntimeError):
    """A page failed to execute; the message names the page and the failing cell."""


def toc_entries(root: Path | None = None) -> list[str]:
    """File entries of ``_toc.yml`` (without suffix) in reading order."""
    root = root or repo_root()
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    entries: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    entries.append(str(node[key]))
            for key in ("chapters", "sections", "parts"):
                for child in node.get(key, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(toc)
    return entries


def book_pages(root: Path | None = None) -> list[Path]:
    """The executable pages (``book/**/*.py``) in ``_toc.yml`` order, relative to ``root``.

    A page missing from the table of contents is an error: it would execute but never be read.
    """
    root = root or repo_root()
    found = sorted(p.relative_to(root) for p in root.glob(PAGE_GLOB))
    order = {entry: i for i, entry in enumerate(toc_entries(root))}
    missing = [str(p) for p in found if str(p.with_suffix("")) not in order]
    if missing:
        raise PageError(f"pages not listed in _toc.yml: {', '.join(missing)}")
    return sorted(found, key=lambda p: order[str(p.with_suffix(""))])


def read_page(page: Path):
    """The page as an in-memory notebook (nbformat v4) with a python3 kernelspec."""
    import jupytext

    nb = jupytext.read(page)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    if not any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb.cells):
        raise PageError(f"{page}: no cell tagged 'parameters' (see STYLE.md, item 3)")
    return nb


def page_parameters(page: str | Path) -> dict[str, PageParameter]:
    """The fields of the page's parameters cell (name, annotation, default, help), in order.

    Line numbers (in errors and :attr:`PageParameter.lineno`) are lines of the page file.
    """
    page = Path(page)
    nb = read_page(page)
    cell = next(c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", []))
    offset = 0
    if page.suffix == ".py":
        lines = page.read_text().splitlines()
        header = next(
            (
                i
                for i, line in enumerate(lines)
                if line.startswith("# %%") and "parameters" in line
            ),
            None,
        )
        offset = 0 if header is None else header + 1
    return read_parameters(cell.source, f"{page} (parameters cell)", line_offset=offset)


def check_parameters(page: str | Path, parameters: Mapping[str, Any]) -> None:
    """Raise :class:`ParameterError` unless every parameter is a field of the page's parameters
    cell and fits its annotation."""
    validate_parameters(page_parameters(page), parameters, str(page))


def parse_parameters(page: str | Path, pairs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Command-line ``-p NAME VALUE`` pairs as values, each read by its field's annotation
    (:meth:`PageParameter.parse_text`); unknown names are read as YAML and left for
    :func:`check_parameters` to refuse."""
    fields = page_parameters(page)
    return {
        name: fields[name].parse_text(text) if name in fields else yaml.safe_load(text)
        for name, text in pairs
    }


def execute_page(
    page: str | Path,
    output: str | Path,
    *,
    preset: str = "embedded",
    parameters: Mapping[str, Any] | None = None,
    cwd: str | Path | None = None,
    log_output: bool = False,
    env: Mapping[str, str] | None = None,
) -> float:
    """Execute one ``.py`` page under ``preset`` into the notebook ``output``; return seconds.

    Args:
        page: the percent-format source, e.g. ``book/00_data/01_audio_features.py``.
        output: where the executed ``.ipynb`` goes (never next to the source).
        preset: injected as the ``preset`` parameter.
        parameters: further single-field overrides injected into the parameters cell; checked
            against the page's parameters cell first (:class:`ParameterError`).
        cwd: working directory of the kernel (default: the repository root).
        log_output: stream cell output to this process's log (CI).
        env: extra environment variables for the kernel (e.g. ``AUDIOREPRO_RESULTS``).
    """
    import nbformat
    import papermill

    page, output = Path(page), Path(output)
    if output.resolve() == page.resolve().with_suffix(".ipynb"):
        raise PageError(f"{output}: the executed copy must not sit next to its source {page}")
    params = {"preset": preset, **dict(parameters or {})}
    check_parameters(page, params)
    output.parent.mkdir(parents=True, exist_ok=True)
    source = output.with_name(output.stem + ".source.ipynb")
    nbformat.write(read_page(page), source)
    rerun = ["python", "-m", "audiorepro.pages", "run", str(page), "OUT.ipynb"]
    for key, value in params.items():
        rerun += ["-p", key, str(value)]
    # AUDIOREPRO_HEADLESS: training prints one line per run, not redraws that pile up.
    env = {"AUDIOREPRO_COMMAND": shlex.join(rerun), "AUDIOREPRO_HEADLESS": "1", **dict(env or {})}
    old_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(source),
            str(output),
            parameters=params,
            cwd=str(cwd or repo_root()),
            kernel_name="python3",
            progress_bar=False,
            log_output=log_output,
            report_mode=False,
        )
    except papermill.PapermillExecutionError as err:
        raise PageError(
            f"{page} (preset={preset}) failed in cell {err.exec_count}: {err.ename}: {err.evalue}"
        ) from err
    finally:
        source.unlink(missing_ok=True)
        for key, value in old_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    seconds = time.perf_counter() - start
    show_parameters_once(output, page_parameters(page), params)
    return seconds


OVERRIDE_NOTE = "Overridden for this build:"
"""How the note of a page's overridden parameters begins (:func:`show_parameters_once`)."""


def overridden(
    fields: Mapping[str, PageParameter], parameters: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``parameters`` whose value differs from the default of the page's field, in the
    order of the parameters cell."""
    return {
        name: parameters[name]
        for name, field in fields.items()
        if name in parameters and parameters[name] != field.default
    }


def show_parameters_once(
    notebook: str | Path, fields: Mapping[str, PageParameter], parameters: Mapping[str, Any]
) -> None:
    """Make an executed notebook show its parameters once, as a reader sees the built book.

    papermill injects a ``# Parameters`` cell after the tagged parameters cell that repeats
    every value; it is tagged ``remove-cell`` (Jupyter Book leaves it out of the HTML), and
    when a value differs from the page's default a one-line markdown note follows the
    parameters cell: ``Overridden for this build: preset='smoke'`` (only those values).
    """
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    cells = nb.cells
    injected = next(
        (i for i, c in enumerate(cells) if "injected-parameters" in c.metadata.get("tags", [])),
        None,
    )
    if injected is None:
        return
    tags = cells[injected].metadata.setdefault("tags", [])
    if "remove-cell" not in tags:
        tags.append("remove-cell")
    changed = overridden(fields, parameters)
    if changed and not any(
        c.cell_type == "markdown" and c.source.startswith(OVERRIDE_NOTE) for c in cells
    ):
        text = ", ".join(f"{name}={value!r}" for name, value in changed.items())
        note = nbformat.v4.new_markdown_cell(f"{OVERRIDE_NOTE} `{text}`")
        note.metadata["tags"] = ["parameters-override-note"]
        cells.insert(injected + 1, note)
    nbformat.write(nb, notebook)


def page_script(page: str | Path, parameters: Mapping[str, Any] | None = None) -> str:
    """The page's code cells as one Python program, overrides assigned after the parameters cell.

    IPython magics (``%`` and ``!`` lines) have no meaning outside a kernel; pages do not use
    them, and a page that does is refused here with the line that has one. The overrides are
    checked against the parameters cell first (:class:`ParameterError`).
    """
    check_parameters(page, parameters or {})
    nb = read_page(Path(page))
    chunks = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for lineno, line in enumerate(cell.source.splitlines(), start=1):
            if line.lstrip().startswith(("%", "!")):
                raise PageError(f"{page}: IPython magic in a code cell, line {lineno}: {line!r}")
        chunks.append(cell.source)
        if "parameters" in cell.metadata.get("tags", []):
            chunks.append("\n".join(f"{k} = {v!r}" for k, v in (parameters or {}).items()))
    return "\n\n".join(chunks) + "\n"


def run_script(page: str | Path, parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Execute a page as a plain program in this process; returns its global namespace."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    code = compile(page_script(page, parameters), str(page), "exec")
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(page)}
    exec(code, namespace)  # noqa: S102 - the page is this repository's own source
    return namespace


def stage_book(root: Path | None = None, stage: Path | None = None) -> Path:
    """Copy the book's configuration and markdown into ``stage`` (default ``_build/src``),
    and MathJax into its ``_static`` (:func:`audiorepro.book_assets.stage_mathjax`).

    Executed notebooks are added by :func:`execute_pages`. ``lib`` is linked in so pages can
    ``literalinclude`` library code with the same relative paths as in the repository.
    """
    root = root or repo_root()
    stage = stage or root / STAGE_DIR
    stage.mkdir(parents=True, exist_ok=True)
    for name in STAGED_FILES:
        shutil.copy2(root / name, stage / name)
    for path in (root / "book").rglob("*"):
        if path.is_file() and path.suffix in ASSET_SUFFIXES:
            dest = stage / path.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
    link = stage / "lib"
    if not link.exists():
        link.symlink_to(root / "lib", target_is_directory=True)
    config = yaml.safe_load((stage / "_config.yml").read_text()) or {}
    mathjax_path = ((config.get("sphinx") or {}).get("config") or {}).get("mathjax_path")
    if not mathjax_path:
        raise PageError(
            f"{root / '_config.yml'}: sphinx.config.mathjax_path is not set, so the book would "
            "load MathJax from a CDN; set it to mathjax/tex-mml-chtml.js"
        )
    stage_mathjax(stage, mathjax_path)
    return stage


def build_parameters(
    preset: str,
    parameters: Mapping[str, Any] | None = None,
    *,
    root: Path | None = None,
    only: Sequence[str] = (),
) -> dict[Path, dict[str, Any]]:
    """The parameters of each selected page of a build, checked: ``{page: {name: value}}``.

    Each page gets ``preset`` and those of ``parameters`` that it has a field for. A name that
    no selected page has, or a value that does not fit a page's annotation, is a
    :class:`ParameterError`.
    """
    root = root or repo_root()
    given = dict(parameters or {})
    selected = [p for p in book_pages(root) if not only or any(o in str(p) for o in only)]
    fields = {page: page_parameters(root / page) for page in selected}
    known = {name for page_fields in fields.values() for name in page_fields}
    unknown = [name for name in given if name not in known]
    if unknown:
        raise ParameterError(
            f"no selected page has the parameter(s) {', '.join(map(repr, unknown))} "
            f"(the selected pages' parameters: {', '.join(sorted(known))})"
        )
    per_page = {
        page: {"preset": preset, **{k: v for k, v in given.items() if k in fields[page]}}
        for page in selected
    }
    for page in selected:
        validate_parameters(fields[page], per_page[page], str(page))
    return per_page


def write_page_times(path: Path, times: Mapping[str, float]) -> None:
    """Write ``{page: seconds}`` to ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(dict(times), indent=2) + "\n")
    tmp.replace(path)


#: Chapters side by side (``build --jobs N``): every chapter waits for the data chapter (it
#: generates the corpora), chapter 02 for chapter 01's page 02_pretrain (its PaSST teachers are
#: chapter 01's pretrained runs, which that page trains; chapter 02 reads nothing else of chapter
#: 01), and the Reference part, which reads every chapter's ledger rows and page times, for all
#: of them. A need is a chapter or one of its pages (``chapter/page``). Chapters write their runs
#: and derived data to folders of their own; the ledger and the run store take rows and runs
#: from several processes at once.
DATA_CHAPTER = "00_data"
LAST_PART = "reference"
CHAPTER_NEEDS: dict[str, tuple[str, ...]] = {"02_distillation": ("01_retrieval/02_pretrain",)}


def chapter_of(page: Path) -> str:
    """The chapter folder of a page path ``book/<chapter>/<page>.py``."""
    return page.parts[1] if len(page.parts) > 2 else page.parts[0]


def side_by_side_parts(
    pages: Sequence[Path],
) -> tuple[dict[str, list[Path]], dict[str, tuple[str, ...]]]:
    """The pages (book order, without the Reference part) as the parts that run side by side,
    in the order they start when several are ready, with the parts each waits for. A part is a
    chapter's pages; where another chapter needs one page of it (:data:`CHAPTER_NEEDS`), the
    pages after that page are a part of their own, named after its first page, which waits for
    the chapter's first part and starts after every chapter ready beside it (nothing in the
    book but the Reference part waits for it). So chapter 02 starts when chapter 01's
    pretraining page ends, and chapter 01's evaluation pages take the next free core."""
    chapters: dict[str, list[Path]] = {}
    for page in pages:
        chapters.setdefault(chapter_of(page), []).append(page)
    rests: dict[str, str] = {}  # a split chapter -> the name of its later part
    parts: dict[str, list[Path]] = {}
    for chapter, in_order in chapters.items():
        stems = [p.stem for p in in_order]
        cuts = [
            n.partition("/")[2]
            for ns in CHAPTER_NEEDS.values()
            for n in ns
            if n.startswith(f"{chapter}/")
        ]
        at = max((stems.index(c) + 1 for c in cuts if c in stems[:-1]), default=len(stems))
        parts[chapter] = in_order[:at]
        if at < len(stems):
            rests[chapter] = f"{chapter}/{stems[at]}"

    def parts_needed(need: str) -> tuple[str, ...]:
        chapter, _, page = need.partition("/")
        if chapter not in parts:
            return ()
        head = [p.stem for p in parts[chapter]]
        if chapter in rests and not (page and page in head):
            return (chapter, rests[chapter])
        return (chapter,)

    waits: dict[str, tuple[str, ...]] = {}
    for chapter in list(parts):
        needs = () if chapter == DATA_CHAPTER else (DATA_CHAPTER, *CHAPTER_NEEDS.get(chapter, ()))
        found = [part for need in needs for part in parts_needed(need)]
        waits[chapter] = tuple(dict.fromkeys(p for p in found if p != chapter))
    for chapter, name in rests.items():
        waits[name] = (*waits[chapter], chapter)
        parts[name] = chapters[chapter][len(parts[chapter]) :]
    return parts, waits


def execute_pages(
    preset: str = "embedded",
    *,
    root: Path | None = None,
    stage: Path | None = None,
    only: Sequence[str] = (),
    parameters: Mapping[str, Any] | None = None,
    log_output: bool = False,
    jobs: int = 1,
) -> dict[str, float]:
    """Execute every page (or those whose path contains one of ``only``) into the stage.

    ``parameters`` go to each selected page that has the field (``-p seed 2`` reaches every
    page with a ``seed``) and are checked before the first page runs: a name that no selected
    page has, or a value that does not fit a page's annotation, fails the build at once, not an
    hour in. Prints one line per page with its time and writes ``page_times.json`` next to the
    stage (``_build/page_times.json``) after every page (with ``jobs`` > 1, after every
    chapter), so a page late in the book (the Reference part's status page) reads the times of
    the pages before it in this build.

    ``jobs`` > 1 runs up to that many chapters side by side, each in a process of its own, its
    pages in book order (:func:`side_by_side_parts` says which wait for which): a chapter's
    evaluation pages leave a core idle that another chapter's training takes. A page's numbers
    do not depend on it (every run's thread count is part of its configuration). The first
    chapter to fail stops the build once the chapters running beside it have ended.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    root = root or repo_root()
    stage = stage or root / STAGE_DIR
    per_page = build_parameters(preset, parameters, root=root, only=only)
    times: dict[str, float] = {}

    def written(new: Mapping[str, float]) -> dict[str, float]:
        """Add ``new`` page times and write them all, in book order."""
        times.update(new)
        in_order = {str(p): times[str(p)] for p in per_page if str(p) in times}
        write_page_times(stage.parent / PAGE_TIMES, in_order)
        return in_order

    if jobs > 1:
        last = {p: v for p, v in per_page.items() if chapter_of(p) == LAST_PART}
        others = [p for p in per_page if chapter_of(p) != LAST_PART]
        if others:
            parts, waits = side_by_side_parts(others)
            work = {name: {p: per_page[p] for p in in_order} for name, in_order in parts.items()}
            _execute_chapters(work, waits, jobs, preset, root, stage, log_output, written)
    else:
        last = dict(per_page)
    for page, params in last.items():  # here, each page's time written before the next
        written(_execute_in_order({page: params}, preset, root, stage, log_output))
    in_order = written({})
    print(f"[book] executed {len(times)} pages in {sum(times.values()):.1f} s", flush=True)
    return in_order


def _execute_chapters(
    chapters: Mapping[str, Mapping[Path, dict[str, Any]]],
    waits: Mapping[str, tuple[str, ...]],
    jobs: int,
    preset: str,
    root: Path,
    stage: Path,
    log_output: bool,
    written: Callable[[Mapping[str, float]], Any],
) -> None:
    """:func:`execute_pages` with ``jobs`` parts of chapters side by side, one process each
    (:func:`side_by_side_parts`), each started once the parts in ``waits`` have ended."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    pending, done = list(chapters), set()
    failure: BaseException | None = None
    context = multiprocessing.get_context("spawn")  # a fresh process: no copied state
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        running: dict[Any, str] = {}
        while pending or running:
            ready = [c for c in pending if set(waits[c]) <= done] if failure is None else []
            for chapter in ready[: jobs - len(running)]:
                pending.remove(chapter)
                args = (chapters[chapter], preset, root, stage, log_output)
                running[pool.submit(_execute_in_order, *args)] = chapter
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                chapter = running.pop(future)
                try:
                    written(future.result())
                    done.add(chapter)
                except BaseException as err:  # noqa: BLE001 - raised once the others end
                    failure = failure or err
    if failure is not None:
        raise failure


def _execute_in_order(
    pages: Mapping[Path, Mapping[str, Any]],
    preset: str,
    root: Path,
    stage: Path,
    log_output: bool,
) -> dict[str, float]:
    """Execute ``pages`` one after another (a chapter, in a process of its own under
    ``jobs`` > 1); return ``{page: seconds}``."""
    times = {}
    for page, params in pages.items():
        print(f"[book] executing {page} (preset={preset}) ...", flush=True)
        seconds = execute_page(
            root / page,
            stage / page.with_suffix(".ipynb"),
            preset=preset,
            parameters={k: v for k, v in params.items() if k != "preset"},
            log_output=log_output,
        )
        times[str(page)] = round(seconds, 1)
        print(f"[book] {page}: {seconds:.1f} s", flush=True)
    return times


def check_page(page: str | Path) -> Path:
    """The page to run: an existing ``.py`` page source, or a :class:`PageError` saying how to
    list the pages."""
    page = Path(page)
    if not page.is_file() or page.suffix != ".py":
        what = "is not a .py page" if page.is_file() else "no such page"
        raise PageError(
            f"{page}: {what}; `python -m audiorepro.pages list` lists the book's pages "
            "(book/<part>/<page>.py)"
        )
    return page


def check_output(page: str | Path, output: str | Path) -> Path:
    """Where ``pages run`` may write the executed copy of ``page``: a new ``.ipynb``, or a
    notebook an earlier run wrote (papermill's metadata in it). Never a page source, a folder,
    or any other existing file (:class:`PageError` naming it)."""
    output = Path(output)
    if output.is_dir():
        raise PageError(f"{output}: is a folder; give the notebook to write in it (o.ipynb)")
    if output.suffix != ".ipynb":
        source = " (a page source)" if output.suffix == ".py" else ""
        raise PageError(
            f"{output}{source}: the executed copy of {page} is a notebook and is never written "
            "over a page or another file: give a path ending in .ipynb"
        )
    scratch = output.with_name(output.stem + ".source.ipynb")
    for path in (output, scratch):
        if not path.exists():
            continue
        try:
            written = "papermill" in json.loads(path.read_text(encoding="utf-8"))["metadata"]
        except (OSError, ValueError, KeyError, TypeError):
            written = False
        if not written:
            raise PageError(
                f"{path}: exists and is not a notebook that `pages run` wrote (no papermill "
                "metadata), so it is not replaced: give a new path, or move the file away"
            )
    return output


DEBUG = "AUDIOREPRO_DEBUG"
"""Set (``AUDIOREPRO_DEBUG=1``) to see the traceback of an unexpected error."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m audiorepro.pages", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="print the pages in reading order")
    build = sub.add_parser("build", help="stage the book and execute every page into it")
    build.add_argument("--preset", default="embedded", choices=("smoke", "embedded", "paper"))
    build.add_argument("--only", action="append", default=[], help="substring of page paths")
    build.add_argument("--log-output", action="store_true", help="stream cell output")
    build.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="chapters (or parts of one, where another chapter needs one of its pages) executed "
        "side by side, one process each (make book: 2)",
    )
    build.add_argument(
        "-p",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="a parameter for every selected page",
    )
    run = sub.add_parser("run", help="execute one page into one notebook")
    run.add_argument("page")
    run.add_argument("output")
    run.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    script = sub.add_parser("script", help="run a page as a plain program (accelerate launch)")
    script.add_argument("page")
    script.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    args = parser.parse_args(argv)
    try:
        if args.cmd == "list":
            print("\n".join(str(p) for p in book_pages()))
        elif args.cmd == "build":
            params = {name: yaml.safe_load(value) for name, value in args.p}
            # each value is read by the annotation of the selected pages that have the field
            for page in book_pages() if args.p else []:
                if not args.only or any(o in str(page) for o in args.only):
                    fields = page_parameters(repo_root() / page)
                    pairs = [pair for pair in args.p if pair[0] in fields]
                    params.update(parse_parameters(repo_root() / page, pairs))
            build_parameters(args.preset, params, only=args.only)  # before anything is staged
            stage_book()
            execute_pages(
                args.preset,
                only=args.only,
                parameters=params,
                log_output=args.log_output,
                jobs=args.jobs,
            )
        elif args.cmd == "script":
            check_page(args.page)
            run_script(args.page, parse_parameters(args.page, args.p))
        else:
            check_output(check_page(args.page), args.output)
            params = parse_parameters(args.page, args.p)
            preset = params.pop("preset", "embedded")
            seconds = execute_page(args.page, args.output, preset=preset, parameters=params)
            print(f"{args.page}: {seconds:.1f} s -> {args.output}")
    except (PageError, ParameterError, BookAssetError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - the top-level guard: one paragraph, no traceback
        if os.environ.get(DEBUG) or args.cmd == "script":  # a page's own error: its traceback
            raise
        print(
            f"error: {type(err).__name__}: {err}. Run again with {DEBUG}=1 to see where it "
            "came from",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
