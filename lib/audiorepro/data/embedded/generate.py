"""One entry point for all embedded corpora, used by the CLI and by the pages.

``ensure_corpora(preset, seed)`` generates what is missing under
``<data dir>/embedded/<preset>-seed<seed>/`` and reuses what a previous run completed (each
generator writes to a temporary folder, renames it into place and leaves a ``.complete``
marker, so a partial corpus is never taken for a finished one)::

    python -m audiorepro.data.embedded generate --preset smoke --seed 0 [--out DIR] [--only words]
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from scipy.signal import resample_poly

from audiorepro.data.embedded.atomic import MARKER
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


def _generate(name: str, target: Path, preset: str, seed: int) -> float:
    """Generate (or reuse) one corpus at ``target``; returns the seconds it took."""
    start = time.perf_counter()
    if name == "zerospeech":
        generate_zerospeech_corpus(target, preset, seed)
    elif name == "words":
        generate_word_corpus(target, preset, seed)
    else:
        generate_audio_caption_corpora(target, preset, seed, speech=espeak_phrase_speech(seed))
    return time.perf_counter() - start


def ensure_corpora(
    preset: str = "embedded",
    seed: int = 0,
    *,
    out: str | Path | None = None,
    only: Sequence[str] = CORPORA,
    verbose: bool = True,
    workers: int | None = None,
) -> dict[str, Any]:
    """Generate (or reuse) the named corpora; returns ``{name: path}`` plus ``"timings"``.

    Corpora still to generate are written by up to ``workers`` processes at once (None: one
    per core, at most one per corpus): each corpus depends only on the preset and the seed, so
    the files are the same bytes as one after the other."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
    unknown = [c for c in only if c not in CORPORA]
    if unknown:
        raise ValueError(f"unknown corpus {unknown}; valid corpora: {', '.join(CORPORA)}")
    root = corpora_root(preset, seed, out)
    root.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys(only))
    # the largest first, so that the others fill the second process meanwhile
    missing = sorted(
        (n for n in names if not (root / n / MARKER).is_file()),
        key=lambda n: n != "audio_caption",
    )
    if workers is None:
        workers = min(os.cpu_count() or 1, len(missing))
    seconds: dict[str, float] = {}
    if workers > 1 and len(missing) > 1:
        context = multiprocessing.get_context("spawn")  # no fork of a process holding threads
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {n: pool.submit(_generate, n, root / n, preset, seed) for n in missing}
            seconds = {n: f.result() for n, f in futures.items()}
    paths: dict[str, Any] = {"timings": {}}
    for name in names:
        if name not in seconds:
            seconds[name] = _generate(name, root / name, preset, seed)
        paths[name] = root / name
        paths["timings"][name] = round(seconds[name], 1)
        if verbose:
            print(f"[embedded] {name}: {root / name} ({seconds[name]:.1f} s)", flush=True)
    return paths
