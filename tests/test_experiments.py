"""The four chapter modules share one shape, and every preset of every chapter loads."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import types
from pathlib import Path

import pytest

from audiorepro.config import PRESETS, ConfigError, CorpusSpec

CHAPTERS = ("retrieval", "distillation", "zerospeech", "awe")
SHAPE = (
    "CHAPTER",
    "PRESETS",
    "Config",
    "load_config",
    "load_data",
    "evaluate",
    "PAPER",
    "findings",
)


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_chapter_module_has_the_same_public_shape(name):
    module = importlib.import_module(f"audiorepro.experiments.{name}")
    missing = [attr for attr in SHAPE if not hasattr(module, attr)]
    assert not missing, f"experiments.{name} lacks {missing}"
    assert module.PRESETS.is_dir() and module.PRESETS.name == "presets"
    assert module.PAPER, f"experiments.{name}.PAPER is empty"


@pytest.mark.parametrize("name", CHAPTERS)
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_loads_into_a_composed_config(name, preset):
    module = importlib.import_module(f"audiorepro.experiments.{name}")
    config = module.load_config(preset)
    assert dataclasses.is_dataclass(config)
    sections = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    corpora = [v for v in sections.values() if isinstance(v, CorpusSpec)]
    nested = [v for v in sections.values() if dataclasses.is_dataclass(v)]
    if name == "distillation":  # chapter 02 nests chapter 01's whole (composed) config
        corpora, nested = (
            [config.retrieval.corpus],
            [config.retrieval.model, config.retrieval.train],
        )
    assert len(corpora) == 1 and len(nested) >= 2, f"{name}/{preset}: not composed"
    assert corpora[0].kind == preset if preset != "paper" else corpora[0].root


@pytest.mark.parametrize("name", CHAPTERS)
def test_an_unknown_override_names_the_field(name):
    module = importlib.import_module(f"audiorepro.experiments.{name}")
    with pytest.raises(ConfigError, match="unknown key 'no_such_field'"):
        module.load_config("smoke", {"no_such_field": 1})


# ----------------------------------------------------------------------------- package shape

REPO = Path(__file__).resolve().parents[1]
CORE_FILES = ("config", "data", "train", "evaluate", "plan", "findings")


def page_names(chapter: str) -> set[str]:
    """Every attribute the book's pages take from ``chapter``'s package (read with ``ast``: a
    page binds it with ``from audiorepro.experiments import <chapter> [as alias]``), and every
    name they import from it directly."""
    used: set[str] = set()
    for page in sorted((REPO / "book").rglob("*.py")):
        tree = ast.parse(page.read_text(encoding="utf-8"))
        bound = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "audiorepro.experiments":
                bound |= {a.asname or a.name for a in node.names if a.name == chapter}
            if isinstance(node, ast.ImportFrom) and node.module == (
                f"audiorepro.experiments.{chapter}"
            ):
                used |= {a.name for a in node.names}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
            ):
                used.add(node.attr)
    return used


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_chapter_is_a_package_of_one_shape(name):
    """config -> data -> train -> evaluate -> plan -> findings, in that order among its
    ``FILES``; every file documented; ``__init__`` hands on the shape and what the pages use,
    and no more."""
    module = importlib.import_module(f"audiorepro.experiments.{name}")
    assert Path(module.__file__).name == "__init__.py", f"experiments.{name} is not a package"
    assert [f for f in module.FILES if f in CORE_FILES] == list(CORE_FILES)
    for file in module.FILES:
        sub = importlib.import_module(f"audiorepro.experiments.{name}.{file}")
        doc = (sub.__doc__ or "").strip()
        assert doc, f"experiments/{name}/{file}.py has no module docstring"
        assert doc.count(". ") + doc.count(".\n") <= 3, f"{name}/{file}: docstring too long"
    handed_on = set(module.__all__)
    missing = page_names(name) - handed_on
    assert not missing, f"the pages use {sorted(missing)} that experiments.{name} lacks"
    extra = handed_on - page_names(name) - set(SHAPE) - {"FILES"}
    assert not extra, f"experiments.{name} hands on {sorted(extra)} that no page uses"
    for public in handed_on - {"FILES", "CHAPTER", "PRESETS", "PAPER"}:
        obj = getattr(module, public)
        if callable(obj) and not isinstance(obj, types.ModuleType):
            assert (obj.__doc__ or "").strip(), f"experiments.{name}.{public} has no docstring"
