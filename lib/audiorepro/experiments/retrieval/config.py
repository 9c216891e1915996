"""Chapter 01's configuration: the corpus, the dual encoder, its training schedule, stage 0 and
the chapter's experiments, as frozen dataclasses loaded from one YAML preset per scale
(``book/01_retrieval/presets``); and the chapter's run store."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from audiorepro.config import ConfigError, CorpusSpec, field, preset_loader
from audiorepro.models.audio_encoders import FRAMES_PER_SECOND
from audiorepro.models.dual_encoder import DualEncoderConfig
from audiorepro.models.passt import PASST_CONFIGS
from audiorepro.paths import repo_root
from audiorepro.storage import RunStore
from audiorepro.training.loop import TrainConfig
from audiorepro.training.selection import check_select

CHAPTER = "01_retrieval"
PRESETS = repo_root() / "book" / CHAPTER / "presets"
"""The chapter's YAML presets: smoke, embedded, paper."""
METRICS = ("mAP@10", "R@1", "R@5", "R@10")
"""Text-to-audio metrics of every table (paper (a) §3.1), shown in percent."""
STAGES = ("pretrain", "finetune", "finetune-aug")
"""The main system's stages: pretraining (§2.6), fine-tuning on ClothoV2 without and with
caption augmentation (§3.5)."""


@dataclasses.dataclass(frozen=True)
class Stage0:
    """The tagging run of stage 0 (one per encoder configuration, shared by all seeds, as the
    papers' runs all start from one released AudioSet checkpoint)."""

    steps: int = field(300, help="Optimizer steps of tagging (AdamW, warm-up then cosine).")
    batch_size: int = field(64, help="Crops per step.")
    lr: float = field(1e-3, help="Peak learning rate.")
    warmup_steps: int = field(30, help="Steps of linear warm-up.")
    crop_s: float = field(4.0, help="Training and evaluation crop (s); the snippet length suits.")
    seed: int = field(0, help="Seed of the one tagging run.")
    train_split: str = field("development", help="Clotho-layout split that stage 0 trains on.")
    heldout_split: str = field("validation", help="Clotho-layout split of the tagging mAP.")
    torch_threads: int | None = field(
        None, help="torch CPU threads of the run (None: torch's setting; as Training's)."
    )


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
        "model.audio_pretrained: stage0 loads (experiments.retrieval.stage0).",
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

    @property
    def ledger_seeds(self) -> tuple[int, ...]:
        """The seeds whose ledger records the tables and findings read: ``seeds``
        (:func:`audiorepro.reporting.current_records`)."""
        return self.seeds


load_config = preset_loader(Config, PRESETS)


def store() -> RunStore:
    """The chapter's run store: trained models and the frozen text encoder's caption cache."""
    return RunStore(CHAPTER)
