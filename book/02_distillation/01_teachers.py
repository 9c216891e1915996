# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Stage 1: three teachers
#
# *Paper (b) trains the same dual encoder three times, with PaSST, ATST-Frame and MobileNetV3 as
# the audio side, and asks the three to agree on which captions describe which clips.*
#
# In this notebook we will
#
# - build the two new audio encoders, ATST-Frame (frames, not patches) and MobileNetV3 (any
#   length), and compare their sizes with the paper's configurations;
# - pretrain each as a retrieval model with L_sup on the three corpora, reusing chapter 01 (its
#   PaSST model is the PaSST teacher);
# - score every teacher on the ClothoV2-layout evaluation split over several seeds: the first
#   section of the paper's Table 2.

# %% tags=["parameters"]
preset: str = "embedded"  # smoke | embedded | paper

# %%
import pandas as pd

from audiorepro import plotting, reporting
from audiorepro.config import load_preset, to_dict
from audiorepro.models.atst import atst
from audiorepro.models.mobilenet import mobilenet
from audiorepro.models.passt import passt
from audiorepro.paths import repo_root
from audiorepro.training.distillation import DistillationConfig, stage1_teacher, teacher_config
from audiorepro.training.retrieval import (
    RetrievalConfig,
    evaluate_retrieval,
    load_retrieval_data,
    seed_table,
)

CHAPTER = "02_distillation"
dcfg = load_preset(DistillationConfig, repo_root() / "book/02_distillation/presets", preset)
rcfg = load_preset(
    RetrievalConfig, repo_root() / "book/01_retrieval/presets", dcfg.retrieval_preset
)
data = load_retrieval_data(preset, rcfg)
dcfg

# %% [markdown]
# ## Two more audio encoders
#
# **ATST-Frame** (§4.2.2) is a transformer over *frames*: each token is a block of 4 log-mel
# frames spanning all 64 mel bands, so there is no patching over frequency. Its positional
# encoding covers 10 s; longer clips are cut into 10 s snippets whose embeddings are averaged,
# exactly as for PaSST. In training it warps the frequency axis, dropping up to 10 % of the
# highest bins and stretching the rest back:
#
# ```{literalinclude} ../../lib/audiorepro/models/atst.py
# :pyobject: frequency_warp
# ```
#
# **MobileNetV3** (§4.2.3, EfficientAT's `mn40_as_ext`) is a CNN whose embedding is the global
# average of its last feature map, so it takes a clip of any length in one pass. Both mirror
# the released implementations' module names, so their checkpoints load from local files
# (`load_atst_checkpoint`, `load_mobilenet_checkpoint`).
#
# The paper's configurations and ours, by parameter count (the embedded preset trains small
# configurations from scratch on 2 CPU cores; the paper starts from AudioSet checkpoints):


# %%
def millions(module) -> float:
    return round(sum(p.numel() for p in module.parameters()) / 1e6, 2)


sizes = pd.DataFrame(
    [
        {"encoder": "PaSST", "paper": "n (chapter 01 paper preset)",
         "paper M params": millions(passt("n")), "ours": rcfg.passt_variant,
         "ours M params": millions(passt(rcfg.passt_variant))},
        {"encoder": "ATST-Frame", "paper": "base", "paper M params": millions(atst("base")),
         "ours": dcfg.atst_variant, "ours M params": millions(atst(dcfg.atst_variant))},
        {"encoder": "MobileNetV3", "paper": "mn40_as_ext",
         "paper M params": millions(mobilenet("mn40_as_ext")), "ours": dcfg.mobilenet_variant,
         "ours M params": millions(mobilenet(dcfg.mobilenet_variant))},
    ]
)  # fmt: skip
sizes

# %% [markdown]
# ## Pretraining the teachers
#
# Each teacher is chapter 01's dual encoder with another audio side: the same text encoder,
# 1024-d shared space (the preset's `embed_dim`), NT-Xent with τ = 0.05, Adam with one warm-up
# epoch and cosine decay, on ClothoV2, AudioCaps and WavCaps (§4.5). The PaSST teacher *is*
# chapter 01's pretrained model (read back from its saved run when chapter 01 has run). ATST
# gets its own front end (64 bands at 16 kHz), MobileNet the PaSST one (128 bands at 32 kHz).
# Under `embedded`, ATST and MobileNet see `stage1_max_train_items` captions per corpus in
# crops of `stage1_max_audio_s` seconds; every model is evaluated on whole clips.

# %%
teachers = {}
for seed in dcfg.seeds:
    for name in dcfg.teachers:
        tcfg = teacher_config(dcfg, rcfg, name)
        model = stage1_teacher(preset, dcfg, rcfg, name, seed, data)
        metrics = evaluate_retrieval(model, data.eval_set, data.features_for(tcfg), tcfg)
        _ = reporting.record_result(
            CHAPTER, "01_teachers", metrics, preset=preset, seed=seed,
            config={"distillation": to_dict(dcfg), "retrieval": to_dict(tcfg)},
            tags={"model": name, "stage": "stage1"},
        )  # fmt: skip
        teachers[name, seed] = model

# %% [markdown]
# ## Training curves
#
# L_sup per optimizer step of each teacher (first seed). The three start from scratch here, so
# the curves show how quickly each audio encoder learns on the embedded corpora.

# %%
seed0 = dcfg.seeds[0]
curves = {name: teachers[name, seed0].train_history.get("losses", []) for name in dcfg.teachers}
fig, ax = plotting.plt.subplots(figsize=(6, 3))
for name, losses in curves.items():
    ax.plot(range(1, len(losses) + 1), losses, label=name)
ax.set_xlabel("optimizer step")
ax.set_ylabel("L_sup (NT-Xent)")
ax.legend()
fig.tight_layout()

# %% [markdown]
# ## The teachers on the evaluation split
#
# Text-to-audio retrieval on the ClothoV2-layout evaluation split, mean ± std over the seeds,
# in percent (the first section of paper (b) Table 2: PaSST 35.7, ATST 32.3, MobileNet 34.1
# mAP@10 at paper scale).

# %%
records = reporting.read_ledger()
seed_table(
    records,
    [(name, {"model": name, "stage": "stage1"}) for name in dcfg.teachers],
    chapter=CHAPTER,
    preset=preset,
)

# %% [markdown]
# In this notebook we have
#
# - built ATST-Frame and MobileNetV3 beside PaSST and compared their sizes with the paper's;
# - pretrained the three dual encoders with L_sup on the three corpora, the PaSST one shared
#   with chapter 01;
# - scored the teachers on the evaluation split, mean ± std over the seeds. Page 02 asks what
#   they believe about the training captions.
