"""Why the units score as they do: how long one code lasts, whether the runs have converged,
and what the input frames themselves score before and after a VQ-VAE's standardisation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from audiorepro import reporting
from audiorepro.data.speech_segments import FEATURES, HOP_S, feature_of, normalize_features
from audiorepro.experiments.zerospeech.config import Config
from audiorepro.experiments.zerospeech.data import (
    language_dir,
    load_data,
    load_features,
    model_inputs,
)
from audiorepro.experiments.zerospeech.evaluate import code_runs, encode_files
from audiorepro.experiments.zerospeech.tables import AblationRow, RowResult
from audiorepro.experiments.zerospeech.train import train_vqvae
from audiorepro.metrics.abx import abx
from audiorepro.models.vqvae import INPUT_SCALES, input_statistics


def unit_runs(
    config: Config,
    rows: Sequence[AblationRow],
    language: str = "english",
    results: Mapping[tuple[str, int], RowResult] | None = None,
) -> pd.DataFrame:
    """:func:`code_runs` of the test units of each row's model for every seed of
    ``config.main_seeds`` (trained if missing, else read from the run store), as mean ± std
    over seeds: ``run_ms`` (the mean run of one code in milliseconds), ``single_share`` (runs
    one code frame long), with ``seeds``. Indexed by row key. ``results`` (of
    :func:`run_rows` on ``language``) gives the statistics its runs computed when they scored
    the same units; the (row, seed) pairs it lacks are encoded here."""
    lang_dir = language_dir(config, language)
    out = []
    for row in rows:
        per_seed = []
        for seed in config.main_seeds:
            done = (results or {}).get((row.key, seed))
            if done is not None and done.code_stats:
                stats = dict(done.code_stats)
            else:
                test = load_features(lang_dir, "test", feature_of(row.model.input_dim))
                trained = train_vqvae(config, row.model, seed, language=language)
                codes, _ = encode_files(trained.model, test)
                stats = code_runs(codes)
            if stats["empty_files"]:
                print(
                    f"{row.key}, seed {seed}: {int(stats['empty_files'])} test files have no "
                    "code frame and are not counted"
                )
            ms = stats["mean_run"] * row.model.stride * HOP_S * 1000
            per_seed.append((ms, stats["single_share"]))
        (ms, ms_std), (single, single_std) = (
            reporting.mean_std([v[i] for v in per_seed]) for i in (0, 1)
        )
        out.append({
            "row": row.key, "label": row.label, "seeds": len(per_seed),
            "run_ms": round(ms, 1), "run_ms_std": round(ms_std, 1),
            "single_share": round(single, 3), "single_share_std": round(single_std, 3),
        })  # fmt: skip
    return pd.DataFrame(out).set_index("row")


#: The loss terms and health signs :func:`convergence` reads from a run's history.
CONVERGENCE_TERMS = ("reconstruction", "commitment", "batch_codes")


def convergence(
    config: Config, rows: Sequence[AblationRow], language: str = "english", tenths: int = 10
) -> pd.DataFrame:
    """Whether each row's runs have flattened out by their last step: for every term of
    :data:`CONVERGENCE_TERMS`, its mean over the last ``1/tenths`` of the steps (``<term>``)
    and its change from the tenth before in percent (``<term>_change``; a run shorter than
    ``tenths`` steps compares its last step with the one before), mean over the seeds of
    ``config.main_seeds`` (the runs trained if missing, else read from the run store), with
    ``steps``. A row whose reconstruction still falls by several percent per tenth of its
    steps is still learning. Indexed by row key."""
    out = []
    for row in rows:
        per_seed: dict[str, list[float]] = {}
        steps = 0
        for seed in config.main_seeds:
            history = train_vqvae(config, row.model, seed, language=language).history
            steps = int(history["step"][-1])
            for term in CONVERGENCE_TERMS:
                values = np.asarray(history[term], dtype=float)
                width = max(1, len(values) // tenths)  # a short run: its last steps
                last = values[-width:].mean()
                before = values[-2 * width : -width].mean() if len(values) > width else np.nan
                per_seed.setdefault(term, []).append(last)
                per_seed.setdefault(f"{term}_change", []).append(100 * (last / before - 1))
        out.append(
            {"row": row.key, "label": row.label, "steps": steps}
            | {
                k: round(float(np.mean(v)), 3 if "change" not in k else 1)
                for k, v in per_seed.items()
            }
        )
    return pd.DataFrame(out).set_index("row")


def convergence_curves(
    config: Config, rows: Sequence[AblationRow], seed: int, smooth: int = 50
) -> dict[str, dict[str, np.ndarray]]:
    """``{term: {row key: curve}}`` of every term of :data:`CONVERGENCE_TERMS`: each row's run of
    ``seed`` (trained if missing), step by step, each step the mean of the last ``smooth``
    steps up to it (fewer at the start), for :func:`audiorepro.plotting.loss_curves`."""
    curves: dict[str, dict[str, np.ndarray]] = {t: {} for t in CONVERGENCE_TERMS}
    for row in rows:
        history = train_vqvae(config, row.model, seed).history
        for term in CONVERGENCE_TERMS:
            total = np.cumsum(np.asarray(history[term], dtype=float))
            window = np.minimum(np.arange(1, len(total) + 1), smooth)
            earlier = np.concatenate([np.zeros(smooth), total])[: len(total)]
            curves[term][row.key] = (total - earlier) / window
    return curves


def frames_abx(
    config: Config,
    feature: str = "mfcc",
    feature_norm: str = "none",
    language: str = "english",
    input_scale: str | None = None,
) -> float:
    """ABX across (%) of the test set's input frames themselves (10 ms, angular), normalised
    per ``feature_norm``: the scale for the units made from them. With ``input_scale``
    (``global`` | ``dimension``) the frames are standardised as a VQ-VAE with that
    ``model.input_scale`` standardises its input (training mean and scale,
    :func:`~audiorepro.models.vqvae.input_statistics`): the geometry its reconstruction loss
    weighs."""
    lang_dir = language_dir(config, language)
    test = model_inputs(load_features(lang_dir, "test", feature), feature_norm)
    if input_scale is not None:
        train = _training_frames(config, feature, feature_norm, language)
        test = _standardised(test, train, input_scale)
    return _frames_error(test, lang_dir)


def _training_frames(config: Config, feature: str, feature_norm: str, language: str) -> np.ndarray:
    """Every training frame of ``language``, normalised per ``feature_norm``: (N, F)."""
    data = load_data(config, language, feature)
    return np.concatenate(normalize_features(data.feats, feature_norm, data.speakers))


def _standardised(
    test: Mapping[str, np.ndarray], train: np.ndarray, input_scale: str
) -> dict[str, np.ndarray]:
    mean, std = (t.numpy() for t in input_statistics(train, input_scale))
    return {name: (x - mean) / std for name, x in test.items()}


def _frames_error(test: Mapping[str, np.ndarray], lang_dir: Path) -> float:
    item = lang_dir / "abx/byCtxt_acSpkr.item"
    return abx(dict(test), item, "angular", "across", frame_shift=HOP_S).error


def input_geometry(config: Config, language: str = "english") -> pd.DataFrame:
    """ABX across (%) of each feature's test frames as given (``raw``) and as a VQ-VAE's
    input standardisation leaves them (``global``: centred, one scale; ``dimension``: each
    dimension to unit variance; :func:`frames_abx`), with ``config.model.feature_norm``: what
    the reconstruction loss of each ``model.input_scale`` asks the units to keep. Each
    feature's test and training frames are read once for the three columns."""
    norm = config.model.feature_norm
    lang_dir = language_dir(config, language)
    rows = []
    for feature in FEATURES:
        test = model_inputs(load_features(lang_dir, "test", feature), norm)
        train = _training_frames(config, feature, norm, language)
        row = {"feature": feature, "raw": _frames_error(test, lang_dir)}
        for scale in INPUT_SCALES:
            row[scale] = _frames_error(_standardised(test, train, scale), lang_dir)
        rows.append(row)
    return pd.DataFrame(rows).set_index("feature").round(2)
