"""The sizes of the generated corpora per preset, from YAML like every other preset.

``presets/smoke.yaml`` and ``presets/embedded.yaml`` (beside this module) hold one section per
corpus, each read into its configuration dataclass:

- ``zerospeech``: :class:`~audiorepro.data.embedded.zerospeech_corpus.ZeroSpeechCorpusConfig`;
- ``word_corpus``: :class:`~audiorepro.data.embedded.word_corpus.WordCorpusConfig`;
- ``audio_caption``: :class:`~audiorepro.data.embedded.audio_caption.AudioCaptionCorpusConfig`.

Fields a section leaves out take the dataclass defaults. ``paper`` has no file: it reads the real
corpora (:mod:`audiorepro.data.recipes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from audiorepro.config import ConfigError, from_dict, load_yaml, merge

__all__ = ["CORPUS_PRESETS", "PRESET_DIR", "corpus_preset"]

C = TypeVar("C")

PRESET_DIR = Path(__file__).with_name("presets")
"""The folder of the preset files (shipped with the package)."""

CORPUS_PRESETS: tuple[str, ...] = ("smoke", "embedded")
"""The presets that generate corpora (``paper`` reads the real ones)."""


def corpus_preset(
    cls: type[C], preset: str, section: str, overrides: Mapping[str, Any] | None = None
) -> C:
    """Section ``section`` of ``presets/<preset>.yaml`` as ``cls``, with field overrides.

    The caller checks ``preset`` against :data:`CORPUS_PRESETS` first (its error message says
    where the paper preset's corpus comes from).

    Raises:
        ConfigError: no such section, an unknown key (named, with the valid ones) or a bad value.
    """
    path = PRESET_DIR / f"{preset}.yaml"
    values = load_yaml(path)
    if not isinstance(values.get(section), Mapping):
        raise ConfigError(f"{path}: expected a mapping {section!r} of {cls.__name__} fields")
    return from_dict(cls, merge(values[section], overrides or {}), source=f"{path}: {section}")
