from __future__ import annotations

import dataclasses
from dataclasses import FrozenInstanceError, dataclass

import pytest

from audiorepro.config import (
    ConfigError,
    CorpusSpec,
    config_help,
    field,
    from_dict,
    load_preset,
    merge,
    preset_loader,
    replace,
    to_dict,
)


@dataclass(frozen=True)
class Toy:
    """A configuration used only by these tests."""

    num_epochs: int = field(3, help="passes over the training set")
    lr: float = field(1e-3, help="peak learning rate")
    widths: tuple[int, ...] = field((8, 16), help="hidden widths")
    name: str | None = field(None, help="optional run name")


def write_presets(tmp_path, **presets):
    for name, text in presets.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path


def test_load_preset_applies_yaml_then_overrides(tmp_path):
    d = write_presets(tmp_path, smoke="num_epochs: 1\nlr: 1e-2\nwidths: [4, 4, 4]\n")
    cfg = load_preset(Toy, d, "smoke", lr=0.5, name=None)
    assert cfg == Toy(num_epochs=1, lr=0.5, widths=(4, 4, 4), name=None)
    assert isinstance(cfg.lr, float) and isinstance(cfg.widths, tuple)
    with pytest.raises(FrozenInstanceError):
        cfg.lr = 1.0  # type: ignore[misc]


def test_yaml_scientific_notation_string_becomes_float(tmp_path):
    # PyYAML reads "1e-3" (no dot) as a string; a float field must still get a float.
    d = write_presets(tmp_path, embedded="lr: 1e-3\n")
    assert load_preset(Toy, d, "embedded").lr == pytest.approx(1e-3)


def test_unknown_key_names_key_and_lists_valid_ones(tmp_path):
    d = write_presets(tmp_path, smoke="num_epoch: 2\n")
    with pytest.raises(ConfigError) as err:
        load_preset(Toy, d, "smoke")
    msg = str(err.value)
    assert "'num_epoch'" in msg and "did you mean 'num_epochs'" in msg
    assert "valid keys: num_epochs, lr, widths, name" in msg
    assert "smoke.yaml" in msg


def test_unknown_override_is_an_error(tmp_path):
    d = write_presets(tmp_path, smoke="")
    with pytest.raises(ConfigError, match="'batchsize'"):
        load_preset(Toy, d, "smoke", batchsize=4)


def test_unknown_preset_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="unknown preset 'big'.*smoke, embedded, paper"):
        load_preset(Toy, tmp_path, "big")
    with pytest.raises(ConfigError, match="paper.yaml: preset file not found"):
        load_preset(Toy, tmp_path, "paper")


def test_wrong_type_names_field(tmp_path):
    d = write_presets(tmp_path, smoke="num_epochs: three\n")
    with pytest.raises(ConfigError, match="field 'num_epochs': expected int, got str"):
        load_preset(Toy, d, "smoke")


def test_non_mapping_yaml(tmp_path):
    d = write_presets(tmp_path, smoke="- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_preset(Toy, d, "smoke")


def test_help_and_to_dict():
    assert config_help(Toy)["lr"] == "peak learning rate"
    assert to_dict(from_dict(Toy, {"widths": [1, 2]})) == {
        "num_epochs": 3,
        "lr": 1e-3,
        "widths": [1, 2],
        "name": None,
    }


# ------------------------------------------------------------------------------ composed configs


@dataclasses.dataclass(frozen=True)
class _Model:
    width: int = field(8, help="width")
    depth: int = field(2, help="depth")


@dataclasses.dataclass(frozen=True)
class _Composed:
    corpus: CorpusSpec = field(CorpusSpec(), help="corpus")
    model: _Model = field(_Model(), help="model")
    lr: float = field(1e-3, help="lr")


def test_nested_sections_load_from_yaml_and_merge_overrides(tmp_path):
    (tmp_path / "smoke.yaml").write_text(
        "corpus: {kind: smoke, seed: 3}\nmodel: {width: 4, depth: 1}\nlr: 0.01\n"
    )
    cfg = load_preset(_Composed, tmp_path, "smoke", model={"depth": 5})
    assert cfg == _Composed(CorpusSpec("smoke", None, 3), _Model(4, 5), 0.01)
    assert to_dict(cfg) == {
        "corpus": {"kind": "smoke", "root": None, "seed": 3},
        "model": {"width": 4, "depth": 5},
        "lr": 0.01,
    }
    assert replace(cfg, **{"model.width": 16, "lr": 1}).model == _Model(16, 5)
    assert merge({"a": {"b": 1, "c": 2}}, {"a.c": 3, "d": 4}) == {"a": {"b": 1, "c": 3}, "d": 4}


def test_unknown_nested_key_and_wrong_nested_type_name_the_section(tmp_path):
    (tmp_path / "smoke.yaml").write_text("model: {widht: 4}\n")
    with pytest.raises(ConfigError, match=r"field 'model': unknown key 'widht' \(did you mean"):
        load_preset(_Composed, tmp_path, "smoke")
    (tmp_path / "smoke.yaml").write_text("model: 4\n")
    with pytest.raises(ConfigError, match="field 'model': expected a mapping of _Model fields"):
        load_preset(_Composed, tmp_path, "smoke")


def test_corpus_spec_kinds_roots_and_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIOREPRO_DATA", str(tmp_path))
    with pytest.raises(ConfigError, match="corpus.kind: expected one of smoke, embedded, paper"):
        CorpusSpec(kind="tiny")
    with pytest.raises(ConfigError, match="corpus.root: a paper corpus needs"):
        CorpusSpec(kind="paper")
    assert CorpusSpec().resolve(tmp_path / "gen") == tmp_path / "gen"
    assert CorpusSpec("embedded", "mine").resolve(tmp_path / "gen") == tmp_path / "mine"
    assert CorpusSpec("paper", "/abs/zr19").resolve(tmp_path / "gen").as_posix() == "/abs/zr19"


@dataclasses.dataclass(frozen=True)
class _Train:
    num_epochs: int = field(3, help="epochs")
    max_steps: int | None = field(None, help="steps")


@dataclasses.dataclass(frozen=True)
class _Steps:
    train: _Train = field(_Train(), help="training")
    lr: float = field(1e-3, help="lr")


def test_preset_loader_is_every_chapters_load_config(tmp_path):
    write_presets(tmp_path, smoke="train: {num_epochs: 2, max_steps: 5}\nlr: 0.5\n")
    plain = preset_loader(_Steps, tmp_path)
    assert plain("smoke") == _Steps(_Train(2, 5), 0.5)
    # A mapping and keywords merge; dotted names set nested fields; None keeps the preset's.
    got = plain("smoke", {"train.max_steps": 9}, lr=None)
    assert got == _Steps(_Train(2, 9), 0.5)
    # With the section in steps_alone, max_steps alone is the run's length (epochs lifted).
    assert preset_loader(_Steps, tmp_path, ("train",))("smoke", {"train.max_steps": 9}) == (
        _Steps(_Train(9, 9), 0.5)
    )
    with pytest.raises(ConfigError, match="unknown key 'nope'"):
        plain("smoke", nope=1)
    assert "_Steps" in plain.__doc__
