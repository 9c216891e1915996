# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # What the ensemble believes: estimated correspondences
#
# *Contrastive training assumes a caption describes its own clip and no other. The ensemble of
# stage-1 models gives every caption a graded belief over all clips instead.*
#
# In this notebook we will
#
# - let each stage-1 model embed every fine-tuning audio and caption once, at the crop stage 2
#   trains on, and store the embeddings keyed by audio id and caption text (O(N·D) memory,
#   never N × N);
# - compare, for a few clips and their captions, the binary assumption with the ensemble's
#   Ĉ = (1/M) Σ_m C^m and the targets p̂_c and p̂_a at τ = 0.05;
# - measure how much of p̂ falls on other clips, over the whole set and in a training batch,
#   and whether it lands where a caption really does describe another clip;
# - count the training captions that truly describe more than one clip;
# - list, for a clip, the other training captions the ensemble believes describe it, and listen.

# %% tags=["parameters"]
preset: str = "embedded"  # smoke | embedded | paper

# %%
import numpy as np
import pandas as pd
from IPython.display import Audio, display

from audiorepro import plotting, reporting
from audiorepro.config import to_dict
from audiorepro.experiments import distillation

pd.set_option("display.max_colwidth", None)
config = distillation.load_config(preset)
data = distillation.load_data(config.retrieval)
seed = config.seeds[0]
items = distillation.finetune_items(config, data)
ensemble = distillation.teacher_ensemble(config, seed, data, items)
print(
    f"seed {seed}: {ensemble.num_teachers} teachers "
    f"({', '.join(ensemble.names)}), "
    f"{len(ensemble.audio_ids)} clips and {len(ensemble.captions)} "
    "distinct "
    "captions, "
    f"fused rows {tuple(ensemble.audio.shape)} + "
    f"{tuple(ensemble.caption.shape)}"
)

# %% [markdown]
# ## Teacher embeddings
#
# Each teacher's store holds one row per clip and one per distinct caption text, with the
# caption preprocessing it applied, so that a student with other preprocessing, another
# projection size or training items the teachers never saw is refused before it trains. Each
# clip is embedded as stage 2 will see it: its first `finetune_max_audio_s` seconds (the
# store's `crop_frames`), so every target is computed on the audio the student hears. The
# ensemble joins the M stores into fused rows, each teacher's part L2-normalised and scaled by
# 1/√M, so that any block of Ĉ is one matrix product:
#
# ```{literalinclude} ../../lib/audiorepro/distillation/teachers.py
# :pyobject: TeacherEnsemble.similarity
# ```

# %%
ensemble.metadata[0]

# %% [markdown]
# ## Binary assumption versus the ensemble
#
# A few clips against all of their captions, as in a training batch. Left: the binary
# correspondences of stage 1 (a caption describes its own clip only). Middle: Ĉ. Right: p̂_c,
# the softmax of Ĉ/τ over the captions of this block, each clip's row summing to 1.

# %%
by_clip: dict[str, list[str]] = {}
for item in items:
    by_clip.setdefault(item.key, []).append(item.caption)
clips = list(by_clip)[: config.analysis_clips]
captions = list(dict.fromkeys(c for clip in clips for c in by_clip[clip]))
binary = np.array(
    [[float(c in by_clip[clip]) for c in captions] for clip in clips]
)
c_hat = ensemble.similarity_of(clips, captions)  # (clips, captions)
p_audio, p_caption = distillation.soft_targets(c_hat, config.target_tau)
fig, axes = plotting.plt.subplots(1, 3, figsize=(13, 3.2))
labels = [clip.split("/")[-1] for clip in clips]
panels = (binary, c_hat.numpy(), p_caption.numpy())
for ax, matrix, title in zip(
    axes, panels, ("binary p_c", "Ĉ (mean cosine)", "p̂_c"), strict=True
):
    plotting.similarity_heatmap(
        matrix,
        row_labels=labels,
        ax=ax,
        title=title,
        xlabel="caption",
        ylabel="clip",
    )
fig.tight_layout()

# %% [markdown]
# The captions, in the heatmaps' column order:

# %%
pd.DataFrame(
    {
        "caption": captions,
        "written for": [
            next(clip for clip in clips if c in by_clip[clip]).split("/")[
                -1
            ]
            for c in captions
        ],
    }
)

# %% [markdown]
# ## How much belief leaves the paired clip
#
# Over the whole fine-tuning set, computed in blocks of `analysis_block_size` rows so the
# memory stays bounded whatever N is: for every caption, p̂_a over *all* training clips. The
# binary assumption puts all mass on the caption's own clip. Where the same caption text was
# written for several clips, the truth is spread over those clips, and a good estimate should
# put its mass there.

# %%
top = distillation.top_matches(
    ensemble,
    k=min(10, len(ensemble.audio_ids)),
    rows="caption",
    block_size=config.analysis_block_size,
    tau=config.target_tau,
)
clips_of_caption: dict[str, set[str]] = {}
for item in items:
    clips_of_caption.setdefault(item.caption, set()).add(item.key)
rows = []
for j, caption in enumerate(ensemble.captions):
    own = clips_of_caption[caption]
    probs = top.probabilities[j]
    keys = [ensemble.audio_ids[int(i)] for i in top.indices[j]]
    mass_own = sum(
        float(p) for p, key in zip(probs, keys, strict=True) if key in own
    )
    rows.append(
        {
            "caption": caption,
            "clips with this caption": len(own),
            "top-1 is a paired clip": keys[0] in own,
            "p̂_a on paired clips (top 10)": mass_own,
        }
    )
beliefs = pd.DataFrame(rows)
shared = beliefs["clips with this caption"] > 1
summary = pd.DataFrame(
    {
        "captions": [int((~shared).sum()), int(shared.sum())],
        "top-1 is a paired clip (%)": [
            100 * beliefs.loc[~shared, "top-1 is a paired clip"].mean(),
            100 * beliefs.loc[shared, "top-1 is a paired clip"].mean(),
        ],
        "mean p̂_a on paired clips": [
            beliefs.loc[~shared, "p̂_a on paired clips (top 10)"].mean(),
            beliefs.loc[shared, "p̂_a on paired clips (top 10)"].mean(),
        ],
    },
    index=["caption of one clip", "caption of several clips"],
).round(3)
summary

# %%
n_clips = len(ensemble.audio_ids)
print(
    "A caption's clip picked at random is top-1 with probability "
    f"{100 / n_clips:.2f} % "
    f"({n_clips} clips); a uniform p̂_a puts {1 / n_clips:.4f} on each "
    "clip. "
    "The ensemble's "
    "top-1 is a paired clip for "
    f"{100 * beliefs['top-1 is a paired clip'].mean():.2f} % of "
    "the captions."
)

# %% [markdown]
# Under the binary assumption both rows would read 100 % and 1.0. Weak teachers give a flat
# p̂ (close to the uniform value), strong ones a peaked p̂ on a few clips. What the ensemble puts
# elsewhere is what stage 2 teaches the students: soft credit to clips that share the sound
# the caption names.
#
# ## The targets of a training batch
#
# Stage 2 never sees the softmax over all clips: p̂_a and p̂_c normalise over the clips and
# captions of one batch. In random batches of the stage-2 batch size, how much of their mass
# leaves the pairs that L_sup's one-hot targets hold? 0 means L_dist repeats L_sup; the
# uniform level means the targets know nothing. Page 04 reads these numbers back when it asks
# why λ = 1 does or does not beat λ = 0.

# %%
targets = distillation.target_summary(config, seed, data, ensemble)
paired_mass = beliefs["p̂_a on paired clips (top 10)"].mean()
_ = reporting.record_result(
    distillation.CHAPTER,
    "02_correspondences",
    targets
    | {
        "top1_paired": float(beliefs["top-1 is a paired clip"].mean()),
        "mass_on_paired": float(paired_mass),
    },
    preset=preset,
    seed=seed,
    config=to_dict(config),
    tags={"analysis": "beliefs"},
)
pd.Series(targets).round(4)

# %% [markdown]
#
# ## Captions that fit other clips
#
# Paper (b) §2 rests on captions that describe more than one clip. How many are there in the
# training captions? Two kinds can be counted: captions written word for word for several
# clips (the corpus proves those), and, in the embedded corpus, the captions its generator
# drew from a table of *generic* descriptions that fit many clips ("several sounds happen one
# after another"). These are the cases where a one-hot target is wrong and a good p̂ can be
# right:

# %%
distillation.captions_of_several_clips(config, data)

# %% [markdown]
# For one clip, the training captions *written for other clips* that the ensemble believes
# describe it best, with p̂_c over all training captions. Listen to the clip, then to the clip
# each caption was written for.

# %%
clip = clips[0]
print("clip:", clip, "— its own captions:")
for c in by_clip[clip]:
    print("   ", c)
audio_of = {i.key: i.audio for i in items}
display(
    Audio(distillation.load_audio(audio_of[clip], sr=16000)[0], rate=16000)
)
others = distillation.captions_for_clip(
    ensemble, clip, k=3, exclude=by_clip[clip], tau=config.target_tau
)
for caption, c_value, p_value in others:
    source = sorted(clips_of_caption[caption])[0]
    print(
        f"Ĉ = {c_value:.3f}, p̂_c = {p_value:.4f}: {caption!r} (written "
        "for "
        f"{source})"
    )
    display(
        Audio(
            distillation.load_audio(audio_of[source], sr=16000)[0],
            rate=16000,
        )
    )

# %% [markdown]
# ## Memory of the full-matrix analysis
#
# `top_matches` never holds more than a `block_size` × `block_size` block of Ĉ. The benchmark
# `bench/bench_distillation.py` (`make bench`) measures its peak memory for 20,000 clips ×
# 100,000 captions against the bound of 1.5 GB; `make bench` keeps the figure.

# %% [markdown]
# In this notebook we have
#
# - embedded every fine-tuning clip and caption once per stage-1 model and joined the stores
#   into one lookup of Ĉ;
# - compared the binary assumption with the ensemble's Ĉ, p̂_c and p̂_a for a few clips;
# - measured, blockwise over the whole set, how much belief leaves the paired clip and whether
#   it lands on clips that share the caption, and how far a training batch's targets are from
#   the one-hot ones;
# - counted the training captions shared word for word by several clips or generic;
# - listened to a clip next to the clips of captions the ensemble believes also describe it.
