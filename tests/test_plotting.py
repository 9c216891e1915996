from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from audiorepro import plotting


def test_spectrogram_with_tiers_shares_time_axis():
    feats = np.random.default_rng(0).normal(size=(150, 40))
    tiers = {"word": [("hello", 0.1, 0.6), ("world", 0.7, 1.4)], "phone": [("HH", 0.1, 0.2)]}
    fig = plotting.spectrogram(feats, hop_s=0.01, tiers=tiers, title="t")
    by_label = {ax.get_ylabel(): ax for ax in fig.axes}
    main, word, phone = by_label["mel band"], by_label["word"], by_label["phone"]
    assert main.get_xlim() == pytest.approx((0.0, 1.5))
    assert word.get_xlim() == pytest.approx((0.0, 1.5))
    assert [t.get_text() for t in word.texts] == ["hello", "world"]
    assert [t.get_text() for t in phone.texts] == ["HH"]


def test_spectrogram_rejects_wrong_rank_and_ax_with_tiers():
    with pytest.raises(ValueError, match=r"\(T, F\)"):
        plotting.spectrogram(np.zeros(10), hop_s=0.01)
    fig = plotting.similarity_heatmap(np.eye(3))
    with pytest.raises(ValueError, match="either ax or tiers"):
        plotting.spectrogram(np.zeros((5, 5)), hop_s=0.01, ax=fig.axes[0], tiers={"w": []})


def test_heatmap_labels_and_curves():
    fig = plotting.similarity_heatmap(
        np.arange(6.0).reshape(2, 3), row_labels=["a", "b"], col_labels=["x", "y", "z"]
    )
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["a", "b"]
    history = {
        "step": [1, 2, 3],
        "loss": [3.0, 2.0, 1.0],
        "eval_step": [3],
        "eval": [{"acc": 0.5}],
    }
    fig = plotting.training_curves(history, smooth=2)
    assert len(fig.axes) == 2  # loss axis and the twin axis of the evaluation metric
    with pytest.raises(ValueError, match="3 steps but 2 losses"):
        plotting.training_curves({"step": [1, 2, 3], "loss": [1.0, 2.0]})


def test_histogram_one_or_several_series():
    fig = plotting.histogram([1, 2, 2, 3], xlabel="frames", bins=3)
    assert fig.axes[0].get_xlabel() == "frames"
    fig = plotting.histogram({"train": [1, 2], "test": [2, 3]}, xlabel="x", bins=2)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["train", "test"]
