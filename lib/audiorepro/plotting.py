"""The book's one figure style: spectrograms with label tiers, similarity heatmaps, curves.

Pages plot only through these functions, so every figure in the book has the same fonts, colour
maps and axis conventions (time in seconds on x, frequency or feature index on y, origin lower).
Each function draws into a given ``ax`` (or makes a figure) and returns the figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

STYLE: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "image.cmap": "magma",
    "legend.frameon": False,
}

Tier = Sequence[tuple[str, float, float]]
"""A label tier: ``(label, start_s, end_s)`` intervals, e.g. phones or words."""


def use_style() -> None:
    """Apply the book's matplotlib style (called by every plotting function)."""
    plt.rcParams.update(STYLE)


def _new_axes(ax: plt.Axes | None, figsize: tuple[float, float]) -> tuple[Figure, plt.Axes]:
    use_style()
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, ax


def spectrogram(
    feats: np.ndarray,
    *,
    hop_s: float,
    ax: plt.Axes | None = None,
    title: str | None = None,
    ylabel: str = "mel band",
    tiers: Mapping[str, Tier] | None = None,
    colorbar: bool = True,
    vmin: float | None = None,
    vmax: float | None = None,
) -> Figure:
    """Show a (T, F) feature matrix with time in seconds, plus time-aligned label tiers below.

    Args:
        feats: (T, F) features, frame t starting at ``t * hop_s`` seconds.
        hop_s: frame shift in seconds (0.01 for 10 ms features).
        ax: draw into this axis; tiers then need a figure of their own, so pass ``ax`` only
            without ``tiers``.
        tiers: tier name → ``(label, start_s, end_s)`` intervals, drawn as rows under the
            spectrogram sharing its time axis (e.g. ``{"word": words, "phone": phones}``).
    """
    feats = np.asarray(feats)
    if feats.ndim != 2:
        raise ValueError(f"spectrogram expects (T, F) features, got shape {feats.shape}")
    tiers = dict(tiers or {})
    if ax is not None and tiers:
        raise ValueError("pass either ax or tiers: label tiers need their own axes")
    use_style()
    if ax is None:
        heights = [4.0] + [0.5] * len(tiers)
        fig, axes = plt.subplots(
            1 + len(tiers),
            1,
            figsize=(10, 2.6 + 0.45 * len(tiers)),
            sharex=True,
            gridspec_kw={"height_ratios": heights, "hspace": 0.05},
            layout="constrained",
            squeeze=False,
        )
        ax, tier_axes = axes[0, 0], [a[0] for a in axes[1:]]
    else:
        fig, tier_axes = ax.figure, []
    duration = feats.shape[0] * hop_s
    im = ax.imshow(
        feats.T,
        origin="lower",
        aspect="auto",
        extent=(0.0, duration, 0, feats.shape[1]),
        interpolation="nearest",
        vmin=vmin,
        vmax=vmax,
    )
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if colorbar:
        fig.colorbar(im, ax=ax, pad=0.01, fraction=0.03)
    for tier_ax, (name, intervals) in zip(tier_axes, tiers.items(), strict=True):
        _draw_tier(tier_ax, name, intervals, duration)
    (tier_axes[-1] if tier_axes else ax).set_xlabel("time (s)")
    ax.set_xlim(0.0, duration)
    return fig


def _draw_tier(ax: plt.Axes, name: str, intervals: Tier, duration: float) -> None:
    ax.set_yticks([])
    ax.set_ylabel(name, rotation=0, ha="right", va="center")
    ax.set_xlim(0.0, duration)
    for spine in ("left", "top", "right"):
        ax.spines[spine].set_visible(False)
    for i, (label, start, end) in enumerate(intervals):
        ax.axvspan(start, end, color="0.85" if i % 2 else "0.93", lw=0)
        ax.axvline(start, color="0.4", lw=0.6)
        ax.text((start + end) / 2, 0.5, label, ha="center", va="center", fontsize=8, clip_on=True)


def waveform(
    wav: np.ndarray, *, sr: int, ax: plt.Axes | None = None, title: str | None = None
) -> Figure:
    """Plot a mono waveform (S,) against time in seconds."""
    fig, ax = _new_axes(ax, (10, 2))
    wav = np.asarray(wav)
    ax.plot(np.arange(wav.size) / sr, wav, lw=0.5, color="C0")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("amplitude")
    ax.set_xlim(0.0, wav.size / sr)
    if title:
        ax.set_title(title)
    return fig


def similarity_heatmap(
    sim: np.ndarray,
    *,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    xlabel: str = "audio",
    ylabel: str = "caption",
    cmap: str = "viridis",
    annotate: bool = False,
) -> Figure:
    """A (rows × cols) similarity matrix, e.g. caption-vs-audio cosine similarities."""
    sim = np.asarray(sim, dtype=float)
    if sim.ndim != 2:
        raise ValueError(f"similarity_heatmap expects a 2-D matrix, got shape {sim.shape}")
    size = (min(2 + 0.35 * sim.shape[1], 12), min(1.5 + 0.3 * sim.shape[0], 10))
    fig, ax = _new_axes(ax, size)
    im = ax.imshow(sim, cmap=cmap, aspect="auto", interpolation="nearest")
    fig.colorbar(im, ax=ax, pad=0.01, fraction=0.04)
    if row_labels is not None:
        ax.set_yticks(range(len(row_labels)), row_labels, fontsize=7)
    if col_labels is not None:
        ax.set_xticks(range(len(col_labels)), col_labels, fontsize=7, rotation=90)
    if annotate:
        for (i, j), v in np.ndenumerate(sim):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return fig


def loss_curves(
    panels: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    xlabel: str = "optimizer step",
    ylabel: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Loss curves per optimizer step, one panel per key of ``panels`` (its title; "" for
    none), one line per loss in each: ``{"passt": {"loss_sup": [...], "loss_dist": [...]}}``."""
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=figsize or (4 * n, 3), squeeze=False)
    for ax, (title, curves) in zip(axes[0], panels.items(), strict=True):
        for name, values in curves.items():
            ax.plot(range(1, len(values) + 1), values, label=name)
        if title:
            ax.set_title(title)
        ax.set_xlabel(xlabel)
        if ylabel:
            ax.set_ylabel(ylabel)
        ax.legend()
    fig.tight_layout()
    return fig


def lambda_sweep(
    sweep: Any,
    *,
    x: str = "λ",
    y: str = "mAP@10 mean",
    yerr: str = "std",
    baseline: str = "stage 1",
    ylabel: str = "mAP@10 (%)",
) -> Figure:
    """A metric against λ with seed error bars, one line per ``model`` of the ``sweep`` table
    (columns ``model``, ``x``, ``y``, ``yerr`` and ``baseline``), and each model's ``baseline``
    (the model before distillation) as a dotted line."""
    fig, ax = plt.subplots(figsize=(5, 3))
    for name, group in sweep.groupby("model", sort=False):
        ax.errorbar(group[x], group[y], yerr=group[yerr], marker="o", capsize=3, label=name)
        ax.axhline(
            group[baseline].iloc[0], linestyle=":", color="grey", label=f"{name}, {baseline}"
        )
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.legend()
    fig.tight_layout()
    return fig


def training_curves(
    history: Mapping[str, Any],
    *,
    ax: plt.Axes | None = None,
    title: str | None = None,
    eval_metrics: Sequence[str] | None = None,
    smooth: int = 1,
) -> Figure:
    """Training loss against step, with evaluation metrics on a second axis.

    ``history`` is ``TrainResult.to_dict()`` (keys ``step``, ``loss``, and optionally
    ``eval_step`` with ``eval`` = list of metric dicts), or any mapping with those keys.
    ``smooth`` > 1 draws a running mean over that many steps on top of the raw loss.
    """
    fig, ax = _new_axes(ax, (7, 3.2))
    steps = np.asarray(history.get("step", []))
    loss = np.asarray(history.get("loss", []), dtype=float)
    if steps.size != loss.size:
        raise ValueError(f"history has {steps.size} steps but {loss.size} losses")
    ax.plot(steps, loss, color="C0", alpha=0.35 if smooth > 1 else 1.0, lw=0.8, label="loss")
    if smooth > 1 and loss.size >= smooth:
        kernel = np.ones(smooth) / smooth
        ax.plot(steps[smooth - 1 :], np.convolve(loss, kernel, "valid"), color="C0", lw=1.5)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    evals = history.get("eval") or []
    if evals:
        names = list(eval_metrics or evals[0].keys())
        ax2 = ax.twinx()
        ax2.spines["right"].set_visible(True)
        for k, name in enumerate(names):
            vals = [e.get(name, np.nan) for e in evals]
            ax2.plot(history["eval_step"], vals, "o-", color=f"C{k + 1}", ms=3, label=name)
        ax2.set_ylabel(", ".join(names))
        ax2.legend(loc="upper right", fontsize=8)
    if title:
        ax.set_title(title)
    return fig


def scatter_labeled(
    x: Sequence[float],
    y: Sequence[float],
    labels: Sequence[str],
    *,
    xlabel: str,
    ylabel: str,
    ax: plt.Axes | None = None,
    title: str | None = None,
    xerr: Sequence[float] | None = None,
    yerr: Sequence[float] | None = None,
) -> Figure:
    """Points with text labels and optional error bars (e.g. bitrate vs ABX per model)."""
    fig, ax = _new_axes(ax, (6, 4))
    ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=4, capsize=2)
    for xi, yi, label in zip(x, y, labels, strict=True):
        ax.annotate(label, (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return fig


def histogram(
    values: Mapping[str, Sequence[float]] | Sequence[float],
    *,
    xlabel: str,
    bins: int | Sequence[float] = 30,
    ax: plt.Axes | None = None,
    title: str | None = None,
    ylabel: str = "count",
) -> Figure:
    """Histogram of one sample, or overlaid step histograms of several named ones."""
    fig, ax = _new_axes(ax, (6, 3))
    series = values if isinstance(values, Mapping) else {"": values}
    for name, vals in series.items():
        ax.hist(np.asarray(vals, dtype=float), bins=bins, histtype="step", lw=1.5, label=name)
    if isinstance(values, Mapping):
        ax.legend(fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return fig


def two_view_projection(
    acoustic_xy: np.ndarray,
    acoustic_labels: Sequence[str],
    word_xy: np.ndarray,
    word_labels: Sequence[str],
    *,
    ax: plt.Axes | None = None,
    title: str | None = None,
) -> Figure:
    """A 2-D projection of two embedding views: acoustic tokens as dots coloured by word,
    written words as labelled stars in the same colour (multi-view AWE, chapter 04).

    Args:
        acoustic_xy: (N, 2) projected acoustic embeddings; acoustic_labels: (N,) their words.
        word_xy: (W, 2) projected written-word embeddings; word_labels: (W,) the words.
    """
    fig, ax = _new_axes(ax, (6.5, 5))
    words = sorted(set(acoustic_labels) | set(word_labels))
    colour = {w: f"C{k % 10}" for k, w in enumerate(words)}
    acoustic_xy, word_xy = np.asarray(acoustic_xy), np.asarray(word_xy)
    ax.scatter(
        acoustic_xy[:, 0],
        acoustic_xy[:, 1],
        c=[colour[w] for w in acoustic_labels],
        s=14,
        alpha=0.6,
        label="acoustic tokens f(x)",
    )
    ax.scatter(
        word_xy[:, 0],
        word_xy[:, 1],
        c=[colour[w] for w in word_labels],
        marker="*",
        s=160,
        edgecolors="black",
        linewidths=0.6,
        label="written words g(c)",
    )
    for (x, y), w in zip(word_xy, word_labels, strict=True):
        ax.annotate(w, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xlabel("component 1")
    ax.set_ylabel("component 2")
    ax.legend(loc="best", fontsize=8)
    if title:
        ax.set_title(title)
    return fig


def bars(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    ylabel: str,
    ax: plt.Axes | None = None,
    title: str | None = None,
    errors: Sequence[float] | None = None,
    rotate: bool = True,
) -> Figure:
    """One bar per label (e.g. tokens per phone, ABX per model), optional error bars."""
    fig, ax = _new_axes(ax, (min(10.0, max(4.0, 0.22 * len(labels) + 2)), 3))
    x = np.arange(len(labels))
    ax.bar(x, np.asarray(values, dtype=float), yerr=errors, capsize=2, color="C0")
    if len(labels) <= 60:  # beyond that the labels would overlap: leave the axis unlabelled
        ax.set_xticks(x, labels, rotation=90 if rotate else 0, fontsize=8)
    else:
        ax.set_xticks([])
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return fig


# chapter 04


def history_curves(
    history: Any,
    *,
    ax: plt.Axes | None = None,
    title: str | None = None,
    eval_metrics: Sequence[str] | None = None,
    smooth: int = 1,
) -> Figure:
    """:func:`training_curves` of a training history object: anything with ``steps``,
    ``losses``, ``eval_steps`` and ``eval_metrics`` attributes (``TrainResult``)."""
    return training_curves(
        {
            "step": history.steps,
            "loss": history.losses,
            "eval_step": history.eval_steps,
            "eval": history.eval_metrics,
        },
        ax=ax,
        title=title,
        eval_metrics=eval_metrics,
        smooth=smooth,
    )
