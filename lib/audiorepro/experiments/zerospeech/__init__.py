"""Chapter 03, ZeroSpeech 2019 with the Transformer VQ-VAE (Tjandra, Sakti & Nakamura 2020).

The pages of ``book/03_zerospeech`` call the names below one line at a time; the files are read
in the order of :data:`FILES`, each importing only the files before it:

- ``config``: the preset's :class:`Config` (:func:`load_config`; the pages read it through
  :func:`tables_config`) and the run store;
- ``data``: the language folders (:func:`language_dir`), their features (:func:`load_features`)
  and the training speech (:func:`load_data`);
- ``pairs``: files of different speakers paired by DTW for correspondence training
  (``units train`` on several speakers);
- ``train``: the VQ-VAE, trained or loaded from the run store (:func:`train_vqvae`);
- ``evaluate``: units (:func:`encode_files`), their ABX error and bitrate (:func:`evaluate`),
  the k-means baseline of the same K (:func:`kmeans_baseline`);
- ``tables``: the paper's numbers (:data:`PAPER`) and the rows of Tables 1-3
  (:func:`ablation_rows`);
- ``diagnostics``: how long a code lasts (:func:`unit_runs`), convergence, input geometry;
- ``inverter``: the codebook inverter and resynthesis in a target voice;
- ``submission``: a ZeroSpeech 2019 submission folder, written and scored from its files;
- ``plan``: every run trained ahead (:func:`train_ahead`), every row scored (:func:`run_rows`);
- ``findings``: the ledger read back into the page's tables (:func:`summarize`,
  :func:`findings`);
- ``recordings``: what the ``audiorepro units`` and ``abx items`` commands run on a user's files;
- ``ensemble``: ``units train --models N``, several models of one folder whose units are set
  side by side; ``units_bitrate``: ``units bitrate``, checked against the recordings;
- ``voice``: what ``units voice`` and ``units resynth`` run (an inverter for one voice);
- ``baselines``: the k-means units and input frames ``abx score`` scores beside a units folder;
- ``real_speech``: that path run on the real Italian prompts the book ships
  (:func:`units_on_real_speech_seeds`).

Every trained model and feature file is one run of ``RunStore("03_zerospeech")``, keyed by what
defines it: the VQ-VAE by its model and training sections, seed and the training features'
content key; the inverter by its sections, seed, target voice and the VQ-VAE's weights.
"""

from audiorepro.data.recipes.zerospeech import read_bitrate_filelist, read_item_file
from audiorepro.data.speech_segments import FEATURES
from audiorepro.experiments.zerospeech.config import (
    CHAPTER,
    PRESETS,
    Config,
    load_config,
    tables_config,
)
from audiorepro.experiments.zerospeech.data import language_dir, load_data, load_features
from audiorepro.experiments.zerospeech.diagnostics import (
    convergence,
    convergence_curves,
    frames_abx,
    input_geometry,
    unit_runs,
)
from audiorepro.experiments.zerospeech.evaluate import (
    code_segments,
    encode_files,
    evaluate,
)
from audiorepro.experiments.zerospeech.findings import findings, summarize
from audiorepro.experiments.zerospeech.inverter import (
    resynthesize,
    synthesis_targets,
    synthesis_voices,
    train_inverter,
)
from audiorepro.experiments.zerospeech.plan import run_row, run_rows, train_ahead
from audiorepro.experiments.zerospeech.real_speech import (
    ABX_CHANCE,
    italian_files,
    italian_folder,
    models_side_by_side,
    units_on_real_speech_seeds,
)
from audiorepro.experiments.zerospeech.submission import (
    export_submission,
    relative_time_abx,
    score_submission,
    submission_dir,
)
from audiorepro.experiments.zerospeech.tables import PAPER, ablation_rows
from audiorepro.experiments.zerospeech.train import train_vqvae
from audiorepro.features import griffin_lim, linear_spectrogram, load_audio, spectral_convergence
from audiorepro.metrics.abx import abx

FILES = (
    "config",
    "data",
    "pairs",
    "train",
    "evaluate",
    "tables",
    "diagnostics",
    "inverter",
    "submission",
    "plan",
    "findings",
    "recordings",
    "units_bitrate",
    "ensemble",
    "voice",
    "baselines",
    "real_speech",
)

__all__ = [
    "ABX_CHANCE",
    "CHAPTER",
    "FEATURES",
    "PAPER",
    "PRESETS",
    "Config",
    "ablation_rows",
    "abx",
    "code_segments",
    "convergence",
    "convergence_curves",
    "encode_files",
    "evaluate",
    "export_submission",
    "findings",
    "frames_abx",
    "griffin_lim",
    "input_geometry",
    "italian_files",
    "italian_folder",
    "language_dir",
    "linear_spectrogram",
    "load_audio",
    "load_config",
    "load_data",
    "load_features",
    "models_side_by_side",
    "read_bitrate_filelist",
    "read_item_file",
    "relative_time_abx",
    "resynthesize",
    "run_row",
    "run_rows",
    "score_submission",
    "spectral_convergence",
    "submission_dir",
    "summarize",
    "synthesis_targets",
    "synthesis_voices",
    "tables_config",
    "train_ahead",
    "train_inverter",
    "train_vqvae",
    "unit_runs",
    "units_on_real_speech_seeds",
]
