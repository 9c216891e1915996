"""The built book reads offline: MathJax is served from the book, and a check proves nothing
else is loaded from another host.

Sphinx loads MathJax from a CDN unless ``mathjax_path`` is a path under the book's ``_static``.
The MathJax 3 files come from the ``sphinx-mathjax-offline`` package (the ``book`` extra of
``pyproject.toml``); :func:`stage_mathjax` copies them into ``<stage>/_mathjax/mathjax`` when the
book is staged. ``_config.yml`` lists ``_mathjax`` in ``sphinx.config.html_static_path``, so
Sphinx copies it into the built book's ``_static``, and points ``mathjax_path`` at the copy. Not
``<stage>/_static`` itself: Jupyter Book adds every ``.js`` file under a ``_static`` folder of
the source to every page, which would load all of MathJax's components eagerly.

:func:`remote_resources` lists every script, stylesheet, font, image or frame a built page loads
from another host, following the local stylesheets it links (their ``@import`` and ``url()``)::

    python -m audiorepro.book_assets _build/html     # exit status 1 and a list when any
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import sys
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

#: The distribution (and top-level folder) that ships MathJax's files, MathJax 3.2.2.
MATHJAX_PACKAGE = "sphinx-mathjax-offline"
#: Folder under ``_static`` that the copy goes to; ``mathjax_path`` must start with it.
MATHJAX_DIR = "mathjax"
#: The staged folder (listed in ``html_static_path``) whose content Sphinx copies to ``_static``.
STATIC_DIR = "_mathjax"


class BookAssetError(RuntimeError):
    """MathJax cannot be staged as configured; the message names the file and the setting."""


def mathjax_source() -> Path:
    """The installed folder of MathJax files (``.../sphinx-mathjax-offline/static/mathjax``)."""
    spec = importlib.util.find_spec(MATHJAX_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        candidate = Path(folder) / "static" / "mathjax"
        if candidate.is_dir():
            return candidate
    raise BookAssetError(
        f"MathJax files not found: the package {MATHJAX_PACKAGE!r} is not installed "
        "(it is in the book extra: pip install -e '.[book]')"
    )


def stage_mathjax(stage: Path, mathjax_path: str) -> Path:
    """Copy the MathJax entry script ``mathjax_path`` and the components it loads into
    ``stage/_mathjax`` (:data:`STATIC_DIR`); returns the entry script's copy.

    ``mathjax_path`` is ``_config.yml``'s ``sphinx.config.mathjax_path``, e.g.
    ``mathjax/tex-mml-chtml.js`` (relative to ``_static``). A URL, a path outside
    ``mathjax/`` or an entry script MathJax does not ship is a :class:`BookAssetError`.
    The other combined entry scripts are left out; every component folder is copied, since
    the entry script loads TeX extensions, fonts and the accessibility tools from them on demand.
    """
    where = f"{stage / '_config.yml'}: sphinx.config.mathjax_path"
    if "://" in mathjax_path or mathjax_path.startswith("//"):
        raise BookAssetError(f"{where} is a URL ({mathjax_path}); the book would need a network")
    parts = Path(mathjax_path).parts
    if len(parts) != 2 or parts[0] != MATHJAX_DIR:
        raise BookAssetError(
            f"{where} = {mathjax_path!r}; expected {MATHJAX_DIR}/<entry script>.js"
        )
    source = mathjax_source()
    entry = source / parts[1]
    if not entry.is_file():
        shipped = sorted(p.name for p in source.glob("*.js"))
        raise BookAssetError(
            f"{where} = {mathjax_path!r}: {MATHJAX_PACKAGE} ships no {parts[1]} "
            f"(it ships {', '.join(shipped)})"
        )
    dest = stage / STATIC_DIR / MATHJAX_DIR
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(entry, dest / entry.name)
    for folder in sorted(p for p in source.iterdir() if p.is_dir()):
        shutil.copytree(folder, dest / folder.name, dirs_exist_ok=True)
    license_file = source / "LICENSE"
    if license_file.is_file():
        shutil.copy2(license_file, dest / "LICENSE")
    return dest / entry.name


def is_remote(url: str) -> bool:
    """Whether a reference leaves the book: a scheme with a host (``https://``, ``//host``)."""
    parts = urlsplit(url.strip())
    return bool(parts.netloc) or parts.scheme not in ("", "data", "file", "about", "blob")


#: ``<tag attribute>`` pairs that the browser fetches while loading a page (links only for
#: the ``rel`` values below); ``<a href>`` is navigation and is not fetched.
LOADING = {
    ("script", "src"),
    ("img", "src"),
    ("iframe", "src"),
    ("source", "src"),
    ("audio", "src"),
    ("video", "src"),
    ("embed", "src"),
    ("object", "data"),
}
LINK_RELS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut", "prefetch", "manifest"}
CSS_REFERENCE = re.compile(r"""@import\s+(?:url\()?\s*['"]?([^'")\s;]+)|url\(\s*['"]?([^'")]+)""")


class _Loads(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []  # (what, url)
        self.styles: list[str] = []  # <style> elements and style attributes
        self.in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.in_style = tag == "style"
        if tag == "link" and set(values.get("rel", "").lower().split()) & LINK_RELS:
            self.found.append((f"<link rel={values['rel']}>", values.get("href", "")))
        for name, attr in LOADING:
            if tag == name and values.get(attr):
                self.found.append((f"<{tag} {attr}>", values[attr]))
        if "style" in values:
            self.styles.append(values["style"])

    def handle_endtag(self, tag: str) -> None:
        self.in_style = False

    def handle_data(self, data: str) -> None:
        if self.in_style:
            self.styles.append(data)


def _css_references(text: str) -> list[str]:
    return [a or b for a, b in CSS_REFERENCE.findall(text)]


def remote_resources(html_dir: str | Path) -> list[str]:
    """Every resource a page under ``html_dir`` loads from another host, one line each:
    ``page: <script src> https://...`` (stylesheets: ``page -> style.css: url() https://...``).
    """
    root = Path(html_dir)
    if not root.is_dir():
        raise BookAssetError(f"{root}: no built book here (run make html first)")
    problems: list[str] = []
    seen_css: set[Path] = set()

    def check_css(css: Path, via: str) -> None:
        if css in seen_css or not css.is_file():
            return
        seen_css.add(css)
        for ref in _css_references(css.read_text(encoding="utf-8", errors="replace")):
            if is_remote(ref):
                problems.append(f"{via} -> {css.relative_to(root)}: {ref}")
            elif not ref.startswith(("data:", "#")):
                target = (css.parent / unquote(urlsplit(ref).path)).resolve()
                if target.suffix == ".css":
                    check_css(target, via)

    for page in sorted(root.rglob("*.html")):
        parser = _Loads()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        name = str(page.relative_to(root))
        for what, url in parser.found:
            if is_remote(url):
                problems.append(f"{name}: {what} {url}")
            elif what.startswith("<link") and urlsplit(url).path.endswith(".css"):
                check_css((page.parent / unquote(urlsplit(url).path)).resolve(), name)
        for style in parser.styles:
            problems += [f"{name}: <style> {u}" for u in _css_references(style) if is_remote(u)]
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: exit 1 and list what a built book loads from other hosts."""
    parser = argparse.ArgumentParser(
        prog="python -m audiorepro.book_assets", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("html_dir", help="the built book, e.g. _build/html")
    args = parser.parse_args(argv)
    try:
        problems = remote_resources(args.html_dir)
    except BookAssetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if problems:
        print(f"error: the book in {args.html_dir} loads from other hosts:", file=sys.stderr)
        print("\n".join(f"  {p}" for p in problems), file=sys.stderr)
        return 1
    pages = sum(1 for _ in Path(args.html_dir).rglob("*.html"))
    print(f"{args.html_dir}: {pages} pages, nothing loaded from another host")
    return 0


if __name__ == "__main__":
    sys.exit(main())
