# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Fine-tuning on ClothoV2, with and without caption augmentation
#
# *The pretrained model continues on ClothoV2 alone; swapping captions for paraphrases is the
# paper's answer to overfitting on its 19,195 captions.*
#
# In this notebook we will
#
# - start from each seed's pretrained model (pretraining it first if page 02 has not run);
# - fine-tune it on the ClothoV2 development split with plain captions;
# - fine-tune it again with caption augmentation: each caption replaced, with probability 0.3,
#   by one of its paraphrases;
# - compare the three stages on the ClothoV2 evaluation split.

# %% tags=["parameters"]
preset: str = "embedded"  # smoke | embedded | paper

# %%
import pandas as pd

from audiorepro import reporting
from audiorepro.experiments import retrieval

config = retrieval.load_config(preset)
data = retrieval.load_data(config)
reporting.config_table(config)

# %% [markdown]
# ## Caption augmentation
#
# The training set draws, for every caption and epoch, whether to swap it (probability
# `paraphrase_prob`) and for which paraphrase, from a generator seeded by the run's seed, the
# epoch and the item, so a run is reproducible and resumable:
#
# ```{literalinclude} ../../lib/audiorepro/data/retrieval.py
# :pyobject: CaptionDataset.__getitem__
# ```

# %%
example = data.finetune[0]
print("original:  ", example.caption)
print(
    "paraphrase:",
    example.paraphrases[0] if example.paraphrases else "(none)",
)

# %% [markdown]
# ## Fine-tuning
#
# Fine-tuning reuses the pretraining recipe with a lower peak learning rate (`finetune_lr`) for
# `finetune_epochs` epochs (§3.5).

# %%
# page 02 records the pretrained models; this page the fine-tuned ones
runs = retrieval.evaluate_stages(
    config,
    data,
    preset=preset,
    page="03_finetune",
    recorded=("finetune", "finetune-aug"),
)
rows = [
    {
        "stage": stage,
        "seed": seed,
        **{k: round(100 * v, 2) for k, v in metrics.items()},
    }
    for (stage, seed), (_, metrics) in runs.items()
]

# %% [markdown]
# ## Three stages compared
#
# Mean and standard deviation over the seeds, in percent, on the ClothoV2 evaluation split.

# %%
table = pd.DataFrame(rows)
summary = (
    table.drop(columns="seed")
    .groupby("stage", sort=False)
    .agg(["mean", "std"])
    .round(2)
)
summary

# %% [markdown]
# In this notebook we have
#
# - started from the pretrained models of every seed;
# - fine-tuned each on ClothoV2 with and without swapping captions for paraphrases;
# - compared pretraining, fine-tuning and fine-tuning with caption augmentation on the ClothoV2
#   evaluation split.
