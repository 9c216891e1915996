# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Training two transformer encoders into one space
#
# *An acoustic transformer and a phoneme transformer, trained jointly with the multi-view
# contrastive loss under the paper's plateau schedule, up to the preset's epoch cap.*
#
# In this notebook we will
#
# - build the two encoders of the paper's Figure 4: MFCC frames → transformer → mean, and
#   phones → transformer → mean;
# - read the multi-view contrastive loss of eq. (4), with the negative pairing the reference
#   code meant to implement;
# - train the chosen model (phoneme encoder with N = 4 layers and h = 16 heads) with Adam and
#   the paper's plateau schedule, evaluating dev cross-view AP after every epoch;
# - see what the paper's squared cosine distance does to cross-view AP, ranked by $\cos$ and
#   by $|\cos|$;
# - measure acoustic and cross-view AP on dev and test.

# %% tags=["parameters"]
from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
seed: Optional[int] = None  # seed of this run; None keeps the preset's
num_epochs: Optional[int] = None  # cap on epochs; None keeps the preset's
corpus_root: Optional[str] = None  # the word-corpus folder; None: preset's

# %%
import pandas as pd

from audiorepro import plotting, reporting
from audiorepro.config import to_dict
from audiorepro.experiments import awe

cfg = awe.load_config(
    preset,
    seed=seed,
    **{"train.num_epochs": num_epochs, "corpus.root": corpus_root},
)
data = awe.load_data(cfg)
reporting.config_table(cfg)

# %% [markdown]
# ## The two encoders
#
# Both views go through the same recipe (§2.1.2, §3.2): an input layer to $d_{model}$ (a
# linear projection of the frames; an embedding of the phone ids), the sinusoidal positional
# encoding of eq. (5) with base 5000, a post-norm PyTorch `TransformerEncoder` with ReLU and
# dropout (the paper: 0.1; the `embedded` preset: 0, which trains a third faster per step on
# the CPU and climbs faster, as its file measures), and a mean over the valid positions;
# padded positions are masked in attention
# and in the mean. The inputs are scaled by $\sqrt{d_{model}}$ before the encoding is added,
# as in Vaswani et al.; without it the positional encoding dominates every mean and all
# embeddings start out nearly parallel, where the cosine distance has almost no gradient.
#
# ```{literalinclude} ../../lib/audiorepro/models/awe.py
# :pyobject: AcousticEncoder.forward
# ```

# %% [markdown]
# ## The loss
#
# Eq. (4) has three hinge terms per segment, all against the distance $d_i$ between the
# segment and its own written word: the segment against other written words (obj0), its word
# against other written words (obj1) and its word against segments of other words (obj2).
# Each averages over the $k$ most offending negatives in the batch, and the batch's unique
# words form the written side. The published agwe-recipe code builds its negative indices
# with a `cat` then `view` that scrambles rows, so segments meet their own word as a
# "negative"; here every negative set comes from an explicit mask, and the tests compare the
# loss with a brute-force loop.
#
# ```{literalinclude} ../../lib/audiorepro/losses/multiview.py
# :pyobject: MultiViewContrastiveLoss.terms
# ```

# %% [markdown]
# ## Training with the plateau schedule
#
# Adam with $\beta = (0.9, 0.999)$, $\epsilon = 10^{-8}$; after every epoch the dev cross-view
# AP is measured; after `train.patience` epochs without a new best, the best model *and
# optimizer state* are reloaded and the learning rate divided by 10; training ends below
# $10^{-7}$ or at the epoch cap of the preset. The trained model is kept in the chapter's run
# store, keyed by its configuration and seed, where the evaluation page finds it again.
#
# ```{literalinclude} ../../lib/audiorepro/experiments/awe/train.py
# :pyobject: train
# ```

# %% [markdown]
# Every run of this chapter (this page's two, and the evaluation page's sweeps over depth,
# pooling, heads and seeds) is independent of the others: each seeds its own weights and data
# order. They train here, side by side, one process per core, the longest first
# (`awe.train_ahead`); below and on the next page they are loaded from the run store. Each
# equals the run trained alone.

# %%
trained = awe.train_ahead(cfg, data)
print(f"trained {trained} runs; the others were in the run store")

# %%
run = awe.train(cfg, data, progress="lines")
print(
    f"acoustic encoder: {awe.num_parameters(run.model.acoustic):,} "
    "parameters"
)
print(
    f"phoneme encoder: {awe.num_parameters(run.model.phones):,} parameters"
)
print("schedule events (step, event):", run.schedule_events)

# %%
history = run.history
fig = plotting.history_curves(
    history, title="training loss and dev AP", smooth=5
)

# %% [markdown]
# In the `embedded` build every epoch sets a new best dev cross-view AP (the events above), so
# the run ends at the preset's 7-epoch cap, still climbing, long before the schedule would
# stop it; the evaluation page measures how far each setting of the sweeps still climbs at
# that cap.

# %% [markdown]
# ## The paper's distance: $1 - \cos^2$
#
# Eq. (4) defines $d(a, b) = 1 - \langle a/\|a\|, b/\|b\| \rangle^2$, squared; the code base the
# paper builds on uses $1 - \cos$ (this preset too). The square makes a vector and its
# opposite identical, so the loss is content with a written word pointing away from its
# spoken tokens, while the cross-view AP ranks pairs by $1 - \cos$. The same model, trained for
# `sweep_epochs` epochs with the squared distance, against the run above, epoch by epoch:

# %%
squared = awe.train(awe.squared_config(cfg), data)
n = min(len(history.eval_steps), len(squared.history.eval_steps))
per_epoch = pd.DataFrame(
    {
        "dev cross-view AP, 1 - cos": history.eval_metric("crossview_ap")[
            :n
        ],
        "dev cross-view AP, 1 - cos²": squared.history.eval_metric(
            "crossview_ap"
        )[:n],
        "dev acoustic AP, 1 - cos": history.eval_metric("acoustic_ap")[:n],
        "dev acoustic AP, 1 - cos²": squared.history.eval_metric(
            "acoustic_ap"
        )[:n],
    },
    index=pd.RangeIndex(1, n + 1, name="epoch"),
)
reporting.record_result(
    awe.CHAPTER,
    "02_train",
    {"dev_crossview_ap": squared.best_dev},
    preset=preset,
    seed=squared.seed,
    config=to_dict(cfg),
    tags={
        "model": "chosen",
        "distance": "cos2",
        "epochs": cfg.sweep_epochs,
    },
)
per_epoch.round(3)

# %% [markdown]
# Cross-view AP ranks pairs by $\cos$, so a written word that sits opposite its tokens
# ($\cos < 0$), which the squared distance does not mind, is ranked last. Two measures on the
# dev set separate "learned nothing" from "learned it with the wrong sign": the cross-view AP
# with pairs ranked by $|\cos|$ instead (the squared distance's own ranking), and the share of
# positive pairs (a token and its own written word) whose cosine is below 0
# (`awe.sign_stats`).

# %%
signs = {}
for distance, trained in (("cos", run), ("cos2", squared)):
    signs[distance] = awe.sign_stats(trained.model, data["dev"])
    reporting.record_result(
        awe.CHAPTER,
        "02_train",
        signs[distance],
        preset=preset,
        seed=trained.seed,
        config=to_dict(cfg),
        tags={
            "model": "chosen",
            "distance": distance,
            "epochs": len(trained.history.eval_steps),
            "split": "dev",
        },
    )
sq, plain = signs["cos2"], signs["cos"]
print(
    f"1 - cos²: {sq['negative_share']:.0%} of the positive pairs have "
    f"cos < 0; cross-view AP {sq['crossview_ap']:.3f} ranked by cos, "
    f"{sq['abs_crossview_ap']:.3f} by |cos| "
    f"(1 - cos: {plain['crossview_ap']:.3f} and "
    f"{plain['abs_crossview_ap']:.3f})"
)
pd.DataFrame(signs).T.rename(
    index={"cos": "1 - cos", "cos2": "1 - cos²"}
).round(3)

# %% [markdown]
# If the squared distance had learned the same space up to the sign of each word, ranking by
# $|\cos|$ would close the gap to $1 - \cos$. In the embedded run it does not: with
# $1 - \cos^2$ essentially every written word sits opposite its own tokens, which is why its
# cosine-ranked AP falls to chance, but ranked by $|\cos|$ its AP is still far below that of
# $1 - \cos$ after the same epochs. The negative cosines explain the collapse of the
# cosine ranking, not the whole gap, and they are no reason to prefer $1 - \cos^2$ here: the
# preset keeps $1 - \cos$.

# %% [markdown]
# ## Dev and test AP of the best dev model
#
# The model with the best dev cross-view AP is loaded back and scored on both splits:
# acoustic AP over all token pairs (same word or not), cross-view AP over every token against
# every word type of the split.

# %%
scores = {
    split: awe.evaluate(run.model, data[split]) for split in ("dev", "test")
}
for split, metrics in scores.items():
    reporting.record_result(
        awe.CHAPTER,
        "02_train",
        metrics,
        preset=preset,
        seed=run.seed,
        config=to_dict(cfg),
        wall_time_s=history.wall_time_s,
        tags={"model": "chosen-full-schedule", "split": split},
    )
pd.DataFrame(scores).T.round(3)

# %% [markdown]
# In this notebook we have
#
# - built the acoustic and phoneme transformer encoders with masked mean pooling;
# - trained them jointly with the eq. (4) loss, with the intended negative pairing, and the
#   reset-to-best plateau schedule driven by dev cross-view AP;
# - compared the paper's $1 - \cos^2$ with the code base's $1 - \cos$, and measured how many
#   spoken words sit opposite their written word under each;
# - scored the best dev model on dev and test and recorded the numbers in the ledger.
