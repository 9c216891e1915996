"""Chapter 02's configuration: chapter 01's setting (``retrieval``), which teachers, how long
each stage trains and the distillation loss, loaded from one YAML preset per scale
(``book/02_distillation/presets``); the chapter's run store, and each teacher's chapter-01
configuration for stage 1 and stage 2."""

from __future__ import annotations

import dataclasses

from audiorepro.config import ConfigError, field, preset_loader, replace
from audiorepro.distillation import DEFAULT_TAU
from audiorepro.experiments.retrieval.config import Config as RetrievalConfig
from audiorepro.paths import repo_root
from audiorepro.storage import RunStore

CHAPTER = "02_distillation"
PRESETS = repo_root() / "book" / CHAPTER / "presets"
"""The chapter's YAML presets: smoke, embedded, paper."""
TEACHER_MODELS = ("passt", "atst", "mobilenet")
PASST_STAGE1 = ("chapter01", "own", "auto")
"""The audio encoders of paper (b) §4.2, each paired with the text encoder."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Chapter 02: chapter 01's setting (``retrieval``: corpus, PaSST dual encoder, training),
    which teachers, how long each stage trains, and the distillation loss."""

    retrieval: RetrievalConfig = field(
        RetrievalConfig(),
        help="Chapter 01's configuration: the corpus, the text encoder, PaSST, the optimiser.",
    )
    teachers: tuple[str, ...] = field(
        TEACHER_MODELS, help="Stage-1 models, M of them: passt | atst | mobilenet (§4.2)."
    )
    atst_variant: str = field("base", help="ATST-Frame configuration: base | small | tiny.")
    mobilenet_variant: str = field("mn40_as_ext", help="EfficientAT MobileNetV3 (§4.2.3).")
    mobilenet_batch_size: int | None = field(
        32, help="MobileNet's batch size (§4.5: 32; None: chapter 01's)."
    )
    passt_stage1: str = field(
        "chapter01",
        help="The PaSST teacher: chapter01 (chapter 01's pretrained run, whatever its recipe; "
        "smoke, embedded) | own (chapter 02 trains one with the stage-1 recipe below) | auto "
        "(own when chapter 01's pretraining differs from the stage-1 recipe, else chapter "
        "01's run; paper, where chapter 01 pretrains 16 epochs and §4.5 20).",
    )
    stage1_epochs: int | None = field(
        20,
        help="Stage-1 epochs of ATST and MobileNet, and of PaSST when it is chapter 02's own "
        "(§4.5: 20 for every teacher; None: chapter 01's).",
    )
    stage1_steps: int | None = field(
        None,
        help="Stage-1 optimizer steps of ATST and MobileNet, cosine spanning them (None: "
        "stage1_epochs).",
    )
    mobilenet_stage1_steps: int | None = field(
        None,
        help="MobileNet's stage-1 optimizer steps when they differ from stage1_steps (None: "
        "stage1_steps). Its steps take half the crops of the others' (batch 32).",
    )
    stage1_max_train_items: int | None = field(
        None, help="Stage-1 captions per corpus for ATST and MobileNet (None: chapter 01's)."
    )
    stage1_max_audio_s: float | None = field(
        None,
        help="Stage-1 random training crop of ATST and MobileNet in s (None: chapter 01's "
        "train_crop_s); evaluation still sees max_audio_s.",
    )
    finetune_epochs: int = field(20, help="Stage-2 epochs on the Clotho development split.")
    finetune_steps: int | None = field(
        None,
        help="Stage-2 optimizer steps of every model and λ, cosine spanning them (None: "
        "finetune_epochs): λ = 0 and λ = 1 get exactly equal budgets.",
    )
    finetune_lr: float = field(2e-5, help="Stage-2 peak learning rate (§4.5: as pretraining).")
    finetune_max_items: int | None = field(
        None, help="Stage-2 captions (None: all of chapter 01's fine-tuning split)."
    )
    finetune_max_audio_s: float | None = field(
        None,
        help="Stage-2 training crop in s, the start of each clip, which the teachers embed too "
        "(None: chapter 01's max_audio_s, whole clips at paper scale).",
    )
    lam: float = field(1.0, help="λ of L = L_sup + λ·L_dist (§4.5: 1).")
    dist_only: bool = field(False, help="Train on L_dist alone (the salsa README's command).")
    target_tau: float = field(DEFAULT_TAU, help="Temperature of the targets p̂_a, p̂_c (§4.5).")
    lambdas: tuple[float, ...] = field((0.0, 0.5, 1.0, 2.0), help="λ values of the λ sweep.")
    sweep_models: tuple[str, ...] = field(("passt",), help="Models the λ sweep fine-tunes.")
    seeds: tuple[int, ...] = field((0, 1, 2), help="Seeds of every reported configuration.")
    analysis_block_size: int = field(
        4096, help="Captions per block of the full-matrix analysis (bounds its memory)."
    )
    analysis_clips: int = field(4, help="Clips shown in the correspondence heatmap.")

    def __post_init__(self) -> None:
        unknown = [t for t in self.teachers if t not in TEACHER_MODELS]
        if unknown or not self.teachers:
            raise ConfigError(
                f"Config.teachers: expected some of {' | '.join(TEACHER_MODELS)}, "
                f"got {list(self.teachers)}"
            )
        if self.passt_stage1 not in PASST_STAGE1:
            raise ConfigError(
                f"Config.passt_stage1: expected {' | '.join(PASST_STAGE1)}, "
                f"got {self.passt_stage1!r}"
            )
        for name in self.sweep_models:
            if name not in self.teachers:
                raise ConfigError(
                    f"Config.sweep_models: {name!r} is not one of the teachers "
                    f"{list(self.teachers)}"
                )
        if self.lam < 0 or any(v < 0 for v in self.lambdas):
            raise ConfigError(f"Config: λ must be >= 0, got {self.lam}, {self.lambdas}")
        if not self.target_tau > 0:
            raise ConfigError(f"Config.target_tau: expected > 0, got {self.target_tau}")

    @property
    def ledger_seeds(self) -> tuple[int, ...]:
        """The seeds whose ledger records the tables, findings and checks read: ``seeds``
        (:func:`audiorepro.reporting.current_records`)."""
        return self.seeds


load_config = preset_loader(Config, PRESETS)


def store() -> RunStore:
    """Chapter 02's run store: the ATST and MobileNet teachers, the students, the teacher
    embedding stores (the PaSST teachers stay in chapter 01's)."""
    return RunStore(CHAPTER)


def teacher_config(config: Config, name: str) -> RetrievalConfig:
    """Chapter 01's configuration with teacher ``name``'s audio encoder: PaSST as chapter 01,
    ATST-Frame or MobileNet in its place (the same text encoder, space, loss and optimiser)."""
    rcfg = config.retrieval
    if name == "passt":
        return rcfg
    if name == "atst":
        return replace(
            rcfg, **{"model.audio_encoder": "atst", "model.atst_variant": config.atst_variant}
        )
    if name == "mobilenet":
        return replace(
            rcfg,
            **{
                "model.audio_encoder": "mobilenet",
                "model.mobilenet_variant": config.mobilenet_variant,
                "train.batch_size": config.mobilenet_batch_size or rcfg.train.batch_size,
            },
        )
    raise ValueError(f"unknown teacher {name!r}; known: {', '.join(TEACHER_MODELS)}")


def stage2_config(config: Config, name: str) -> RetrievalConfig:
    """Chapter 01's configuration of stage 2 of teacher ``name``: :func:`teacher_config` with the
    training crop ``finetune_max_audio_s`` (``train_crop_s``; None: ``max_audio_s``), which stage
    2 takes from the *start* of each clip and the teachers embed, and no ``audio_pretrained``
    (the weights come from stage 1). Evaluation still cuts at ``max_audio_s``."""
    return replace(
        teacher_config(config, name),
        train_crop_s=config.finetune_max_audio_s,
        **{"model.audio_pretrained": None},
    )


def own_passt_teacher(config: Config) -> bool:
    """Whether the PaSST teacher is chapter 02's own stage-1 run rather than chapter 01's
    pretrained model (``passt_stage1``; ``auto``: when the stage-1 recipe, its epochs, steps,
    captions per corpus or crop, differs from chapter 01's pretraining)."""
    if config.passt_stage1 != "auto":
        return config.passt_stage1 == "own"
    rcfg = config.retrieval
    return (
        (config.stage1_epochs or rcfg.train.num_epochs) != rcfg.train.num_epochs
        or config.stage1_steps is not None
        or (config.stage1_max_train_items or rcfg.max_train_items) != rcfg.max_train_items
        or (config.stage1_max_audio_s or rcfg.train_crop_s) != rcfg.train_crop_s
    )


def stage1_steps(config: Config, name: str) -> int | None:
    """The stage-1 optimizer steps of model ``name`` (``None``: ``stage1_epochs``):
    ``mobilenet_stage1_steps`` for MobileNet when set, else ``stage1_steps``."""
    if name == "mobilenet" and config.mobilenet_stage1_steps is not None:
        return config.mobilenet_stage1_steps
    return config.stage1_steps
