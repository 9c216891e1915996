"""Ensemble knowledge distillation for audio retrieval (paper (b), DCASE 2024 task 8).

Why a package of its own rather than ``losses/`` or ``models/``: the correspondence estimate is
neither a loss nor a model but data derived from trained models, with its own storage format,
lookup, distributed gathering and analysis; the loss that consumes it lives in
:mod:`audiorepro.losses.distillation`, next to the other losses.

- :mod:`~audiorepro.distillation.teachers`: each stage-1 model's embeddings of the training set
  (stored O(N·D), atomically, with the caption preprocessing), and the M-teacher lookup.
- :mod:`~audiorepro.distillation.targets`: a batch's Ĉ, p̂_a and p̂_c (global batch under
  several processes).
- :mod:`~audiorepro.distillation.analysis`: top matches over the whole training set in blocks of
  bounded memory, training-caption top-1 of a model or the ensemble, and how far the batch
  targets depart from the one-hot ones.
- :mod:`~audiorepro.distillation.ensemble`: averaging the similarity matrices of several models.
"""

from audiorepro.distillation.analysis import (
    TopMatches,
    caption_top1,
    captions_for_clip,
    target_departure,
    top_matches,
    top_matches_dense,
)
from audiorepro.distillation.ensemble import ensemble_scores
from audiorepro.distillation.targets import (
    DEFAULT_TAU,
    BatchTargets,
    all_gather_rows,
    batch_targets,
    soft_targets,
)
from audiorepro.distillation.teachers import (
    TeacherEmbeddings,
    TeacherEmbeddingsError,
    TeacherEnsemble,
    compute_teacher_embeddings,
)

__all__ = [
    "DEFAULT_TAU",
    "BatchTargets",
    "TeacherEmbeddings",
    "TeacherEmbeddingsError",
    "TeacherEnsemble",
    "TopMatches",
    "all_gather_rows",
    "batch_targets",
    "caption_top1",
    "captions_for_clip",
    "compute_teacher_embeddings",
    "ensemble_scores",
    "soft_targets",
    "target_departure",
    "top_matches",
    "top_matches_dense",
]
