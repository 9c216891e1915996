# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # From units back to speech: the codebook inverter
#
# *If the codes carry what was said and the target voice is learned separately, any speaker's
# utterance can be re-spoken by the target voice.*
#
# In this notebook we will
#
# - train the paper's codebook inverter (multiscale convolutions and Transformer layers) to map
#   the VQ-VAE's codebook vectors of the target voice `V001` to linear magnitude spectrograms;
# - resynthesise held-out `V001` speech from its codes with Griffin-Lim and compare it with the
#   original;
# - convert test sentences of unseen speakers into the voice of `V001`;
# - add the converted sentences to the ZeroSpeech submission.

# %% tags=["parameters"]
from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
seed: Optional[int] = None  # None keeps the preset's

# %%
import numpy as np
import pandas as pd
from IPython.display import Audio, display

from audiorepro import plotting, reporting
from audiorepro.config import replace, to_dict
from audiorepro.experiments import zerospeech as zs

cfg = zs.tables_config(preset, seed=seed)
lang = zs.language_dir(cfg, "english")
vqvae = zs.train_vqvae(
    cfg, cfg.model, cfg.seed
)  # the main model (from the run store)
print(f"VQ-VAE from the run store: {vqvae.from_cache}")

# %% [markdown]
# ## The inverter
#
# Each codebook vector is repeated $r = 4$ times to reach the 10 ms frame rate of the
# spectrogram; sinusoidal positions let the model tell the copies apart (Figure 4 of the paper):
#
# ```{literalinclude} ../../lib/audiorepro/models/inverter.py
# :pyobject: CodebookInverter.forward
# ```
#
# It is trained on the voice set of the target speaker only, with the L2 loss on the linear
# magnitudes (Eq. 14). The last files of that voice are held out to listen to unseen speech.

# %%
voice_files = sorted(
    n
    for n in zs.load_features(lang, "train/voice", "mfcc")
    if n.startswith(cfg.target_voice)
)
holdout = voice_files[-cfg.n_examples :]
inverter = zs.train_inverter(
    cfg, vqvae, cfg.seed, holdout=holdout, progress="lines"
)
fig = plotting.training_curves(
    inverter.history, smooth=10, title="inverter training loss"
)

# %% [markdown]
# ## Resynthesis of held-out target-voice speech
#
# For each held-out file: the original, Griffin-Lim applied to its *true* magnitudes (the best
# the phase reconstruction can do), and Griffin-Lim applied to the magnitudes the inverter
# predicts from the codes. The spectral convergence
# $\lVert |S| - |\hat S|\rVert_F / \lVert |S| \rVert_F$ of the prediction measures how close
# the magnitudes are (0 is perfect).

# %%
mfcc_voice = zs.load_features(lang, "train/voice", "mfcc")
convergence = []
for name in holdout:
    wav, sr = zs.load_audio(lang / "train/voice" / f"{name}.wav", sr=16000)
    true_mag = zs.linear_spectrogram(wav, sr=sr)
    resyn, mag, codes = zs.resynthesize(
        vqvae.model,
        inverter.model,
        mfcc_voice[name],
        len(wav),
        cfg.griffin_lim_iters,
    )
    convergence.append(
        zs.spectral_convergence(true_mag, mag[: len(true_mag)])
    )
    oracle = zs.griffin_lim(
        true_mag, n_iter=cfg.griffin_lim_iters, sr=sr, length=len(wav)
    )
    print(
        f"{name}: {len(codes)} codes, spectral convergence "
        f"{convergence[-1]:.3f}"
    )
    display(
        Audio(wav, rate=sr), Audio(oracle, rate=sr), Audio(resyn, rate=sr)
    )
    fig = plotting.spectrogram(
        np.log(true_mag + 1e-4),
        hop_s=0.01,
        ylabel="FFT bin",
        title=f"{name}: true",
    )
    fig = plotting.spectrogram(
        np.log(mag + 1e-4),
        hop_s=0.01,
        ylabel="FFT bin",
        title=f"{name}: from codes",
    )

# %%
record = reporting.record_result(
    "03_zerospeech",
    "04_inverter",
    {"spectral_convergence": float(np.mean(convergence))},
    preset=preset,
    seed=cfg.seed,
    config=to_dict(inverter.model.cfg),
    tags={
        "row": "inverter",
        "language": "english",
        "voice": cfg.target_voice,
    },
)
print(
    f"mean spectral convergence on held-out {cfg.target_voice} files: "
    f"{np.mean(convergence):.3f}"
)

# %% [markdown]
# ## Voice conversion
#
# The synthesis list names test sentences of held-out speakers and the voice to re-speak them
# in. The entries for `V001` go through the VQ-VAE's encoder and the `V001` inverter: whatever
# of the source speaker survives in the codes, the decoder side only knows `V001`.

# %%
targets = zs.synthesis_targets(lang, cfg.target_voice)
test_mfcc = zs.load_features(lang, "test", "mfcc")
converted = {}
for k, (name, out_name) in enumerate(targets):
    wav, sr = zs.load_audio(lang / "test" / f"{name}.wav", sr=16000)
    converted[out_name], mag, _ = zs.resynthesize(
        vqvae.model,
        inverter.model,
        test_mfcc[name],
        len(wav),
        cfg.griffin_lim_iters,
    )
    if k < cfg.n_examples:
        print(f"{name} -> {out_name}")
        display(Audio(wav, rate=sr), Audio(converted[out_name], rate=sr))
        fig = plotting.spectrogram(
            np.log(mag + 1e-4),
            hop_s=0.01,
            ylabel="FFT bin",
            title=f"{out_name}",
        )

# %% [markdown]
# The synthesis list also names other target voices (English has `V002` as well). Each gets an
# inverter of its own, trained the same way on all of its voice files, for its entries:

# %%
for voice in zs.synthesis_voices(lang):
    if voice != cfg.target_voice:
        other = zs.train_inverter(
            replace(cfg, target_voice=voice), vqvae, cfg.seed
        )
        for name, out_name in zs.synthesis_targets(lang, voice):
            converted[out_name] = zs.resynthesize(
                vqvae.model,
                other.model,
                test_mfcc[name],
                None,
                cfg.griffin_lim_iters,
            )[0]
print(
    f"{len(converted)} converted sentences for voices "
    f"{zs.synthesis_voices(lang)}"
)

# %% [markdown]
# The converted sentences join the submission folder written by the previous page, named by the
# target voice and the test file's utterance id.

# %%
codes, vectors = zs.encode_files(vqvae.model, test_mfcc)
submission = zs.export_submission(
    zs.submission_dir(),
    "english",
    codes,
    vectors=vectors,
    wavs=converted,
    hyperparameters=to_dict(vqvae.model.cfg),
)
wavs = sorted((submission / "2019/english/test").glob("*.wav"))
pd.DataFrame({"wav files": [len(wavs)], "embedding files": [len(codes)]})

# %% [markdown]
# In this notebook we have
#
# - trained the codebook inverter on the target voice's speech encoded by the VQ-VAE;
# - resynthesised held-out target-voice speech from its codes and measured how close the
#   predicted magnitudes are;
# - converted test sentences of unseen speakers into the target voice (and the other voices of
#   the synthesis list);
# - completed the ZeroSpeech 2019 submission with the converted audio.
