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
# - check that their stage-0 tagging runs (the stand-in for AudioSet pretraining) learned;
# - pretrain each as a retrieval model with L_sup on the three corpora, reusing chapter 01 (its
#   PaSST model is the PaSST teacher);
# - score every teacher and the ensemble of the three on the ClothoV2-layout evaluation split
#   over several seeds (the first section of the paper's Table 2), and measure how well each
#   fits the captions stage 2 trains on.

# %% tags=["parameters"]
preset: str = "embedded"  # smoke | embedded | paper

# %%

from audiorepro import plotting, reporting
from audiorepro.experiments import distillation

config = distillation.load_config(preset)
data = distillation.load_data(config.retrieval)
reporting.config_table(config)

# %% [markdown]
# The chapter's code is `audiorepro.experiments.distillation`; its `Config` nests chapter 01's
# (`retrieval`), so the data, the text encoder and the PaSST teacher are chapter 01's.
#
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
distillation.encoder_sizes(config)

# %% [markdown]
# ## Stage 0: tagging before retrieval
#
# The paper's encoders start from AudioSet tagging checkpoints. The embedded presets train the
# same kind of start (`audio_pretrained: stage0`): each encoder, in this chapter's variant,
# tags the sound events of the Clotho-layout development clips, and is scored on the
# validation clips. Chapter 01 shows PaSST's; here are ATST-Frame's and MobileNet's, with the
# tagging mAP a random scorer gets:

# %%
# every run of the chapter, side by side, one per core (as chapter 01,
# page 02): stage 0 and stage 1 of each teacher, the teachers' embeddings
# of the stage-2 captions, every student
distillation.train_ahead(config, data, "chapter")
distillation.stage0_table(config, data, page="01_teachers", preset=preset)

# %% [markdown]
# ## Pretraining the teachers
#
# Each teacher is chapter 01's dual encoder with another audio side: the same text encoder,
# 1024-d shared space (the preset's `embed_dim`), NT-Xent with τ = 0.05, Adam with one warm-up
# epoch and cosine decay, on ClothoV2, AudioCaps and WavCaps (§4.5). The PaSST teacher *is*
# chapter 01's pretrained model (read back from its saved run when chapter 01 has run). ATST
# gets its own front end (64 bands at 16 kHz), MobileNet the PaSST one (128 bands at 32 kHz).
# Under `embedded`, ATST trains for `stage1_steps` optimizer steps and MobileNet for
# `mobilenet_stage1_steps` (the cosine spanning them) on random crops of `stage1_max_audio_s`
# seconds, MobileNet with the paper's batch of 32 (§4.5), PaSST and ATST with 64 (the smallest
# MobileNet learns slowest: at 100 or 198 steps it stayed below three times chance); every model is evaluated on clips cut at
# chapter 01's `max_audio_s`. As in chapter 01, a teacher is the model of the best ClothoV2
# validation mAP@10 of its epoch ends (the final one is saved too), and it is those weights
# that embed the stage-2 captions and clips.
#
# For every seed the three are also scored as one ensemble (the mean of their similarity
# matrices, as paper (b) ensembles its distilled models), and each one, and the ensemble's
# Ĉ, is asked which training clip each stage-2 training caption describes (page 02 computes
# the embeddings this needs).

# %%
teachers = distillation.evaluate_teachers(
    config, data, preset=preset, page="01_teachers"
)

# %% [markdown]
# ## Training curves
#
# L_sup per optimizer step of each teacher (first seed). The three start from scratch here, so
# the curves show how quickly each audio encoder learns on the embedded corpora.

# %%
seed0 = config.seeds[0]
curves = {
    name: teachers[name, seed0].train_history.get("losses", [])
    for name in config.teachers
}
fig = plotting.loss_curves(
    {"": curves}, ylabel="L_sup (NT-Xent)", figsize=(6, 3)
)

# %% [markdown]
# ## The teachers on the evaluation split
#
# Text-to-audio retrieval on the ClothoV2-layout evaluation split, mean ± std over the seeds,
# in percent (the first section of paper (b) Table 2: PaSST 35.7, ATST 32.3, MobileNet 34.1
# mAP@10 at paper scale). The last column is the **training-caption top-1**: the share of the
# stage-2 training captions whose most similar training clip is their own (for the
# ensemble, by Ĉ). Stage 2 can only teach a model what the ensemble knows better than it
# does: the ensemble row has to beat a model's row for distillation to have something to
# distill. The last row is chance: a random ranking.

# %%
records = reporting.read_ledger()
chance = distillation.chance_levels(data, config)
distillation.table(records, config, preset, distilled=False, chance=chance)

# %% [markdown]
# In this notebook we have
#
# - built ATST-Frame and MobileNetV3 beside PaSST and compared their sizes with the paper's;
# - checked their stage-0 tagging runs against chance;
# - pretrained the three dual encoders with L_sup on the three corpora, the PaSST one shared
#   with chapter 01;
# - scored the teachers and their ensemble on the evaluation split and on the training
#   captions, mean ± std over the seeds. Page 02 asks what they believe about the training
#   captions.
