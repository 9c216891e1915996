"""Chapter 04's configuration: one frozen :class:`Config` composed of the corpus, the two
encoders and the plateau training section, loaded from a preset in ``book/04_awe/presets``."""

from __future__ import annotations

import dataclasses

from audiorepro.config import ConfigError, CorpusSpec, field, preset_loader
from audiorepro.losses.multiview import DISTANCES
from audiorepro.models.awe import AWEModelConfig
from audiorepro.paths import repo_root
from audiorepro.training.plateau import PlateauTrainConfig
from audiorepro.training.selection import check_select

SAMPLE_RATE = 16_000
"""The sample rate every recording is read at (the corpus's and the ``audiorepro`` command's)."""

CHAPTER = "04_awe"
"""The chapter's name: its ledger records, run store and book folder."""

PRESETS = repo_root() / "book" / CHAPTER / "presets"
"""The folder of the chapter's presets (``smoke``, ``embedded``, ``paper``)."""

MIN_FRAMES = 2
"""The fewest 10 ms frames of a segment the chapter embeds (the paper's selection, after Settle
et al. 2019): ``Config.min_frames``' default, which no preset changes. ``awe train`` leaves
shorter rows out (``--set min_frames=N``: shorter than N), ``awe embed`` leaves out the rows
shorter than its run's, and ``awe dtw`` those shorter than this
(:func:`~audiorepro.experiments.awe.frames.long_enough`)."""

MAX_TABLE_MODELS = 16
"""The most models ``awe train`` trains of one table (``table_models``, ``--models``)."""
DATA_FORMATS = ("npz", "hdf5")
SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a chapter-04 page needs; paper values in ``presets/paper.yaml``."""

    corpus: CorpusSpec = field(
        default_factory=CorpusSpec,
        help="the word corpus: smoke | embedded (generated, under root if given) | paper (root: "
        "the Switchboard word folder; relative: under $AUDIOREPRO_DATA)",
    )
    model: AWEModelConfig = field(
        default_factory=AWEModelConfig,
        help="the two encoders (num_phones is taken from the data)",
    )
    train: PlateauTrainConfig = field(
        default_factory=PlateauTrainConfig, help="batches, Adam's lr and the plateau schedule"
    )
    data_format: str = field("npz", help="npz (lists + npz) | hdf5 (agwe utterance features)")
    min_frames: int = field(MIN_FRAMES, help="segments shorter than this are dropped (paper: 2)")
    max_train_tokens: int | None = field(None, help="cap on train tokens (None: all)")
    margin: float = field(0.5, help="margin m of eq. (4) (agwe-recipe: 0.5)")
    loss_k: int = field(8, help="most offending negatives averaged per term (agwe-recipe: 8)")
    distance: str = field("cos2", help="cos2 (paper: 1 - cos^2) | cos (code base: 1 - cos)")
    seed: int = field(0, help="seed of a run (initialisation, data order, dropout)")
    seeds: tuple[int, ...] = field((0, 1, 2), help="seeds of the chosen model (mean ± std)")
    sweep_epochs: int = field(15, help="epochs of each sweep run (paper: 15)")
    sweep_layers: tuple[int, ...] = field((1, 4, 8), help="Table 1: phoneme encoder layers")
    sweep_heads: tuple[int, ...] = field(
        (1, 4, 8, 16, 32), help="Table 2: heads at N = model.phone_layers"
    )
    table1_heads: int = field(4, help="Table 1: heads of every phoneme encoder (paper: 4)")
    dtw_tokens: int = field(200, help="test tokens of the MFCC + DTW baseline (all pairs)")
    eval_batch_size: int = field(512, help="segments per forward pass when embedding")
    table_steps: int | None = field(
        None,
        help="awe train on a segments table: epochs enough for about this many optimizer "
        "steps (at least train.num_epochs, at most the paper's 100), the plateau schedule "
        "ending them sooner; None: train.num_epochs (the chapter's runs never read it)",
    )
    table_models: int = field(
        1,
        help="awe train on a segments table: how many models to train, from seeds seed, "
        "seed + 1, ...; awe embed concatenates their embeddings (the mean of their cosines)",
    )
    select: str = field(
        "best",
        help="the weights a run evaluates: best (the epoch of the best dev cross-view AP, the "
        "paper's and agwe-recipe's selection; every preset) | final (the last epoch's). A run "
        "saves both (model.safetensors, final.safetensors); select does not change the run",
    )

    def __post_init__(self) -> None:
        if self.data_format not in DATA_FORMATS:
            raise ConfigError(
                f"data_format: expected one of {DATA_FORMATS}, got {self.data_format!r}"
            )
        if self.distance not in DISTANCES:
            raise ConfigError(f"distance: expected one of {DISTANCES}, got {self.distance!r}")
        if not self.seeds:
            raise ConfigError("seeds: give at least one seed")
        check_select(self.select, "Config.select")
        if self.table_steps is not None and (
            isinstance(self.table_steps, bool)
            or not isinstance(self.table_steps, int)
            or self.table_steps < 1
        ):
            raise ConfigError(
                f"table_steps: expected an int >= 1 or null, got {self.table_steps!r}"
            )

        if (
            isinstance(self.table_models, bool)
            or not isinstance(self.table_models, int)
            or (not 1 <= self.table_models <= MAX_TABLE_MODELS)
        ):
            raise ConfigError(
                f"table_models: expected an int from 1 to {MAX_TABLE_MODELS}, got "
                f"{self.table_models!r}"
            )

    @property
    def ledger_seeds(self) -> tuple[int, ...]:
        """The seeds whose ledger records the findings read: ``seeds`` and ``seed``
        (:func:`audiorepro.reporting.current_records`)."""
        return (*self.seeds, self.seed)


load_config = preset_loader(Config, PRESETS, steps_alone=("train",))
