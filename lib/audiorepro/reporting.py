"""The results ledger and the paper-vs-ours tables that evaluation pages end with.

Every number the book shows comes from one JSON line in the ledger, written by
:func:`record_result` at the moment it was measured. A line records what was measured (chapter,
page, metric values), how (preset, seed, configuration, command) and with what (git SHA, package
versions, device, wall time). :func:`paper_vs_ours` then reads the ledger back and sets each
metric beside the paper's value, as mean ± std over seeds.

The ledger is append-only JSON Lines, so several pages (or several processes at paper scale,
where only the main process writes) add to it without reading it first.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shlex
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, is_dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audiorepro.config import to_dict
from audiorepro.paths import repo_root, results_dir
from audiorepro.repro import environment_snapshot
from audiorepro.storage import config_hash as _config_hash

LEDGER_NAME = "ledger.jsonl"
COMMAND_ENV = "AUDIOREPRO_COMMAND"  # set by audiorepro.pages: the command that reruns a page
_last_record_time = time.perf_counter()
REQUIRED_KEYS = ("chapter", "page", "metrics", "preset", "seed")


class LedgerError(ValueError):
    """A ledger line is not valid JSON or lacks a required key."""


def ledger_path(path: str | Path | None = None) -> Path:
    """The ledger file: ``path`` if given, else ``results_dir() / "ledger.jsonl"``."""
    return Path(path) if path is not None else results_dir() / LEDGER_NAME


def _jsonable(value: Any) -> Any:
    """Plain JSON values for numpy scalars, tensors, tuples and paths."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def record_result(
    chapter: str,
    page: str,
    metrics: Mapping[str, float],
    *,
    preset: str,
    seed: int,
    config: Mapping[str, Any] | None = None,
    command: str | None = None,
    wall_time_s: float | None = None,
    tags: Mapping[str, Any] | None = None,
    path: str | Path | None = None,
) -> dict[str, Any]:
    """Append one result to the ledger and return the record.

    Args:
        chapter: e.g. ``"03_zerospeech"``.
        page: the page (or script) that measured it, e.g. ``"03_abx_bitrate"``.
        metrics: metric name → value, e.g. ``{"abx_across": 14.2, "bitrate": 412.0}``.
        preset: ``smoke``, ``embedded`` or ``paper``.
        seed: the run's one seed.
        config: the run's configuration (a configuration dataclass, or
            ``audiorepro.config.to_dict(cfg)``); the tables of a page read only the records of
            its own resolved configuration (:func:`current_records`).
        command: how to reproduce it; defaults to ``$AUDIOREPRO_COMMAND`` (which
            :mod:`audiorepro.pages` sets to the page and its parameters), else this process's
            command line.
        wall_time_s: how long the measured run took; when not given, the seconds since this
            process's previous record (or since the library was imported), marked as such.
        tags: free keys that tell rows of one table apart (``{"model": "transformer", "K": 256}``).
        path: ledger file; default :func:`ledger_path`.
    """
    global _last_record_time
    bad = {k: v for k, v in metrics.items() if not isinstance(_jsonable(v), int | float)}
    if bad:
        raise TypeError(f"metric values must be numbers, got {bad!r}")
    now = time.perf_counter()
    wall_source = "measured"
    if wall_time_s is None:
        wall_time_s, wall_source = now - _last_record_time, "since the previous record"
    _last_record_time = now
    plain_config = _plain_config(config)
    if command is None:
        command = os.environ.get(COMMAND_ENV) or shlex.join(sys.argv)
    record = {
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "chapter": chapter,
        "page": page,
        "metrics": _jsonable(dict(metrics)),
        "preset": preset,
        "seed": int(seed),
        "tags": _jsonable(dict(tags or {})),
        "config": plain_config,
        "config_hash": _hash_of(plain_config),
        "command": command,
        "wall_time_s": float(wall_time_s),
        "wall_time_source": wall_source,
        "env": environment_snapshot(),
    }
    if not is_main_process():
        return record  # under several processes only the main one writes
    out = ledger_path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True) + "\n"
    # One write call of one line in append mode: concurrent writers never interleave mid-line.
    with open(out, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())
    return record


def _plain_config(config: Any) -> dict[str, Any]:
    """A configuration dataclass or mapping (or None) as plain JSON values."""
    if config is None:
        return {}
    if is_dataclass(config) and not isinstance(config, type):
        config = to_dict(config)
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping or a configuration dataclass, got {config!r}")
    return _jsonable(dict(config))


def config_hash_of(config: Any) -> str:
    """The ``config_hash`` :func:`record_result` stores for ``config`` (a configuration
    dataclass or a mapping)."""
    return _hash_of(_plain_config(config))


def current_records(
    records: Iterable[Mapping[str, Any]], config: Any, seeds: Iterable[int] | None = None
) -> list[Mapping[str, Any]]:
    """Only the records of the resolved configuration ``config`` (by ``config_hash``) and of
    ``seeds``, in ledger order; ``seeds`` defaults to ``config.ledger_seeds``, the seeds a
    chapter's pages record (every chapter's ``Config`` has that property).

    Every chapter's tables and findings read the ledger through this, so a row of an older
    preset, of another setting, or of a seed outside the list never shows, however recent.
    """
    if seeds is None:
        seeds = config.ledger_seeds
    return select(records, config_hash=config_hash_of(config), seeds=seeds, latest_per_seed=False)


CHANCE_FACTOR = 3.0
"""A compared run counts as having learned when its evaluation metric reaches this many times
its chance level (the same rule in every chapter)."""


def chance_floor(chance: float) -> float:
    """The value a compared run's metric must reach to count as having learned:
    :data:`CHANCE_FACTOR` times ``chance`` (in the metric's own unit)."""
    return CHANCE_FACTOR * chance


def _hash_of(config: Mapping[str, Any]) -> str:
    """:func:`audiorepro.storage.config_hash` of a record's configuration (values that are not
    JSON are hashed by their text)."""
    try:
        return _config_hash(config)
    except TypeError:
        return _config_hash(json.loads(json.dumps(config, default=str)))


def is_main_process() -> bool:
    """False in every process but the first of a multi-process launch (``accelerate launch``,
    ``torchrun``: ``RANK`` > 0)."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def read_ledger(path: str | Path | None = None) -> list[dict[str, Any]]:
    """All records of the ledger, oldest first; a malformed line raises ``LedgerError``."""
    src = ledger_path(path)
    if not src.exists():
        return []
    records = []
    with open(src, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise LedgerError(f"{src}:{lineno}: not valid JSON ({err.msg})") from err
            missing = [k for k in REQUIRED_KEYS if k not in rec]
            if missing:
                raise LedgerError(f"{src}:{lineno}: missing key(s) {', '.join(missing)}")
            records.append(rec)
    return records


def ledger_frame(path: str | Path | None = None) -> pd.DataFrame:
    """The ledger as one row per (record, metric): chapter, page, preset, seed, tags…, metric, value."""
    rows = []
    for i, rec in enumerate(read_ledger(path)):
        for metric, value in rec["metrics"].items():
            rows.append(
                {
                    "record": i,
                    "time": rec.get("time"),
                    "chapter": rec["chapter"],
                    "page": rec["page"],
                    "preset": rec["preset"],
                    "seed": rec["seed"],
                    **{f"tag.{k}": v for k, v in rec.get("tags", {}).items()},
                    "metric": metric,
                    "value": value,
                    "git_sha": rec.get("env", {}).get("git_sha"),
                }
            )
    return pd.DataFrame(rows)


def select(
    records: Iterable[Mapping[str, Any]],
    *,
    chapter: str | None = None,
    preset: str | None = None,
    metric: str | None = None,
    tags: Mapping[str, Any] | None = None,
    latest_per_seed: bool = True,
    seeds: Iterable[int] | None = None,
    config_hash: str | None = None,
) -> list[Mapping[str, Any]]:
    """Records matching every given field; by default only the newest record per seed.

    ``seeds`` keeps only those seeds (a page's seed list), ``config_hash`` only records of that
    resolved configuration, so records of an older preset or another setting never enter a
    table.

    Re-running a page appends new lines; ``latest_per_seed`` makes a table use the latest run of
    each seed rather than mixing old and new code.
    """
    picked = []
    seed_set = {int(s) for s in seeds} if seeds is not None else set()
    for rec in records:
        if chapter is not None and rec["chapter"] != chapter:
            continue
        if preset is not None and rec["preset"] != preset:
            continue
        if metric is not None and metric not in rec["metrics"]:
            continue
        if seeds is not None and rec["seed"] not in seed_set:
            continue
        if config_hash is not None and rec.get("config_hash") != config_hash:
            continue
        rec_tags = rec.get("tags", {})
        if tags and any(rec_tags.get(k) != _jsonable(v) for k, v in tags.items()):
            continue
        picked.append(rec)
    if latest_per_seed:
        by_seed: dict[int, Mapping[str, Any]] = {}
        for rec in picked:  # ledger order is time order, so later lines win
            by_seed[rec["seed"]] = rec
        picked = [by_seed[s] for s in sorted(by_seed)]
    return picked


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1; 0.0 for a single value)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("mean_std of no values")
    std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
    return float(arr.mean()), std


def format_mean_std(values: Sequence[float], digits: int = 1) -> str:
    """``"12.3 ± 0.4"`` over seeds, or ``"12.3"`` for one seed."""
    mean, std = mean_std(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


VERDICTS = ("reproduces", "contradicts", "inconclusive")


@dataclass(frozen=True)
class Finding:
    """The verdict on one of a paper's claims, "``better`` beats ``worse``", over seeds.

    Attributes:
        claim: the paper's claim in plain words, e.g. ``"PaSST beats CNN14"``.
        verdict: ``reproduces`` (the paper's direction, beyond the seed spread), ``contradicts``
            (the opposite direction, beyond the spread) or ``inconclusive`` (within the spread,
            too few seeds, a side not run, or a compared run not above chance).
        reason: why an inconclusive verdict is inconclusive ("" otherwise).
        better, worse: the per-seed values of the side the paper says wins and of the other.
        difference: mean(better) - mean(worse), sign-flipped when lower is better, so a
            positive difference is always the paper's direction.
        spread: the larger of the two sample standard deviations.
        sentence: the verdict as one sentence, with the numbers.
    """

    claim: str
    verdict: str
    reason: str
    better: tuple[float, ...]
    worse: tuple[float, ...]
    difference: float
    spread: float
    sentence: str

    def __str__(self) -> str:
        return self.sentence


def finding(
    claim: str,
    better: Sequence[float],
    worse: Sequence[float],
    *,
    metric: str = "",
    higher_is_better: bool = True,
    chance: float | None = None,
    must_beat: float | None = None,
    both_must_learn: bool = True,
    min_seeds: int = 2,
    digits: int = 2,
) -> Finding:
    """Judge the paper's claim that the ``better`` setting beats the ``worse`` one.

    The claim **reproduces** when the mean difference goes the paper's way and exceeds the seed
    spread (the larger standard deviation of the two sides), **contradicts** when it goes the
    other way beyond the spread, and is **inconclusive** otherwise, or when a side has fewer than
    ``min_seeds`` seeds, or when a compared run did not learn: its mean does not beat
    ``must_beat`` (default ``chance``), so the comparison tests nothing.

    Whether a run learned is decided by what was measured, its evaluation metric, alone: a
    training loss that stays high (a contrastive loss near ln(batch)) is a diagnostic for the
    page, not a verdict; a run far above chance has learned what the metric measures.

    Args:
        claim: the paper's claim in plain words.
        better, worse: per-seed values of the two settings.
        metric: the metric's name, for the sentence.
        higher_is_better: False for errors (ABX).
        chance: the chance level of the metric, for the sentence and the default ``must_beat``.
        must_beat: the value every compared mean must reach (at least, or at most for errors)
            to count as having learned; e.g. three times chance mAP@10.
        both_must_learn: False where a setting failing to learn is part of the paper's claim
            (a phoneme encoder that collapses at depth 8): then only a comparison in which
            neither run beats ``must_beat`` is inconclusive.
        min_seeds: fewer seeds on a side than this is inconclusive.
        digits: decimals in the sentence.
    """
    a = tuple(float(v) for v in better if math.isfinite(float(v)))
    b = tuple(float(v) for v in worse if math.isfinite(float(v)))
    what = f"{metric} " if metric else ""
    if not a or not b:
        side = (
            "neither side"
            if not a and not b
            else ("the compared setting" if a else "the paper's better setting")
        )
        sentence = f"{claim}: inconclusive, {side} not run."
        return Finding(claim, "inconclusive", "not run", a, b, math.nan, math.nan, sentence)
    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
    sign = 1.0 if higher_is_better else -1.0
    diff = sign * (ma - mb)
    spread = max(sa, sb)
    numbers = (
        f"{what}{ma:.{digits}f} ± {sa:.{digits}f} vs {mb:.{digits}f} ± {sb:.{digits}f} "
        f"({ma - mb:+.{digits}f}, {len(a)}/{len(b)} seeds"
        + (f", chance {chance:.{digits}f}" if chance is not None else "")
        + ")"
    )
    floor = must_beat if must_beat is not None else chance
    reason = ""
    if floor is not None:
        learned = [(m >= floor) if higher_is_better else (m <= floor) for m in (ma, mb)]
        if not any(learned):
            reason = f"neither compared run reaches the chance floor {floor:.{digits}f}"
        elif not all(learned) and both_must_learn:
            which = "the paper's better setting" if not learned[0] else "the compared setting"
            reason = f"{which} does not reach the chance floor {floor:.{digits}f}"
    if not reason and min(len(a), len(b)) < min_seeds:
        reason = f"fewer than {min_seeds} seeds on a side, so no spread to judge against"
    if not reason and abs(diff) <= spread:
        reason = "the difference is within the seed spread"
    if reason:
        verdict = "inconclusive"
    else:
        verdict = "reproduces" if diff > 0 else "contradicts"
    sentence = f"{claim}: {verdict}" + (f" ({reason})" if reason else "") + f", {numbers}."
    return Finding(claim, verdict, reason, a, b, diff, spread, sentence)


def fails(
    claim: str,
    runs: Sequence[float],
    floor: float,
    *,
    metric: str = "",
    higher_is_better: bool = True,
    min_seeds: int = 2,
    digits: int = 2,
) -> Finding:
    """Judge the paper's claim that a setting fails to learn: its per-seed ``runs`` stay at
    ``floor`` (e.g. three times chance) or below it (above it for errors).

    **reproduces** when the mean is on the failing side of ``floor`` by more than the seed
    spread, **contradicts** when it is beyond the floor on the learning side by more than the
    spread, and **inconclusive** within the spread, with fewer than ``min_seeds`` seeds, or
    with no run. ``better`` of the :class:`Finding` holds the floor, ``worse`` the runs.
    """
    got = tuple(float(v) for v in runs if math.isfinite(float(v)))
    what = f"{metric} " if metric else ""
    if not got:
        sentence = f"{claim}: inconclusive, not run."
        return Finding(
            claim, "inconclusive", "not run", (floor,), (), math.nan, math.nan, sentence
        )
    mean, spread = mean_std(got)
    sign = 1.0 if higher_is_better else -1.0
    margin = sign * (floor - mean)  # > 0: on the failing side of the floor
    reason = ""
    if len(got) < min_seeds:
        reason = f"fewer than {min_seeds} seeds, so no spread to judge against"
    elif abs(margin) <= spread:
        reason = "the floor is within the seed spread"
    verdict = "inconclusive" if reason else ("reproduces" if margin > 0 else "contradicts")
    numbers = (
        f"{what}{mean:.{digits}f} ± {spread:.{digits}f} against the floor "
        f"{floor:.{digits}f} ({len(got)} seeds)"
    )
    sentence = f"{claim}: {verdict}" + (f" ({reason})" if reason else "") + f", {numbers}."
    return Finding(claim, verdict, reason, (floor,), got, margin, spread, sentence)


def values(
    records: Iterable[Mapping[str, Any]],
    *,
    chapter: str,
    preset: str,
    metric: str,
    tags: Mapping[str, Any] | None = None,
    scale: float = 1.0,
) -> list[float]:
    """``scale`` × ``metric`` of the newest record per seed matching ``tags``, in seed order."""
    hits = select(records, chapter=chapter, preset=preset, metric=metric, tags=tags)
    return [scale * float(r["metrics"][metric]) for r in hits]


def seed_table(
    records: Sequence[Mapping[str, Any]],
    rows: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    chapter: str,
    preset: str,
    metrics: Sequence[str],
    scale: float = 1.0,
    digits: int = 2,
) -> pd.DataFrame:
    """One row per ``(label, tags)``: the label, the seed count and each metric as mean ± std
    over the seeds (× ``scale``), read from the ledger ``records``."""
    out = []
    for label, tags in rows:
        hits = select(records, chapter=chapter, preset=preset, tags=tags)
        row: dict[str, Any] = {"setting": label, "seeds": len(hits)}
        for m in metrics:
            vals = [scale * r["metrics"][m] for r in hits if m in r["metrics"]]
            row[m] = format_mean_std(vals, digits) if vals else "not run"
        out.append(row)
    return pd.DataFrame(out)


@dataclass(frozen=True)
class PaperRow:
    """One line of a paper-vs-ours table.

    Attributes:
        label: what the row shows, e.g. ``"ABX across, Transformer VQ-VAE K=256"``.
        metric: the metric key in the ledger records.
        paper: the paper's value in the same unit as ``scale * ours`` (``None`` if not reported).
        chapter: ledger chapter to read from.
        tags: ledger tags that pick this row's runs.
        scale: factor applied to our values before display (e.g. 100 for fractions shown as %).
        digits: decimals shown.
        finding: one plain sentence on whether the paper's finding reproduces here; computed by
            :func:`finding` when ``claim`` and ``versus`` are given.
        claim: the paper's claim that this row's setting beats the ``versus`` setting.
        versus: ledger tags of the setting the claim compares this row against.
        higher_is_better: False for errors.
        must_beat: the value both compared runs must beat to count as having learned (in the
            displayed unit).
        source: where the paper reports the value (``"Table 3"``).
    """

    label: str
    metric: str
    paper: float | None
    chapter: str
    tags: Mapping[str, Any] | None = None
    scale: float = 1.0
    digits: int = 1
    finding: str = ""
    claim: str | None = None
    versus: Mapping[str, Any] | None = None
    higher_is_better: bool = True
    must_beat: float | None = None
    source: str = ""


def paper_vs_ours(
    rows: Sequence[PaperRow],
    *,
    preset: str,
    path: str | Path | None = None,
    records: Sequence[Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """The table an evaluation page ends with: metric, paper, ours (mean ± std), preset, seeds,
    finding.

    Every "ours" value is read from the ledger (``records`` if given, else the ledger file), so
    the table shows exactly what the code measured. A row with no matching record shows "not
    run" rather than a number. A row with a ``claim`` and ``versus`` gets its finding computed
    by :func:`finding` from the same records.
    """
    recs = list(records) if records is not None else read_ledger(path)
    out = []
    for row in rows:
        hits = select(recs, chapter=row.chapter, preset=preset, metric=row.metric, tags=row.tags)
        ours = [row.scale * float(r["metrics"][row.metric]) for r in hits]
        finite = [v for v in ours if math.isfinite(v)]
        text = row.finding
        if row.claim is not None and row.versus is not None:
            other = values(
                recs,
                chapter=row.chapter,
                preset=preset,
                metric=row.metric,
                tags=row.versus,
                scale=row.scale,
            )
            text = finding(
                row.claim,
                finite,
                other,
                metric=row.metric,
                higher_is_better=row.higher_is_better,
                must_beat=row.must_beat,
                digits=row.digits,
            ).sentence
        out.append(
            {
                "metric": row.label,
                "source": row.source,
                "paper": "—" if row.paper is None else f"{row.paper:.{row.digits}f}",
                "ours": format_mean_std(finite, row.digits) if finite else "not run",
                "preset": preset,
                "seeds": ", ".join(str(r["seed"]) for r in hits) or "—",
                "finding": text,
            }
        )
    columns = ["metric", "source", "paper", "ours", "preset", "seeds", "finding"]
    if not any(row.source for row in rows):
        columns.remove("source")  # a table without paper references keeps its old shape
    return pd.DataFrame(out, columns=columns)


class Timer:
    """Wall-clock timer for ``wall_time_s``: ``with Timer() as t: ...; t.seconds``."""

    def __enter__(self) -> Timer:
        self._start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


class _WholeTextFrame(pd.DataFrame):
    """A frame that shows every cell whole (no 50-character cut), wrapped by the page's HTML."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame  # what is derived from it is an ordinary frame

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.max_colwidth", None):
            return super()._repr_html_()

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            return super().__repr__()


def _shown(value: Any) -> str:
    """A configuration value as a reader writes it in a preset: ``0, 1, 2`` for a tuple."""
    if isinstance(value, tuple | list):
        return ", ".join(_shown(v) for v in value) if value else "()"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) if value else "{}"
    return str(value)


def config_table(config: Any) -> pd.DataFrame:
    """A configuration as a readable table: one row per field, nested sections flattened to
    dotted names (``train.max_steps``, the names a page's overrides use), with the value and
    the field's help text (``dataclasses.field(metadata={"help": ...})``).

    Columns: field, value, help (index: the dotted field). Cells are shown whole, so a page
    prints its configuration wrapped in the book's column instead of one dataclass repr that
    scrolls sideways.
    """
    if not (is_dataclass(config) and not isinstance(config, type)):
        raise TypeError(f"config_table: expected a dataclass instance, got {type(config)!r}")
    rows: list[dict[str, str]] = []

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            name = prefix + f.name
            if is_dataclass(value) and not isinstance(value, type):
                walk(value, name + ".")
            else:
                rows.append(
                    {"field": name, "value": _shown(value), "help": f.metadata.get("help", "")}
                )

    walk(config, "")
    table = pd.DataFrame(rows, columns=["field", "value", "help"]).set_index("field")
    return _WholeTextFrame(table)


_FINDING = re.compile(
    r"^(?P<claim>.+?): (?P<verdict>reproduces|contradicts|inconclusive)"
    r"(?: \((?P<reason>.+?)\))?(?:, (?P<numbers>.+?))?\.$",
    re.S,
)


def finding_parts(sentence: str) -> dict[str, str]:
    """The parts of a :func:`finding` (or :func:`fails`) sentence: claim, verdict, reason and
    numbers (``"mAP@10 12.00 ± 0.50 vs 9.00 ± 0.40 (+3.00, 3/3 seeds)"``; "" when absent).

    The paper-vs-ours tables keep only the sentence; this reads it back, for a page that
    gathers the findings of every chapter. A sentence of another shape is a ``ValueError``
    naming it.
    """
    match = _FINDING.match(sentence.strip())
    if match is None:
        raise ValueError(f"not a finding sentence: {sentence!r}")
    parts = {k: v or "" for k, v in match.groupdict().items()}
    if not parts["reason"] and parts["numbers"].endswith("not run"):
        parts["reason"], parts["numbers"] = parts["numbers"], ""  # "inconclusive, not run."
    return parts


# ----------------------------------------------------------------------------- the build's status


def page_times(path: str | Path | None = None) -> pd.DataFrame | None:
    """The build's page times (``_build/page_times.json``, written by :mod:`audiorepro.pages`
    after every page) as a table: page, chapter (its folder), seconds, in reading order.
    ``None`` when the file does not exist (no build has run here)."""
    path = Path(path) if path is not None else repo_root() / "_build" / "page_times.json"
    if not path.is_file():
        return None
    times = json.loads(path.read_text(encoding="utf-8"))
    return pd.DataFrame(
        [
            {"page": page, "chapter": Path(page).parent.name, "seconds": float(seconds)}
            for page, seconds in times.items()
        ],
        columns=["page", "chapter", "seconds"],
    )


def bench_records(folder: str | Path | None = None) -> list[dict[str, Any]]:
    """The benchmark records ``make bench`` committed (``bench/results/<bench>.json``, written
    by ``bench/record.py``: bench, command, produced, git_sha, machine, seconds, output), by
    bench name; ``[]`` when there are none."""
    folder = Path(folder) if folder is not None else repo_root() / "bench" / "results"
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]


def _parametrized_cases(decorators: Sequence[Any]) -> tuple[int, bool]:
    """Cases of a test from its ``@pytest.mark.parametrize`` decorators with literal lists, and
    whether every one was literal (else each such decorator counts as one case)."""
    import ast

    cases, exact = 1, True
    for deco in decorators:
        if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
            continue
        values = deco.args[1] if len(deco.args) > 1 else None
        if isinstance(values, ast.List | ast.Tuple):
            cases *= len(values.elts)
        else:
            exact = False
    return cases, exact


def count_tests(folder: str | Path | None = None) -> dict[str, int]:
    """Count the test suite without importing it (``ast``, fast): ``files``, ``functions``
    (``test_*`` functions and methods of ``tests/test_*.py``) and ``cases`` (functions times
    their literal ``parametrize`` lists; a parametrization over a computed list, such as every
    book page, counts once, so ``cases`` is a lower bound then and ``computed`` says how many
    such functions there are)."""
    import ast

    folder = Path(folder) if folder is not None else repo_root() / "tests"
    files = sorted(folder.glob("test_*.py"))
    functions = cases = computed = 0
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test_"
            ):
                functions += 1
                n, exact = _parametrized_cases(node.decorator_list)
                cases += n
                computed += not exact
    return {"files": len(files), "functions": functions, "cases": cases, "computed": computed}


def findings_of(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a chapter's paper-vs-ours table (a chapter's ``findings(...)``) that carry a
    verdict on one of the paper's claims, one row each: claim, verdict, reason, numbers (both
    sides, mean ± std, the difference and the seeds: :func:`finding_parts`), and the row's
    metric, paper, ours and seeds columns."""
    rows = []
    for _, row in table.iterrows():
        try:
            parts = finding_parts(str(row.get("finding", "")))
        except ValueError:
            continue  # a row that only shows a number
        rows.append(parts | {k: row.get(k, "") for k in ("metric", "paper", "ours", "seeds")})
    columns = ["claim", "verdict", "reason", "numbers", "metric", "paper", "ours", "seeds"]
    return pd.DataFrame(rows, columns=columns)


def mechanism_line(claim: str, checks: pd.DataFrame | None, key: str = "finding") -> str:
    """The measured checks in ``checks`` (a chapter's mechanism table: ``key``, check, measured
    and optionally reading) whose ``key`` names ``claim`` (equal, or one a prefix of the
    other), as one line ``"check: measured; ..."``; "" when there is none."""
    if checks is None or checks.empty or key not in checks:
        return ""
    lines = []
    for _, row in checks.iterrows():
        name = str(row[key])
        if not (claim.startswith(name) or name.startswith(claim)):
            continue
        line = f"{row.get('check', '')}: {row.get('measured', '')}"
        reading = row.get("reading", "")
        lines.append(line + (f" ({reading})" if isinstance(reading, str) and reading else ""))
    return "; ".join(lines)
