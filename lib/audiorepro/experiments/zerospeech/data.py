"""The chapter's speech: the ZeroSpeech 2019 language folders, their cached features, the
training utterances with their speakers, and the per-file normalisation a model reads them with;
of anyone's folder of recordings, the files it trains on and the files too short to read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.config import ConfigError
from audiorepro.data.recipes.zerospeech import speaker_of
from audiorepro.data.recordings import RecordingsError, content_problem
from audiorepro.data.speech_segments import features_key, normalize_features
from audiorepro.data.speech_segments import load_features as _features
from audiorepro.experiments.zerospeech.config import Config, store
from audiorepro.paths import data_dir


def language_dir(config: Config, language: str = "english") -> Path:
    """The language folder (``english`` or ``surprise``), generating the corpus if needed."""
    spec = config.corpus
    if spec.kind == "paper":
        root = spec.resolve(data_dir())
    else:
        from audiorepro.data.embedded.generate import ensure_corpora

        out = None if spec.root is None else spec.resolve(data_dir())
        if out is not None:
            own = [name for name in ("english", "surprise") if (out / name).is_dir()]
            if own:
                raise ConfigError(
                    f"corpus.root = {spec.root!r} holds a ZeroSpeech 2019 folder ({own[0]}/), "
                    f"but corpus.kind is {spec.kind!r}: the generated corpus would go to "
                    f"{out / 'zerospeech'} and yours would be ignored. Set corpus.kind=paper "
                    "to read it, or give a root for the generated corpus"
                )
        paths = ensure_corpora(spec.kind, spec.seed, out=out, only=("zerospeech",), verbose=False)
        root = Path(paths["zerospeech"])
    path = root / language
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no ZeroSpeech 2019 {language} folder")
    return path


def load_features(lang_dir: Path, split: str, feature: str) -> dict[str, np.ndarray]:
    """``{file id: (T, F) float32}`` for every wav of ``<lang_dir>/<split>`` (10 ms frames).

    ``split`` is a folder (``train/unit``, ``train/voice``, ``test``); ``feature`` is ``mfcc``
    (MFCC + Δ + ΔΔ, 39), ``logmel`` (80) or ``linear`` (the inverter's magnitudes, 257). Kept
    in the chapter's run store under the content of the wavs.
    """
    return _features(Path(lang_dir) / split, feature, store())


@dataclass
class SpeechData:
    """Training speech: per-file features, their speakers, and what defines them (``key``)."""

    feats: list[np.ndarray]
    speakers: list[str]
    key: dict[str, Any]


def load_data(config: Config, language: str = "english", feature: str = "mfcc") -> SpeechData:
    """Features and speakers of the unit-discovery and voice training files (paper §5.1)."""
    lang_dir = language_dir(config, language)
    feats, speakers, key = [], [], {"max_train_files": config.max_train_files}
    for split in ("train/unit", "train/voice"):
        key[split] = features_key(lang_dir / split, feature)
        for name, x in sorted(load_features(lang_dir, split, feature).items()):
            feats.append(x)
            speakers.append(speaker_of(name))
    if config.max_train_files is not None:
        feats, speakers = feats[: config.max_train_files], speakers[: config.max_train_files]
    return SpeechData(feats, speakers, key)


def model_inputs(
    feats: Mapping[str, np.ndarray],
    feature_norm: str,
    speakers: Mapping[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """``{file: (T, F)}`` normalised per ``feature_norm`` (none | utterance | speaker,
    :func:`~audiorepro.data.speech_segments.normalize_features`); the speaker of a file is
    ``speakers[file]``, or its ZeroSpeech name prefix (``S025_0001`` → ``S025``)."""
    names = list(feats)
    spk = None
    if feature_norm == "speaker":
        spk = [speakers[n] if speakers is not None else speaker_of(n) for n in names]
    out = normalize_features([feats[n] for n in names], feature_norm, spk)
    return dict(zip(names, out, strict=True))


MIN_TRAIN_FRAMES = 8
"""The shortest file (10 ms frames) the VQ-VAE trains on: its shortest training segment
(:class:`~audiorepro.data.speech_segments.SegmentDataset`); a shorter file is left out, named,
and every other reader of a folder refuses it (:func:`refuse_short_files`)."""


def refuse_short_files(wavs: Mapping[str, Path], feats: Mapping[str, np.ndarray]) -> None:
    """RecordingsError naming the first file (by id) of ``wavs`` whose ``feats`` (T, F) have
    fewer than :data:`MIN_TRAIN_FRAMES` frames: what ``units train`` leaves out, ``units
    encode``, ``units resynth`` and the baselines of ``abx score`` refuse, as
    :func:`~audiorepro.features.load_audio` refuses a silent file or channels that cancel."""
    short = [name for name in sorted(feats) if len(feats[name]) < MIN_TRAIN_FRAMES]
    if not short:
        return
    n = len(feats[short[0]])
    more = f" ({len(short) - 1} more such files)" if len(short) > 1 else ""
    raise RecordingsError(
        wavs[short[0]],
        None,
        f"too short: {n} frame{'s' if n != 1 else ''} of 10 ms, fewer than the "
        f"{MIN_TRAIN_FRAMES} units train needs "
        f"(it leaves such files out){more}; leave the file out",
    )


def training_files(
    wavs: Mapping[str, Path],
) -> tuple[dict[str, Path], list[tuple[Path, str]]]:
    """``(files to train on, [(path, why left out)])``: silent files and files whose channels
    cancel when mixed to mono (:func:`~audiorepro.data.recordings.content_problem`) are left
    out of training and named, never trained on as silence."""
    kept, left_out = {}, []
    for name, path in wavs.items():
        problem = content_problem(path)
        if problem is None:
            kept[name] = path
        else:
            left_out.append((path, problem))
    return kept, left_out
