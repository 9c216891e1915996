"""Chapter 04's word segments: the corpus folder, the train/dev/test tokens after the paper's
selection (§3.1), their identity as a run's data, and a split written as a segments table."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.data.awe import WordSegments, prepare_split
from audiorepro.data.recipes.switchboard import WordVocab, load_vocab
from audiorepro.data.recordings import SEGMENT_COLUMNS
from audiorepro.experiments.awe.config import SPLITS, Config
from audiorepro.models.awe import AWEModelConfig


def corpus_root(config: Config) -> Path:
    """The word-corpus folder: ``corpus.root`` when given (a generated corpus is generated there,
    or reused), else the generated corpus's default place."""
    spec = config.corpus
    if spec.kind == "paper":
        return spec.resolve(Path())
    if spec.root is None:
        from audiorepro.data.embedded.generate import ensure_corpora

        return Path(ensure_corpora(spec.kind, spec.seed, only=("words",))["words"])
    from audiorepro.data.embedded.word_corpus import generate_word_corpus

    root = spec.resolve(Path())
    generate_word_corpus(root, spec.kind, spec.seed)
    return root


def load_data(config: Config) -> dict[str, WordSegments]:
    """``{"train", "dev", "test"}`` segments after the selection of §3.1."""
    root = corpus_root(config)
    return {
        split: prepare_split(
            root,
            split,
            feature_dim=config.model.feature_dim,
            min_frames=config.min_frames,
            max_tokens=config.max_train_tokens if split == "train" else None,
            source=config.data_format,
        )
        for split in SPLITS
    }


def num_phone_ids(data: Mapping[str, WordSegments]) -> int:
    """The phone vocabulary size the model needs for every split."""
    return max(s.num_phones for s in data.values())


def data_digest(data: Mapping[str, WordSegments]) -> str:
    """Hex digest of the segments' keys, frames and phones: the data identity of a run."""
    digest = hashlib.sha256()
    for split in sorted(data):
        seg = data[split]
        digest.update(f"{split}:{len(seg)}:".encode())
        for key, feats, phones in zip(seg.keys, seg.feats, seg.phones, strict=True):
            digest.update(key.encode())
            digest.update(str(feats.shape).encode())
            digest.update(np.ascontiguousarray(feats).tobytes())
            digest.update(np.ascontiguousarray(phones).tobytes())
    return digest.hexdigest()[:16]


def model_config(config: Config, data: Mapping[str, WordSegments]) -> AWEModelConfig:
    """``config.model`` with the phone vocabulary of ``data``."""
    return dataclasses.replace(config.model, num_phones=num_phone_ids(data))


def corpus_vocab(config: Config) -> WordVocab:
    """The ``vocab.json`` of the chapter's corpus: word and phone ids, pronunciations."""
    return load_vocab(corpus_root(config) / "vocab.json")


def corpus_segments_table(
    config: Config, segments: WordSegments, path: str | os.PathLike[str]
) -> Path:
    """Write a split of the chapter's generated word corpus as a segments table, the input of
    the ``audiorepro awe`` commands: one row per token, ``path`` the absolute path of its
    conversation side's wav (``<corpus>/audio/<side>.wav``), ``start``/``end`` its frames in
    seconds. Read back with :func:`~audiorepro.data.recordings.read_segments` and
    :func:`~audiorepro.experiments.awe.recordings.segments_data`, the tokens have the frames of
    ``segments`` (the side's features are computed the same way, CMVN over the whole side).

    Raises:
        FileNotFoundError: the corpus has no ``audio/`` folder (the real Switchboard word
            lists come as features only).
    """
    from audiorepro.data.embedded.word_corpus import AUDIO_DIR
    from audiorepro.data.recipes.switchboard import parse_key

    audio = corpus_root(config).resolve() / AUDIO_DIR
    if not audio.is_dir():
        raise FileNotFoundError(f"{audio}: the corpus has no audio to cut segments from")
    lines = ["\t".join(SEGMENT_COLUMNS)]
    for key, speaker in zip(segments.keys, segments.speakers, strict=True):
        k = parse_key(key)
        times = [f"{frame / 100:.2f}" for frame in (k.start, k.end)]  # 10 ms frames
        lines.append("\t".join([str(audio / f"{k.side}.wav"), k.word, speaker, *times]))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def compare_segments(a: WordSegments, b: WordSegments) -> dict[str, Any]:
    """How far two loadings of the same tokens agree: token count, whether words, speakers,
    phone sequences and frame counts are equal token by token, and the largest absolute
    difference of their features (``nan`` when the frame counts differ)."""
    same_frames = len(a) == len(b) and all(
        x.shape == y.shape for x, y in zip(a.feats, b.feats, strict=True)
    )
    return {
        "tokens": (len(a), len(b)),
        "same_words": a.words == b.words,
        "same_speakers": a.speakers == b.speakers,
        "same_phones": len(a) == len(b)
        and all(np.array_equal(x, y) for x, y in zip(a.phones, b.phones, strict=True)),
        "same_frame_counts": same_frames,
        "max_abs_feature_diff": max(
            (float(np.abs(x - y).max()) for x, y in zip(a.feats, b.feats, strict=True)),
            default=0.0,
        )
        if same_frames
        else float("nan"),
    }
