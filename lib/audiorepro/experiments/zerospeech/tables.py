"""The paper's Tables 1-3: its numbers (:data:`PAPER`), the rows a preset asks for
(:func:`ablation_rows`), and what one row and seed gave (:class:`RowResult`)."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from audiorepro.config import replace
from audiorepro.data.speech_segments import FEATURES
from audiorepro.experiments.zerospeech.config import Config
from audiorepro.models.vqvae import VQVAEConfig


@dataclass(frozen=True)
class PaperResult:
    """One of the paper's rows: ABX across (%) and bitrate (b/s) on the test set, and where."""

    abx_across: float
    bitrate: float
    source: str


# The paper's English Tables 1-3 (stride 4× throughout) and the leaderboard's surprise language.
PAPER: dict[tuple[str, Any], PaperResult] = {
    ("logmel", 128): PaperResult(33.79, 171.05, "Table 1"),
    ("mfcc", 128): PaperResult(21.91, 170.42, "Tables 1-3"),
    ("mfcc", 64): PaperResult(22.72, 141.82, "Table 2"),
    ("mfcc", 256): PaperResult(21.94, 194.69, "Table 2"),
    ("mfcc", 512): PaperResult(21.6, 217.47, "Table 2"),
    ("conv", 256): PaperResult(24.17, 184.32, "Table 2"),
    ("smooth", 1e-2): PaperResult(21.88, 169.02, "Table 3"),
    ("smooth", 5e-3): PaperResult(21.67, 169.2, "Table 3"),
    ("smooth", 1e-3): PaperResult(21.75, 169.56, "Table 3"),
    ("jitter", 0.05): PaperResult(21.57, 166.19, "Table 3"),
    ("jitter", 0.075): PaperResult(21.70, 164.08, "Table 3"),
    ("combo", (5e-3, 0.05)): PaperResult(20.71, 171.99, "Table 3"),
    ("combo", (1e-3, 0.05)): PaperResult(20.14, 167.02, "Table 3"),
    ("surprise", 128): PaperResult(14.17, 170.92, "leaderboard 2019_task/12"),
}


@dataclass(frozen=True)
class AblationRow:
    """One row of the paper's Tables 1-3: the model to train, and the paper's numbers for it."""

    key: str
    label: str
    table: str
    model: VQVAEConfig
    paper: PaperResult | None


def ablation_rows(config: Config) -> list[AblationRow]:
    """The rows of Tables 1-3 that the preset asks for; each runs with every seed of
    ``config.main_seeds``, since each enters a finding (:func:`findings`).

    Each row's model is ``config.model`` with the row's changes (``audiorepro.config.replace``).
    """
    base, k0 = config.model, config.model.codebook_size

    def row(key, label, table, paper_key, **changes) -> AblationRow:
        model = replace(base, **changes) if changes else base
        return AblationRow(key, label, table, model, PAPER.get(paper_key))

    rows = [
        row("base", f"TrfVQVAE MFCC K={k0}", "1, 2, 3", ("mfcc", k0)),
        row(
            "logmel",
            f"TrfVQVAE log-Mel K={k0}",
            "1",
            ("logmel", k0),
            input_dim=FEATURES["logmel"],
        ),
        row(
            "conv",
            f"Conv VQVAE K={config.conv_codebook_size}",
            "2",
            ("conv", config.conv_codebook_size),
            encoder="conv",
            codebook_size=config.conv_codebook_size,
        ),
    ]
    for k in config.codebook_sizes:
        if k != k0:
            rows.append(row(f"K{k}", f"TrfVQVAE K={k}", "2", ("mfcc", k), codebook_size=k))
    for lam in config.smoothings:
        rows.append(
            row(f"smooth{lam:g}", f"+ temp smooth λ={lam:g}", "3", ("smooth", lam), smoothing=lam)
        )
    for p in config.jitters:
        rows.append(row(f"jitter{p:g}", f"+ temp jitter p={p:g}", "3", ("jitter", p), jitter=p))
    for lam, p in config.combos:
        rows.append(
            row(
                f"combo{lam:g}_{p:g}",
                f"+ smooth λ={lam:g} + jitter p={p:g}",
                "3",
                ("combo", (lam, p)),
                smoothing=lam,
                jitter=p,
            )
        )
    return rows


@dataclass(frozen=True)
class RowResult:
    """One (row, seed) of Tables 1-3: its metrics (:func:`run_row`), the seconds its
    training (when not loaded from the run store), evaluation and baseline took, and
    :func:`code_runs` of its test units (``code_stats``, for :func:`unit_runs`)."""

    key: str
    seed: int
    metrics: dict[str, float]
    seconds: float
    code_stats: dict[str, float] = dataclass_field(default_factory=dict)
