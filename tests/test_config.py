from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass

import pytest

from audiorepro.config import (
    ConfigError,
    config_help,
    field,
    from_dict,
    load_preset,
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
