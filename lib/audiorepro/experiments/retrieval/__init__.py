"""Chapter 01: the PaSST + transformer dual encoder for language-based audio retrieval
(paper (a), §2.6, §3).

The package reads in the order of :data:`FILES`, each file importing only those before it:
``config`` (the presets' :class:`Config`), ``data`` (the corpora, :func:`load_data`),
``stage0`` (sound-event tagging, the embedded analogue of AudioSet pretraining), ``train``
(the dual encoder's training loop), ``evaluate`` (the DCASE metrics), ``runs`` (a run's
identity, model selection on the validation split and published weights, which chapter 02
shares), ``stages`` (stage 0, pretraining, fine-tuning, the ablations), ``plan`` (what the pages
run, trained side by side ahead of them) and ``findings`` (the paper's numbers beside ours).
This module hands on the names the book's pages use; everything else is imported from its file.
"""

from audiorepro.data.retrieval import caption_statistics, manifest_counts
from audiorepro.experiments.retrieval.config import CHAPTER, PRESETS, Config, load_config
from audiorepro.experiments.retrieval.data import load_data
from audiorepro.experiments.retrieval.evaluate import (
    evaluate,
    evaluate_and_record,
    similarity_matrix,
)
from audiorepro.experiments.retrieval.findings import (
    PAPER,
    ablation_table,
    chance_floor,
    findings,
    mechanism_checks,
    snippet_curve,
    stage_table,
    training_table,
)
from audiorepro.experiments.retrieval.plan import evaluate_stages, run_ablations, train_ahead
from audiorepro.experiments.retrieval.runs import build_model
from audiorepro.experiments.retrieval.stage0 import stage0_report
from audiorepro.experiments.retrieval.stages import pretrain, stage0_checkpoint, stage0_table
from audiorepro.features import load_audio
from audiorepro.search import AudioIndex

FILES = (
    "config",
    "data",
    "stage0",
    "train",
    "evaluate",
    "runs",
    "stages",
    "plan",
    "findings",
)
"""The package's files in reading order; each imports only files before it."""

__all__ = [
    "CHAPTER",
    "FILES",
    "PAPER",
    "PRESETS",
    "AudioIndex",
    "Config",
    "ablation_table",
    "build_model",
    "caption_statistics",
    "chance_floor",
    "evaluate",
    "evaluate_and_record",
    "evaluate_stages",
    "findings",
    "load_audio",
    "load_config",
    "load_data",
    "manifest_counts",
    "mechanism_checks",
    "pretrain",
    "run_ablations",
    "similarity_matrix",
    "snippet_curve",
    "stage0_checkpoint",
    "stage0_report",
    "stage0_table",
    "stage_table",
    "train_ahead",
    "training_table",
]
