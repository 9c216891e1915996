"""Chapter 01: the PaSST + transformer dual encoder for language-based audio retrieval
(paper (a), §2.6, §3).

:class:`Config` composes the corpus (:class:`~audiorepro.config.CorpusSpec`), the model
(:class:`~audiorepro.models.dual_encoder.DualEncoderConfig`), the training schedule
(:class:`Training`) and the chapter's experiments (seeds, fine-tuning, ablations); one YAML
preset per scale in ``book/01_retrieval/presets``. :func:`load_data` reads the corpora and caches
their log-mel; :func:`pretrain` and :func:`finetune` are the paper's two stages, run by the
project's :class:`~audiorepro.training.Trainer` (and hence unchanged under ``accelerate
launch``, the loss then using the global batch), selected on the Clotho validation split as
the papers do (:class:`Selection`: the best mAP@10 of the epoch ends, the final weights kept
too) and kept in the chapter's :class:`~audiorepro.storage.RunStore`, so the pages share
trained models and still run alone; :func:`evaluate` scores a model with the DCASE metrics;
:data:`PAPER` and :func:`findings` set the ledger's numbers beside the paper's.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from audiorepro import reporting
from audiorepro.config import ConfigError, CorpusSpec, field, load_preset, replace, to_dict
from audiorepro.data.retrieval import (
    CaptionDataset,
    CaptionItem,
    EvaluationSet,
    caption_statistics,
    collate_captions,
    log_mel_features,
    manifest_counts,
)
from audiorepro.experiments.tagging import Stage0, pretrained_key, resolve_stage0, stage0_entry
from audiorepro.features import load_audio
from audiorepro.metrics.retrieval import retrieval_metrics
from audiorepro.models.audio_encoders import FRAMES_PER_SECOND
from audiorepro.models.dual_encoder import DualEncoder, DualEncoderConfig, build_dual_encoder
from audiorepro.models.passt import PASST_CONFIGS, scaled_time_patchout
from audiorepro.models.text import TextEncoder
from audiorepro.parallel import Task, graph_order, map_processes, run_graph, usable_cores
from audiorepro.paths import data_dir, repo_root
from audiorepro.reporting import PaperRow
from audiorepro.repro import torch_threads
from audiorepro.search import AudioIndex
from audiorepro.storage import (
    ALIASES_KEY,
    Run,
    RunStore,
    frozen_parameter_names,
    load_tensors,
    read_json,
    save_tensors,
    write_json,
)
from audiorepro.training.loop import Callback, TrainConfig, Trainer, TrainResult
from audiorepro.training.selection import KeepBest, check_select

__all__ = [
    "ABLATIONS",
    "AHEAD",
    "CHAPTER",
    "METRICS",
    "PAPER",
    "PRESETS",
    "STAGES",
    "AudioIndex",
    "CHECKPOINT_STEPS",
    "Config",
    "RetrievalData",
    "SELECTION_METRIC",
    "Job",
    "Selection",
    "Training",
    "WEIGHT_FILES",
    "ablation_budget",
    "ablation_entry",
    "ablation_config",
    "ablation_model",
    "ablation_steps",
    "ablation_settings",
    "ablation_table",
    "all_items",
    "build_model",
    "chance_floor",
    "chapter_tasks",
    "checkpoint_every",
    "caption_statistics",
    "current",
    "embed_captions",
    "embed_recordings",
    "epoch_setter",
    "evaluate",
    "evaluate_and_record",
    "evaluate_stages",
    "evaluation_points",
    "findings",
    "finetune",
    "finetune_entry",
    "items_digest",
    "load_audio",
    "load_data",
    "loss_ceiling",
    "load_trained_state",
    "manifest_counts",
    "mechanism_checks",
    "pretrain",
    "pretrain_entry",
    "resolve_pretrained",
    "run_ablation",
    "run_ablations",
    "run_entry",
    "run_training",
    "save_text_caches",
    "side_by_side_workers",
    "similarity_matrix",
    "snippet_curve",
    "stage0_checkpoint",
    "stage0_key",
    "stage0_ready",
    "stage0_table",
    "step_budget",
    "steps_per_epoch",
    "throughput",
    "stage_table",
    "store",
    "text_cache_saver",
    "train_ahead",
    "train_graph",
    "train_dual_encoder",
    "trained_model",
    "trained_state",
    "weights_key",
    "training_table",
]

CHAPTER = "01_retrieval"
PRESETS = repo_root() / "book" / CHAPTER / "presets"
"""The chapter's YAML presets: smoke, embedded, paper."""
METRICS = ("mAP@10", "R@1", "R@5", "R@10")
"""Text-to-audio metrics of every table (paper (a) §3.1), shown in percent."""
STAGES = ("pretrain", "finetune", "finetune-aug")
"""The main system's stages: pretraining (§2.6), fine-tuning on ClothoV2 without and with
caption augmentation (§3.5)."""


@dataclasses.dataclass(frozen=True)
class Training:
    """How a dual encoder trains (paper (a) §2.6): Adam with PyTorch defaults, a linear warm-up
    of ``warmup_epochs`` then cosine decay."""

    batch_size: int = field(64, help="Captions per batch (per process).")
    lr: float = field(2e-5, help="Peak learning rate of pretraining (Adam).")
    num_epochs: int = field(16, help="Pretraining epochs (one of them warm-up).")
    warmup_epochs: float = field(1.0, help="Epochs of linear warm-up before the cosine decay.")
    min_lr: float = field(
        0.0,
        help="Where the cosine decay ends (salsa: min_lr = 1e-7, the paper preset's; 0: decays "
        "to 0, the smoke and embedded presets').",
    )
    device: str = field("auto", help="auto | cpu | cuda | mps.")
    mixed_precision: str = field("auto", help="auto | no | fp32 | bf16 | fp16 (TrainConfig).")
    optimizer_impl: str = field(
        "fused",
        help="auto | for-loop | foreach | fused: how Adam updates (TrainConfig.optimizer_impl). "
        "fused: one multithreaded kernel, 5x faster than PyTorch's CPU default (the for-loop) "
        "for a 100M-parameter model on 2 cores, and the usual choice on a GPU.",
    )
    freqm: int = field(
        0,
        help="SpecAugment band mask width bound on the training log-mel (data.retrieval."
        "spec_augment). Not in the paper; the official dcase2023 code uses 48, salsa 0 (off).",
    )
    timem: int = field(
        0,
        help="SpecAugment frame mask width bound (official dcase2023 code: 192; salsa: 0, off).",
    )
    torch_threads: int | None = field(
        None,
        help="torch CPU threads of a training run, its caption cache and its teacher stores "
        "(None: leave torch's setting). Part of the run's identity, since CPU numbers depend on "
        "it; 1 lets the pages train one run per core side by side (train_ahead), the "
        "embedded preset's choice: small models gain little from a second thread.",
    )

    def trainer_config(
        self, num_items: int, *, seed: int, num_epochs: int, lr: float, **changes: Any
    ) -> TrainConfig:
        """The Trainer settings of a run over ``num_items`` captions: weight decay 0,
        ``warmup_epochs`` of warm-up then cosine decay, ``batch_size`` per process; ``changes``
        override fields (``max_steps``, ``checkpoint_every``, ...). Under several processes an
        optimizer step consumes ``batch_size`` captions on each, so the warm-up, given in
        epochs, spans fewer steps."""
        processes = int(os.environ.get("WORLD_SIZE", "1"))
        steps_per_epoch = -(-num_items // (self.batch_size * processes))
        values: dict[str, Any] = dict(
            num_epochs=num_epochs,
            batch_size=self.batch_size,
            lr=lr,
            weight_decay=0.0,
            warmup_steps=int(round(self.warmup_epochs * steps_per_epoch)),
            schedule="cosine",
            min_lr=min(self.min_lr, lr),
            seed=seed,
            device=self.device,
            mixed_precision=self.mixed_precision,
            optimizer_impl=self.optimizer_impl,
            log_every=max(1, steps_per_epoch),
            # Encoders carry parameters the retrieval loss never reaches (MobileNet's and
            # PaSST's classifier heads, ATST-Frame's mask token): DDP must not wait for them.
            find_unused_parameters=True,
        )
        return TrainConfig(**(values | changes))


@dataclasses.dataclass(frozen=True)
class Config:
    """Chapter 01: the corpus, the dual encoder, its training, and the chapter's experiments."""

    corpus: CorpusSpec = field(
        CorpusSpec(kind="paper", root="real"),
        help="The audio-caption corpora: generated (smoke, embedded) or the real downloads "
        "(paper: clotho/, audiocaps/, wavcaps/ under root).",
    )
    model: DualEncoderConfig = field(DualEncoderConfig(), help="The dual encoder (§2.2-§2.3).")
    train: Training = field(Training(), help="Pretraining schedule and hardware (§2.6).")
    # data
    pretrain_corpora: tuple[str, ...] = field(
        ("clotho", "audiocaps", "wavcaps"),
        help="Corpora of the pretraining stage (paper §2.4: all three).",
    )
    max_audio_s: float = field(
        30.0, help="Longest audio a model sees: training crop and evaluation cut (§2.5: 30 s)."
    )
    train_crop_s: float | None = field(
        None,
        help="Random training crop (s) when shorter than max_audio_s, a CPU economy; "
        "evaluation still embeds up to max_audio_s (None: max_audio_s).",
    )
    stage0: Stage0 = field(
        Stage0(),
        help="Stage 0 at the embedded scale: the sound-event tagging run that "
        "model.audio_pretrained: stage0 loads (experiments.tagging).",
    )
    max_train_items: int | None = field(
        None, help="Use only the first this many captions of each training corpus (None: all)."
    )
    max_eval_items: int | None = field(
        None,
        help="Use only the first this many captions of the evaluation split, and of the "
        "validation split that selects the model (None: all).",
    )
    eval_batch_size: int = field(64, help="Clips or captions per batch when embedding.")
    select: str = field(
        "best",
        help="The weights a run gives: best (those of the best mAP@10 on the ClothoV2 "
        "validation split, evaluated at the end of every epoch and at the last step, the "
        "papers' selection, salsa's ModelCheckpoint on val/mAP@10; every preset) | final (the "
        "last step's). A run saves both (model.safetensors, final.safetensors), so select does "
        "not change the run: switching it loads the other weights without training. A run with "
        "a single evaluation point (one epoch or less) is not evaluated: best is final.",
    )
    # fine-tuning (§3.5)
    finetune_lr: float = field(8e-6, help="Peak learning rate of fine-tuning on ClothoV2 (§3.5).")
    finetune_epochs: int = field(5, help="Fine-tuning epochs on the Clotho development split.")
    paraphrase_prob: float = field(
        0.3, help="Caption augmentation: swap for a paraphrase with this probability (§3.5)."
    )
    # experiments
    seeds: tuple[int, ...] = field((0, 1, 2), help="Seeds of every reported configuration.")
    ablation_epochs: int | None = field(
        16,
        help="Training epochs of each ablation run. None: the main pretraining's budget: "
        "train.num_epochs over pretrain_corpora, and as many steps for every setting (a "
        "setting with other corpora takes the main system's steps, not its epochs); the "
        "reference setting then is the main pretraining run itself, trained once.",
    )
    ablation_steps: int | None = field(
        None,
        help="Optimizer steps of every ablation run (None: ablation_epochs). Equal steps give the "
        "compared settings one budget, whatever their corpus sizes.",
    )
    audio_encoder_steps: int | None = field(
        None,
        help="Optimizer steps of both sides of the audio-encoder ablation (None: ablation_steps). "
        "On a CPU a CNN14 step costs about five tiny-PaSST steps, so at embedded that comparison "
        "runs shorter than the others; its two sides still get equal steps.",
    )
    ablation_max_train_items: int | None = field(
        None, help="Captions per corpus in the ablation runs (None: all)."
    )
    ablation_max_audio_s: float | None = field(
        None, help="Training crop of the ablation runs (None: max_audio_s); evaluation is not cut."
    )
    corpus_combinations: tuple[str, ...] = field(
        (
            "audiocaps",
            "wavcaps",
            "clotho",
            "audiocaps+wavcaps",
            "wavcaps+clotho",
            "audiocaps+clotho",
            "audiocaps+wavcaps+clotho",
        ),
        help="Pretraining-corpus combinations of the Table 4 analogue ('+'-joined).",
    )
    snippet_lengths_s: tuple[float, ...] = field(
        (2.0, 5.0, 10.0, 15.0), help="Snippet lengths of the Figure 1 analogue (s)."
    )
    snippet_variant: str | None = field(
        None,
        help="PaSST variant of the snippet-length ablation: s20 (paper (a) §3.4: PaSST-S20, whose "
        "20 s time encoding covers snippets up to 20 s, started from its released checkpoint; "
        "the paper preset) | another PaSST variant | None (the main model's, smoke and "
        "embedded). Only PaSST main models switch.",
    )
    search_queries: tuple[str, ...] = field(
        ("a dog barks", "rain falls on a roof", "someone speaks"),
        help="Typed queries of the search demo.",
    )

    def __post_init__(self) -> None:
        check_select(self.select, "Config.select")
        for name in self.pretrain_corpora:
            if name not in ("clotho", "audiocaps", "wavcaps"):
                raise ConfigError(f"Config.pretrain_corpora: unknown corpus {name!r}")
        if self.snippet_variant is not None and self.snippet_variant not in PASST_CONFIGS:
            raise ConfigError(
                f"Config.snippet_variant: expected None or a PaSST variant "
                f"({' | '.join(PASST_CONFIGS)}), got {self.snippet_variant!r}"
            )
        if not 0.0 <= self.paraphrase_prob <= 1.0:
            raise ConfigError(
                f"Config.paraphrase_prob: expected [0, 1], got {self.paraphrase_prob}"
            )

    @property
    def max_frames(self) -> int:
        """Evaluation cut in log-mel frames."""
        return int(round(self.max_audio_s * FRAMES_PER_SECOND))

    @property
    def train_frames(self) -> int:
        """Training crop in log-mel frames."""
        crop = self.max_audio_s if self.train_crop_s is None else self.train_crop_s
        return int(round(min(crop, self.max_audio_s) * FRAMES_PER_SECOND))


def store() -> RunStore:
    """The chapter's run store: trained models and the frozen text encoder's caption cache."""
    return RunStore(CHAPTER)


# ------------------------------------------------------------------------------ text cache

_TEXT_CACHES: dict[str, dict[str, torch.Tensor]] = {}
_TEXT_CACHE_SIZES: dict[str, int] = {}
TEXT_CACHE_VERSION = 6
"""How the caption cache is computed. Part of every run's key: the cached vectors feed
training. 6: each caption's vector is the one it gets alone (batches of one token count, one
thread: :meth:`~audiorepro.models.text.TextEncoder.missing_chunks`), whatever was cached
before; under 5, padded batches of whatever was missing gave a caption other last bits when
something else (a smaller corpus, an earlier call) had filled part of the cache first, and
runs of the same key differed between builds."""


def _text_cache_path(model: DualEncoderConfig, seed: int) -> Path:
    key: dict[str, Any] = {
        "model": model.text_model, "pretrained": model.text_pretrained, "v": TEXT_CACHE_VERSION
    }  # fmt: skip
    if not model.text_pretrained:
        key["seed"] = seed  # a random encoder differs per seed
    return store().run("text_cache", key).path / "captions.pt"


def _read_text_cache(path: Path) -> dict[str, torch.Tensor]:
    """A saved cache: the captions and one (N, D) tensor of their embeddings (one tensor
    loads in a fraction of the time thousands of small ones take)."""
    if not path.is_file():
        return {}
    saved = torch.load(path)
    if set(saved) != {"captions", "embeddings"} or len(saved["captions"]) != len(
        saved["embeddings"]
    ):
        raise ValueError(f"{path}: not a caption-embedding cache (captions + embeddings)")
    return dict(zip(saved["captions"], saved["embeddings"], strict=True))


def _text_cache(model: DualEncoderConfig, seed: int) -> dict[str, torch.Tensor]:
    """The caption-embedding cache of a frozen text encoder, shared in-process and on disk."""
    path = _text_cache_path(model, seed)
    key = str(path)
    if key not in _TEXT_CACHES:
        cache = _read_text_cache(path)
        _TEXT_CACHES[key] = cache
        _TEXT_CACHE_SIZES[key] = len(cache)
    return _TEXT_CACHES[key]


def save_text_caches() -> None:
    """Write the chapter's caption caches that were added to since loading (:func:`load_data`
    fills them; a model embeds into its own copy, :func:`build_model`)."""
    from audiorepro.storage import atomic_write

    for key, cache in _TEXT_CACHES.items():
        if len(cache) == _TEXT_CACHE_SIZES[key]:
            continue
        saved = {"captions": list(cache), "embeddings": torch.stack(list(cache.values()))}
        atomic_write(key, lambda tmp, saved=saved: torch.save(saved, tmp))
        _TEXT_CACHE_SIZES[key] = len(cache)


def build_model(config: Config, seed: int, data: RetrievalData | None = None) -> DualEncoder:
    """A fresh dual encoder of ``config.model`` (same seed, same weights), its audio encoder
    loaded from ``audio_pretrained`` (``stage0`` needs ``data``: the tagging run is trained
    on it if missing). A frozen text encoder starts from a copy of the chapter's
    caption-embedding cache (what :func:`load_data` embedded) and keeps what it embeds later
    (paraphrases, a random encoder's captions) to itself, and into its checkpoints, so that
    the shared cache on disk is only ever what :func:`load_data` wrote."""
    if data is not None:
        config = resolve_pretrained(config, data)
    return build_dual_encoder(
        config.model, seed, text_cache=lambda: dict(_text_cache(config.model, seed))
    )


# ------------------------------------------------------------------------------ data


@dataclasses.dataclass
class RetrievalData:
    """Everything the chapter's pages train and evaluate on.

    Attributes:
        pretrain: ``{corpus: caption items}`` of the pretraining splits (paper §2.4).
        finetune: the Clotho development captions (fine-tuning, §3.5).
        validation: the Clotho validation captions, on which every run selects its model
            (:class:`Selection`).
        evaluation: the Clotho evaluation captions (the paper's test split).
        features: cached log-mel of every recording above.
        root: the corpora folder.
    """

    pretrain: dict[str, list[CaptionItem]]
    finetune: list[CaptionItem]
    validation: list[CaptionItem]
    evaluation: list[CaptionItem]
    features: dict[str, torch.Tensor]
    root: Path
    _front_ends: dict[str, dict[str, torch.Tensor]] = dataclasses.field(
        default_factory=dict, repr=False
    )

    def features_for(self, model: DualEncoderConfig) -> dict[str, torch.Tensor]:
        """The log-mel the audio encoder of ``model`` takes: :attr:`features` (PaSST front end) or,
        for ATST-Frame, its own 64-band features of the same recordings (computed once)."""
        if model.front_end == "passt":
            return self.features
        if model.front_end not in self._front_ends:
            everything = all_items(self.pretrain, self.validation, self.evaluation)
            self._front_ends[model.front_end] = log_mel_features(
                everything, front_end=model.front_end
            )
        return self._front_ends[model.front_end]

    def training_items(
        self, corpora: Sequence[str], max_items: int | None = None
    ) -> list[CaptionItem]:
        """The pretraining captions of ``corpora``, at most ``max_items`` of each, concatenated."""
        items: list[CaptionItem] = []
        for corpus in corpora:
            if corpus not in self.pretrain:
                raise ValueError(f"unknown corpus {corpus!r}; known: {', '.join(self.pretrain)}")
            items += self.pretrain[corpus][:max_items]
        return items

    @property
    def eval_set(self) -> EvaluationSet:
        """The evaluation split as queries (captions) and items (recordings)."""
        return EvaluationSet.from_items(self.evaluation)


def all_items(
    pretrain: Mapping[str, Sequence[CaptionItem]],
    validation: Sequence[CaptionItem],
    evaluation: Sequence[CaptionItem],
) -> list[CaptionItem]:
    """Every caption item of the chapter, whose recordings get log-mel features and whose
    captions a frozen text encoder embeds once: pretraining, validation, evaluation."""
    return [i for items in pretrain.values() for i in items] + [*validation, *evaluation]


def load_config(preset: str, overrides: Mapping[str, Any] | None = None, **more: Any) -> Config:
    """The chapter's :class:`Config` of ``preset`` (``PRESETS/<preset>.yaml``) with single-field
    overrides, given as a mapping or as keywords; dotted names set nested fields
    (``{"train.max_steps": 10}``), and ``None`` values are ignored."""
    return load_preset(Config, PRESETS, preset, **{**dict(overrides or {}), **more})


def load_data(config: Config) -> RetrievalData:
    """The three corpora of ``config.corpus`` as caption items, with their log-mel cached; the
    Clotho validation split, which selects the models, cut to ``max_eval_items`` as the
    evaluation split.

    ``smoke`` and ``embedded`` generate (or reuse) the embedded corpora; ``paper`` reads the real
    downloads from ``corpus.root``, laid out as ``clotho/``, ``audiocaps/``, ``wavcaps/`` in
    their distributed formats. Both go through the same recipes
    (:func:`~audiorepro.data.retrieval.prepare_caption_manifests`).
    """
    from audiorepro.data.embedded.generate import ensure_corpora
    from audiorepro.data.retrieval import PRETRAIN_SPLITS, caption_items

    spec = config.corpus
    if spec.kind == "paper" or spec.root is not None:
        root = spec.resolve(data_dir() / "real")
    else:
        root = Path(
            ensure_corpora(spec.kind, spec.seed, only=["audio_caption"], verbose=False)[
                "audio_caption"
            ]
        )
    pretrain = {
        corpus: caption_items(root, corpus, PRETRAIN_SPLITS[corpus])[: config.max_train_items]
        for corpus in ("clotho", "audiocaps", "wavcaps")
    }
    finetune = pretrain["clotho"]
    validation = caption_items(root, "clotho", ["validation"])[: config.max_eval_items]
    evaluation = caption_items(root, "clotho", ["evaluation"])[: config.max_eval_items]
    everything = all_items(pretrain, validation, evaluation)
    features = log_mel_features(everything)
    model = config.model
    if model.trainable_layers == 0 and model.text_pretrained:
        # A frozen pretrained text encoder embeds every caption once, here, for all pages, on
        # the training runs' threads. The paraphrases (twice as many) are embedded when caption
        # augmentation first draws them, into the run's own copy of this cache (build_model).
        captions = [i.caption for i in everything]
        text = TextEncoder(model.text_model, trainable_layers=0)
        text._cache = _text_cache(model, 0)
        chunks = text.missing_chunks(captions)
        workers = min(side_by_side_workers(config), len(chunks))
        threads = config.train.torch_threads
        if workers > 1:  # the same batches on the same threads, in one process per core
            parts = [chunks[i::workers] for i in range(workers)]
            shared = (model.text_model, threads)
            embedded = map_processes(_embed_chunks, parts, shared=shared, workers=workers)
            pairs = zip(sum(parts, []), sum(embedded, []), strict=True)
        else:
            with torch_threads(threads):
                pairs = zip(chunks, text.embed_chunks(chunks), strict=True)
        for chunk, embeddings in pairs:
            text.add_to_cache(chunk, embeddings)
        save_text_caches()
    return RetrievalData(pretrain, finetune, validation, evaluation, features, root)


def _embed_chunks(model: tuple[str, int | None], chunks: list[list[str]]) -> list[torch.Tensor]:
    """A worker's part of :func:`load_data`'s caption embedding: ``model`` is the frozen text
    model's name and the runs' torch threads."""
    name, threads = model
    with torch_threads(threads):
        return TextEncoder(name, trainable_layers=0).embed_chunks(chunks)


# ------------------------------------------------------------------------------ training


class _EpochSetter(Callback):
    """Tells the dataset which epoch's crops and caption swaps to draw."""

    def __init__(self, dataset: CaptionDataset) -> None:
        self.dataset = dataset

    def on_fit_start(self, trainer: Trainer) -> None:
        self.dataset.set_epoch(trainer.epoch)

    def on_step_end(self, trainer: Trainer, step: int, logs: dict[str, float]) -> None:
        self.dataset.set_epoch(trainer.epoch)


class _TextCacheSaver(Callback):
    """Keeps what a run's frozen text encoder embedded during the run (its own cache,
    :func:`build_model`) in the run's checkpoints, and restores it on resume, so that a run
    resumed in a new process finds every caption embedded before its checkpoint as it was
    computed then (not again, in other batches, with other rounding)."""

    def __init__(self, model: DualEncoder) -> None:
        text = model.text_encoder
        frozen = getattr(text, "trainable_layers", None) == 0
        self.cache: dict[str, torch.Tensor] = text._cache if frozen else {}
        self.base = set(self.cache)

    def state_dict(self) -> dict[str, Any]:
        added = [c for c in self.cache if c not in self.base]
        if not added:
            return {"captions": []}
        return {"captions": added, "embeddings": torch.stack([self.cache[c] for c in added])}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        captions = list(state.get("captions", []))
        if captions:
            self.cache.update(zip(captions, state["embeddings"], strict=True))


def text_cache_saver(model: DualEncoder) -> Callback:
    """The Trainer callback of a resumable run of ``model``, whose frozen text encoder has its
    own caption cache: the captions it embeds go into every checkpoint and come back on resume
    (see :func:`train_dual_encoder`)."""
    return _TextCacheSaver(model)


CHECKPOINT_STEPS = 200
"""Most optimizer steps between two checkpoints of a resumable run (:func:`checkpoint_every`)."""


def steps_per_epoch(train_cfg: TrainConfig, num_items: int) -> int:
    """Optimizer steps of one epoch over ``num_items`` training items: batches of
    ``batch_size`` on each of ``$WORLD_SIZE`` processes, ``grad_accum_steps`` per step."""
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    batches = max(1, -(-num_items // (train_cfg.batch_size * processes)))
    return -(-batches // train_cfg.grad_accum_steps)


def checkpoint_every(train_cfg: TrainConfig, num_items: int) -> int:
    """Steps between the checkpoints of a resumable run over ``num_items`` training items: once
    per epoch, and at least every :data:`CHECKPOINT_STEPS` steps when epochs are longer."""
    return min(steps_per_epoch(train_cfg, num_items), CHECKPOINT_STEPS)


def retrieval_loss(model: torch.nn.Module, batch: Mapping[str, Any]) -> torch.Tensor:
    """``loss_fn`` for the Trainer: the dual encoder's NT-Xent on one collated batch."""
    return model(batch["feats"], batch["lengths"], batch["captions"], batch["audio_ids"])


def epoch_setter(dataset: CaptionDataset) -> Callback:
    """The Trainer callback that tells ``dataset`` the epoch (its crops and caption swaps)."""
    return _EpochSetter(dataset)


def step_budget(train_cfg: TrainConfig, num_items: int, max_steps: int | None) -> TrainConfig:
    """``train_cfg`` for a run of exactly ``max_steps`` optimizer steps over ``num_items``
    training items: as many epochs as needed, the cosine spanning the ``max_steps`` and the
    warm-up at most a tenth of them (unchanged when ``max_steps`` is None). Runs compared with
    one budget (an ablation's settings, stage 2 at λ = 0 and λ = 1) take equal steps whatever
    their corpus sizes."""
    if max_steps is None:
        return train_cfg
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    per_epoch = max(1, -(-num_items // (train_cfg.batch_size * processes)))
    return dataclasses.replace(
        train_cfg,
        num_epochs=-(-max_steps // per_epoch),
        max_steps=max_steps,
        schedule_steps=max_steps,
        warmup_steps=min(train_cfg.warmup_steps, max_steps // 10),
    )


# ------------------------------------------------------------------------------ model selection

SELECTION_METRIC = "mAP@10"
"""What every run selects its model by on the validation split (papers (a) and (b): salsa's
``ModelCheckpoint`` on ``val/mAP@10``)."""
WEIGHT_FILES = {"best": "model.safetensors", "final": "final.safetensors"}
"""The two weights every run saves, by the ``Config.select`` value that loads them."""


def evaluation_points(train_cfg: TrainConfig, num_items: int) -> int:
    """How many evaluations a run of ``train_cfg`` over ``num_items`` items has when it
    evaluates once per epoch: the end of every epoch it completes and its last step, hence one
    for a run of one epoch or less."""
    per_epoch = steps_per_epoch(train_cfg, num_items)
    total = train_cfg.num_epochs * per_epoch
    if train_cfg.max_steps is not None:
        total = min(total, train_cfg.max_steps)
    return -(-total // per_epoch)


class Selection:
    """Model selection of one run on the validation split, as papers (a) and (b) do it.

    :meth:`trainer_hooks` gives the Trainer an ``eval_fn``, the text-to-audio metrics of
    ``model`` on ``validation`` at the end of every epoch and at the last step, and a
    :class:`~audiorepro.training.selection.KeepBest` on mAP@10 that keeps the best trained
    weights (:func:`trained_state`, without the frozen text encoder) under ``directory``, so
    that a resumed run still has them. A run with a single evaluation point (one epoch or less)
    is not evaluated at all: its best weights are its final ones by definition, and on 2 CPU
    cores an evaluation is not free.

    Args:
        model: the dual encoder being trained (the Trainer's model, or the one a distillation
            student wraps).
        validation: the validation split as queries and items.
        features: log-mel of its recordings on ``model``'s front end.
        config: the chapter's configuration (evaluation cut and batch).
        directory: where the best weights are kept (``None``: in memory).
    """

    def __init__(
        self,
        model: DualEncoder,
        validation: EvaluationSet,
        features: Mapping[str, torch.Tensor],
        config: Config,
        directory: Path | None = None,
    ) -> None:
        self.model, self.validation = model, validation
        self.features, self.config = features, config
        self.keep = KeepBest(
            SELECTION_METRIC, "max", directory, state=lambda _: trained_state(model)
        )
        self.evaluates = False

    def eval_fn(self, module: torch.nn.Module) -> dict[str, float]:
        """The Trainer's ``eval_fn``: :func:`evaluate` of the dual encoder on the validation
        split (``module``, the Trainer's model, is it or wraps it)."""
        return evaluate(self.model, self.validation, self.features, self.config)

    def trainer_hooks(self, train_cfg: TrainConfig, num_items: int) -> tuple[Any, list[Any]]:
        """``(eval_fn, callbacks)`` for a Trainer of ``train_cfg`` over ``num_items`` items,
        ``(None, [])`` when the run has a single evaluation point; :attr:`evaluates` records
        which."""
        self.evaluates = evaluation_points(train_cfg, num_items) > 1
        return (self.eval_fn, [self.keep]) if self.evaluates else (None, [])

    def best_state(self, final: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
        """The kept best weights, or ``final`` when none were kept (the run was not evaluated,
        or no evaluation gave a finite mAP@10)."""
        return self.keep.best_state() if self.keep.best_step is not None else final

    def summary(self, result: TrainResult) -> dict[str, Any]:
        """What the run's history records of the selection: the validation curve (``steps``,
        mAP@10 ``values``), whether the run was evaluated, and ``best_step`` and
        ``best_mAP@10`` (the final step and ``None`` when no best was kept: then the best
        weights are the final ones)."""
        kept = self.keep.best_step is not None
        return {
            "validation": {
                "metric": SELECTION_METRIC,
                "evaluated": self.evaluates,
                "steps": list(result.eval_steps),
                "values": [m[SELECTION_METRIC] for m in result.eval_metrics],
            },
            "best_step": self.keep.best_step if kept else result.final_step,
            f"best_{SELECTION_METRIC}": self.keep.best if kept else None,
        }


def train_dual_encoder(
    model: DualEncoder,
    items: Sequence[CaptionItem],
    features: Mapping[str, torch.Tensor],
    config: Config,
    *,
    seed: int,
    num_epochs: int,
    lr: float,
    paraphrase_prob: float = 0.0,
    max_steps: int | None = None,
    crop: str = "random",
    out_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    selection: Selection | None = None,
    callbacks: Sequence[Any] = (),
    progress: str = "auto",
) -> Any:
    """Train ``model`` in place on caption items; returns the Trainer's ``TrainResult``.

    Adam with PyTorch defaults (weight decay 0), one warm-up epoch then cosine decay (§2.6),
    crops of ``config.train_frames`` (random, or the start of each clip with ``crop="start"``),
    padding to the batch maximum, caption swaps with ``paraphrase_prob``. With ``max_steps``
    the run takes exactly that many steps (:func:`step_budget`).

    With ``out_dir`` the run writes checkpoints there (:func:`checkpoint_every`), without the
    frozen text-encoder weights, and ``resume=True`` continues from the newest one: ``model``
    must then be built as the interrupted run's was (:func:`build_model`, same configuration and
    seed), which gives the same frozen weights. With ``selection`` (a :class:`Selection` of
    ``model``) the run is evaluated on the validation split at the end of every epoch and at
    its last step, and the best weights are kept. ``callbacks`` are further Trainer callbacks.
    """
    dataset = CaptionDataset(
        items, features, max_frames=config.train_frames, crop=crop,
        paraphrase_prob=paraphrase_prob, seed=seed,
        freqm=config.train.freqm, timem=config.train.timem,
    )  # fmt: skip
    train_cfg = config.train.trainer_config(len(dataset), seed=seed, num_epochs=num_epochs, lr=lr)
    train_cfg = step_budget(train_cfg, len(dataset), max_steps)
    if out_dir is not None:
        every = checkpoint_every(train_cfg, len(dataset))
        train_cfg = dataclasses.replace(train_cfg, checkpoint_every=every)
    eval_fn, keep = (
        (None, []) if selection is None else selection.trainer_hooks(train_cfg, len(dataset))
    )
    trainer = Trainer(
        model,
        retrieval_loss,
        dataset,
        train_cfg,
        collate_fn=functools.partial(collate_captions, pad_value=model.pad_value),
        eval_fn=eval_fn,
        out_dir=out_dir,
        callbacks=[_EpochSetter(dataset), text_cache_saver(model), *keep, *callbacks],
        checkpoint_frozen=False,
        progress=progress,
    )
    with torch_threads(config.train.torch_threads):
        return trainer.fit(resume=resume)


# ------------------------------------------------------------------------------ evaluation


@torch.no_grad()
def embed_recordings(
    model: DualEncoder,
    keys: Sequence[str],
    features: Mapping[str, torch.Tensor],
    max_frames: int | None = None,
    batch_size: int = 64,
) -> torch.Tensor:
    """(N, embed_dim) projected audio embeddings of the recordings ``keys``, in order.

    Evaluation uses the start of each recording, at most ``max_frames`` (deterministic).
    Recordings are batched by length to limit padding.
    """
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(keys)), key=lambda i: features[keys[i]].shape[0])
    out = torch.zeros(len(keys), model.audio_projection.out_features)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        clips = [features[keys[i]][:max_frames] for i in idx]
        lengths = torch.tensor([c.shape[0] for c in clips])
        feats = torch.full((len(clips), int(lengths.max()), clips[0].shape[1]), model.pad_value)
        for j, c in enumerate(clips):
            feats[j, : c.shape[0]] = c.float()
        emb = model.encode_audio(feats.to(device), lengths.to(device))
        out[idx] = emb.float().cpu()
    return out


@torch.no_grad()
def embed_captions(
    model: DualEncoder, captions: Sequence[str], batch_size: int = 256
) -> torch.Tensor:
    """(M, embed_dim) projected caption embeddings, in order."""
    model.eval()
    parts = [
        model.encode_text(list(captions[i : i + batch_size])).float().cpu()
        for i in range(0, len(captions), batch_size)
    ]
    return torch.cat(parts)


def similarity_matrix(
    model: DualEncoder,
    eval_set: EvaluationSet,
    features: Mapping[str, torch.Tensor],
    config: Config,
) -> torch.Tensor:
    """(n_captions, n_recordings) cosine similarities: rows are queries, as the metrics expect."""
    audio = embed_recordings(
        model, eval_set.keys, features, config.max_frames, config.eval_batch_size
    )
    text = embed_captions(model, eval_set.captions)
    return DualEncoder.similarity(text, audio)


def evaluate(
    model: DualEncoder,
    eval_set: EvaluationSet,
    features: Mapping[str, torch.Tensor],
    config: Config,
) -> dict[str, float]:
    """Text-to-audio ``mAP@10``, ``R@1``, ``R@5``, ``R@10`` (fractions) on ``eval_set``."""
    scores = similarity_matrix(model, eval_set, features, config)
    return retrieval_metrics(scores, torch.tensor(eval_set.targets))


def evaluate_and_record(
    model: DualEncoder,
    config: Config,
    data: RetrievalData,
    *,
    page: str,
    preset: str,
    seed: int,
    tags: Mapping[str, Any],
    chapter: str = CHAPTER,
    record_config: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    """:func:`evaluate` ``model`` on the evaluation split (on its own front end) and append
    the metrics, with the run's training throughput (:func:`throughput`), to the results ledger
    with ``tags``; returns the metrics."""
    metrics = evaluate(model, data.eval_set, data.features_for(config.model), config)
    reporting.record_result(
        chapter,
        page,
        metrics | throughput(model),
        preset=preset,
        seed=seed,
        config=record_config if record_config is not None else to_dict(config),
        tags=tags,
    )
    return metrics


def throughput(model: DualEncoder) -> dict[str, float]:
    """Training speed of the run that produced ``model``: ``steps_per_s`` and ``clips_per_s``
    (optimizer steps and training clips per second), and its ``train_steps``, ``final_loss``
    (the last step's batch) and ``late_loss`` (the mean NT-Xent over the last tenth of its
    steps, at least one: what the findings judge, less noisy than one batch; for a distilled
    run its ``loss_sup`` part); empty for a model without a training history."""
    history = getattr(model, "train_history", None) or {}
    out = {k: float(history[k]) for k in ("steps_per_s", "clips_per_s") if k in history}
    if history.get("final_step"):
        out["train_steps"] = float(history["final_step"])
    losses = history.get("losses")
    if losses:
        # A stage-2 run's loss adds L_dist: its NT-Xent part, L_sup, is what ln(batch) bounds.
        contrastive = (history.get("step_metrics") or {}).get("loss_sup") or losses
        late = contrastive[-max(1, len(contrastive) // 10) :]
        out["final_loss"] = float(losses[-1])
        out["late_loss"] = math.fsum(late) / len(late)
    return out


# ------------------------------------------------------------------------------ run store


def items_digest(items: Sequence[CaptionItem]) -> str:
    """Identity of a list of training captions (their audio keys and texts, in order)."""
    return hashlib.sha256("\n".join(i.key + i.caption for i in items).encode()).hexdigest()


def run_entry(
    kind: str,
    config: Config,
    seed: int,
    *,
    items: Sequence[CaptionItem],
    validation: Sequence[CaptionItem],
    num_epochs: int,
    lr: float,
    paraphrase_prob: float = 0.0,
    max_steps: int | None = None,
    init: str | None = None,
    run_store: RunStore | None = None,
    **extra: Any,
) -> Run:
    """The run-store entry of one training run (complete or not yet). Its hash covers what
    defines the result: the corpus, model and schedule, the crop, the seed, the training
    captions, the validation captions and embedding batch that select the best weights
    (:class:`Selection`), the epochs (or steps) and learning rate, the caption swaps, the
    weights it starts from (``init``, the :func:`weights_key` of an earlier run's model; a
    pretrained audio checkpoint by its content hash) and ``extra``. ``config.select`` is not
    part of it: a run saves both the best and the final weights."""
    spec = {
        "corpus": to_dict(config.corpus),
        "model": pretrained_key(config.model),
        "train": to_dict(config.train),
        "max_audio_s": config.max_audio_s,
        "train_frames": config.train_frames,
        "seed": seed,
        "items": items_digest(items),
        "validation": {"items": items_digest(validation), "batch": config.eval_batch_size},
        "text_cache": TEXT_CACHE_VERSION if config.model.trainable_layers == 0 else None,
        "num_epochs": num_epochs,
        "lr": lr,
        "paraphrase_prob": paraphrase_prob,
        "init": init,
        **extra,
    }
    if max_steps is not None:
        spec["max_steps"] = max_steps
    return (run_store or store()).run(kind, spec)


def trained_state(model: DualEncoder) -> dict[str, torch.Tensor]:
    """The state dict without the frozen weights (a frozen text encoder, a fixed temperature:
    rebuilt identically from the configuration, the seed and the starting weights), which keeps
    a saved run small; the tensors of the trainer's checkpoints (``checkpoint_frozen=False``)."""
    frozen = set(frozen_parameter_names(model))
    return {k: v.cpu() for k, v in model.state_dict().items() if k not in frozen}


def load_trained_state(model: DualEncoder, state: Mapping[str, torch.Tensor]) -> None:
    """Load :func:`trained_state` output; anything missing other than frozen weights is an error."""
    result = model.load_state_dict(state, strict=False)
    frozen = set(model.state_dict()) - set(trained_state(model))
    missing = [k for k in result.missing_keys if k not in frozen]
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"saved run does not fit the model: missing {missing}, unexpected "
            f"{list(result.unexpected_keys)}"
        )


def weights_key(run_key: str, select: str) -> str:
    """The identity of the ``select``-ed weights (best or final) of the run ``run_key``: what a
    run that starts from them, or distils from them, records. The two selections of one run are
    one run but two starting points."""
    return f"{run_key}/{select}"


def trained_model(
    run: Run,
    config: Config,
    seed: int,
    train: Any,
    *,
    data: RetrievalData,
    init: DualEncoder | None = None,
    run_store: RunStore | None = None,
) -> DualEncoder:
    """The model of ``run`` (see :func:`run_entry`) with its ``config.select``-ed weights:
    loaded if the run is complete, else built from ``config.model`` and ``seed`` (or ``init``'s
    weights), trained by ``train(model, staging, selection) -> TrainResult`` and published.

    ``staging`` is the run's :meth:`RunStore.staging` folder, where ``train`` keeps its
    checkpoints and from which it resumes: a run killed before it was published continues
    there when called again with the same configuration (the folder is removed on publishing).
    ``selection`` is the run's :class:`Selection` on ``data``'s validation split (its best
    weights kept in ``staging`` too), for ``train`` to hand to the Trainer. A run saves the best
    weights as ``model.safetensors``, the final ones as ``final.safetensors``, and its history
    with the validation curve and best step as ``history.json``.

    The model carries ``train_history`` (that history, a dict, with ``selected``: which weights
    it holds), ``run_key`` (the run's key, whichever weights are selected) and ``weights_key``
    (:func:`weights_key`, the identity of these weights). With ``init``, the audio encoder's
    ``audio_pretrained`` is not loaded (``init``'s weights replace it anyway)."""
    if init is not None:
        config = replace(config, **{"model.audio_pretrained": None})
    model = build_model(config, seed)
    if init is not None:
        model.load_state_dict(init.state_dict())
    built: dict[str, Any] = {}  # what this call's build wrote, if it ran
    if not run.complete:
        run_store = run_store or store()

        def build(folder: Path) -> dict[str, Any]:
            staging = run_store.staging(run)
            validation = EvaluationSet.from_items(data.validation)
            features = data.features_for(config.model)
            selection = Selection(model, validation, features, config, staging / "best")
            result = train(model, staging, selection)
            history = result.to_dict() if result is not None else {}
            if result is not None:
                history |= selection.summary(result)
            if result is not None and result.wall_time_s:
                steps = result.final_step - result.resumed_step  # those of this call
                history["steps_per_s"] = steps / result.wall_time_s
                history["clips_per_s"] = steps * config.train.batch_size / result.wall_time_s
            final = trained_state(model)
            write_final_weights(final, folder / WEIGHT_FILES["final"], result)
            kept = selection.keep.best_step
            best_is_final = kept is None or (result is not None and kept == result.final_step)
            if best_is_final:  # one file on disk (a paper-size run's weights are GBs)
                os.link(folder / WEIGHT_FILES["final"], folder / WEIGHT_FILES["best"])
            else:
                save_tensors(selection.best_state(final), folder / WEIGHT_FILES["best"])
            write_json(folder / "history.json", history)
            built["history"] = _file_identity(folder / "history.json")
            built["holds_selected"] = config.select == "final" or best_is_final
            return {}

        run_store.publish(run, build)
    # The model already holds the selected weights if this call trained the run and its files
    # are the ones published (another process may have published the same run first).
    published_here = built and built["history"] == _file_identity(run.file("history.json"))
    if not (published_here and built["holds_selected"]):
        tensors, _ = load_tensors(run.file(WEIGHT_FILES[config.select]))
        load_trained_state(model, tensors)
    model.train_history = read_json(run.file("history.json")) | {"selected": config.select}
    model.run_key = run.key
    model.weights_key = weights_key(run.key, config.select)
    return model


def _file_identity(path: Path) -> tuple[int, int]:
    """(device, inode): the same file after a rename, another file after a rewrite."""
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def write_final_weights(
    final: Mapping[str, torch.Tensor], path: Path, result: TrainResult | None
) -> None:
    """Write a run's final weights to ``path``: a hard link to the model file of the trainer's
    last checkpoint when that checkpoint is the finished run's (it ends at the run's final step
    and holds exactly the tensors of ``final``: :func:`trained_state` and
    ``checkpoint_frozen=False`` both leave out the frozen weights), else a new file. A
    paper-size run's weights are GBs: the link saves writing and syncing them twice."""
    source = _finished_model_file(final, result)
    if source is not None:
        try:
            os.link(source, path)
            return
        except OSError:  # another file system, or no hard links: write the file
            pass
    save_tensors(final, path)


def _finished_model_file(
    final: Mapping[str, torch.Tensor], result: TrainResult | None
) -> Path | None:
    """The last checkpoint's model file if it holds the tensors of ``final`` (see
    :func:`write_final_weights`), else ``None``."""
    from safetensors import safe_open

    from audiorepro.training.checkpoint import MODEL_FILE, checkpoint_name

    if result is None or not result.checkpoint:
        return None
    folder = Path(result.checkpoint)
    if folder.name != checkpoint_name(result.final_step) or not (folder / MODEL_FILE).is_file():
        return None
    with safe_open(str(folder / MODEL_FILE), framework="pt", device="cpu") as handle:
        metadata = handle.metadata() or {}
        if json.loads(metadata.get(ALIASES_KEY, "{}")) or set(handle.keys()) != set(final):
            return None
        if any(handle.get_slice(k).get_shape() != list(final[k].shape) for k in final):
            return None
    return folder / MODEL_FILE


def run_training(
    kind: str,
    config: Config,
    seed: int,
    data: RetrievalData,
    *,
    items: Sequence[CaptionItem],
    num_epochs: int,
    lr: float,
    paraphrase_prob: float = 0.0,
    max_steps: int | None = None,
    init: DualEncoder | None = None,
    progress: str = "lines",
    run_store: RunStore | None = None,
    callbacks: Sequence[Any] = (),
) -> DualEncoder:
    """Train (or reload) one run of ``kind`` in ``run_store`` (default :func:`store`), starting
    from ``init``'s weights when given (its ``run_key`` is part of the run's identity), else
    from ``config.model.audio_pretrained`` (``stage0`` is trained first if needed,
    :func:`resolve_pretrained`). The model is selected on ``data``'s validation split
    (:class:`Selection`; ``config.select`` picks the best or the final weights, both saved). A
    run killed before it finished continues from its last checkpoint (:func:`trained_model`) and
    ends with the weights of an uninterrupted run. ``callbacks`` are further Trainer callbacks
    (progress hooks, tests)."""
    if init is None:
        config = resolve_pretrained(config, data)
    else:
        config = replace(config, **{"model.audio_pretrained": None})  # init's weights win
    run = run_entry(
        kind,
        config,
        seed,
        items=items,
        validation=data.validation,
        num_epochs=num_epochs,
        lr=lr,
        paraphrase_prob=paraphrase_prob,
        max_steps=max_steps,
        init=None if init is None else init.weights_key,
        run_store=run_store,
    )

    def train(model: DualEncoder, staging: Path, selection: Selection) -> Any:
        return train_dual_encoder(
            model,
            items,
            data.features_for(config.model),
            config,
            seed=seed,
            num_epochs=num_epochs,
            lr=lr,
            paraphrase_prob=paraphrase_prob,
            max_steps=max_steps,
            out_dir=staging,
            resume=True,
            selection=selection,
            callbacks=callbacks,
            progress=progress,
        )

    return trained_model(run, config, seed, train, data=data, init=init, run_store=run_store)


def resolve_pretrained(config: Config, data: RetrievalData) -> Config:
    """``config`` with ``model.audio_pretrained: stage0`` replaced by the path of the stage-0
    tagging checkpoint of its audio encoder (:mod:`~audiorepro.experiments.tagging`, trained in
    the chapter's run store when missing); other values are kept."""
    model = resolve_stage0(
        config.model, data.root, config.stage0, run_store=store(),
        corpus=to_dict(config.corpus), features=data.features_for(config.model),
    )  # fmt: skip
    return config if model is config.model else replace(config, model=model)


def stage0_checkpoint(config: Config, data: RetrievalData) -> Path | None:
    """The stage-0 checkpoint ``config.model`` starts from (trained if needed), or ``None``
    when it does not use ``audio_pretrained: stage0``."""
    resolved = resolve_pretrained(config, data).model.audio_pretrained
    return Path(resolved) if config.model.audio_pretrained == "stage0" else None


def stage0_table(
    config: Config, data: RetrievalData, encoders: Sequence[str], *, page: str, preset: str,
    chapter: str = CHAPTER, configs: Mapping[str, Config] | None = None,
) -> pd.DataFrame:  # fmt: skip
    """Stage 0 of each audio encoder in ``encoders`` (trained if missing): held-out tagging mAP
    beside its chance level, steps and throughput; each row also goes to the ledger, tagged
    ``{"stage": "stage0", "encoder": name}``. An encoder is ``config`` with that
    ``model.audio_encoder``, or ``configs[name]`` when given (another chapter's variant, e.g.
    chapter 02's ATST-Frame and MobileNet configurations)."""
    from audiorepro.experiments.tagging import stage0_report

    rows = []
    for name in encoders:
        cfg = (configs or {}).get(name) or replace(config, **{"model.audio_encoder": name})
        path = stage0_checkpoint(cfg, data)
        if path is None:
            continue
        report = stage0_report(path)
        metrics = {
            "tagging_map": report["heldout_map"],
            "chance_map": report["heldout_chance_map"],
            "steps_per_s": report["steps_per_s"],
            "clips_per_s": report["steps_per_s"] * config.stage0.batch_size,
            "final_loss": report["history"]["losses"][-1],
        }
        reporting.record_result(
            chapter, page, metrics, preset=preset, seed=config.stage0.seed,
            config=to_dict(cfg), wall_time_s=report["seconds"],
            tags={"stage": "stage0", "encoder": name},
        )  # fmt: skip
        rows.append({
            "encoder": name,
            "tagging mAP (held out)": round(report["heldout_map"], 3),
            "chance": round(report["heldout_chance_map"], 3),
            "classes": len(report["classes"]),
            "train / held-out clips": f"{report['train_clips']} / {report['heldout_clips']}",
            "steps": report["steps"],
            "seconds": round(report["seconds"], 1),
            "steps/s": round(report["steps_per_s"], 2),
        })  # fmt: skip
    return pd.DataFrame(rows)


def pretrain_entry(config: Config, seed: int, data: RetrievalData) -> Run:
    """The run-store entry of :func:`pretrain` (its key identifies the pretrained weights)."""
    config = resolve_pretrained(config, data)
    return run_entry(
        "pretrain",
        config,
        seed,
        items=data.training_items(config.pretrain_corpora),
        validation=data.validation,
        num_epochs=config.train.num_epochs,
        lr=config.train.lr,
    )


def pretrain(config: Config, seed: int, data: RetrievalData, **kwargs: Any) -> DualEncoder:
    """Stage 1 (paper §2.6): contrastive pretraining on ``config.pretrain_corpora``."""
    return run_training(
        "pretrain",
        config,
        seed,
        data,
        items=data.training_items(config.pretrain_corpora),
        num_epochs=config.train.num_epochs,
        lr=config.train.lr,
        **kwargs,
    )


def finetune(
    config: Config, seed: int, data: RetrievalData, *, augment: bool, **kwargs: Any
) -> DualEncoder:
    """Stage 2 (§3.5): fine-tune the pretrained model on ClothoV2, with or without the caption
    swap (probability ``config.paraphrase_prob``). Pretrains first if no saved model exists."""
    base = pretrain(config, seed, data, **kwargs)
    return run_training(
        "finetune-aug" if augment else "finetune",
        config,
        seed,
        data,
        items=data.finetune,
        num_epochs=config.finetune_epochs,
        lr=config.finetune_lr,
        paraphrase_prob=config.paraphrase_prob if augment else 0.0,
        init=base,
        **kwargs,
    )


def finetune_entry(config: Config, seed: int, data: RetrievalData, *, augment: bool) -> Run:
    """The run-store entry of :func:`finetune` (its pretraining's stage 0 must exist,
    :func:`stage0_ready`, or it is trained now)."""
    base = pretrain_entry(config, seed, data)
    return run_entry(
        "finetune-aug" if augment else "finetune",
        replace(config, **{"model.audio_pretrained": None}),
        seed,
        items=data.finetune,
        validation=data.validation,
        num_epochs=config.finetune_epochs,
        lr=config.finetune_lr,
        paraphrase_prob=config.paraphrase_prob if augment else 0.0,
        init=weights_key(base.key, config.select),
    )


def evaluate_stages(
    config: Config,
    data: RetrievalData,
    *,
    preset: str,
    page: str,
    recorded: Sequence[str] = STAGES,
) -> dict[tuple[str, int], tuple[DualEncoder, dict[str, float]]]:
    """For every seed, the models of :data:`STAGES` (trained or reloaded), each scored on the
    evaluation split; the stages in ``recorded`` go to the ledger, tagged ``{"stage": ...}``.
    Returns ``{(stage, seed): (model, metrics)}``. Missing runs train side by side first
    (:func:`train_ahead`)."""
    train_ahead(config, data, "finetune")
    out = {}
    for seed in config.seeds:
        models = {
            "pretrain": pretrain(config, seed, data),
            "finetune": finetune(config, seed, data, augment=False),
            "finetune-aug": finetune(config, seed, data, augment=True),
        }
        for stage, model in models.items():
            if stage in recorded:
                metrics = evaluate_and_record(
                    model, config, data, page=page, preset=preset, seed=seed,
                    tags={"stage": stage},
                )  # fmt: skip
            else:
                metrics = evaluate(model, data.eval_set, data.features, config)
            out[stage, seed] = (model, metrics)
    return out


# ------------------------------------------------------------------------------ ablations

ABLATIONS = ("audio_encoder", "text_encoder", "corpora", "snippet_s")
"""The chapter's ablations: PaSST vs CNN14 (Table 3), pretrained vs random text encoder,
pretraining corpora (Table 4), snippet length (Figure 1)."""


def ablation_config(config: Config, kind: str, setting: str) -> Config:
    """``config`` with one factor changed. ``setting``: ``passt``/``cnn14``/``cnn10``,
    ``pretrained``/``random``, ``+``-joined corpora, or a snippet length in seconds (with a
    PaSST main model and ``snippet_variant`` set, every snippet length runs on that variant,
    PaSST-S20 in the paper; a PaSST whose time patchout is the variant's own drops the same
    share of each snippet's time patches as the variant does of its input,
    :func:`~audiorepro.models.passt.scaled_time_patchout`)."""
    if kind == "audio_encoder":
        return replace(config, **{"model.audio_encoder": setting})
    if kind == "text_encoder":
        if setting not in ("pretrained", "random"):
            raise ValueError(f"text_encoder setting must be pretrained or random, got {setting!r}")
        return replace(config, **{"model.text_pretrained": setting == "pretrained"})
    if kind == "corpora":
        return replace(config, pretrain_corpora=corpora_order(config, setting))
    if kind == "snippet_s":
        changes: dict[str, Any] = {"model.snippet_s": float(setting)}
        if config.model.audio_encoder == "passt":
            if config.snippet_variant is not None:
                changes["model.passt_variant"] = config.snippet_variant
            if config.model.s_patchout_t is None:  # the variant's, scaled to the snippet
                variant = changes.get("model.passt_variant", config.model.passt_variant)
                frames = int(round(float(setting) * FRAMES_PER_SECOND))
                changes["model.s_patchout_t"] = scaled_time_patchout(variant, frames)
        return replace(config, **changes)
    raise ValueError(f"unknown ablation {kind!r}; known: {', '.join(ABLATIONS)}")


def corpora_order(config: Config, setting: str) -> tuple[str, ...]:
    """The corpora of a ``+``-joined ``setting`` in the order of ``config.pretrain_corpora``
    (others after them, as written). The order is a name, not an experiment: the setting of
    the main system's corpora then is the main system's configuration, whose runs the
    reference setting of every other ablation already trained."""
    chosen = setting.split("+")
    base = [c for c in config.pretrain_corpora if c in chosen]
    return tuple(base + [c for c in chosen if c not in base])


def ablation_settings(config: Config) -> dict[str, list[str]]:
    """The settings each ablation compares, as ledger ``setting`` tags."""
    return {
        "audio_encoder": ["passt", "cnn14"],
        "text_encoder": ["pretrained", "random"],
        "corpora": list(config.corpus_combinations),
        "snippet_s": [str(s) for s in config.snippet_lengths_s],
    }


def run_ablation(
    config: Config, data: RetrievalData, kind: str, setting: str, seed: int, **kwargs: Any
) -> dict[str, float]:
    """Train one ablation run (:func:`ablation_budget`, on at most ``ablation_max_train_items``
    captions per corpus, crops of ``ablation_max_audio_s``), from the same ``audio_pretrained``
    weights as the main system, and return its evaluation metrics (clips cut at
    ``max_audio_s`` as in the main runs) with its throughput.

    An ablation run is a pretraining run with one factor changed, so settings that coincide
    train once: the reference setting appears in every ablation, and with the pretraining's
    budget (``ablation_epochs: null``, or the same epochs, crops and captions) it is the main
    system's pretraining run of :func:`pretrain`."""
    eval_cfg = ablation_config(config, kind, setting)
    model = ablation_model(config, data, kind, setting, seed, **kwargs)
    metrics = evaluate(model, data.eval_set, data.features_for(eval_cfg.model), eval_cfg)
    return metrics | throughput(model)


def ablation_model(
    config: Config, data: RetrievalData, kind: str, setting: str, seed: int, **kwargs: Any
) -> DualEncoder:
    """The model of one ablation run (:func:`run_ablation`), trained or reloaded, unscored."""
    run = _ablation_run(config, data, kind, setting)
    return run_training("pretrain", run.pop("config"), seed, data, **run, **kwargs)


def _ablation_run(config: Config, data: RetrievalData, kind: str, setting: str) -> dict[str, Any]:
    """What trains an ablation run: its config, captions and budget (:func:`run_ablation`)."""
    eval_cfg = ablation_config(config, kind, setting)
    run_cfg = replace(eval_cfg, train_crop_s=config.ablation_max_audio_s or config.train_crop_s)
    items = data.training_items(run_cfg.pretrain_corpora, config.ablation_max_train_items)
    num_epochs, max_steps = ablation_budget(config, kind, len(items), data)
    return dict(
        config=run_cfg, items=items, num_epochs=num_epochs, lr=config.train.lr,
        max_steps=max_steps,
    )  # fmt: skip


def ablation_entry(config: Config, data: RetrievalData, kind: str, setting: str, seed: int) -> Run:
    """The run-store entry of an ablation run (:func:`run_ablation`); its stage 0 must exist
    (:func:`stage0_ready`), or it is trained now."""
    run = _ablation_run(config, data, kind, setting)
    run_cfg = resolve_pretrained(run.pop("config"), data)
    return run_entry("pretrain", run_cfg, seed, validation=data.validation, **run)


def ablation_steps(config: Config, kind: str) -> int | None:
    """The optimizer steps of every run of ablation ``kind`` (``None``: ``ablation_epochs``)."""
    if kind == "audio_encoder" and config.audio_encoder_steps is not None:
        return config.audio_encoder_steps
    return config.ablation_steps


def ablation_budget(
    config: Config, kind: str, num_items: int, data: RetrievalData
) -> tuple[int, int | None]:
    """``(num_epochs, max_steps)`` of an ablation run of ``kind`` over ``num_items`` captions:
    :func:`ablation_steps` when set; else ``ablation_epochs``; else (``ablation_epochs: null``)
    the main pretraining's ``train.num_epochs``, with ``max_steps`` set to the pretraining's
    steps when this setting's corpora give another number of steps per epoch."""
    steps = ablation_steps(config, kind)
    epochs = config.ablation_epochs
    if steps is not None:
        return epochs or config.train.num_epochs, steps
    if epochs is not None:
        return epochs, None
    epochs = config.train.num_epochs
    train_cfg = config.train.trainer_config(
        num_items, seed=0, num_epochs=epochs, lr=config.train.lr
    )
    main = data.training_items(config.pretrain_corpora, config.ablation_max_train_items)
    main_steps = epochs * steps_per_epoch(train_cfg, len(main))
    if epochs * steps_per_epoch(train_cfg, num_items) == main_steps:
        return epochs, None
    return epochs, main_steps


def run_ablations(config: Config, data: RetrievalData, *, preset: str, page: str) -> None:
    """Every ablation setting of :func:`ablation_settings` for every seed, recorded in the
    ledger with tags ``{"ablation": kind, "setting": setting}``. Missing runs train side by side
    first (:func:`train_ahead`)."""
    train_ahead(config, data, "ablations")
    for kind, settings in ablation_settings(config).items():
        for setting in settings:
            for seed in config.seeds:
                metrics = run_ablation(config, data, kind, setting, seed)
                reporting.record_result(
                    CHAPTER, page, metrics, preset=preset, seed=seed, config=to_dict(config),
                    tags={"ablation": kind, "setting": setting},
                )  # fmt: skip


# ------------------------------------------------------------------------------ runs side by side


@dataclasses.dataclass(frozen=True)
class Job:
    """A call that trains (or reloads) runs into a run store: ``fn(config, data=data,
    **kwargs)``. ``fn`` is a module-level function, sent to a worker process by name."""

    fn: Callable[..., Any]
    config: Any
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __call__(self, data: RetrievalData) -> Any:
        return self.fn(self.config, data=data, **self.kwargs)


def side_by_side_workers(config: Config) -> int:
    """How many runs of ``config`` train at once: one per ``train.torch_threads`` usable cores
    on the CPU (:func:`audiorepro.parallel.usable_cores`); one when the threads are not set,
    on a GPU, or under several processes (``accelerate launch`` runs one run on all of them)."""
    threads = config.train.torch_threads
    device = config.train.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if threads is None or device != "cpu" or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return 1
    return max(1, usable_cores() // threads)


_WORKER_DATA: dict[str, RetrievalData] = {}


def _worker_data(config: Config) -> RetrievalData:
    """:func:`load_data` once per process (a worker runs many jobs)."""
    key = repr(to_dict(config))
    if key not in _WORKER_DATA:
        _WORKER_DATA[key] = load_data(config)
    return _WORKER_DATA[key]


def _run_job(data_config: Config, job: Job) -> None:
    job(_worker_data(data_config))


def train_graph(
    data_config: Config, data: RetrievalData, tasks: Mapping[Any, Task[Job]], *, workers: int
) -> None:
    """Run the jobs of ``tasks`` (:class:`audiorepro.parallel.Task`: a :class:`Job`, the keys
    of the tasks it starts from, a cost in seconds), each once its ``after`` tasks are done, up
    to ``workers`` processes at once (:func:`audiorepro.parallel.run_graph`: the costliest
    remaining path first), before the pages reload their runs.

    The workers load the data of ``data_config`` once each (:func:`load_data`) and live until
    the last job, so one graph for a whole chapter leaves no core idle between pages. Two tasks
    must not train the same run. Nothing is recorded here: the pages reload every run from the
    run store and record it. A run trains on its configuration's ``train.torch_threads``
    wherever it runs, so its numbers are those it would have had in the page's own process.
    With ``workers`` <= 1 the jobs run here, in :func:`audiorepro.parallel.graph_order`."""
    if workers <= 1 or len(tasks) <= 1:
        for key in graph_order(tasks):
            tasks[key].item(data)
        return
    run_graph(_run_job, tasks, shared=data_config, workers=workers)


def stage0_ready(config: Config, data: RetrievalData) -> bool:
    """Whether the stage-0 run ``config.model`` starts from exists (or it needs none)."""
    if config.model.audio_pretrained != "stage0":
        return True
    return stage0_entry(
        config.model, config.stage0, run_store=store(), corpus=to_dict(config.corpus)
    ).complete


def stage0_key(config: Config) -> str | None:
    """The run key of the stage-0 run ``config.model`` starts from (complete or not), or
    ``None`` when it starts from something else: the identity of a stage-0 task."""
    if config.model.audio_pretrained != "stage0":
        return None
    return stage0_entry(
        config.model, config.stage0, run_store=store(), corpus=to_dict(config.corpus)
    ).key


#: What :func:`train_ahead` trains for each stage (a job's kind: ``stage0``, ``pretrain``,
#: ``finetune``, ``ablation``); the runs a kind starts from come with it.
AHEAD: dict[str, tuple[str, ...]] = {
    "pretrain": ("stage0", "pretrain"),
    "finetune": ("pretrain", "finetune"),
    "ablations": ("pretrain", "ablation"),
    "chapter": ("stage0", "pretrain", "finetune", "ablation"),
}

#: Rough seconds of one job under ``embedded`` on one thread (from the book's ledgers), only
#: to start the costliest remaining path first.
JOB_SECONDS = {
    "stage0": 45.0, "stage0/cnn14": 150.0, "pretrain": 40.0, "finetune": 25.0,
    "ablation": 35.0, "ablation/cnn14": 60.0, "ablation/random": 80.0,
}  # fmt: skip


def chapter_tasks(config: Config, data: RetrievalData, stage: str = "chapter") -> dict[Any, Task]:
    """The missing runs of ``stage`` (:data:`AHEAD`) of chapter 01 as one graph for
    :func:`train_graph`: each stage 0 (keyed by its run key, so that settings sharing one
    train it once; with ``stage0``, that of every audio encoder the chapter compares), the
    pretraining of every seed after its stage 0, both fine-tunings after their seed's
    pretraining, every ablation run after its own stage 0 and its seed's pretraining (an
    ablation's reference setting is that pretraining run, :func:`run_ablation`, so the two must
    not train side by side). Runs already in the store are left out; whatever waits on a
    missing stage 0 stays in, since its key is only known once that stage 0 exists."""
    if stage not in AHEAD:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(AHEAD)}")
    kinds = AHEAD[stage]
    tasks: dict[Any, Task[Job]] = {}

    def stage0(cfg: Config) -> tuple[Any, ...]:
        key = stage0_key(cfg)
        if key is None or stage0_ready(cfg, data):
            return ()
        cost = JOB_SECONDS.get(f"stage0/{cfg.model.audio_encoder}", JOB_SECONDS["stage0"])
        tasks.setdefault(("stage0", key), Task(Job(stage0_checkpoint, cfg), cost=cost))
        return (("stage0", key),)

    if "stage0" in kinds:  # page 02 shows the stage 0 of every encoder the chapter compares
        for name in ablation_settings(config)["audio_encoder"]:
            stage0(replace(config, **{"model.audio_encoder": name}))
    main = stage0(config)
    pretrained: dict[int, tuple[Any, ...]] = {}
    for seed in config.seeds:
        pretrained[seed] = ()
        if main or not pretrain_entry(config, seed, data).complete:
            job = Job(pretrain, config, {"seed": seed})
            tasks[("pretrain", seed)] = Task(job, main, JOB_SECONDS["pretrain"])
            pretrained[seed] = (("pretrain", seed),)
        for a in (False, True) if "finetune" in kinds else ():
            if not pretrained[seed] and finetune_entry(config, seed, data, augment=a).complete:
                continue
            job = Job(finetune, config, {"seed": seed, "augment": a})
            tasks[("finetune", seed, a)] = Task(job, pretrained[seed], JOB_SECONDS["finetune"])
    for kind, settings in ablation_settings(config).items() if "ablation" in kinds else ():
        for setting in settings:
            first = stage0(ablation_config(config, kind, setting))
            cost = JOB_SECONDS.get(f"ablation/{setting}", JOB_SECONDS["ablation"])
            for seed in config.seeds:
                after = first + pretrained[seed]
                if not after and ablation_entry(config, data, kind, setting, seed).complete:
                    continue
                kwargs = {"kind": kind, "setting": setting, "seed": seed}
                job = Job(ablation_model, config, kwargs)  # the page scores it
                tasks[("ablation", kind, setting, seed)] = Task(job, after, cost)
    return tasks


def train_ahead(config: Config, data: RetrievalData, stage: str) -> None:
    """Train the missing runs of ``stage`` side by side (:func:`chapter_tasks`,
    :func:`train_graph`), so that the pages' loops only reload them: ``pretrain`` (stage 0 of
    every audio encoder the chapter uses, then the pretraining of every seed), ``finetune``
    (both fine-tunings of every seed), ``ablations`` (every ablation run) or ``chapter`` (all of
    them; what page 02 runs under ``embedded``). Does nothing where
    :func:`side_by_side_workers` is 1: the pages then train each run in their loops."""
    if stage not in AHEAD:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(AHEAD)}")
    workers = side_by_side_workers(config)
    if workers > 1:
        train_graph(config, data, chapter_tasks(config, data, stage), workers=workers)


# ------------------------------------------------------------------------------ findings


def current(records: Sequence[Mapping[str, Any]], config: Config) -> list[Mapping[str, Any]]:
    """The ledger ``records`` of ``config`` (its ``config_hash``) and its seeds only: what every
    table and finding of this chapter reads (:func:`audiorepro.reporting.current_records`)."""
    return reporting.current_records(records, config, config.seeds)


def stage_table(records: Sequence[Mapping[str, Any]], config: Config, preset: str) -> pd.DataFrame:
    """The main system stage by stage (Table 3 analogue), mean ± std over ``config``'s seeds in
    %, from the records of ``config`` only."""
    records = current(records, config)
    rows = [
        ("PaSST, pretrained on all corpora", {"stage": "pretrain"}),
        ("+ fine-tuned on ClothoV2", {"stage": "finetune"}),
        ("+ fine-tuned with caption augmentation", {"stage": "finetune-aug"}),
    ]
    return reporting.seed_table(
        records, rows, chapter=CHAPTER, preset=preset, metrics=METRICS, scale=100
    )


def ablation_table(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str, kind: str
) -> pd.DataFrame:
    """One ablation's settings, mean ± std over seeds in %, from the records of ``config``."""
    records = current(records, config)
    settings = ablation_settings(config)[kind]
    label = (lambda v: f"{v} s") if kind == "snippet_s" else str
    rows = [(label(v), {"ablation": kind, "setting": v}) for v in settings]
    return reporting.seed_table(
        records, rows, chapter=CHAPTER, preset=preset, metrics=METRICS, scale=100
    )


TRAINING_METRICS = ("train_steps", "late_loss", "steps_per_s", "clips_per_s")
"""What every training run records besides its scores: steps, last loss, throughput."""


def training_table(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str
) -> pd.DataFrame:
    """Did every compared run learn, on one budget? Per stage and ablation setting: optimizer
    steps, the NT-Xent loss of its last tenth of steps (``late_loss``; ln(batch size) is the
    loss of a model that learned nothing, :func:`loss_ceiling` what the findings require),
    steps/s and clips/s, mean ± std over seeds (records of ``config`` only)."""
    records = current(records, config)
    rows = [(stage, {"stage": stage}) for stage in STAGES]
    for kind, settings in ablation_settings(config).items():
        rows += [(f"{kind} = {v}", {"ablation": kind, "setting": v}) for v in settings]
    table = reporting.seed_table(
        records, rows, chapter=CHAPTER, preset=preset, metrics=TRAINING_METRICS, digits=2
    )
    return table.rename(columns={"late_loss": f"late loss (ln {config.train.batch_size} = "
                                 f"{math.log(config.train.batch_size):.2f}, findings need < "
                                 f"{loss_ceiling(config):.2f})"})  # fmt: skip


def loss_ceiling(config: Config) -> float:
    """The training loss a compared run must stay below for its finding to count:
    ln(batch) - ln 2. NT-Xent over a batch of B pairs is ln B for a model that tells nothing
    apart; below ln(B/2) the paired entry is on average at least twice as likely as a uniform
    guess. A run above it may still beat the mAP floor, but has hardly trained."""
    return math.log(config.train.batch_size) - math.log(2.0)


def snippet_curve(
    records: Sequence[Mapping[str, Any]], config: Config, preset: str
) -> tuple[list[float], list[float], list[float]]:
    """The Figure 1 analogue: snippet lengths (s), mAP@10 means and stds over seeds (%), from
    the records of ``config``."""
    records = current(records, config)
    settings = ablation_settings(config)["snippet_s"]
    stats = [
        reporting.mean_std(
            reporting.values(
                records, chapter=CHAPTER, preset=preset, metric="mAP@10", scale=100,
                tags={"ablation": "snippet_s", "setting": v},
            )
        )
        for v in settings
    ]  # fmt: skip
    return [float(v) for v in settings], [m for m, _ in stats], [s for _, s in stats]


CHECK_PAIRS = 512
"""Caption-paraphrase pairs of the augmentation check: enough for a mean cosine to two decimals."""


def mechanism_checks(config: Config, data: RetrievalData) -> pd.DataFrame:
    """Measured causes behind the ablations, for findings that do not show: what caption
    augmentation changes in the (frozen) text space, how much of each pretraining corpus the
    ablation budget sees and how many clips it adds, and how many snippets the evaluation clips
    hold at each snippet length."""
    rows = []
    text = build_model(config, config.seeds[0], data).text_encoder
    pairs = [(i.caption, i.paraphrases[0]) for i in data.finetune if i.paraphrases]
    pairs = pairs[:CHECK_PAIRS]
    if pairs and config.model.trainable_layers == 0:
        with torch.no_grad():
            a = torch.nn.functional.normalize(text([c for c, _ in pairs]).float(), dim=-1)
            b = torch.nn.functional.normalize(text([p for _, p in pairs]).float(), dim=-1)
        shuffled = torch.roll(b, 1, dims=0)
        rows.append({
            "finding": "caption augmentation helps",
            "check": "cosine of a caption and its paraphrase in the frozen text space "
                     f"(vs another clip's paraphrase; {len(pairs)} captions)",
            "measured": f"{(a * b).sum(-1).mean():.3f} (vs {(a * shuffled).sum(-1).mean():.3f})",
        })  # fmt: skip
    rows += _text_encoder_spread(config, data)
    for name in ("passt", "cnn14"):
        cfg = ablation_config(config, "audio_encoder", name)
        audio = build_model(replace(cfg, **{"model.audio_pretrained": None}), 0).audio_encoder
        rows.append({
            "finding": "PaSST beats CNN14",
            "check": f"trainable parameters of the {name} audio encoder at this scale",
            "measured": f"{sum(p.numel() for p in audio.parameters() if p.requires_grad):,}",
        })  # fmt: skip
    for combo in config.corpus_combinations:
        items = data.training_items(combo.split("+"), config.ablation_max_train_items)
        clips = len({i.key for i in items})
        epochs, steps = ablation_budget(config, "corpora", len(items), data)
        if steps is None:  # whole epochs
            steps = epochs * steps_per_epoch(config.train.trainer_config(
                len(items), seed=0, num_epochs=epochs, lr=config.train.lr), len(items))  # fmt: skip
        seen = (
            f", the ablation budget sees {steps * config.train.batch_size / len(items):.2f} epochs"
        )
        rows.append({
            "finding": "adding corpora to ClothoV2 helps",
            "check": f"training data of {combo}",
            "measured": f"{len(items)} captions of {clips} clips{seen}",
        })  # fmt: skip
    lengths = [data.features[k].shape[0] / FRAMES_PER_SECOND for k in data.eval_set.keys]
    for snippet in config.snippet_lengths_s:
        per_clip = [math.ceil(min(t, config.max_audio_s) / snippet) for t in lengths]
        rows.append({
            "finding": "longer snippets beat shorter ones",
            "check": f"snippets per evaluation clip at {snippet} s",
            "measured": f"{sum(per_clip) / len(per_clip):.2f} on average "
                        f"(clips {min(lengths):.1f}-{max(lengths):.1f} s)",
        })  # fmt: skip
    return pd.DataFrame(rows)


def _text_encoder_spread(config: Config, data: RetrievalData, n: int = 256) -> list[dict]:
    """How far apart the first ``n`` distinct training captions lie in the pretrained and the
    random text encoder of the ablation: the mean cosine between two different captions. An
    encoder that puts every caption in nearly one direction gives the projection nothing to
    separate, whatever the audio side learns."""
    captions = list(dict.fromkeys(i.caption for i in data.finetune))[:n]
    rows = []
    for setting in ("pretrained", "random"):
        cfg = ablation_config(config, "text_encoder", setting)
        cfg = replace(cfg, **{"model.audio_pretrained": None})
        text = build_model(cfg, config.seeds[0]).text_encoder.eval()
        with torch.no_grad():
            features = text(captions).float()  # (n, text_dim)
        measured = _mean_cosine(features)
        if config.model.text_norm == "batch":  # what the projection sees: standardised
            standard = (features - features.mean(0)) / features.std(0).clamp_min(1e-6)
            measured += f"; {_mean_cosine(standard)} after standardisation"
        rows.append({
            "finding": "a pretrained text encoder beats a random one",
            "check": f"cosine of two different training captions, {setting} text encoder",
            "measured": f"{measured} ({len(captions)} captions)",
        })  # fmt: skip
    return rows


def _mean_cosine(features: torch.Tensor) -> str:
    """The mean and the least cosine between two different rows of (n, D) ``features``."""
    emb = torch.nn.functional.normalize(features, dim=-1)
    off = (emb @ emb.T)[~torch.eye(len(emb), dtype=torch.bool)]
    return f"{off.mean():.3f} on average (min {off.min():.3f})"


PAPER: dict[str, dict[str, float | None]] = {
    # Table 3: PaSST-N + roberta-large, pretrained, fine-tuned, fine-tuned with augmentation;
    # and the audio encoders with bert-base.
    "Table 3": {
        "pretrain mAP@10": 36.65,
        "finetune mAP@10": 38.00,
        "finetune-aug mAP@10": 38.56,
        "finetune-aug R@1": 26.07,
        "finetune-aug R@10": 69.30,
        "passt mAP@10": 35.22,
        "cnn14 mAP@10": 28.06,
    },
    # Table 4: mAP@10 by pretraining corpora (PaSST-N + bert-base).
    "Table 4": {
        "audiocaps": 21.01,
        "wavcaps": 27.62,
        "clotho": 27.28,
        "audiocaps+wavcaps": 27.13,
        "wavcaps+clotho": 34.42,
        "audiocaps+clotho": 30.64,
        "audiocaps+wavcaps+clotho": 35.22,
    },
    # Figure 1: mAP@10 against the snippet length (PaSST-S20), read off a plot: no value.
    "Figure 1": {},
}
"""The paper's numbers (paper (a), in %), by the table or figure that reports them."""


def chance_floor(data: RetrievalData) -> tuple[float, float]:
    """Chance mAP@10 of the evaluation split (%, a ranking that ignores the query) and the
    floor every compared run must beat to count as having learned: three times chance."""
    from audiorepro.metrics.retrieval import chance_metrics

    chance = 100 * chance_metrics(len(data.eval_set.keys))["mAP@10"]
    return chance, 3 * chance


def findings(
    records: Sequence[Mapping[str, Any]],
    config: Config,
    preset: str,
    must_beat: float | None = None,
) -> pd.DataFrame:
    """The paper-vs-ours table: every value of :data:`PAPER` the preset ran, beside the ledger's
    mean ± std over seeds, with the verdict on each of the paper's claims. ``must_beat`` (in %,
    e.g. :func:`chance_floor`'s three times chance) is the mAP@10 both compared runs must
    exceed, and :func:`loss_ceiling` the ``late_loss`` both must stay below, else the claim is
    inconclusive: a run at chance, or one that hardly trained, tests nothing. Only the records
    of ``config`` and its seeds count (:func:`current`)."""
    records = current(records, config)
    t3, t4 = PAPER["Table 3"], PAPER["Table 4"]
    ab, tx, co, sn = (
        {"ablation": k} for k in ("audio_encoder", "text_encoder", "corpora", "snippet_s")
    )
    row = functools.partial(
        PaperRow, chapter=CHAPTER, scale=100, digits=2, must_beat=must_beat,
        loss_metric="late_loss", loss_ceiling=loss_ceiling(config),
    )  # fmt: skip
    rows = [
        row("mAP@10, pretrained (PaSST-N + roberta-large)", "mAP@10", t3["pretrain mAP@10"],
            tags={"stage": "pretrain"}, source="Table 3"),
        row("mAP@10, + fine-tuned", "mAP@10", t3["finetune mAP@10"], tags={"stage": "finetune"},
            claim="fine-tuning on ClothoV2 helps", versus={"stage": "pretrain"},
            source="Table 3"),
        row("mAP@10, + fine-tuned with augmentation", "mAP@10", t3["finetune-aug mAP@10"],
            tags={"stage": "finetune-aug"}, claim="caption augmentation helps fine-tuning",
            versus={"stage": "finetune"}, source="Table 3"),
        row("R@1, + fine-tuned with augmentation", "R@1", t3["finetune-aug R@1"],
            tags={"stage": "finetune-aug"}, source="Table 3"),
        row("R@10, + fine-tuned with augmentation", "R@10", t3["finetune-aug R@10"],
            tags={"stage": "finetune-aug"}, source="Table 3"),
        row("mAP@10, PaSST-N (bert-base)", "mAP@10", t3["passt mAP@10"],
            tags=ab | {"setting": "passt"}, claim="PaSST beats CNN14",
            versus=ab | {"setting": "cnn14"}, source="Table 3"),
        row("mAP@10, CNN14 (bert-base)", "mAP@10", t3["cnn14 mAP@10"],
            tags=ab | {"setting": "cnn14"}, source="Table 3"),
        row("mAP@10, randomly initialised text encoder", "mAP@10", None,
            tags=tx | {"setting": "random"}),
        row("mAP@10, pretrained text encoder", "mAP@10", None,
            tags=tx | {"setting": "pretrained"},
            claim="a pretrained text encoder beats a random one",
            versus=tx | {"setting": "random"}),
    ]  # fmt: skip
    combos = list(config.corpus_combinations)
    for combo in combos:
        claim = versus = None
        if combo == combos[-1] and "clotho" in combos and len(combos) > 1:
            claim, versus = "adding corpora to ClothoV2 helps", co | {"setting": "clotho"}
        rows.append(
            row(f"mAP@10, pretrained on {combo}", "mAP@10", t4.get(combo),
                tags=co | {"setting": combo}, claim=claim, versus=versus, source="Table 4")
        )  # fmt: skip
    lengths = ablation_settings(config)["snippet_s"]
    rows.append(
        row(f"mAP@10, {lengths[-1]} s snippets (Figure 1)", "mAP@10", None,
            tags=sn | {"setting": lengths[-1]}, claim="longer snippets beat shorter ones",
            versus=sn | {"setting": lengths[0]}, source="Figure 1")
    )  # fmt: skip
    return reporting.paper_vs_ours(rows, preset=preset, records=records)
