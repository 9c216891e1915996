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
reporting.config_table(cfg)

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
# weights and data order), so the training page trained them side by side, one process per
# core (`awe.train_ahead`); here `awe.sweeps` loads and scores them (or trains what is still
# missing, in one pool); a run two tables share is trained once. The numbers are those of one
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
# ranking in the tables is the ranking at the best dev epoch; a curve still climbing there
# could yet overtake another. A setting counts as levelled off when its last epoch added less
# than the seed spread of its final value (`awe.sweep_spreads`): another epoch at that pace
# would move it by less than its seeds already differ.

# %%
curves = {f"Table {t}": awe.sweep_curves(sweeps[t], t) for t in ("1", "2")}
spreads = awe.sweep_spreads(sweeps["1"], "1") | awe.sweep_spreads(
    sweeps["2"], "2"
)
fig = plotting.loss_curves(
    curves, xlabel="epoch", ylabel="dev cross-view AP", figsize=(9, 3)
)
ends = awe.curve_ends(curves["Table 1"] | curves["Table 2"], spreads)
print(
    f"levelled off after {cfg.sweep_epochs} epochs: "
    f"{int(ends['levelled off'].sum())} of {len(ends)} settings"
)
ends.round(3)

# %% [markdown]
# After `sweep_epochs` epochs (7 in the `embedded` preset) the curves are flattening but
# not all flat: the last epoch adds a few percent of each setting's rise (the paper's
# plateau schedule, four epochs without a new best, is out of reach), and about half the
# settings have levelled off within their seed spread (the count above). More epochs for three
# seeds of every setting do not fit the book's CPU budget. The tables therefore compare the
# settings at a fixed budget, as the paper compared its settings after 15 epochs of up to
# 100: for a setting still climbing, a difference beyond the seed spread says which setting
# learns more within that budget, not which ends higher.

# %% [markdown]
# ## The chosen model over seeds (Tables 3 and 4)
#
# The paper's chosen model, N = 4 and h = 16 with mean pooling, trained with the plateau
# schedule (capped at `train.num_epochs`) once per seed, then scored on the test set. These
# are the configurations the training page asks for, trained there with the sweeps; here
# they are loaded from the run store. With `sweep_epochs` equal to `train.num_epochs`, as in
# the `embedded` preset, they are Table 2's h = 16 runs.

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
# ## Why some findings do not show
#
# Three measured checks on the models above, one per finding that does not reproduce here.
#
# **Avg against Rep.** "Rep" keeps the phoneme encoder's output at the first phone. With one
# layer that output has attended to the whole word only once; with more layers it can carry
# the whole word. If so, a deeper Rep encoder should stop grouping written words by their
# first phone: below, the share of test words whose nearest other written word (cosine) starts
# with the same phone, against the share for a random neighbour, mean over seeds
# (`awe.written_word_geometry`). Its `mean_cosine`, the mean cosine between two different
# written words, is also the check on the paper's failing deepest encoder: a collapsed encoder
# maps every word near one direction (mean cosine near 1).

# %%
geometry = pd.DataFrame(
    [
        {
            "setting": f"N = {c.model.phone_layers} "
            f"{c.model.phone_pooling.capitalize()}",
            "seed": c.seed,
            **awe.written_word_geometry(
                awe.train(c, data).model, test.word_phones
            ),
        }
        for c in awe.table1_configs(cfg)
    ]
)
geometry.groupby("setting", sort=False)[
    ["first_phone_share", "chance", "mean_cosine"]
].mean().round(3)

# %% [markdown]
# **Cross-view AP above acoustic AP.** Cross-view AP ranks each spoken token against one
# anchor per word (its written form); acoustic AP ranks tokens against each other, so it pays
# twice for speaker variation. If the anchor is what helps, an *acoustic* anchor should help
# as much: below, on the test tokens of half the speakers, token against token (acoustic AP),
# token against the written words (cross-view AP) and token against the mean embedding of
# each word's tokens from the *other* half of the speakers (centroid AP), for each seed of the
# chosen model (`awe.anchor_check`).

# %%
anchors = pd.DataFrame(
    {s: awe.anchor_check(run.model, test) for s, run in runs.items()}
).T
anchors.loc["mean"] = anchors.mean()
anchors = anchors.astype({"tokens": int, "words": int})
anchors.round(3)

# %% [markdown]
# Why would the written word predict a token better than other speakers' tokens do? Because
# here a word is pronounced the same way by every voice. From the corpus's phone alignments
# (`awe.corpus_pronunciation_variation`): `dictionary_match`, the share of tokens realised
# exactly as the dictionary pronunciation the phoneme encoder reads, and `phone_error_rate`,
# their mean phone edit distance to it; `usual_realisation`, over the words with two or more
# tokens, the share of tokens said as their word's most frequent phone sequence, and
# `words_with_variants`, the share of those words said in more than one way.

# %%
# empty for a corpus without phone alignments (Switchboard's npz layout)
variation = pd.DataFrame(
    {
        split: awe.corpus_pronunciation_variation(cfg, split) or {}
        for split in ("train", "test")
    }
).T
variation.round(3).convert_dtypes()

# %% [markdown]
# Read together: the acoustic centroid of other speakers' tokens is a *worse* anchor than the
# tokens themselves, and the written word the best one, so what lifts cross-view AP here is
# not having one anchor per word but the written view itself, which predicts every voice's
# tokens of a word better than other speakers' tokens do. eSpeak's pronunciation of a word
# often differs from the dictionary's (the phone error rate), but it is the same for every
# voice and context (nearly all tokens in their word's usual form): the written word maps to
# one fixed phone sequence, and only the voice varies. Switchboard's conversational tokens
# depart from their dictionary pronunciations differently from token to token. Is that why
# the paper's cross-view AP stays below its acoustic AP? Not by itself: on a word corpus
# whose speakers talk in eSpeak's eight English accents (the corpus option `accents`,
# measured outside the book with this chapter's runs, `git show b7d5992`), 88 % of the test tokens are
# in their word's usual form and both APs fall, but cross-view AP stays above acoustic AP
# (chosen model 0.64 against 0.50). On the depth checks: a one-layer Rep encoder groups written
# words by their first phone almost entirely, deeper Rep encoders much less (the table before),
# which is how Rep catches up with Avg and passes it at N = 4 and 8 here; and no encoder has
# collapsed (mean cosines near 0), so the deepest one learns at this width and learning rate.

# %% [markdown]
# **The number of heads.** Heads let the phoneme encoder attend to several positions at once;
# how much that can matter depends on how many positions a word has. Below, the phones per
# written test word, and the spread of Table 2's acoustic AP across head counts against the
# seed spread within each.

# %%
lengths = pd.Series([len(p) for p in test.word_phones.values()])
by_heads = pd.DataFrame(sweeps["2"]).groupby("phone_heads")["acoustic_ap"]
means = by_heads.mean()
print(
    f"phones per written test word: mean {lengths.mean():.1f}, "
    f"max {lengths.max()}; Table 2 acoustic AP: range of the "
    f"head-count means {means.max() - means.min():.3f}, "
    f"mean seed std {by_heads.std().mean():.3f}"
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
# - checked each of the paper's findings against our numbers, saying which reproduce;
# - measured, for each finding that does not, the mechanism behind it.
