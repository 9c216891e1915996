# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Training the Transformer VQ-VAE
#
# *An autoencoder whose bottleneck is a short list of discrete codes, and a decoder that knows
# the speaker: the codes are left to carry what was said.*
#
# In this notebook we will
#
# - read the model: Transformer layers and strided convolutions in the encoder, an EMA codebook,
#   the straight-through estimator, temporal jitter, and a speaker-conditioned decoder;
# - train it on the unit-discovery and voice speech, with one seed per run and several seeds;
# - look at how much of the codebook the test set uses, and at the codes of one sentence.

# %% tags=["parameters"]
from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
seed: Optional[int] = None  # None keeps the preset's
max_steps: Optional[int] = None  # None: the preset's table_steps
workers: Optional[int] = None  # runs at once; None: one per core (GPU: 1)

# %%
import numpy as np
import pandas as pd

from audiorepro import plotting, reporting
from audiorepro.config import to_dict
from audiorepro.experiments import zerospeech as zs

cfg = zs.tables_config(preset, seed=seed, max_steps=max_steps)
model_cfg = cfg.model
reporting.config_table(model_cfg)

# %% [markdown]
# ## The model
#
# The encoder maps the features (B, T, F) to vectors $z_t$ at a quarter of the frame rate: a
# linear projection with sinusoidal positions, then twice a Transformer layer (Figure 1 of the
# paper: layer norm, multi-head self-attention, residual; layer norm, two linear layers with a
# ReLU, residual) followed by a convolution of stride 2.
#
# ```{literalinclude} ../../lib/audiorepro/models/vqvae.py
# :pyobject: TransformerLayer.forward
# ```
#
# Each $z_t$ is replaced by its nearest codebook vector $e_{c_t}$ (L2). The codebook is not
# trained by gradient descent but by exponential moving averages of the vectors assigned to
# each code, with Laplace smoothing of the counts; codes that stop being used are moved onto
# a vector of the current batch:
#
# ```{literalinclude} ../../lib/audiorepro/models/vqvae.py
# :pyobject: VectorQuantizerEMA._update
# ```
#
# The decoder gets $e_{c_t}$ through the straight-through estimator ($z + \mathrm{sg}(e - z)$:
# the value of $e$, the gradient of $z$) together with a learned embedding of the speaker, and
# reconstructs the features. The loss is the reconstruction error, plus $\gamma = 0.25$ times the
# commitment $\lVert z_t - \mathrm{sg}(e_{c_t})\rVert^2$, plus $\lambda$ times the temporal
# smoothing $\lVert z_t - z_{t+1}\rVert^2$ (Eq. 7-10). In training only, temporal jitter lets
# each frame take its neighbour's code with probability $p$ on each side (Eq. 11-13):
#
# ```{literalinclude} ../../lib/audiorepro/models/vqvae.py
# :pyobject: temporal_jitter
# ```

# %% [markdown]
# ## Training
#
# The training speech is every file of `train/unit` and `train/voice`, cut into segments; the
# speaker of each segment is its file-name prefix. Adam, as in the paper (the embedded preset
# uses a larger learning rate and `table_steps` = 500 steps, about two and a half epochs,
# since the model and the corpus are small; `units train` takes 1,200).
# Each seed sets the initial weights, the data order and the jitter draws; trained models are
# kept in the chapter's run store (`audiorepro.storage.RunStore`, keyed by the model and training
# sections, the seed and the content of the training features), so the next page evaluates these
# very models.

# %% [markdown]
# These three runs and the evaluation page's (every row of Tables 1-3, every seed, and the
# surprise language's main model) are independent: each seeds its own weights, data order
# and jitter draws. They all train here, side by side, one process per core
# (`zs.train_ahead`); below and on the next page they are loaded from the run store, each as
# it would have trained alone.

# %%
trained = zs.train_ahead(cfg, workers=workers)
print(f"trained {trained} runs; the others were in the run store")

# %%
runs = {}
for s in cfg.main_seeds:
    runs[s] = zs.train_vqvae(cfg, model_cfg, s)  # trained above: loaded
    h = runs[s].history
    print(
        f"seed {s}: {len(h['step'])} steps, final loss "
        f"{np.mean(h['loss'][-10:]):.2f}"
    )

# %%
for s, run in runs.items():
    reporting.record_result(
        "03_zerospeech",
        "02_train_vqvae",
        {
            "final_loss": float(np.mean(run.history["loss"][-10:])),
            "train_wall_time_s": float(run.history["wall_time_s"]),
        },
        preset=preset,
        seed=s,
        config=to_dict(model_cfg),
        tags={"row": "base", "language": "english"},
    )
fig = plotting.training_curves(
    runs[cfg.seed].history, smooth=10, title=f"seed {cfg.seed}"
)

# %% [markdown]
# Every term of the loss, and two signs of health, for the first seed (the table: every
# seed's last 25 steps): the reconstruction error, the commitment $\lVert z_t - \mathrm{sg}(e_{c_t})\rVert^2$ (before $\gamma$), the
# RMS of the encoder outputs $z$ (fixed at 1 when `pre_quant_norm` normalises them: the
# commitment cannot grow with their scale) and the number of distinct codes in each batch
# (a collapse onto a few codes shows as a dip). A run that has not flattened out by its
# last step is still learning.

# %%
terms = [
    "reconstruction",
    "commitment",
    "smoothing",
    "z_rms",
    "batch_codes",
]
h = runs[cfg.seed].history
for term in terms:
    curve = {"step": h["step"], "loss": h[term]}
    fig = plotting.training_curves(
        curve, smooth=25, title=f"{term}, seed {cfg.seed}"
    )
pd.DataFrame(
    {
        s: {t: float(np.mean(run.history[t][-25:])) for t in terms}
        for s, run in runs.items()
    }
).rename_axis("last 25 steps")

# %% [markdown]
# ## What the codes look like
#
# Encoding the English test set with the first seed's model: how many of the K codes does it
# use, and how evenly? The perplexity $2^{H}$ of the code distribution is the number of equally
# likely codes that would have the same entropy.

# %%
lang = zs.language_dir(cfg, "english")
test_feats = zs.load_features(lang, "test", "mfcc")
codes, vectors = zs.encode_files(runs[cfg.seed].model, test_feats)
pooled = np.concatenate(list(codes.values()))
usage = np.bincount(pooled, minlength=model_cfg.codebook_size)
p = usage[usage > 0] / usage.sum()
print(
    f"{(usage > 0).sum()} of {model_cfg.codebook_size} codes used, "
    f"perplexity {2 ** -(p * np.log2(p)).sum():.1f}"
)
order = np.argsort(-usage)
fig = plotting.bars(
    [str(i) for i in order],
    usage[order],
    ylabel="code frames",
    title="code usage, test set",
)

# %% [markdown]
# One full test sentence with its code sequence underneath (one code every 40 ms; runs of the
# same code are merged into one segment):

# %%
name = zs.read_bitrate_filelist(lang / "bitrate_filelist.txt")[0][
    0
].replace(".txt", "")
segments = zs.code_segments(
    codes[name], frame_shift=model_cfg.stride * 0.01
)
fig = plotting.spectrogram(
    zs.load_features(lang, "test", "logmel")[name],
    hop_s=0.01,
    tiers={"code": segments},
    title=f"{name} and its codes",
)
pd.DataFrame({"codes": [len(codes[name])], "segments": [len(segments)]})

# %% [markdown]
# In this notebook we have
#
# - read the Transformer VQ-VAE's encoder layer, EMA codebook update and temporal jitter in the
#   library's code;
# - trained the model with several seeds on untranscribed, multi-speaker speech and recorded
#   each run in the ledger;
# - measured how much of the codebook the test set uses and looked at the codes of one sentence.
