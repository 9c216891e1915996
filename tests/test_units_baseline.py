"""Input normalisation, frames averaged to the code rate, and the k-means unit baseline."""

from __future__ import annotations

import numpy as np
import pytest

from audiorepro.data.speech_segments import HOP_S, average_frames, normalize_features
from audiorepro.experiments.zerospeech import diagnostics
from audiorepro.experiments.zerospeech.config import load_config
from audiorepro.experiments.zerospeech.data import (
    language_dir,
    load_data,
    load_features,
    model_inputs,
)
from audiorepro.experiments.zerospeech.diagnostics import frames_abx, input_geometry, unit_runs
from audiorepro.experiments.zerospeech.evaluate import (
    code_runs,
    encode_files,
    evaluate,
    kmeans_units,
)
from audiorepro.experiments.zerospeech.tables import RowResult, ablation_rows
from audiorepro.models.kmeans import kmeans, nearest_centroid


def test_utterance_normalisation_hand_values():
    x = np.array([[1.0, 10.0], [3.0, 10.0]])  # mean (2, 10), std (1, 0 -> eps)
    (out,) = normalize_features([x], "utterance", eps=1e-5)
    np.testing.assert_allclose(out, [[-1.0, 0.0], [1.0, 0.0]])
    assert out.dtype == np.float32


def test_speaker_normalisation_pools_the_speakers_files():
    a = np.array([[0.0], [2.0]])
    b = np.array([[4.0], [6.0]])  # speaker s: frames 0 2 4 6, mean 3, std sqrt(5)
    c = np.array([[1.0], [1.0], [4.0]])  # speaker t alone: mean 2, std sqrt(2)
    out = normalize_features([a, b, c], "speaker", ["s", "s", "t"])
    r5, r2 = np.sqrt(5.0), np.sqrt(2.0)
    np.testing.assert_allclose(out[0][:, 0], [-3 / r5, -1 / r5], rtol=1e-6)
    np.testing.assert_allclose(out[1][:, 0], [1 / r5, 3 / r5], rtol=1e-6)
    np.testing.assert_allclose(out[2][:, 0], [-1 / r2, -1 / r2, 2 / r2], rtol=1e-6)
    same = normalize_features([a, b], "none")
    np.testing.assert_array_equal(same[1], b.astype(np.float32))


def test_normalisation_rejects_bad_input():
    with pytest.raises(ValueError, match="one of"):
        normalize_features([np.zeros((2, 2))], "global")
    with pytest.raises(ValueError, match="one speaker per utterance"):
        normalize_features([np.zeros((2, 2))], "speaker")
    with pytest.raises(ValueError, match=r"utterance 1: expected \(T, F\)"):
        normalize_features([np.zeros((2, 2)), np.zeros(3)], "utterance")


def test_model_inputs_uses_the_name_prefix_as_speaker():
    feats = {"S001_0001": np.array([[0.0]]), "S001_0002": np.array([[2.0]])}
    out = model_inputs(feats, "speaker")
    assert out["S001_0001"][0, 0] == pytest.approx(-1.0)
    assert out["S001_0002"][0, 0] == pytest.approx(1.0)


def test_average_frames_to_the_code_rate():
    x = np.arange(10, dtype=np.float32)[:, None] * [1.0, -1.0]  # (10, 2)
    out = average_frames(x, 4)  # windows 0-3, 4-7, 8-9 (ceil(10 / 4) = 3, the code count)
    np.testing.assert_allclose(out[:, 0], [1.5, 5.5, 8.5])
    np.testing.assert_allclose(out[:, 1], [-1.5, -5.5, -8.5])
    np.testing.assert_array_equal(average_frames(x, 1), x)
    assert average_frames(x[:3], 4).shape == (1, 2)
    with pytest.raises(ValueError, match="stride"):
        average_frames(x, 0)


def test_kmeans_is_seeded_and_assigns_the_nearest_centroid():
    rng = np.random.default_rng(0)
    centres = 20.0 * np.eye(5)[:, :4]  # four far-apart corners and the origin
    x = np.concatenate([c + rng.normal(size=(40, 4)) for c in centres])
    a, b = kmeans(x, 5, seed=3), kmeans(x, 5, seed=3)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    # well-separated blobs: each found centroid sits on one true centre
    found = np.sort(np.linalg.norm(a.centroids[:, None] - centres[None], axis=-1).min(1))
    assert found.max() < 1.0
    # brute force: the assignment is the argmin of every squared distance
    probe = rng.normal(size=(50, 4)) * 10
    brute = np.array([np.argmin([((p - c) ** 2).sum() for c in a.centroids]) for p in probe])
    np.testing.assert_array_equal(a.assign(probe), brute)
    np.testing.assert_array_equal(nearest_centroid(probe, a.centroids), brute)
    # Lloyd's fixed point: every centroid is the mean of the training rows assigned to it
    codes = a.assign(x)
    for j in range(5):
        np.testing.assert_allclose(a.centroids[j], x[codes == j].mean(0), atol=1e-4)
    with pytest.raises(ValueError, match="k must be"):
        kmeans(x, len(x) + 1)


def test_kmeans_units_average_then_quantise():
    rng = np.random.default_rng(1)
    train = [rng.normal(size=(37, 4)).astype(np.float32) for _ in range(6)]
    test = {"S001_0001": rng.normal(size=(10, 4)).astype(np.float32)}
    codes, vectors, fitted = kmeans_units(train, test, k=8, stride=4, seed=0)
    assert codes["S001_0001"].shape == (3,)  # ceil(10 / 4) code frames, as the VQ-VAE
    np.testing.assert_array_equal(
        codes["S001_0001"], fitted.assign(average_frames(test["S001_0001"], 4))
    )
    np.testing.assert_array_equal(vectors["S001_0001"], fitted.centroids[codes["S001_0001"]])
    again, _, _ = kmeans_units(train, test, k=8, stride=4, seed=0)
    np.testing.assert_array_equal(again["S001_0001"], codes["S001_0001"])


def _runs_by_loop(codes):
    runs = frames = single = 0
    for seq in codes.values():
        seq = list(seq)
        i = 0
        while i < len(seq):
            j = i
            while j + 1 < len(seq) and seq[j + 1] == seq[i]:
                j += 1
            runs += 1
            single += j == i
            i = j + 1
        frames += len(seq)
    return runs, frames, single


def test_code_runs_hand_values_and_files_do_not_join():
    codes = {"a": np.array([3, 3, 1, 1, 1, 2]), "b": np.array([2, 2]), "c": np.array([], int)}
    stats = code_runs(codes)
    # a: runs 3,3 / 1,1,1 / 2; b: 2,2 (the 2 ending a does not continue into b)
    assert stats == {
        "runs": 4.0,
        "frames": 8.0,
        "mean_run": 2.0,
        "single_share": 0.25,
        "empty_files": 1.0,
    }
    assert code_runs({"x": np.array([5])})["single_share"] == 1.0


def test_code_runs_match_a_loop_on_random_sequences():
    rng = np.random.default_rng(0)
    for _ in range(20):
        codes = {f"f{i}": rng.integers(0, 3, rng.integers(0, 30)) for i in range(5)}
        codes["last"] = rng.integers(0, 3, 7)  # at least one frame
        runs, frames, single = _runs_by_loop(codes)
        stats = code_runs(codes)
        assert (stats["runs"], stats["frames"]) == (runs, frames)
        assert stats["mean_run"] == pytest.approx(frames / runs)
        assert stats["single_share"] == pytest.approx(single / runs)


def test_code_runs_reject_bad_input():
    with pytest.raises(ValueError, match="no code frames"):
        code_runs({"a": np.array([], int)})
    with pytest.raises(ValueError, match="b: codes must be one sequence"):
        code_runs({"b": np.zeros((2, 3), int)})


def _two_seed_units(monkeypatch):
    """Smoke config with seeds 0-1, one row, and stand-ins whose seed s encodes to
    ``per_seed[s]``; returns (config, rows, per_seed, the seeds encoded in order)."""
    from types import SimpleNamespace

    cfg = load_config("smoke", main_seeds=(0, 1))
    rows = ablation_rows(cfg)[:1]
    per_seed = {0: {"u": np.array([1, 1, 2, 2])}, 1: {"u": np.array([1, 2, 3, 3])}}
    encoded = []
    monkeypatch.setattr(diagnostics, "language_dir", lambda config, language: None)
    monkeypatch.setattr(diagnostics, "load_features", lambda lang_dir, split, feature: {})
    monkeypatch.setattr(
        diagnostics,
        "train_vqvae",
        lambda config, model, seed, language: SimpleNamespace(model=seed),
    )
    monkeypatch.setattr(
        diagnostics,
        "encode_files",
        lambda model, feats: encoded.append(model) or (per_seed[model], {}),
    )
    return cfg, rows, per_seed, encoded


def test_unit_runs_report_milliseconds_per_row_over_seeds(monkeypatch):
    cfg, rows, _, _ = _two_seed_units(monkeypatch)
    table = unit_runs(cfg, rows)
    ms = rows[0].model.stride * 10  # one code frame
    # seed 0: 2 runs of 2 frames; seed 1: runs 1, 1, 2 -> 4/3 frames, 2 of 3 single
    row = table.loc[rows[0].key]
    assert row["seeds"] == 2
    assert row["run_ms"] == pytest.approx(round((2 + 4 / 3) / 2 * ms, 1))
    assert row["run_ms_std"] == pytest.approx(round(np.std([2 * ms, 4 / 3 * ms], ddof=1), 1))
    assert row["single_share"] == pytest.approx(round(1 / 3, 3))


def test_unit_runs_take_the_statistics_the_scored_runs_computed(monkeypatch):
    cfg, rows, per_seed, encoded = _two_seed_units(monkeypatch)
    alone = unit_runs(cfg, rows)
    assert encoded == [0, 1]
    key = rows[0].key
    # seed 0 scored by run_rows (its statistics kept), seed 1 not: only seed 1 is encoded
    results = {(key, 0): RowResult(key, 0, {}, 1.0, code_runs(per_seed[0]))}
    encoded.clear()
    assert unit_runs(cfg, rows, results=results).equals(alone)
    assert encoded == [1]
    # a result without statistics (an older caller) is encoded too
    results = {(key, s): RowResult(key, s, {}, 1.0) for s in (0, 1)}
    encoded.clear()
    assert unit_runs(cfg, rows, results=results).equals(alone) and encoded == [0, 1]


def test_frames_abx_scores_the_frames_as_the_model_standardises_them():
    """Angular ABX ignores one common scale: with ``input_scale="global"`` the score is that
    of the frames minus the training mean; ``dimension`` divides each dimension by its
    training standard deviation. ``input_geometry`` tabulates the three."""
    from audiorepro.metrics.abx import abx

    cfg = load_config("smoke")
    lang = language_dir(cfg)
    item = lang / "abx/byCtxt_acSpkr.item"
    test = load_features(lang, "test", "mfcc")
    train = np.concatenate(load_data(cfg, "english", "mfcc").feats).astype(np.float64)
    mean, std = train.mean(0), train.std(0)

    def score(feats):
        return abx(feats, item, "angular", "across", frame_shift=HOP_S).error

    centred = score({k: v - mean for k, v in test.items()})
    scaled = score({k: (v - mean) / std for k, v in test.items()})
    # float32 statistics in the library, float64 here: a near-tie may flip (one triplet)
    assert frames_abx(cfg, "mfcc", input_scale="global") == pytest.approx(centred, abs=0.5)
    assert frames_abx(cfg, "mfcc", input_scale="dimension") == pytest.approx(scaled, abs=0.5)
    assert frames_abx(cfg, "mfcc") == pytest.approx(score(test), abs=1e-9)
    assert abs(centred - scaled) > 5  # the two geometries differ on real frames
    table = input_geometry(cfg)
    assert list(table.columns) == ["raw", "global", "dimension"]
    assert table.loc["mfcc", "global"] == pytest.approx(centred, abs=0.5)


def test_evaluate_hands_back_the_code_runs_of_the_units_it_scored():
    import torch

    from audiorepro.models.vqvae import VQVAE

    cfg = load_config("smoke")
    lang = language_dir(cfg)
    model_cfg = ablation_rows(cfg)[0].model
    torch.manual_seed(0)
    model = VQVAE(model_cfg, n_speakers=4)
    test = load_features(lang, "test", "mfcc")
    stats: dict[str, float] = {}
    metrics = evaluate(model, lang, test, code_stats=stats)
    assert stats == code_runs(encode_files(model, test)[0])
    assert metrics == evaluate(model, lang, test)
