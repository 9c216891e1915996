"""Tagging AP/mAP against a brute-force reference and hand-computed cases; stage-0 labels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from audiorepro.config import ConfigError
from audiorepro.experiments.retrieval.stage0 import TaggingClip, scene_clips
from audiorepro.metrics.tagging import average_precision, chance_map, tagging_map
from conftest import KillAt, Killed


def brute_force_ap(scores, targets) -> float:
    """Precision-recall step area, one point per distinct threshold, by definition."""
    scores, targets = np.asarray(scores, float), np.asarray(targets, bool)
    total, ap, prev_recall = targets.sum(), 0.0, 0.0
    for t in sorted(set(scores.tolist()), reverse=True):
        chosen = scores >= t
        hits = (chosen & targets).sum()
        recall = hits / total
        ap += (recall - prev_recall) * hits / chosen.sum()
        prev_recall = recall
    return float(ap)


def test_hand_computed_ap_without_ties():
    # ranks: + - + -  -> precision 1 at recall 0.5, 2/3 at recall 1
    assert average_precision([0.9, 0.8, 0.7, 0.1], [1, 0, 1, 0]) == pytest.approx(
        0.5 * 1 + 0.5 * 2 / 3
    )


def test_hand_computed_ap_with_ties_enters_tied_clips_together():
    # the top two tie, one positive: the threshold 0.9 takes both (precision 1/2)
    assert average_precision([0.9, 0.9, 0.1], [0, 1, 1]) == pytest.approx(0.5 * 0.5 + 0.5 * 2 / 3)
    # a perfect ranking and an all-tied one
    assert average_precision([3, 2, 1], [1, 1, 0]) == pytest.approx(1.0)
    assert average_precision([1, 1, 1, 1], [1, 0, 0, 0]) == pytest.approx(0.25)


def test_ap_equals_brute_force_on_random_cases_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 15))
        scores = rng.integers(0, 4, n).astype(float)  # many ties
        targets = rng.integers(0, 2, n)
        if targets.sum() == 0:
            targets[0] = 1
        assert average_precision(scores, targets) == pytest.approx(brute_force_ap(scores, targets))


def test_ap_does_not_depend_on_the_order_of_tied_clips():
    scores, targets = [0.5, 0.5, 0.5, 0.2], [1, 0, 0, 1]
    values = {
        round(average_precision([scores[i] for i in p], [targets[i] for i in p]), 12)
        for p in itertools.permutations(range(4))
    }
    assert len(values) == 1


def test_map_skips_classes_without_positives_and_reports_them_as_nan():
    scores = np.array([[0.9, 0.1, 0.3], [0.2, 0.8, 0.4]])
    targets = np.array([[1, 0, 0], [0, 1, 0]])
    mean, per_class = tagging_map(scores, targets)
    assert mean == pytest.approx(1.0)
    assert np.isnan(per_class[2])


def test_chance_map_is_the_mean_positive_rate():
    targets = np.array([[1, 0, 0], [0, 0, 0], [1, 1, 0], [0, 0, 0]])
    assert chance_map(targets) == pytest.approx((0.5 + 0.25) / 2)


@pytest.mark.parametrize(
    "scores, targets, match",
    [
        ([0.1, np.nan], [1, 0], "NaN"),
        ([0.1, 0.2], [1, 2], "0 or 1"),
        ([0.1, 0.2], [0, 0], "positive"),
        ([0.1], [1, 0], "same shape"),
    ],
)
def test_bad_input_is_an_error(scores, targets, match):
    with pytest.raises(ValueError, match=match):
        average_precision(scores, targets)


def test_crop_labels_are_the_events_that_sound_in_the_crop():
    clip = TaggingClip("clotho/x", ((0, 0.0, 1.0), (2, 3.0, 5.0), (1, 0.0, 6.0)), 6.0)
    assert clip.labels(0.0, 2.0, 3).tolist() == [1, 1, 0]
    assert clip.labels(1.0, 3.0, 3).tolist() == [0, 1, 0]  # ends exactly when it starts
    assert clip.labels(4.0, 6.0, 3).tolist() == [0, 1, 1]


def test_stage0_on_a_corpus_without_scene_labels_says_what_to_use(tmp_path):
    with pytest.raises(ConfigError, match="audio_pretrained: audioset"):
        scene_clips(tmp_path, "development")


def test_run_keys_name_a_checkpoint_by_its_content_not_its_path(tmp_path):
    from audiorepro.experiments.retrieval.stage0 import pretrained_key
    from audiorepro.models.audio_encoders import AudioEncoderConfig

    a, b, c = tmp_path / "a.pt", tmp_path / "b.pt", tmp_path / "c.pt"
    a.write_bytes(b"weights one")
    b.write_bytes(b"weights one")
    c.write_bytes(b"weights two")

    def key(path):
        return pretrained_key(AudioEncoderConfig(passt_variant="tiny", audio_pretrained=str(path)))

    assert key(a) == key(b)  # same weights elsewhere: the same runs
    assert key(a) != key(c)  # new weights under a known name: new runs
    assert key(a)["audio_pretrained"].startswith("sha256:")


def test_a_checkpoint_is_hashed_once_until_it_is_rewritten(tmp_path, monkeypatch):
    import os

    from audiorepro import storage

    hashed = []
    real = storage.file_sha256
    monkeypatch.setattr(storage, "file_sha256", lambda path: hashed.append(path) or real(path))
    path = tmp_path / "released.pt"
    path.write_bytes(b"weights one")
    first = storage.known_file_sha256(path)
    assert storage.known_file_sha256(path) == first and len(hashed) == 1
    path.write_bytes(b"weights two")  # rewritten in place: size kept, a new modification time
    os.utime(path, ns=(1, os.stat(path).st_mtime_ns + 1))
    assert storage.known_file_sha256(path) == real(path) != first and len(hashed) == 2


def test_a_killed_stage0_run_resumes_from_its_last_checkpoint_bit_for_bit(tmp_path):
    from audiorepro.config import replace, to_dict
    from audiorepro.experiments.retrieval.config import load_config
    from audiorepro.experiments.retrieval.data import load_data
    from audiorepro.experiments.retrieval.stage0 import STAGE0, encoder_fields, stage0_checkpoint
    from audiorepro.storage import RunStore
    from audiorepro.training.checkpoint import list_checkpoints

    cfg = load_config("smoke")
    data = load_data(cfg)
    stage0 = replace(cfg.stage0, steps=6, batch_size=8, warmup_steps=1)  # 3 steps an epoch
    corpus = to_dict(cfg.corpus)

    def train(store, **kwargs):
        return stage0_checkpoint(
            cfg.model, data.root, stage0, run_store=store, corpus=corpus, progress="none",
            **kwargs,
        )  # fmt: skip

    whole = torch.load(train(RunStore("t", tmp_path / "whole")), weights_only=True)
    store = RunStore("t", tmp_path / "runs")
    spec = {"encoder": to_dict(encoder_fields(cfg.model, stage0)), "stage0": to_dict(stage0)}
    staging = store.staging(store.run(STAGE0, spec | {"corpus": corpus}))
    with pytest.raises(Killed):
        train(store, callbacks=[KillAt(5)])
    saved = list_checkpoints(staging / "checkpoints")
    assert saved and store.runs(STAGE0) == []
    done = int(saved[-1].name.split("_")[-1])
    assert 1 <= done < 5
    again = KillAt()
    resumed = train(store, callbacks=[again])
    assert again.steps == list(range(done + 1, 7))  # only the steps after the checkpoint
    weights = torch.load(resumed, weights_only=True)  # the released-layout file
    assert weights.keys() == whole.keys()
    assert sum(torch.is_tensor(x) for x in whole.values()) > 10
    for name, x in whole.items():
        assert not torch.is_tensor(x) or torch.equal(x, weights[name]), name
    assert not staging.exists()
