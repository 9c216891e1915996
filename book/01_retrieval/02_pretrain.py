# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Pretraining the dual encoder on three corpora
#
# *PaSST and a transformer text encoder learn one space for clips and captions with the
# NT-Xent loss, on ClothoV2, AudioCaps and WavCaps together.*
#
# In this notebook we will
#
# - build the dual encoder: PaSST on log-mel snippets, a Hugging Face text encoder, two linear
#   projections into a 1024-d space;
# - look at the symmetric NT-Xent loss that pulls matching clips and captions together;
# - pretrain on the three corpora for every seed, and watch the loss fall;
# - measure text-to-audio retrieval on the ClothoV2 evaluation split (mAP@10, R@1/5/10).

# %% tags=["parameters"]
preset: str = "embedded"  # smoke | embedded | paper

# %%
import pandas as pd

from audiorepro import plotting, reporting
from audiorepro.experiments import retrieval

config = retrieval.load_config(preset)
data = retrieval.load_data(config)
reporting.config_table(config)

# %% [markdown]
# On a CPU the embedded preset trains each run on one thread (`train.torch_threads: 1`), and
# `train_ahead(..., "chapter")` trains every run of the chapter first, here, side by side, one
# per core; the cells below (and pages 03-04) read them back: stage 0 of both encoders, the
# pretraining of every seed, both fine-tunings and every ablation. Each run starts as soon as
# the runs it starts from are done, the longest remaining chain first, so no core waits for a
# page to end. A run's numbers do not depend on where it trained, since its thread count is
# part of its configuration. Where only one process runs (a GPU, `smoke`), it does nothing and
# each cell trains what it needs.

# %%
retrieval.train_ahead(config, data, "chapter")

# %% [markdown]
# ## The model
#
# Each clip's log-mel is cut into non-overlapping snippets as long as PaSST's time encoding
# (`snippet_s`), each snippet is embedded (the mean of PaSST's cls and dist tokens), and the
# snippets that contain real audio are averaged (§3.4). Captions are lower-cased, stripped of
# punctuation, tokenised, and embedded as the first token's hidden state (§2.2, §2.5). Linear
# projections map both into the shared space (§2.3). Where the text encoder is frozen
# (`smoke`, `embedded`), its features are first standardised with running per-dimension
# statistics (`model.text_norm: batch`, not in the paper): the same linear function class, but
# a projection that no longer has to undo the direction all captions share:
#
# ```{literalinclude} ../../lib/audiorepro/models/dual_encoder.py
# :pyobject: DualEncoder.encode_audio
# ```

# %%
model = retrieval.build_model(config, seed=config.seeds[0], data=data)
trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
print(
    model.audio_encoder.__class__.__name__,
    "+",
    model.text_encoder.name_or_path,
)
print(
    f"{trainable:,} trainable parameters of "
    f"{sum(p.numel() for p in model.parameters()):,}"
)

# %% [markdown]
# ## The loss
#
# With $C_{ij}$ the cosine similarity of clip $i$ and caption $j$ divided by the temperature
# $\tau$ (fixed at 0.05), the loss is the cross-entropy of each row (which caption belongs to
# this clip?) and each column (which clip does this caption describe?) against the identity
# (eq. 2). Two captions of the same clip in one batch are both positives. Under several
# processes the embeddings of the whole global batch are gathered first, so the negatives are
# the global batch:
#
# ```{literalinclude} ../../lib/audiorepro/losses/contrastive.py
# :pyobject: nt_xent
# ```

# %% [markdown]
# ## Stage 0: where the audio encoder starts
#
# The paper's PaSST starts from a checkpoint trained to tag AudioSet's 527 sound-event classes
# (§2.2), as do all its audio encoders. At the `paper` scale, `audio_pretrained: audioset`
# loads those released files. At the embedded scale there is no AudioSet, so stage 0 trains
# the analogue: each encoder tags the events of the Clotho-layout *development* clips (the
# scene generator knows which events sound when; a crop is labelled with the events that
# sound in it) and is scored on the *validation* clips. Neither split holds an evaluation clip.
# The weights are saved in the released checkpoint's file layout and loaded through the same
# `audio_pretrained` field. One run per encoder serves every seed, as one AudioSet checkpoint
# does in the paper.
#
# A caveat: the embedded captions are written from the very event classes stage 0 learns to
# tag, so the head start it gives retrieval is larger than what AudioSet gives on real
# captions.

# %%
stage0 = retrieval.stage0_table(
    config, data, ["passt", "cnn14"], page="02_pretrain", preset=preset
)
stage0
# %%
report = retrieval.stage0_report(retrieval.stage0_checkpoint(config, data))
fig = plotting.training_curves(
    {
        "step": report["history"]["steps"],
        "loss": report["history"]["losses"],
    },
    smooth=5,
    title="stage 0: PaSST tagging loss (binary cross-entropy)",
)
# %% [markdown]
# ## Pretraining
#
# Adam with one warm-up epoch and a cosine decay (§2.6), batches of captions drawn uniformly
# from the three corpora concatenated. At the end of every epoch and at the last step the model
# is scored on the ClothoV2 validation split, and the model kept is the one with the best
# validation mAP@10, as the paper does; the final weights are saved beside it (`select: final`
# loads them). A run of one epoch has a single evaluation point and skips it: its best is its
# final. Each seed's model is saved, so the next pages start from it; in the figure the dotted
# line marks the kept step.

# %%
models = {}
rows = []
for seed in config.seeds:
    models[seed] = retrieval.pretrain(config, seed, data)
    metrics = retrieval.evaluate_and_record(
        models[seed],
        config,
        data,
        page="02_pretrain",
        preset=preset,
        seed=seed,
        tags={"stage": "pretrain"},
    )
    rows.append(
        {"seed": seed, **{k: round(100 * v, 2) for k, v in metrics.items()}}
    )
history = models[config.seeds[0]].train_history
epoch_s = history["wall_time_s"] / max(1, history["final_epoch"])
print(
    f"one pretraining epoch: {epoch_s:.1f} s ({history['final_step']} "
    "steps in "
    "all)"
)
validation = history["validation"]
fig = plotting.training_curves(
    {
        "step": history["steps"],
        "loss": history["losses"],
        "eval_step": validation["steps"],
        "eval": [{"validation mAP@10": v} for v in validation["values"]],
    },
    smooth=5,
    title=f"pretraining, seed {config.seeds[0]}",
)
fig.axes[0].axvline(history["best_step"], color="grey", ls=":", lw=1)

# %% [markdown]
# ## Retrieval after pretraining
#
# Text-to-audio on the ClothoV2 evaluation split, in percent, beside what a random ranking
# would score.

# %%
table = pd.DataFrame(rows)
n_clips = len(data.eval_set.keys)
print(f"{n_clips} evaluation clips, {len(data.eval_set.captions)} queries")
print(
    f"chance: R@1 {100 / n_clips:.2f}, R@10 "
    f"{100 * min(10, n_clips) / n_clips:.2f}"
)
table

# %% [markdown]
# In this notebook we have
#
# - built the PaSST + text-transformer dual encoder with linear projections to a shared space;
# - seen the symmetric NT-Xent loss with its multi-positive mask and global-batch negatives;
# - pretrained it on ClothoV2, AudioCaps and WavCaps for every seed and saved the models;
# - measured text-to-audio retrieval on the ClothoV2 evaluation split.
