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
from audiorepro.config import load_preset, to_dict
from audiorepro.paths import repo_root
from audiorepro.training.retrieval import (
    RetrievalConfig,
    evaluate_retrieval,
    finetune,
    load_retrieval_data,
    metrics_percent,
    pretrain,
)

cfg = load_preset(RetrievalConfig, repo_root() / "book/01_retrieval/presets", preset)
data = load_retrieval_data(preset, cfg)
cfg

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
print("paraphrase:", example.paraphrases[0] if example.paraphrases else "(none)")

# %% [markdown]
# ## Fine-tuning
#
# Fine-tuning reuses the pretraining recipe with a lower peak learning rate (`finetune_lr`) for
# `finetune_epochs` epochs (§3.5).

# %%
rows = []
for seed in cfg.seeds:
    stages = {
        "pretrain": pretrain(preset, cfg, seed, data),
        "finetune": finetune(preset, cfg, seed, data, augment=False),
        "finetune-aug": finetune(preset, cfg, seed, data, augment=True),
    }
    for stage, model in stages.items():
        metrics = evaluate_retrieval(model, data.eval_set, data.features, cfg)
        if stage != "pretrain":  # page 02 records the pretrained models
            _ = reporting.record_result(
                "01_retrieval",
                "03_finetune",
                metrics,
                preset=preset,
                seed=seed,
                config=to_dict(cfg),
                tags={"stage": stage},
            )
        rows.append({"stage": stage, "seed": seed, **metrics_percent(metrics)})

# %% [markdown]
# ## Three stages compared
#
# Mean and standard deviation over the seeds, in percent, on the ClothoV2 evaluation split.

# %%
table = pd.DataFrame(rows)
summary = table.drop(columns="seed").groupby("stage", sort=False).agg(["mean", "std"]).round(2)
summary

# %% [markdown]
# In this notebook we have
#
# - started from the pretrained models of every seed;
# - fine-tuned each on ClothoV2 with and without swapping captions for paraphrases;
# - compared pretraining, fine-tuning and fine-tuning with caption augmentation on the ClothoV2
#   evaluation split.
