"""The four chapter modules share one shape, and every preset of every chapter loads."""

from __future__ import annotations

import dataclasses
import importlib

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
