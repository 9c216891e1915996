"""Chapter 02's numbers beside the paper's: the Table 2 analogue, the λ sweep, the gains of
distillation, the paper-vs-ours findings with a verdict per claim, and a measured check of the
mechanism behind each claim that does not reproduce."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from audiorepro import reporting
from audiorepro.experiments.distillation.config import CHAPTER, Config
from audiorepro.experiments.distillation.evaluate import chance_floor, run_tags
from audiorepro.experiments.retrieval.config import METRICS
from audiorepro.reporting import PaperRow


def _mean(
    records: Sequence[Mapping[str, Any]],
    preset: str,
    tags: Mapping[str, Any],
    metric: str = "mAP@10",
) -> float:
    vals = reporting.values(
        records, chapter=CHAPTER, preset=preset, metric=metric, tags=tags, scale=100
    )
    return reporting.mean_std(vals)[0] if vals else float("nan")


TOP1 = "train_top1"
"""The ledger key of the training-caption top-1 (:func:`training_top1`)."""


def table(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    *,
    stage1: bool = True,
    distilled: bool = True,
    ensemble_label: str = "ensemble of the distilled models",
    chance: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Mean ± std over seeds (in %) of the stage-1 models and their ensemble, the distilled ones
    (λ = ``lam``) and their ensemble, read from the ledger: the evaluation metrics and, for
    stage 1, the training-caption top-1 (so the table shows whether the teachers' ensemble
    beats each model before stage 2). With ``chance`` (:func:`chance_levels`), a last row of
    chance levels.
    Only the records of ``config`` count (:func:`audiorepro.reporting.current_records`)."""
    records = reporting.current_records(records, config)
    rows = []
    if stage1:
        label = (lambda n: f"{n}, stage 1") if distilled else str
        rows += [(label(n), run_tags(n, "stage1")) for n in config.teachers]
        rows.append(("ensemble of the stage-1 models", run_tags("ensemble", "stage1")))
    if distilled:
        label = (lambda n: f"{n}, distilled (λ = {config.lam:g})") if stage1 else str
        rows += [(label(n), run_tags(n, "distilled", config.lam)) for n in config.teachers]
        rows.append((ensemble_label, run_tags("ensemble", "distilled", config.lam)))
    metrics = [*METRICS, *((TOP1,) if stage1 else ())]
    out = reporting.seed_table(
        records, rows, chapter=CHAPTER, preset=preset, metrics=metrics, scale=100
    )
    if stage1:
        # the top-1 is measured for the teachers only: no number is not "not run" for students
        out.loc[[i for i, (_, t) in enumerate(rows) if t["stage"] == "distilled"], TOP1] = "—"
    if chance is not None:
        row = {"setting": "chance (random ranking)", "seeds": "—"}
        row |= {m: f"{100 * chance[m]:.2f}" if m in chance else "—" for m in metrics}
        out = pd.concat([out, pd.DataFrame([row])], ignore_index=True)
    return out.rename(columns={TOP1: "training top-1"})


table2 = functools.partial(table, stage1=True, distilled=True)
"""The Table 2 analogue: stage 1 and its ensemble, distilled and its ensemble."""


def lambda_sweep(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str
) -> pd.DataFrame:
    """mAP@10 (%) per model and λ, mean and std over seeds, with the stage-1 mean of each
    model (the dotted line of :func:`~audiorepro.plotting.lambda_sweep`).
    Only the records of ``config`` count (:func:`audiorepro.reporting.current_records`)."""
    records = reporting.current_records(records, config)
    rows = []
    for name in config.sweep_models:
        base = _mean(records, preset, run_tags(name, "stage1"))
        for lam in config.lambdas:
            vals = reporting.values(
                records,
                chapter=CHAPTER,
                preset=preset,
                metric="mAP@10",
                tags=run_tags(name, "distilled", lam),
                scale=100,
            )
            mean, std = reporting.mean_std(vals) if vals else (float("nan"), float("nan"))
            rows.append(
                {
                    "model": name,
                    "λ": lam,
                    "mAP@10 mean": mean,
                    "std": std,
                    "seeds": len(vals),
                    "stage 1": base,
                }
            )
    return pd.DataFrame(rows)


PAPER: dict[str, dict[tuple[str, str], float]] = {
    # Table 2: mAP@10 (%) of each model after stage 1 and after distillation fine-tuning, and
    # of the ensemble of the three distilled models (SID 1).
    "Table 2": {
        ("passt", "stage1"): 35.7,
        ("atst", "stage1"): 32.31,
        ("mobilenet", "stage1"): 34.06,
        ("passt", "distilled"): 39.77,
        ("atst", "distilled"): 38.96,
        ("mobilenet", "distilled"): 37.73,
        ("ensemble", "distilled"): 41.90,
    },
}
"""The paper's numbers (paper (b), mAP@10 in %), by the table that reports them."""


def claims(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str
) -> list[dict[str, Any]]:
    """The chapter's claims, each ``{"kind", "model", "claim", "tags", "versus"}``: the setting
    the paper says wins (``tags``) and the one it beats (``versus``). Distillation (λ = ``lam``)
    improves each model over its stage-1 model (``kind="distill"``); λ = ``lam`` beats λ = 0
    for each swept model (``"lambda"``); the ensemble of the distilled models beats the best
    single distilled one (``"ensemble"``, best by the ledger's mean mAP@10).
    Only the records of ``config`` count (:func:`audiorepro.reporting.current_records`)."""
    records = reporting.current_records(records, config)
    lam = config.lam
    out = []
    for name in config.teachers:
        distilled = run_tags(name, "distilled", lam)
        out.append(
            dict(kind="distill", model=name, claim=f"distillation fine-tuning improves {name}",
                 tags=distilled, versus=run_tags(name, "stage1"))
        )  # fmt: skip
        if name in config.sweep_models:
            out.append(
                dict(kind="lambda", model=name,
                     claim=f"λ = {lam:g} beats λ = 0 (plain fine-tuning) for {name}",
                     tags=distilled, versus=run_tags(name, "distilled", 0.0))
            )  # fmt: skip
    best = max(
        config.teachers, key=lambda n: _mean(records, preset, run_tags(n, "distilled", lam))
    )
    out.append(
        dict(kind="ensemble", model=best,
             claim=f"the ensemble beats the best single distilled model ({best})",
             tags=run_tags("ensemble", "distilled", lam), versus=run_tags(best, "distilled", lam))
    )  # fmt: skip
    return out


def _judge(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str, claim: Mapping[str, Any],
    chance: Mapping[str, float],
) -> reporting.Finding:  # fmt: skip
    """The verdict on one of :func:`claims`: mAP@10 beyond the seed spread, every compared run
    at 3 × chance or above (the training loss is no part of it)."""
    get = functools.partial(reporting.values, records, chapter=CHAPTER, preset=preset)
    return reporting.finding(
        claim["claim"], get(metric="mAP@10", tags=claim["tags"], scale=100),
        get(metric="mAP@10", tags=claim["versus"], scale=100), metric="mAP@10",
        must_beat=chance_floor(chance), digits=2,
    )  # fmt: skip


def findings(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    chance: Mapping[str, float],
) -> pd.DataFrame:
    """The paper-vs-ours table: each model before and after distillation, both ensembles, beside
    Table 2, with a verdict on each of :func:`claims`: reproduces, contradicts or inconclusive,
    the latter also when a compared run does not reach 3 × chance mAP@10 (``chance`` from
    :func:`chance_levels`).
    Only the records of ``config`` count (:func:`audiorepro.reporting.current_records`)."""
    records = reporting.current_records(records, config)
    paper = PAPER["Table 2"]
    row = functools.partial(
        PaperRow, metric="mAP@10", chapter=CHAPTER, scale=100, digits=2, source="Table 2",
        must_beat=chance_floor(chance),
    )  # fmt: skip
    by_kind = {(c["tags"]["model"], c["kind"]): c for c in claims(records, config, preset)}

    rows = []
    for name in config.teachers:
        rows.append(
            row(f"{name}, stage 1", paper=paper[name, "stage1"], tags=run_tags(name, "stage1"))
        )
        c = by_kind[name, "distill"]
        rows.append(
            row(f"{name}, distilled", paper=paper[name, "distilled"], tags=c["tags"],
                claim=c["claim"], versus=c["versus"])
        )  # fmt: skip
        if (name, "lambda") in by_kind:
            c = by_kind[name, "lambda"]
            rows.append(
                row(f"{name}, distilled (λ = {config.lam:g}) vs λ = 0", paper=None,
                    tags=c["tags"], claim=c["claim"], versus=c["versus"], source="")
            )  # fmt: skip
    rows.append(
        row("ensemble of the stage-1 models", paper=None, tags=run_tags("ensemble", "stage1"),
            source="")
    )  # fmt: skip
    c = by_kind["ensemble", "ensemble"]
    rows.append(
        row("ensemble of the distilled models", paper=paper["ensemble", "distilled"],
            tags=c["tags"], claim=c["claim"], versus=c["versus"])
    )  # fmt: skip
    return reporting.paper_vs_ours(rows, preset=preset, records=records)


def _pct(value: float, digits: int = 2) -> str:
    return "not run" if math.isnan(value) else f"{value:.{digits}f}"


def _check_distill(mean: Any, name: str, chance: Mapping[str, float]) -> tuple[str, str, str]:
    """Distillation can improve ``name`` only if the stage-1 ensemble beats it."""
    ens, own = run_tags("ensemble", "stage1"), run_tags(name, "stage1")
    e, m = mean(ens), mean(own)
    et, mt = mean(ens, metric=TOP1), mean(own, metric=TOP1)
    measured = (
        f"mAP@10 on the evaluation split: stage-1 ensemble {_pct(e)}, {name} {_pct(m)}; "
        f"training-caption top-1: ensemble {_pct(et, 1)} %, {name} {_pct(mt, 1)} % "
        f"(chance {100 * chance.get(TOP1, math.nan):.1f} %)"
    )
    if math.isnan(e) or math.isnan(et):
        reading = "not measured: run page 01 (stage-1 ensemble and top-1)"
    elif e > m and et > mt:
        reading = (
            f"the targets know more than {name} on both counts, so the mechanism is there; "
            "the student did not take it up at this budget"
        )
    else:
        where = (
            "both counts" if e <= m and et <= mt
            else "the evaluation split" if e <= m else "the training captions"
        )  # fmt: skip
        reading = (
            f"the stage-1 ensemble is not better than {name} on {where}: its targets have "
            "little to teach this student"
        )
    return "the teachers' ensemble beats this model before stage 2", measured, reading


def _check_lambda(
    records: Sequence[Mapping[str, Any]], preset: str, mean: Any
) -> tuple[str, str, str]:
    """λ = 1 can differ from λ = 0 only if the batch targets depart from one-hot (page 02)."""
    check = "the targets carry something beyond the one-hot pairs"
    hits = reporting.select(
        records, chapter=CHAPTER, preset=preset, metric="offpair_audio",
        tags={"analysis": "beliefs"},
    )  # fmt: skip
    if not hits:
        return check, "not measured: run page 02", ""
    keys = ("offpair_audio", "offpair_caption", "offpair_uniform", "batch_size")
    off_a, off_c, flat, size = (float(np.mean([r["metrics"][k] for r in hits])) for k in keys)
    top1 = mean(run_tags("ensemble", "stage1"), metric=TOP1)
    measured = (
        f"in a batch of {int(size)}, p̂_a moves {off_a:.3f} and p̂_c {off_c:.3f} of their mass "
        f"off the paired entries (one-hot 0, uniform {flat:.3f}); the ensemble's "
        f"training-caption top-1 is {_pct(top1, 1)} %"
    )
    share = off_a / flat if flat > 0 else math.nan
    if share < 0.1:
        reading = (
            "the targets are nearly one-hot: L_dist repeats L_sup, so λ = 1 acts as a doubled "
            "L_sup rather than as new information"
        )
    elif share > 0.9:
        reading = (
            "the targets are nearly uniform: the teachers cannot tell the batch's clips apart, "
            "so L_dist pulls the student towards flat beliefs"
        )
    else:
        reading = (
            f"the targets move {100 * share:.0f} % of the uniform level off the pairs; whether "
            "that mass lands on clips the captions describe is what the ensemble's top-1 bounds"
        )
    return check, measured, reading


def _check_ensemble(mean: Any, config: Config, tags: Mapping[str, Any]) -> tuple[str, str, str]:
    """An ensemble helps members of comparable quality whose errors cancel."""
    members = {n: mean(run_tags(n, "distilled", config.lam)) for n in config.teachers}
    ranked = sorted(members.values(), reverse=True)
    ensemble, average = mean(tags), float(np.mean(ranked))
    measured = "distilled mAP@10: " + ", ".join(f"{n} {_pct(v)}" for n, v in members.items())
    measured += f"; ensemble {_pct(ensemble)}"
    gap = ranked[0] - ranked[1] if len(ranked) > 1 else math.nan
    if ensemble > average:
        reading = (
            f"averaging beats the members' mean ({_pct(average)}) but not the best member, "
            f"which leads the next by {_pct(gap)} points"
        )
    else:
        reading = (
            f"the ensemble does not beat even the members' mean ({_pct(average)}): their "
            "errors do not cancel"
        )
    return "the distilled members are comparably good", measured, reading


def mechanisms(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    chance: Mapping[str, float],
) -> pd.DataFrame:
    """For each of :func:`claims` that does not reproduce, a measured check of the mechanism it
    rests on, from the ledger: for "distillation improves X", whether the stage-1 ensemble beats
    X on the evaluation split and on training-caption top-1 (the targets know more than the
    student); for λ = 1 vs λ = 0, how far the batch targets depart from one-hot (page 02's
    :func:`target_summary`); for the ensemble, whether it beats the members' mean and how far
    the best member leads. Columns: claim, verdict, check, measured, reading.
    Only the records of ``config`` count (:func:`audiorepro.reporting.current_records`)."""
    records = reporting.current_records(records, config)
    mean = functools.partial(_mean, records, preset)
    rows = []
    for c in claims(records, config, preset):
        found = _judge(records, config, preset, c, chance)
        if found.verdict == "reproduces":
            continue
        if c["kind"] == "distill":
            check, measured, reading = _check_distill(mean, c["model"], chance)
        elif c["kind"] == "lambda":
            check, measured, reading = _check_lambda(records, preset, mean)
        else:
            check, measured, reading = _check_ensemble(mean, config, c["tags"])
        verdict = found.verdict + (f" ({found.reason})" if found.reason else "")
        rows.append(
            {"claim": c["claim"], "verdict": verdict, "check": check, "measured": measured,
             "reading": reading}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=["claim", "verdict", "check", "measured", "reading"])


def gains(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """Distilled − stage 1 mAP@10 per model (percentage points), ours beside the paper's.
    Only the records of ``config`` count (:func:`audiorepro.reporting.current_records`)."""
    records = reporting.current_records(records, config)
    paper = PAPER["Table 2"]
    return pd.DataFrame(
        [
            {
                "model": name,
                "distilled − stage 1 (pp)": _mean(
                    records, preset, run_tags(name, "distilled", config.lam)
                )
                - _mean(records, preset, run_tags(name, "stage1")),
                "paper (pp)": round(paper[name, "distilled"] - paper[name, "stage1"], 2),
            }
            for name in config.teachers
        ]
    ).round(2)
