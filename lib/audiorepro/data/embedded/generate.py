"""One entry point for all embedded corpora, used by the CLI and by the pages.

``ensure_corpora(preset, seed)`` generates what is missing under
``<data dir>/embedded/<preset>-seed<seed>/`` and reuses what a previous run completed (each
generator writes to a temporary folder, renames it into place and leaves a ``.complete``
marker, so a partial corpus is never taken for a finished one)::

    python -m audiorepro.data.embedded generate --preset smoke --seed 0 [--out DIR] [--only words]
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
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
from audiorepro.parallel import usable_cores
from audiorepro.paths import data_dir

CORPORA = ("zerospeech", "words", "audio_caption")
PRESETS = CORPUS_PRESETS


def corpora_root(preset: str, seed: int, out: str | Path | None = None) -> Path:
    """``<out or data dir>/embedded/<preset>-seed<seed>``."""
    return Path(out) if out is not None else data_dir() / "embedded" / f"{preset}-seed{seed}"


class EspeakPhraseSpeech:
    """A ``speech(text, rng)`` source for the scenes: one of 34 eSpeak voices
    (:func:`~audiorepro.data.embedded.espeak.english_voices` of ``seed``) drawn from ``rng``,
    resampled 16 → 32 kHz. It pickles, so processes making clips side by side share it."""

    name = "espeak_phrase_speech"

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.voices = english_voices(34, seed=seed)

    def __call__(self, text: str, rng: np.random.Generator) -> tuple[np.ndarray, str]:
        voice = self.voices[int(rng.integers(len(self.voices)))]
        syn = synthesize(text, voice)
        return resample_poly(syn.wav, 2, 1).astype(np.float32), text


def espeak_phrase_speech(seed: int) -> EspeakPhraseSpeech:
    """The scenes' speech source of corpus seed ``seed`` (:class:`EspeakPhraseSpeech`)."""
    return EspeakPhraseSpeech(seed)


def _generate(name: str, target: Path, preset: str, seed: int, workers: int = 1) -> float:
    """Generate (or reuse) one corpus at ``target``; returns the seconds it took."""
    start = time.perf_counter()
    if name == "zerospeech":
        generate_zerospeech_corpus(target, preset, seed)
    elif name == "words":
        generate_word_corpus(target, preset, seed)
    else:
        generate_audio_caption_corpora(
            target, preset, seed, speech=espeak_phrase_speech(seed), workers=workers
        )
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
    per core, at most one per corpus), and the audio-caption corpora, the largest, have their
    clips made by ``workers`` processes ahead of the writer: each corpus and each clip depends
    only on the preset, the seed and its own index, so the files are the same bytes as one
    after the other."""
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
    cores = usable_cores() if workers is None else workers
    seconds: dict[str, float] = {}
    if cores > 1 and len(missing) > 1:
        context = multiprocessing.get_context("spawn")  # no fork of a process holding threads
        with ProcessPoolExecutor(min(cores, len(missing)), mp_context=context) as pool:
            futures = {
                n: pool.submit(_generate, n, root / n, preset, seed, cores) for n in missing
            }
            seconds = {n: f.result() for n, f in futures.items()}
    paths: dict[str, Any] = {"timings": {}}
    for name in names:
        if name not in seconds:
            seconds[name] = _generate(name, root / name, preset, seed, cores)
        paths[name] = root / name
        paths["timings"][name] = round(seconds[name], 1)
        if verbose:
            print(f"[embedded] {name}: {root / name} ({seconds[name]:.1f} s)", flush=True)
    return paths
