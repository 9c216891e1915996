"""Chapter 03's configuration: the preset's sections (corpus, VQ-VAE, training, inverter, the
tables' sweeps) as one frozen :class:`Config`, read by :func:`load_config`, and the run store."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from audiorepro.config import CorpusSpec, field, preset_loader
from audiorepro.data.speech_segments import feature_of
from audiorepro.models.inverter import InverterConfig
from audiorepro.models.vqvae import VQVAEConfig
from audiorepro.paths import repo_root
from audiorepro.storage import RunStore
from audiorepro.training import TrainConfig
from audiorepro.training.members import member_seeds

CHAPTER = "03_zerospeech"
PRESETS = repo_root() / "book" / CHAPTER / "presets"
# Bump when a change to the code changes what a stored model would be.
RUNS_VERSION = 4  # 3: padding frames zeroed before the encoder convolutions; 4: in the decoder too
INVERTER_VERSION = 1  # inverter runs only; 1: padding zeroed before the inverter's convolutions

PAIRINGS = ("none", "nearest")
"""``train.pairs``: ``none``, each file reconstructs itself (the paper); ``nearest``, files of
different speakers that are mutual DTW nearest neighbours reconstruct each other
(:mod:`audiorepro.experiments.zerospeech.pairs`)."""


SHORTEST_SEGMENT = 8
"""The fewest input frames of a VQ-VAE training segment
(:class:`~audiorepro.data.speech_segments.SegmentDataset`'s ``min_frames``)."""


@dataclass(frozen=True)
class TrainSection:
    """How one model of the chapter is trained: Adam, segments, batch size, loop length."""

    lr: float = field(1e-3, help="Adam learning rate (paper: 1e-4)")
    batch_size: int = field(16, help="segments per batch")
    num_epochs: int = field(1, help="passes over the training segments")
    max_steps: int | None = field(None, help="cap on optimizer steps (None: num_epochs)")
    segment_frames: int = field(
        128, help="training segment length in input frames (feature frames; codes: inverter)"
    )
    pairs: str = field(
        "none",
        help="VQ-VAE only: none (each file reconstructs itself, the paper) | nearest (files of "
        "different speakers that are mutual DTW nearest neighbours reconstruct each other; "
        "`units train`'s default for two or more speakers)",
    )

    def __post_init__(self) -> None:
        if self.pairs not in PAIRINGS:
            raise ValueError(f"train.pairs must be one of {PAIRINGS}, got {self.pairs!r}")
        for name in ("max_steps", "num_epochs", "batch_size", "segment_frames"):
            value = getattr(self, name)
            if name == "max_steps" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"train.{name} must be an int >= 1, got {value!r}")

    def loop(self, seed: int) -> TrainConfig:
        """The :class:`~audiorepro.training.TrainConfig` of one seed (no weight decay)."""
        return TrainConfig(
            num_epochs=self.num_epochs,
            max_steps=self.max_steps,
            batch_size=self.batch_size,
            lr=self.lr,
            weight_decay=0.0,
            seed=seed,
            device="cpu" if not torch.cuda.is_available() else "auto",
            log_every=25,
        )


@dataclass(frozen=True)
class Config:
    """Parameters of the chapter's pages (``book/03_zerospeech/presets/*.yaml``)."""

    corpus: CorpusSpec = field(
        default_factory=CorpusSpec,
        help="the ZeroSpeech 2019 corpus: smoke | embedded (generated) | paper (a real folder "
        "with english/ and surprise/, relative paths under the data folder)",
    )
    model: VQVAEConfig = field(
        default_factory=VQVAEConfig,
        help="the main VQ-VAE (input_dim 39: MFCC, 80: log-Mel); the tables' rows vary it",
    )
    train: TrainSection = field(default_factory=TrainSection, help="VQ-VAE training")
    inverter: InverterConfig = field(
        default_factory=InverterConfig,
        help="the codebook inverter (code_dim, n_bins and repeat come from the VQ-VAE and "
        "the spectrogram)",
    )
    inverter_train: TrainSection = field(
        default_factory=lambda: TrainSection(batch_size=8, num_epochs=4, segment_frames=32),
        help="inverter training (segment_frames: code frames)",
    )
    seed: int = field(0, help="seed of single runs")
    units_models: int = field(
        1,
        help="models `units train` trains of a folder, from seeds seed, seed + 1, ... (its "
        "--models); `units encode` sets their units side by side",
    )
    table_steps: int | None = field(
        None,
        help="optimizer steps of every VQ-VAE the pages 02-05 train or read (each row of "
        "Tables 1-3 and seed, the submission's and the inverter's model: "
        ":func:`tables_config`); None: train.max_steps. `units train` keeps train.max_steps",
    )
    main_seeds: tuple[int, ...] = field(
        (0, 1, 2),
        help="seeds of every row of Tables 1-3 (mean ± std: each row enters a finding)",
    )
    max_train_files: int | None = field(None, help="use only this many training files")
    codebook_sizes: tuple[int, ...] = field((64, 128, 256, 512), help="K of Table 2")
    conv_codebook_size: int = field(256, help="K of the convolutional baseline (Table 2)")
    smoothings: tuple[float, ...] = field((1e-2, 5e-3, 1e-3), help="λ of Table 3")
    jitters: tuple[float, ...] = field((0.05, 0.075), help="p of Table 3")
    combos: tuple[tuple[float, float], ...] = field(
        ((5e-3, 0.05), (1e-3, 0.05)), help="(λ, p) pairs of Table 3"
    )
    surprise: bool = field(True, help="also train and evaluate on the surprise language")
    target_voice: str = field("V001", help="voice the inverter speaks with")
    griffin_lim_iters: int = field(32, help="Griffin-Lim iterations")
    n_examples: int = field(2, help="utterances resynthesised on the inverter page")

    def __post_init__(self) -> None:
        member_seeds(self.seed, self.units_models)  # a whole number >= 1
        feature_of(self.model.input_dim)  # raises unless 39 (MFCC) or 80 (log-Mel)
        if self.train.segment_frames < SHORTEST_SEGMENT:
            raise ValueError(
                f"train.segment_frames must be >= {SHORTEST_SEGMENT} (the shortest segment "
                f"the VQ-VAE trains on, in 10 ms frames), got {self.train.segment_frames}"
            )

    @property
    def ledger_seeds(self) -> tuple[int, ...]:
        """The seeds the pages record: every row's ``main_seeds`` and the single runs' ``seed``
        (:func:`audiorepro.reporting.current_records` reads only these)."""
        return (*self.main_seeds, self.seed)


load_config = preset_loader(Config, PRESETS, steps_alone=("train", "inverter_train"))
"""The chapter's :class:`Config` of ``preset`` (``PRESETS/<preset>.yaml``) with single-field
overrides, given as a mapping or as keywords; dotted names set nested fields
(``{"train.max_steps": 10}``), and ``None`` values are ignored. A section's ``max_steps`` set
without its ``num_epochs`` is the run's length: the preset's epochs no longer stop it first
(:func:`audiorepro.config.max_steps_alone`; the learning rate is constant)."""


def tables_config(preset: str, *, seed: int | None = None, max_steps: int | None = None) -> Config:
    """The configuration the chapter's pages train, score and record with: the preset's
    (:func:`load_config`, ``seed`` if given) with ``train.max_steps`` set to ``max_steps``, or
    else to the preset's ``table_steps``. ``units train`` keeps the preset's ``train.max_steps``
    (the ``embedded`` preset: 500 steps a row here, 1,200 there), so the book's rows fit its
    time budget without changing the command's."""
    steps = max_steps if max_steps is not None else load_config(preset).table_steps
    return load_config(preset, {"seed": seed, "train.max_steps": steps})


def store() -> RunStore:
    """The chapter's run store (models and feature files)."""
    return RunStore(CHAPTER)
