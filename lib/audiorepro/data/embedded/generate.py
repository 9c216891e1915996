"""One entry point for all embedded corpora, used by the CLI and by the pages.

``ensure_corpora(preset, seed)`` generates what is missing under
``<data dir>/embedded/<preset>-seed<seed>/`` and reuses what a previous run completed (each
generator writes to a temporary folder, renames it into place and leaves a ``.complete``
marker, so a partial corpus is never taken for a finished one)::

    python -m audiorepro.data.embedded generate --preset smoke --seed 0 [--out DIR] [--only words]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.signal import resample_poly

from audiorepro.data.embedded.audio_caption import generate_audio_caption_corpora
from audiorepro.data.embedded.corpus_presets import CORPUS_PRESETS
from audiorepro.data.embedded.espeak import english_voices, synthesize
from audiorepro.data.embedded.word_corpus import generate_word_corpus
from audiorepro.data.embedded.zerospeech_corpus import generate_zerospeech_corpus
from audiorepro.paths import data_dir

CORPORA = ("zerospeech", "words", "audio_caption")
PRESETS = CORPUS_PRESETS


def corpora_root(preset: str, seed: int, out: str | Path | None = None) -> Path:
    """``<out or data dir>/embedded/<preset>-seed<seed>``."""
    return Path(out) if out is not None else data_dir() / "embedded" / f"{preset}-seed{seed}"


def espeak_phrase_speech(
    seed: int,
) -> Callable[[str, np.random.Generator], tuple[np.ndarray, str]]:
    """A ``speech(text, rng)`` source for the scenes: eSpeak voices, resampled 16 → 32 kHz."""
    voices = english_voices(34, seed=seed)

    def speech(text: str, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        voice = voices[int(rng.integers(len(voices)))]
        syn = synthesize(text, voice)
        return resample_poly(syn.wav, 2, 1).astype(np.float32), text

    return speech


def ensure_corpora(
    preset: str = "embedded",
    seed: int = 0,
    *,
    out: str | Path | None = None,
    only: Sequence[str] = CORPORA,
    verbose: bool = True,
) -> dict[str, Any]:
    """Generate (or reuse) the named corpora; returns ``{name: path}`` plus ``"timings"``."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
    unknown = [c for c in only if c not in CORPORA]
    if unknown:
        raise ValueError(f"unknown corpus {unknown}; valid corpora: {', '.join(CORPORA)}")
    root = corpora_root(preset, seed, out)
    root.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Any] = {"timings": {}}
    for name in only:
        start = time.perf_counter()
        target = root / name
        if name == "zerospeech":
            generate_zerospeech_corpus(target, preset, seed)
        elif name == "words":
            generate_word_corpus(target, preset, seed)
        else:
            generate_audio_caption_corpora(target, preset, seed, speech=espeak_phrase_speech(seed))
        seconds = time.perf_counter() - start
        paths[name] = target
        paths["timings"][name] = round(seconds, 1)
        if verbose:
            print(f"[embedded] {name}: {target} ({seconds:.1f} s)", flush=True)
    return paths
