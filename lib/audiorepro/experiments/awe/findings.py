"""The paper's numbers and ours: the sweep tables and curves, and the paper-vs-ours table with
a verdict computed from the ledger for every claim of Rhodes & Bains (Tables 1-4)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from audiorepro import reporting
from audiorepro.experiments.awe.config import CHAPTER, Config
from audiorepro.experiments.awe.plan import SWEEP_METRICS
from audiorepro.reporting import PaperRow


def setting_label(row: Mapping[str, Any], table: str) -> str:
    """A sweep row's setting in words: ``"N = 4 Avg"`` (Table 1) or ``"h = 16"`` (Table 2)."""
    if table == "1":
        return f"N = {row['phone_layers']} {str(row['phone_pooling']).capitalize()}"
    return f"h = {row['phone_heads']}"


def _by_setting(
    rows: Sequence[Mapping[str, Any]], table: str
) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(setting_label(row, table), []).append(row)
    return groups


def sweep_table(rows: Sequence[Mapping[str, Any]], table: str, digits: int = 3) -> pd.DataFrame:
    """One line per setting of a sweep (Table ``"1"`` or ``"2"``): its seeds, and the mean ±
    std over them of the scored split's acoustic and cross-view AP and of the best dev
    cross-view AP, and the epochs trained."""
    out = []
    for label, group in _by_setting(rows, table).items():
        line: dict[str, Any] = {
            "setting": label,
            "seeds": ", ".join(str(r["seed"]) for r in group),
        }
        for metric in SWEEP_METRICS:
            line[metric] = reporting.format_mean_std([r[metric] for r in group], digits)
        line["epochs"] = ", ".join(sorted({str(r["epochs"]) for r in group}))
        out.append(line)
    return pd.DataFrame(out).set_index("setting")


def sweep_curves(rows: Sequence[Mapping[str, Any]], table: str) -> dict[str, list[float]]:
    """The dev cross-view AP after each epoch, mean over the seeds of each setting (a run
    stopped early by the schedule counts until its last epoch)."""
    curves = {}
    for label, group in _by_setting(rows, table).items():
        length = max(len(r["dev_curve"]) for r in group)
        padded = np.full((len(group), length), np.nan)
        for i, r in enumerate(group):
            padded[i, : len(r["dev_curve"])] = r["dev_curve"]
        curves[label] = np.nanmean(padded, axis=0).tolist()
    return curves


def sweep_spreads(rows: Sequence[Mapping[str, Any]], table: str) -> dict[str, float]:
    """The seed spread of each setting's last dev cross-view AP: the standard deviation
    (ddof 1) over its runs of their curves' last value (NaN with one seed)."""
    return {
        label: float(np.std([r["dev_curve"][-1] for r in group], ddof=1))
        if len(group) > 1
        else float("nan")
        for label, group in _by_setting(rows, table).items()
    }


def curve_ends(
    curves: Mapping[str, Sequence[float]], spreads: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """How far each curve of :func:`sweep_curves` still rose at its end: the last value, the
    gain of the last epoch, and that gain as a share of the rise since the first epoch (near
    0: flat, a plateau; 1 / (epochs - 1) or above: still climbing as fast as on average).

    With ``spreads`` (:func:`sweep_spreads`), also the seed spread of the last value and
    whether the curve has levelled off: its last epoch added less than that spread, so another
    epoch at that pace would move the setting by less than its seeds already differ."""
    out = []
    for label, curve in curves.items():
        first, last = curve[0], curve[-1]
        gain = last - curve[-2] if len(curve) > 1 else float("nan")
        rise = last - first
        row: dict[str, Any] = {
            "setting": label,
            "epochs": len(curve),
            "last": last,
            "last-epoch gain": gain,
            "share of the rise": gain / rise if rise > 0 else float("nan"),
        }
        if spreads is not None:
            row["seed std at the end"] = spreads[label]
            row["levelled off"] = bool(gain < spreads[label])
        out.append(row)
    return pd.DataFrame(out).set_index("setting")


# ------------------------------------------------------------------------------- the paper

PAPER: dict[str, dict[Any, float]] = {
    # Table 1: dev cross-view AP after 15 epochs, by phoneme-encoder depth N and pooling.
    "Table 1": {
        (1, "avg"): 0.272,
        (1, "rep"): 0.030,
        (4, "avg"): 0.298,
        (4, "rep"): 0.247,
        (8, "avg"): 0.000,
        (8, "rep"): 0.000,
    },
    # Table 2: dev acoustic AP after 15 epochs, N = 4, Avg, by number of heads h.
    "Table 2": {1: 0.373, 4: 0.425, 8: 0.429, 16: 0.447, 32: 0.413},
    # Table 3: test acoustic (same-different) AP.
    "Table 3": {"mfcc-dtw": 0.214, "chosen": 0.708},
    # Table 4: test cross-view AP.
    "Table 4": {"chosen": 0.551},
}
"""The paper's numbers (Rhodes & Bains), by table: Table 1 cross-view AP by ``(N, pooling)``,
Table 2 acoustic AP by heads, Table 3 acoustic AP and Table 4 cross-view AP by model."""

PAPER_BEST_HEADS = 16
"""Table 2's best number of heads (and the chosen model's)."""


def _t1(n: int, pooling: str) -> dict[str, Any]:
    return {"table": "1", "N": n, "pooling": pooling}


_Ours = Callable[[str, Mapping[str, Any]], list[float]]
"""Our per-seed values of a metric for a setting's ledger tags."""
_Says = Callable[..., str]
"""The verdict sentence on a claim, from :func:`audiorepro.reporting.finding`."""


def _table1_rows(
    config: Config, ours: _Ours, says: _Says, floors: Mapping[str, float]
) -> list[PaperRow]:
    """Table 1's paper-vs-ours rows: on each Rep row, Avg beats Rep at that depth; on each
    Avg row but the middle one, the middle depth beats it; on the deepest rows, that depth
    fails (at or below the floor). A failing run is part of these claims, so only a
    comparison of two failing runs is inconclusive for want of learning."""
    metric, floor = "crossview_ap", floors.get("crossview_ap")
    depths = list(config.sweep_layers)
    middle, deepest = depths[len(depths) // 2], depths[-1]
    rows = []
    for n in depths:
        for p in ("avg", "rep"):
            texts = []
            if p == "rep":
                claim = f"Avg beats Rep at N = {n}"
                texts.append(says(claim, metric, _t1(n, "avg"), _t1(n, p), **_floor(floor)))
            elif n != middle:
                claim = f"N = {middle} beats N = {n} (Avg)"
                texts.append(says(claim, metric, _t1(middle, p), _t1(n, p), **_floor(floor)))
            if n == deepest and len(depths) > 1 and floor is not None:
                claim = f"N = {n} fails ({p.capitalize()})"
                found = reporting.fails(
                    claim, ours(metric, _t1(n, p)), floor, metric=metric, digits=3
                )
                texts.append(found.sentence)
            rows.append(
                PaperRow(
                    f"Table 1 cross-view AP, N = {n} {p.capitalize()}",
                    metric,
                    PAPER["Table 1"].get((n, p)),
                    CHAPTER,
                    _t1(n, p),
                    digits=3,
                    finding=" ".join(texts),
                    source="Table 1",
                )
            )
    return rows


def _floor(floor: float | None) -> dict[str, Any]:
    """The keywords of a Table 1 comparison: the floor, and that one failing run may be the
    paper's point."""
    return {} if floor is None else {"must_beat": floor, "both_must_learn": False}


def _table2_rows(
    config: Config, ours: _Ours, says: _Says, floors: Mapping[str, float]
) -> list[PaperRow]:
    """Table 2's rows: on each head count but the paper's best, h = 16 beats it; on the best
    row, which head count has the highest mean here."""
    best_h, floor = PAPER_BEST_HEADS, floors.get("acoustic_ap")
    means = {
        h: float(np.mean(v))
        for h in config.sweep_heads
        if (v := ours("acoustic_ap", {"table": "2", "h": h}))
    }
    rows = []
    for h in config.sweep_heads:
        text = ""
        if h != best_h and best_h in config.sweep_heads:
            text = says(
                f"h = {best_h} beats h = {h}",
                "acoustic_ap",
                {"table": "2", "h": best_h},
                {"table": "2", "h": h},
                must_beat=floor,
            )
        elif h == best_h and means:
            top = max(means, key=means.get)
            text = f"Highest mean acoustic AP here: h = {top} ({means[top]:.3f})."
        rows.append(
            PaperRow(
                f"Table 2 acoustic AP, h = {h}",
                "acoustic_ap",
                PAPER["Table 2"].get(h),
                CHAPTER,
                {"table": "2", "h": h},
                digits=3,
                finding=text,
                source="Table 2",
            )
        )
    return rows


def findings(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    *,
    chance: Mapping[str, float] | None = None,
    on_dtw_pairs: Sequence[float] | None = None,
) -> pd.DataFrame:
    """The paper-vs-ours table of chapter 04, every value and finding from ledger ``records``.

    Findings (each by :func:`audiorepro.reporting.finding` over the seeds, so a claim
    reproduces or contradicts only beyond the seed spread): Avg beats Rep at every depth; the
    middle depth beats the others (Avg); the deepest one fails to learn
    (:func:`audiorepro.reporting.fails`; both poolings collapse in the paper); h = 16 beats
    the other head counts; the transformer beats MFCC + DTW (on the baseline's own pairs when
    ``on_dtw_pairs``, the chosen models' acoustic AP on that subset, is given; DTW has no
    seed, so one value suffices there); acoustic AP exceeds cross-view AP.

    ``chance`` (:func:`~audiorepro.experiments.awe.evaluate.chance_levels` of the scored split)
    sets the floor a run must beat to count as having learned,
    :func:`audiorepro.reporting.chance_floor` (3 x chance): a Table 2 comparison with a run below
    it is inconclusive; in Table 1, where a failing encoder is the paper's claim, only a
    comparison of two runs below it is, and the floor is what "fails" means. Without ``chance``
    there is no floor and no "fails" finding. Only the records of ``config`` and its seeds count
    (:func:`audiorepro.reporting.current_records`), so a row of an older preset or another
    setting never shows.
    """
    records = reporting.current_records(records, config)
    floors = {m: reporting.chance_floor(v) for m, v in (chance or {}).items()}

    def ours(metric: str, tags: Mapping[str, Any]) -> list[float]:
        return reporting.values(records, chapter=CHAPTER, preset=preset, metric=metric, tags=tags)

    def says(claim: str, metric: str, better: Any, worse: Any, **kw: Any) -> str:
        better = ours(metric, better) if isinstance(better, Mapping) else better
        return reporting.finding(
            claim, better, ours(metric, worse), metric=metric, digits=3, **kw
        ).sentence

    rows = _table1_rows(config, ours, says, floors)
    rows += _table2_rows(config, ours, says, floors)
    chosen, dtw = {"model": "chosen"}, {"model": "mfcc-dtw"}
    pairs = "on the same pairs" if on_dtw_pairs is not None else "(whole test set)"
    beats_dtw = says(
        f"the transformer beats MFCC + DTW {pairs}",
        "acoustic_ap",
        list(on_dtw_pairs) if on_dtw_pairs is not None else chosen,
        dtw,
        min_seeds=1,
    )
    below = reporting.finding(
        "acoustic AP exceeds cross-view AP",
        ours("acoustic_ap", chosen),
        ours("crossview_ap", chosen),
        digits=3,
    ).sentence
    rows += [
        PaperRow(
            "Table 3 MFCC + DTW acoustic AP",
            "acoustic_ap",
            PAPER["Table 3"]["mfcc-dtw"],
            CHAPTER,
            dtw,
            digits=3,
            finding=beats_dtw,
            source="Table 3",
        ),
        PaperRow(
            "Table 3 transformer acoustic AP",
            "acoustic_ap",
            PAPER["Table 3"]["chosen"],
            CHAPTER,
            chosen,
            digits=3,
            finding="mean ± std over seeds",
            source="Table 3",
        ),
        PaperRow(
            "Table 4 transformer cross-view AP",
            "crossview_ap",
            PAPER["Table 4"]["chosen"],
            CHAPTER,
            chosen,
            digits=3,
            finding=below,
            source="Table 4",
        ),
    ]
    return reporting.paper_vs_ours(rows, preset=preset, records=records)
