"""A ZeroSpeech 2019 submission folder: written from a model's units, then scored from its files
as the challenge's scorer reads them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from audiorepro.data.speech_segments import SAMPLE_RATE
from audiorepro.experiments.zerospeech.config import CHAPTER
from audiorepro.features import save_audio
from audiorepro.metrics.abx import abx_error, relative_time_item_file
from audiorepro.metrics.bitrate import bitrate_from_submission
from audiorepro.paths import results_dir


def _one_hot_lines(codes: np.ndarray, k: int) -> str:
    return int_lines(np.eye(k, dtype=np.int64)[codes])


def int_lines(rows: np.ndarray) -> str:
    """One line per row of integers (T, D), space-separated: a submission file of one-hots."""
    return "".join(" ".join(map(str, row)) + "\n" for row in rows.tolist())


def vector_lines(vectors: np.ndarray) -> str:
    """One line per vector (T, D), each value read back exactly as the model produced it."""
    # the shortest repr of each float32 value widened to float64: read back as float64 (as the
    # official loader does) it is exactly the vector the model produced
    rows = np.float32(vectors).astype(np.float64)
    return "".join(" ".join(repr(v) for v in row.tolist()) + "\n" for row in rows)


def submission_dir() -> Path:
    """Where the pages write the chapter's ZeroSpeech 2019 submission."""
    return results_dir() / CHAPTER / "submission"


def export_submission(
    out_dir: str | os.PathLike[str],
    language: str,
    codes: Mapping[str, np.ndarray],
    *,
    vectors: Mapping[str, np.ndarray] | None = None,
    codebook_size: int | None = None,
    wavs: Mapping[str, np.ndarray] | None = None,
    author: str = "audiorepro",
    affiliation: str = "audiorepro",
    description: str = "Transformer VQ-VAE (Tjandra et al. 2020) reimplemented in audiorepro",
    hyperparameters: Mapping[str, Any] | None = None,
) -> Path:
    """Write a ZeroSpeech 2019 submission (reference §2.2) and return ``out_dir``.

    ``<out_dir>/metadata.yaml``, ``<out_dir>/2019/metadata.yaml`` and
    ``<out_dir>/2019/<language>/test/<file>.txt``: one line per code frame, the codebook vector
    (``vectors``) or, without vectors, a one-hot vector of ``codebook_size`` (never a single
    integer column, which the official ABX loader drops). ``wavs`` maps a file name such as
    ``V001_0012`` (target voice, then the test file's utterance id) to a 16 kHz waveform, written
    next to the embeddings.
    """
    if vectors is None and codebook_size is None:
        raise ValueError("give the codebook vectors or the codebook size (for one-hot lines)")
    out = Path(out_dir)
    test = out / "2019" / language / "test"
    test.mkdir(parents=True, exist_ok=True)
    for name, c in codes.items():
        text = (
            vector_lines(vectors[name])
            if vectors is not None
            else _one_hot_lines(c, codebook_size)
        )
        (test / f"{name}.txt").write_text(text)
    for name, wav in (wavs or {}).items():
        save_audio(test / f"{name}.wav", wav, SAMPLE_RATE)
    (out / "metadata.yaml").write_text(
        yaml.safe_dump({"author": author, "affiliation": affiliation, "open source": True})
    )
    (out / "2019" / "metadata.yaml").write_text(
        yaml.safe_dump(
            {
                "abx distance": "dtw_cosine",
                "system description": description,
                "hyperparameters": dict(hyperparameters or {}),
                "using parallel train": False,
                "using external data": False,
            },
            sort_keys=False,
        )
    )
    code = out / "2019" / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "README.txt").write_text(
        "The code is the audiorepro library: lib/audiorepro/models/vqvae.py, "
        "lib/audiorepro/models/inverter.py, lib/audiorepro/experiments/zerospeech/.\n"
    )
    return out


def score_submission(
    test_dir: Path, lang_dir: Path, frame_shift: float = 0.04
) -> dict[str, float]:
    """ABX across (%) and bitrate (b/s) of a submission's ``2019/<language>/test`` folder,
    read from its files as the challenge's scorer would."""
    return {
        "abx_across": abx_error(
            test_dir, Path(lang_dir) / "abx/byCtxt_acSpkr.item", frame_shift=frame_shift
        ),
        "bitrate": bitrate_from_submission(test_dir, Path(lang_dir) / "bitrate_filelist.txt"),
    }


def relative_time_abx(test_dir: Path, lang_dir: Path) -> float:
    """ABX across (%) of a submission folder with the 2019 scorer's frame rule: the item file
    rewritten in relative time (every whole-file item from 0 to 1)."""
    relative = relative_time_item_file(
        Path(lang_dir) / "abx/byCtxt_acSpkr.item", results_dir() / CHAPTER / "relative_time.item"
    )
    return abx_error(test_dir, relative)
