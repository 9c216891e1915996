# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Depth, heads and pooling of the phoneme encoder, and the test set
#
# *The paper's sweeps over the phoneme transformer (Tables 1 and 2), the chosen model over
# several seeds against an MFCC + DTW baseline (Tables 3 and 4), and a look inside the shared
# space.*
#
# In this notebook we will
#
# - train phoneme encoders with N ∈ {1, 4, 8} layers, pooled by mean ("Avg") or by the first
#   phone ("Rep"), and with h ∈ {1, 4, 8, 16, 32} heads at N = 4, each with three seeds, and
#   score each on the test set with acoustic and cross-view AP;
# - follow the dev AP of every sweep run epoch by epoch, to see whether it has levelled off;
# - train the chosen model (N = 4, h = 16, Avg) with several seeds and report mean ± std;
# - compute the MFCC + DTW same-different baseline with chapter 03's DTW;
# - project both views to 2-D and list the nearest written words of a few spoken tokens;
# - compare with the paper, finding by finding.

# %% tags=["parameters"]
from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
corpus_root: Optional[str] = None  # the word-corpus folder; None: preset's
workers: Optional[int] = None  # runs at once; None: one per core (GPU: 1)

# %%
import pandas as pd

from audiorepro import plotting, reporting
from audiorepro.config import to_dict
from audiorepro.experiments import awe

pd.set_option(
    "display.max_colwidth", None
)  # the finding sentences are long
cfg = awe.load_config(preset, **{"corpus.root": corpus_root})
data = awe.load_data(cfg)
test = data["test"]
cfg

# %% [markdown]
# ## Table 1: depth and pooling of the phoneme encoder
#
# Every setting is trained once per seed of `seeds` (mean ± std below), with the same
# acoustic encoder and `sweep_epochs` epochs (the paper: 15 epochs, which it found indicative
# of the final ranking), with `table1_heads` heads in the phoneme encoder. The paper reports
# these sweeps on its dev set; we report the test set and keep the best dev epoch of each run.
# Each setting is a variant of the preset's config (`audiorepro.config.replace`), and its
# trained model is kept in the chapter's run store: a setting equal to one trained before,
# here or on the training page, is loaded, not retrained.
#
# The runs of both tables and the chosen model's seeds are independent (each seeds its own
# weights, data order and dropout), so they train side by side, one process per core, in one
# pool (`awe.sweeps`); a run two tables share is trained once. The numbers are those of one
# run after another.

# %%
sweeps = awe.sweeps(cfg, data, workers=workers)
for table in ("1", "2"):
    awe.record_sweep(
        sweeps[table], table, page="03_evaluate", preset=preset, config=cfg
    )
awe.sweep_table(sweeps["1"], "1")

# %% [markdown]
# ## Table 2: attention heads at N = 4
#
# The same protocol with mean pooling, at the chosen depth, varying the number of heads (the
# run with `table1_heads` heads is Table 1's; with `sweep_epochs` equal to the chosen model's
# epochs, the run with 16 heads is the chosen model).

# %%
awe.sweep_table(sweeps["2"], "2")

# %% [markdown]
# ## Have the sweep runs levelled off?
#
# The dev cross-view AP after every epoch, the mean over the seeds of each setting. The
# ranking in the tables is the ranking at the last epoch; a curve still climbing there could
# yet overtake another.

# %%
curves = {f"Table {t}": awe.sweep_curves(sweeps[t], t) for t in ("1", "2")}
fig = plotting.loss_curves(
    curves, xlabel="epoch", ylabel="dev cross-view AP", figsize=(9, 3)
)
awe.curve_ends(curves["Table 1"] | curves["Table 2"]).round(3)

# %% [markdown]
# At embedded scale no curve has levelled off after `sweep_epochs` epochs (2 in the book; 5
# were tried and still climbed, at about 12 minutes under load): the last epoch still adds a
# large share of each setting's rise so far (last column), and the plateau schedule's stop,
# four epochs without a new best, is far out of reach. Longer runs for three seeds of every
# setting do not fit the book's CPU budget. The tables therefore compare the settings at a
# fixed budget, as the paper compared its settings after 15 epochs of up to 100: a setting
# that is still climbing faster (the steepest curves) could overtake another in a longer run,
# so a difference within the seed spread says nothing about the plateau, and one beyond it
# says which setting learns faster.

# %% [markdown]
# ## The chosen model over seeds (Tables 3 and 4)
#
# The paper's chosen model, N = 4 and h = 16 with mean pooling, trained with the full plateau
# schedule (capped at `train.num_epochs`) once per seed, then scored on the test set. These
# are the configurations the training page asks for, so its run of the preset's seed is
# reused here, and the other seeds were trained in the sweeps' pool above: here they are
# loaded from the run store.

# %%
runs = {c.seed: awe.train(c, data) for c in awe.seed_configs(cfg)}
chosen = {
    s: awe.evaluate(run.model, test, cfg.eval_batch_size)
    for s, run in runs.items()
}
for s, metrics in chosen.items():
    reporting.record_result(
        awe.CHAPTER,
        "03_evaluate",
        metrics,
        preset=preset,
        seed=s,
        config=to_dict(cfg),
        tags={"model": "chosen"},
    )
chosen_df = pd.DataFrame(chosen).T
chosen_df.loc["mean"], chosen_df.loc["std"] = (
    chosen_df.mean(),
    chosen_df.std(ddof=1),
)
chosen_df.round(3)

# %% [markdown]
# ## The MFCC + DTW baseline
#
# Kamper et al.'s baseline compares two tokens by dynamic time warping of their MFCC frames
# (frame distance: the angle between frames; cost divided by the path length), using chapter
# 03's DTW. All pairs of a seeded subset of `dtw_tokens` test tokens are scored, and the
# chosen models' acoustic AP on exactly that subset is shown beside it.

# %%
baseline = awe.dtw_baseline(test, cfg.dtw_tokens, seed=cfg.seed)
reporting.record_result(
    awe.CHAPTER,
    "03_evaluate",
    {"acoustic_ap": baseline["ap"]},
    preset=preset,
    seed=cfg.seed,
    config=to_dict(cfg),
    tags={"model": "mfcc-dtw"},
)
on_subset = [
    awe.acoustic_ap_on(
        run.model, test, baseline["indices"], cfg.eval_batch_size
    )
    for run in runs.values()
]
print(
    f"{baseline['num_pairs']:,} pairs of {len(baseline['indices'])} test "
    "tokens"
)
print(f"MFCC + DTW AP: {baseline['ap']:.3f}")
print(
    "chosen model on the same pairs: "
    f"{reporting.format_mean_std(on_subset, 3)}"
)

# %% [markdown]
# ## Both views in one space
#
# A PCA projection of the test tokens of the most frequent test words (dots) and of their
# written forms (stars), from the first seed's model. Tokens of one word should cluster around
# its star.

# %%
model = runs[cfg.seeds[0]].model
fig = plotting.two_view_projection(
    *awe.projection(model, test), title="test tokens and written words"
)

# %% [markdown]
# ## Nearest written words
#
# For four test tokens of words seen in training and up to four of unseen words, the three
# closest written words among all test word types (cosine similarity in brackets). For the
# unseen words the phoneme encoder has only their phones to go on.

# %%
awe.nearest_word_table(model, data, seed=cfg.seed)

# %% [markdown]
# ## Paper vs ours
#
# The paper's Tables 1 and 2 are dev-set sweeps on Switchboard after 15 epochs; ours are
# test-set sweeps on the embedded corpus after `sweep_epochs` epochs with a smaller model, so
# the absolute numbers are not comparable: the question is which *findings* carry over. Each
# finding below is checked on our numbers from the ledger, mean ± std over the seeds of each
# side: it reproduces or contradicts the paper only when the difference exceeds the seed
# spread, and is inconclusive otherwise, saying why. A run counts as having learned when it
# beats three times the chance AP of the test set (the share of positive pairs); the paper's
# deepest phoneme encoder fails, so a Table 1 comparison is inconclusive for that reason only
# when neither side learned, and "N = 8 fails" means at or below that floor.

# %%
chance = awe.chance_levels(test)
print(
    "chance AP on the test set: "
    + ", ".join(f"{m} {v:.4f}" for m, v in chance.items())
)
awe.findings(
    reporting.read_ledger(),
    cfg,
    preset,
    chance=chance,
    on_dtw_pairs=on_subset,
)

# %% [markdown]
# In this notebook we have
#
# - swept the depth, pooling and number of heads of the phoneme encoder with three seeds
#   each and scored every run on the test set with acoustic and cross-view AP;
# - followed the dev AP of the sweep runs epoch by epoch;
# - trained the chosen model with several seeds and reported mean ± std;
# - computed the MFCC + DTW baseline on the same test pairs;
# - seen both views in one projection and the nearest written words of spoken tokens;
# - checked each of the paper's findings against our numbers, saying which reproduce.
