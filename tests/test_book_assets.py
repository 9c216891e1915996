"""The built book reads offline: MathJax comes from the book, and nothing from another host."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from audiorepro import book_assets
from audiorepro.book_assets import BookAssetError, remote_resources, stage_mathjax
from audiorepro.pages import PageError, stage_book
from conftest import REPO, subprocess_timeout

JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"

PAGE = """# Formulas

Inline $\\mathcal{L} = -\\log \\frac{e^{s_{ii}/\\tau}}{\\sum_j e^{s_{ij}/\\tau}}$ and a display:

$$
\\mathrm{AP} = \\sum_k P(k)\\,\\Delta r(k)
$$
"""


def test_config_points_mathjax_at_a_local_copy():
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    path = config["sphinx"]["config"]["mathjax_path"]
    assert not book_assets.is_remote(path)
    assert (book_assets.mathjax_source() / Path(path).name).is_file()


@pytest.mark.slow
def test_built_book_loads_nothing_from_another_host(tmp_path):
    """Stage a one-page book with the repository's _config.yml, build it with Jupyter Book as
    ``make html`` does, and scan every page."""
    root = tmp_path / "repo"
    (root / "book").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "_config.yml").write_text((REPO / "_config.yml").read_text())
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\n")
    (root / "book" / "intro.md").write_text(PAGE)
    stage = stage_book(root, tmp_path / "src")
    build = subprocess.run(
        [str(JUPYTER_BOOK), "build", str(stage), "--path-output", str(tmp_path), "-W", "-n"],
        capture_output=True,
        text=True,
        timeout=subprocess_timeout(300),
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    html = tmp_path / "_build" / "html"
    index = (html / "book" / "intro.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"?]*)', index)
    # MathJax's entry script only; it loads its components itself, when a page needs them
    assert [s for s in scripts if "mathjax" in s] == ["../_static/mathjax/tex-mml-chtml.js"]
    assert (html / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()
    assert list((html / "_static" / "mathjax" / "output" / "chtml" / "fonts").rglob("*.woff"))
    assert remote_resources(html) == []
    assert book_assets.main([str(html)]) == 0


def test_scanner_finds_scripts_stylesheets_and_fonts_from_other_hosts(tmp_path, capsys):
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "theme.css").write_text(
        '@import "base.css";\nbody { background: url(img/bg.png); }\n'
    )
    (tmp_path / "_static" / "base.css").write_text(
        "@font-face { src: url('https://fonts.example.org/a.woff2') format('woff2'); }\n"
    )
    (tmp_path / "index.html").write_text(
        "<html><head>"
        '<script src="_static/local.js"></script>'
        '<script defer src="https://cdn.example.org/mathjax.js"></script>'
        '<link rel="stylesheet" href="_static/theme.css">'
        '<link rel="stylesheet" href="//cdn.example.org/x.css">'
        '<link rel="search" href="https://example.org/search">'
        "<style>p { background: url(http://example.org/p.png) }</style>"
        '</head><body><a href="https://example.org">a link is not a load</a>'
        '<img src="data:image/png;base64,AAAA"><img src="https://example.org/i.png">'
        "<p>url(https://example.org/not-css) in text</p></body></html>"
    )
    assert remote_resources(tmp_path) == [
        "index.html: <script src> https://cdn.example.org/mathjax.js",
        "index.html -> _static/base.css: https://fonts.example.org/a.woff2",
        "index.html: <link rel=stylesheet> //cdn.example.org/x.css",
        "index.html: <img src> https://example.org/i.png",
        "index.html: <style> http://example.org/p.png",
    ]
    assert book_assets.main([str(tmp_path)]) == 1
    assert "loads from other hosts" in capsys.readouterr().err
    assert book_assets.main([str(tmp_path / "missing")]) == 1


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js", "is a URL"),
        ("tex-mml-chtml.js", r"expected mathjax/<entry script>.js"),
        ("mathjax/tex-nothing.js", r"ships no tex-nothing.js \(it ships .*tex-mml-chtml.js"),
    ],
)
def test_stage_mathjax_refuses_paths_it_cannot_serve(tmp_path, path, message):
    with pytest.raises(BookAssetError, match=message):
        stage_mathjax(tmp_path, path)


def test_stage_book_refuses_a_config_without_local_mathjax(tmp_path):
    root = tmp_path / "repo"
    (root / "book").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "_config.yml").write_text("title: t\nsphinx:\n  config:\n    nb_merge_streams: true\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\n")
    with pytest.raises(PageError, match=r"_config.yml: sphinx.config.mathjax_path is not set"):
        stage_book(root, tmp_path / "src")
