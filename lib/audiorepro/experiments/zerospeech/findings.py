"""The evaluation page's tables read back from the ledger: every row's means over seeds beside
its baselines (:func:`summarize`), and the paper-vs-ours table with a verdict per claim
(:func:`findings`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from audiorepro import reporting
from audiorepro.data.speech_segments import FEATURES, HOP_S
from audiorepro.experiments.zerospeech.config import CHAPTER, Config
from audiorepro.experiments.zerospeech.tables import PAPER, AblationRow, ablation_rows


def _tags(key: str, language: str = "english") -> dict[str, str]:
    return {"row": key, "language": language}


def summarize(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """One line per row of :func:`ablation_rows` that ``records`` (ledger records of the
    evaluation page) hold: means and standard deviations over seeds, codebook usage, the most a
    K-code stream at the code rate can carry (``bitrate_cap``), the k-means baseline with the
    same K (``kmeans_abx``, ``kmeans_bitrate``, ``beats_kmeans``), the ABX of the input frames
    (records tagged ``mfcc_frames`` / ``logmel_frames``, metric ``frames_abx``) and the units'
    ABX over it (``abx_over_frames``), and the paper's values. Only
    the records of ``config`` and its ledger seeds count
    (:func:`audiorepro.reporting.current_records`)."""
    records = reporting.current_records(records, config)
    frames = {}
    for feature, dim in FEATURES.items():
        got = reporting.values(
            records,
            chapter=CHAPTER,
            preset=preset,
            metric="frames_abx",
            tags={"row": f"{feature}_frames", "language": "english"},
        )
        if got:
            frames[dim] = float(np.mean(got))
    out = []
    for row in ablation_rows(config):

        def vals(metric: str, key: str = row.key) -> list[float]:
            return reporting.values(
                records, chapter=CHAPTER, preset=preset, metric=metric, tags=_tags(key)
            )

        abx_vals, rates = vals("abx_across"), vals("bitrate")
        if not abx_vals:
            continue
        km_abx, km_rate = vals("kmeans_abx_across"), vals("kmeans_bitrate")
        (abx_mean, abx_std), (rate_mean, rate_std) = (
            reporting.mean_std(abx_vals),
            reporting.mean_std(rates),
        )
        k = row.model.codebook_size
        out.append(
            {
                "row": row.key,
                "label": row.label,
                "table": row.table,
                "K": k,
                "seeds": len(abx_vals),
                "abx": abx_mean,
                "abx_std": abx_std,
                "bitrate": rate_mean,
                "bitrate_std": rate_std,
                "codes_used": float(np.mean(vals("codes_used"))),
                "perplexity": float(np.mean(vals("perplexity"))),
                "kmeans_abx": float(np.mean(km_abx)) if km_abx else math.nan,
                "kmeans_abx_std": reporting.mean_std(km_abx)[1] if km_abx else math.nan,
                "kmeans_bitrate": float(np.mean(km_rate)) if km_rate else math.nan,
                "frames_abx": frames.get(row.model.input_dim, math.nan),
                "abx_over_frames": abx_mean / frames.get(row.model.input_dim, math.nan),
                "beats_kmeans": _beats(abx_vals, km_abx),
                "bitrate_cap": math.log2(k) / (row.model.stride * HOP_S),
                "paper_abx": row.paper.abx_across if row.paper else None,
                "paper_bitrate": row.paper.bitrate if row.paper else None,
            }
        )
    return pd.DataFrame(out).set_index("row")


def _beats(units: Sequence[float], kmeans_abx: Sequence[float]) -> str:
    """Whether the units' ABX is below the k-means baseline's: by more than both spreads
    (``yes``), above it by as much (``no``), or within them (``unclear``)."""
    if not units or not kmeans_abx:
        return ""
    if len(units) < 2 or len(kmeans_abx) < 2:
        return "unclear (one seed)"
    (m, s), (mk, sk) = reporting.mean_std(units), reporting.mean_std(kmeans_abx)
    margin = s + sk
    return "yes" if m + margin < mk else "no" if m - margin > mk else "unclear"


def _row_finding(
    records: Sequence[Mapping[str, Any]], preset: str, row: AblationRow, base: AblationRow
) -> str:
    """The verdict on the paper's claim about ``row`` (against the main row), or ""."""

    def vals(key: str, metric: str) -> list[float]:
        tags = _tags(key)
        return reporting.values(records, chapter=CHAPTER, preset=preset, metric=metric, tags=tags)

    if row.key == "logmel":
        claim, better, worse = "MFCC beats log-Mel by 11.9 ABX points (Table 1)", "base", "logmel"
    elif row.key == "conv":
        claim, better, worse = (
            "the Transformer beats the conv VQ-VAE by 2.2 (Table 2)",
            "base",
            "conv",
        )
    elif row.key.startswith("K"):
        k, k0 = row.model.codebook_size, base.model.codebook_size
        better, worse = (row.key, "base") if k > k0 else ("base", row.key)
        claim = f"bitrate rises with K: K={max(k, k0)} above K={min(k, k0)} (Table 2)"
        return reporting.finding(
            claim, vals(better, "bitrate"), vals(worse, "bitrate"), metric="bitrate", digits=1
        ).sentence
    elif row.key.startswith(("smooth", "jitter", "combo")):
        gain = "1.2-1.8" if row.key.startswith("combo") else "0.0-0.3"
        claim, better, worse = (
            f"{row.label} lowers ABX by {gain} points (Table 3)",
            row.key,
            "base",
        )
    else:
        return ""
    return reporting.finding(
        claim,
        vals(better, "abx_across"),
        vals(worse, "abx_across"),
        metric="ABX %",
        higher_is_better=False,
    ).sentence


def findings(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """The paper-vs-ours table of the evaluation page: for every row of Tables 1-3 (and the
    surprise language), ABX and bitrate beside the paper's, with the verdict on the paper's
    claim about that row computed by :func:`audiorepro.reporting.finding` from ``records``
    (those of ``config`` and its ledger seeds only,
    :func:`audiorepro.reporting.current_records`)."""
    records = reporting.current_records(records, config)
    rows = ablation_rows(config)
    table = []
    for row in rows:
        source = row.paper.source if row.paper else ""
        found = _row_finding(records, preset, row, rows[0])
        for metric, unit, digits in (("abx_across", "ABX %", 2), ("bitrate", "bitrate", 1)):
            table.append(
                reporting.PaperRow(
                    f"{row.label}: {unit}",
                    metric,
                    getattr(row.paper, metric) if row.paper else None,
                    CHAPTER,
                    _tags(row.key),
                    digits=digits,
                    finding=found if (metric == "bitrate") == row.key.startswith("K") else "",
                    source=source,
                )
            )
    if config.surprise:
        paper = PAPER["surprise", 128]
        for metric, unit, digits in (("abx_across", "ABX %", 2), ("bitrate", "bitrate", 1)):
            table.append(
                reporting.PaperRow(
                    f"Indonesian, main model: {unit}",
                    metric,
                    getattr(paper, metric),
                    CHAPTER,
                    _tags("base", "surprise"),
                    digits=digits,
                    finding="Leaderboard value of the 4× system." if digits == 2 else "",
                    source=paper.source,
                )
            )
    return reporting.paper_vs_ours(table, preset=preset, records=records)
