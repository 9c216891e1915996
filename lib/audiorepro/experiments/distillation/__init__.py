"""Chapter 02: ensemble knowledge distillation for audio retrieval (paper (b)).

The two-stage procedure of paper (b) §3 on top of chapter 01
(:mod:`audiorepro.experiments.retrieval`):

1. **Stage 1** (:func:`~.teachers.stage1_teacher`): M dual encoders, PaSST, ATST-Frame and
   MobileNetV3, each with the text encoder, pretrained with L_sup on ClothoV2, AudioCaps and
   WavCaps through chapter 01's :func:`~audiorepro.experiments.retrieval.runs.run_training`.
   The PaSST teacher *is* chapter 01's pretrained model (the same run in chapter 01's run
   store) at ``passt_stage1: chapter01`` (smoke, embedded), so the book trains it once; at
   ``auto`` (paper) chapter 02 trains a PaSST teacher of its own with the stage-1 recipe (20
   epochs, §4.5) whenever chapter 01's pretraining differs from it (chapter 01 pretrains 16).
2. **Correspondences** (:func:`~.teachers.teacher_embeddings`, :func:`teacher_ensemble`):
   every stage-1 model embeds each training audio and caption of the fine-tuning set once; the
   stores are joined into a :class:`~audiorepro.distillation.TeacherEnsemble` whose rows give
   any block of Ĉ = (1/M) Σ_m C^m by one matrix product.
3. **Stage 2** (:func:`~.train.train_distilled`, :func:`~.train.distill`): each stage-1 model
   is fine-tuned on the Clotho-layout corpus alone with L = L_sup + λ·L_dist
   (:class:`~audiorepro.models.dual_encoder.DistillationStudent`), the targets of each (global)
   batch looked up from the ensemble (:func:`~audiorepro.distillation.batch_targets`).
4. **Ensembles** (:func:`~.evaluate.ensemble_similarity`): the stage-1 or the distilled
   models' similarity matrices, averaged.

One departure from the paper, for CPU budgets: stage 2 trains on the *start* of each clip,
``finetune_max_audio_s`` seconds (the same crop every epoch), and the teachers embed exactly
that crop (:func:`~.config.stage2_config`), so every target is computed on the audio the
student sees. The paper feeds whole clips of up to 30 s on GPUs, which the ``paper`` preset
keeps (``finetune_max_audio_s: null``); whole clips would cost about 3 times as much on CPU.
Budgets are equal where runs are compared: ``finetune_steps`` optimizer steps for every model
and λ, ``stage1_steps`` for ATST and MobileNet.

Everything runs through the project's :class:`~audiorepro.training.Trainer`, so stage 2
resumes bit for bit on CPU and runs unchanged under ``accelerate launch``; trained models and
teacher stores live in the :class:`~audiorepro.storage.RunStore` of chapter
``02_distillation``.

The package reads in the order of :data:`FILES`, each file importing only those before it
(and chapter 01's files). This module hands on the names the book's pages use; everything
else is imported from its file.
"""

from audiorepro.distillation import captions_for_clip, soft_targets, top_matches
from audiorepro.experiments.distillation.config import CHAPTER, PRESETS, Config, load_config
from audiorepro.experiments.distillation.data import captions_of_several_clips, finetune_items
from audiorepro.experiments.distillation.evaluate import chance_floor, chance_levels, evaluate
from audiorepro.experiments.distillation.findings import (
    PAPER,
    findings,
    gains,
    lambda_sweep,
    mechanisms,
    table,
    table2,
)
from audiorepro.experiments.distillation.plan import (
    evaluate_models,
    evaluate_sweep,
    evaluate_teachers,
    train_ahead,
)
from audiorepro.experiments.distillation.teachers import (
    encoder_sizes,
    stage0_table,
    target_summary,
    teacher_ensemble,
)
from audiorepro.experiments.retrieval.data import load_data
from audiorepro.features import load_audio

FILES = ("config", "data", "teachers", "train", "evaluate", "plan", "findings")
"""The package's files in reading order; each imports only files before it."""

__all__ = [
    "CHAPTER",
    "FILES",
    "PAPER",
    "PRESETS",
    "Config",
    "captions_for_clip",
    "captions_of_several_clips",
    "chance_floor",
    "chance_levels",
    "encoder_sizes",
    "evaluate",
    "evaluate_models",
    "evaluate_sweep",
    "evaluate_teachers",
    "findings",
    "finetune_items",
    "gains",
    "lambda_sweep",
    "load_audio",
    "load_config",
    "load_data",
    "mechanisms",
    "soft_targets",
    "stage0_table",
    "table",
    "table2",
    "target_summary",
    "teacher_ensemble",
    "top_matches",
    "train_ahead",
]
