"""Chapter 04: multi-view transformer acoustic word embeddings (Rhodes & Bains, §3), and the
``audiorepro awe`` commands on a user's recordings (:mod:`.recordings`).

The files, each importing only those before it: ``config`` (the preset), ``data`` (the word
segments), ``views`` (f(x) and g(c), and their two APs), ``train`` (one run, kept in the run
store), ``evaluate`` (chance, sign, geometry, anchors, pronunciation, MFCC + DTW), ``plan``
(the sweeps, trained ahead), ``figures``, ``findings`` (the paper vs ours), ``development``
(the rows ``awe train`` holds out), ``embeddings_file`` (an ``awe embed`` ``.npz`` read
back), ``recordings`` and ``real_speech`` (the commands' path on
the Italian number words the book ships). This module hands on the names the book's pages use.
"""

from audiorepro.data.recordings import read_segments
from audiorepro.experiments.awe.config import CHAPTER, PRESETS, Config, load_config
from audiorepro.experiments.awe.data import (
    compare_segments,
    corpus_root,
    corpus_segments_table,
    corpus_vocab,
    load_data,
)
from audiorepro.experiments.awe.evaluate import (
    acoustic_ap_on,
    anchor_check,
    chance_levels,
    corpus_pronunciation_variation,
    dtw_baseline,
    sign_stats,
    written_word_geometry,
)
from audiorepro.experiments.awe.figures import nearest_word_table, projection
from audiorepro.experiments.awe.findings import (
    PAPER,
    curve_ends,
    findings,
    sweep_curves,
    sweep_spreads,
    sweep_table,
)
from audiorepro.experiments.awe.plan import (
    record_sweep,
    seed_configs,
    squared_config,
    sweeps,
    table1_configs,
    train_ahead,
)
from audiorepro.experiments.awe.real_speech import awe_on_real_speech_seeds
from audiorepro.experiments.awe.recordings import segments_data

# Imported after the modules of the same name, so that ``awe.train`` and ``awe.evaluate`` are
# the functions (importing a submodule sets the package's attribute to the module).
from audiorepro.experiments.awe.train import train
from audiorepro.experiments.awe.views import evaluate
from audiorepro.models.awe import num_parameters

FILES = (
    "config",
    "data",
    "views",
    "train",
    "evaluate",
    "plan",
    "figures",
    "findings",
    "frames",
    "development",
    "embeddings_file",
    "recordings",
    "ensemble",
    "real_speech",
)
"""The package's files in their one order: each imports only files before it."""

__all__ = [
    "CHAPTER",
    "PAPER",
    "PRESETS",
    "Config",
    "acoustic_ap_on",
    "anchor_check",
    "awe_on_real_speech_seeds",
    "chance_levels",
    "compare_segments",
    "corpus_pronunciation_variation",
    "corpus_root",
    "corpus_segments_table",
    "corpus_vocab",
    "curve_ends",
    "dtw_baseline",
    "evaluate",
    "findings",
    "load_config",
    "load_data",
    "nearest_word_table",
    "num_parameters",
    "projection",
    "read_segments",
    "record_sweep",
    "seed_configs",
    "segments_data",
    "sign_stats",
    "squared_config",
    "sweep_curves",
    "sweep_spreads",
    "sweep_table",
    "sweeps",
    "table1_configs",
    "train",
    "train_ahead",
    "written_word_geometry",
]
