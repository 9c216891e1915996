# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Stage 2: fine-tuning on the ensemble's beliefs
#
# *Each stage-1 model is fine-tuned on the Clotho-layout corpus alone, learning from the
# ensemble's soft correspondences as well as from the binary pairs.*
#
# In this notebook we will
#
# - write down the stage-2 objective L = L_sup + λ·L_dist and how each batch gets its targets;
# - say what audio stage 2 trains on, and where that departs from the paper;
# - fine-tune every stage-1 model of every seed with λ = 1 (the paper's setting);
# - follow L_sup and L_dist during training;
# - score each distilled model and the ensemble of the three distilled models.

# %% tags=["parameters"]
preset: str = "embedded"  # smoke | embedded | paper

# %%
from audiorepro import plotting, reporting
from audiorepro.experiments import distillation

config = distillation.load_config(preset)
data = distillation.load_data(config.retrieval)
reporting.config_table(config)

# %% [markdown]
# ## The objective
#
# For a batch of B pairs the student's logits are S = C/τ (rows audios, columns captions),
# q_a and q_c their softmax over audios and over captions. The targets come from the ensemble:
# Ĉ for the batch's audio ids and caption texts, p̂_a and p̂_c its softmax over audios and over
# captions at τ = 0.05. Then L_dist = H(p̂_a, q_a) + H(p̂_c, q_c) and L = L_sup + λ·L_dist.
# L_sup is chapter 01's NT-Xent, which averages its two directions as salsa does, so L_dist is
# averaged too and λ keeps the paper's balance:
#
# ```{literalinclude} ../../lib/audiorepro/losses/distillation.py
# :pyobject: distillation_objective
# ```
#
# Under `accelerate launch` with several processes the student's loss covers the all-gathered
# global batch, so each process looks up the targets of the global batch too (a two-process
# test shows the run equals one process with the global batch). The targets are keyed by
# caption text, so stage 2 swaps no captions for paraphrases.
#
# ```{literalinclude} ../../lib/audiorepro/models/dual_encoder.py
# :pyobject: DistillationStudent.forward
# ```

# %% [markdown]
# ## What stage 2 hears
#
# A target is only right for the audio it was computed on. The teachers embed the *start* of
# each training clip, `finetune_max_audio_s` seconds, and stage 2 trains on exactly that
# crop, the same window every epoch, rather than on a random window of a clip whose target
# describes another part of it:
#
# ```{literalinclude} ../../lib/audiorepro/experiments/distillation/config.py
# :pyobject: stage2_config
# ```
#
# This departs from the paper, which feeds whole clips of up to 30 s on GPUs (the `paper`
# preset keeps that: `finetune_max_audio_s: null`). On CPU whole clips cost about three times
# as much per step as the embedded preset's 4 s, so the embedded runs see the first 4 s of
# every clip, teachers and students alike; evaluation still sees clips cut at `max_audio_s`.
#
# ## Fine-tuning every teacher
#
# `finetune_steps` optimizer steps (or `finetune_epochs` epochs when it is null) on the
# Clotho-layout development captions with peak learning rate `finetune_lr` and λ = `lam`,
# the cosine spanning exactly those steps, so every model and every λ of page 04 trains on
# one budget. Each seed's students learn from the ensemble of that seed's stage-1 models
# (trained first if page 01 has not run). A student, too, is the model of the best validation
# mAP@10 of its epoch ends; a run of one epoch or less keeps its final weights.

# %%
students = distillation.evaluate_models(
    config, data, preset=preset, page="03_distill", stage1=False
)

# %% [markdown]
# ## L_sup and L_dist during fine-tuning
#
# Per optimizer step, first seed. L_dist cannot reach 0: the targets are soft, and its floor
# is the entropy of p̂.

# %%
seed0 = config.seeds[0]
fig = plotting.loss_curves(
    {
        name: {
            part: students[name, seed0].train_history["step_metrics"][part]
            for part in ("loss_sup", "loss_dist")
        }
        for name in config.teachers
    }
)

# %% [markdown]
# ## The ensemble of the distilled models
#
# Paper (b)'s best system (SID 1) averages the three distilled models' similarity matrices
# (`evaluate_models` above scored it with the students, seed by seed).
# Each model scores the evaluation split on its own front end; the mean of the three
# caption × clip matrices is ranked as one model's would be.

# %%
records = reporting.read_ledger()
distillation.table(
    records,
    config,
    preset,
    stage1=False,
    ensemble_label="ensemble of the three",
)

# %% [markdown]
# In this notebook we have
#
# - written down L = L_sup + λ·L_dist and where each batch's targets come from;
# - trained on the start crop the teachers embedded, a departure from the paper's whole clips;
# - fine-tuned every stage-1 model of every seed on the Clotho-layout corpus with λ = 1, for
#   a fixed number of steps;
# - followed L_sup and L_dist during training;
# - scored each distilled model and the ensemble of the three. Page 04 sets them beside the
#   stage-1 models, the paper and λ.
