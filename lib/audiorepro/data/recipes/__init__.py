"""Recipes: read a downloaded audio-caption corpus in its real format and write manifests.

Each recipe reads the files exactly as the corpus is distributed (the formats are listed in
``shared/reference/retrieval.md``, "ClothoV2/AudioCaps/WavCaps loading") and writes lhotse
manifests ``<split>_recordings.jsonl.gz`` and ``<split>_supervisions.jsonl.gz``, one
supervision per caption spanning the whole recording:

- :func:`prepare_clotho`: ClothoV2 (``clotho_captions_{split}.csv`` + metadata + audio).
- :func:`prepare_audiocaps`: AudioCaps (``dataset/{split}.csv`` + AudioSet audio ``Y<id>``).
- :func:`prepare_wavcaps`: WavCaps (``json_files/<Source>/*_final.json`` + audio), minus the
  DCASE list of FreeSound ids that overlap the Clotho evaluation split.
- :func:`prepare_audio_caption_manifests`: all three on a folder made by
  :func:`audiorepro.data.embedded.audio_caption.generate_audio_caption_corpora`.
- :mod:`audiorepro.data.recipes.zerospeech`: ZeroSpeech 2019 (its own module).
- :mod:`audiorepro.data.recipes.common`: :class:`RecipeError` and the helpers the recipes share
  (CSV reading, recordings from audio headers, caption supervisions).

The embedded corpora are written in the same formats, so the code that prepares the real
corpora at paper scale is the code the default book runs. Sources in the manifests are
relative to the corpus folder (``--root`` for ``python -m audiorepro.data check``).

Every problem with the input raises :class:`RecipeError` naming the file (and line): a CSV
header that is not the expected one (both are shown), an empty caption, a listed audio file
that is missing, audio that cannot be read.
"""

from __future__ import annotations

import os
from pathlib import Path

from audiorepro.data.recipes.audiocaps import AUDIOCAPS_SPLITS, prepare_audiocaps
from audiorepro.data.recipes.clotho import CLOTHO_SPLITS, prepare_clotho
from audiorepro.data.recipes.common import (
    RecipeError,
    caption_supervision,
    check_splits,
    find_audio,
    read_csv,
    recording_from_audio,
)
from audiorepro.data.recipes.wavcaps import WAVCAPS_SOURCES, prepare_wavcaps


def prepare_audio_caption_manifests(
    corpora_dir: str | os.PathLike[str], manifest_dir: str | os.PathLike[str]
) -> dict[str, dict[str, dict[str, int]]]:
    """Run the three recipes on a folder holding ``clotho/``, ``audiocaps/`` and ``wavcaps/``.

    Manifests go to ``manifest_dir/{clotho,audiocaps,wavcaps}``; sources are relative to each
    corpus folder (check with ``--root corpora_dir/<corpus>``). Returns the recipes' counts by
    corpus.
    """
    corpora_dir, manifest_dir = Path(corpora_dir), Path(manifest_dir)
    return {
        "clotho": prepare_clotho(corpora_dir / "clotho", manifest_dir / "clotho"),
        "audiocaps": prepare_audiocaps(corpora_dir / "audiocaps", manifest_dir / "audiocaps"),
        "wavcaps": prepare_wavcaps(corpora_dir / "wavcaps", manifest_dir / "wavcaps"),
    }


__all__ = [
    "AUDIOCAPS_SPLITS",
    "CLOTHO_SPLITS",
    "WAVCAPS_SOURCES",
    "RecipeError",
    "caption_supervision",
    "check_splits",
    "find_audio",
    "prepare_audio_caption_manifests",
    "prepare_audiocaps",
    "prepare_clotho",
    "prepare_wavcaps",
    "read_csv",
    "recording_from_audio",
]
