# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Audio front ends
#
# *What each chapter's models actually see: the PaSST log-mel, log-Mel-80, MFCC-39 and the
# linear spectrogram, shown on a signal whose content is known exactly.*
#
# In this notebook we will
#
# - build a test signal of three labelled parts: a chirp, a vowel-like harmonic sound and noise;
# - compute PaSST's front end (chapters 01 and 02) and see what its training-time jitter does;
# - load audio at another sampling rate and compute the ZeroSpeech / AWE front ends,
#   log-Mel-80 and MFCC + Δ + ΔΔ (chapters 03 and 04);
# - invert a linear magnitude spectrogram with Griffin-Lim and listen to the round trip, which
#   is how chapter 03's codebook inverter makes audio.

# %% tags=["parameters"]
from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
seed: Optional[int] = None  # seed of the noise segment; None: preset
griffin_lim_iters: Optional[int] = None  # Griffin-Lim passes; None: preset

# %%
import tempfile
from pathlib import Path

import numpy as np
import torch
from IPython.display import Audio, display

from audiorepro import features, plotting, reporting
from audiorepro.config import load_preset
from audiorepro.paths import repo_root
from audiorepro.repro import seed_everything
from audiorepro.signals import SignalDemoConfig, demo_signal

cfg = load_preset(
    SignalDemoConfig,
    repo_root() / "book/00_data/presets",
    preset,
    seed=seed,
    griffin_lim_iters=griffin_lim_iters,
)
seed_everything(cfg.seed)
reporting.config_table(cfg)

# %% [markdown]
# ## A signal whose content we know
#
# Three one-second parts separated by silence: a linear chirp sweeping from 100 Hz to 8 kHz, a
# vowel made the way the source-filter model of speech says voices are made (a 120 Hz pulse
# train through three formant resonators at 730, 1090 and 2440 Hz, an /a/), and white noise.
# Each part should look unmistakable in every front end below.

# %%
wav, segments = demo_signal(cfg)
tiers = {"part": segments}
print(f"{wav.size} samples at {cfg.sr} Hz = {wav.size / cfg.sr:.2f} s")
fig = plotting.waveform(wav, sr=cfg.sr, title="test signal")
display(Audio(wav, rate=cfg.sr))

# %% [markdown]
# ## PaSST's front end
#
# PaSST (chapter 01) takes 32 kHz audio and computes 128 log-mel bands with Kaldi's triangular
# filters between 0 and 15 kHz, from a 25 ms Hann window every 10 ms after a pre-emphasis
# filter. The log energies are shifted and scaled by the approximate global mean and standard
# deviation of AudioSet, $(\log(\text{mel} + 10^{-5}) + 4.5) / 5$, so values sit around zero.
# Here is the library's forward pass, which follows the official `AugmentMelSTFT` step by step:
#
# ```{literalinclude} ../../lib/audiorepro/features/passt_mel.py
# :pyobject: PasstMel.forward
# ```

# %%
passt_mel = features.PasstMel().eval()
with torch.no_grad():
    mel = passt_mel(torch.from_numpy(wav)[None])[0]  # (128, T)
print(
    f"PaSST log-mel: {tuple(mel.shape)} (bands, frames); mean "
    f"{mel.mean():.2f}, std {mel.std():.2f}"
)
fig = plotting.spectrogram(
    mel.T.numpy(),
    hop_s=0.01,
    tiers=tiers,
    title="PaSST log-mel (eval mode)",
)

# %% [markdown]
# The chirp is a rising line that bends because the mel scale is logarithmic above about 1 kHz;
# the vowel shows its harmonics at the bottom and the formant envelope across them; the noise
# fills every band.
#
# In training mode the front end moves its band edges at random on every call (the lower edge
# up by 0 to 9 Hz, the upper one anywhere between 14 and 16 kHz), a cheap augmentation. Because
# the bands are spaced evenly on the mel scale between the two edges, moving an edge moves every
# band a little, so two training-mode calls on the same audio differ wherever the audio has
# energy, not only in the top bands. The silences between the parts do not change at all. Compare
# the mean differences per part below with the spread of the log-mel values (standard deviation
# about 1.2, printed above).

# %%
passt_mel.train()
with torch.no_grad():
    a, b = (passt_mel(torch.from_numpy(wav)[None])[0] for _ in range(2))
passt_mel.eval()
change = (a - b).abs()  # (128, T) absolute change between the two calls
for label, start, end in segments:
    part = change[:, int(start / 0.01) : int(end / 0.01)]
    print(f"{label}: mean |difference| {part.mean():.3f}")
fig = plotting.spectrogram(
    (a - b).T.numpy(),
    hop_s=0.01,
    title="two training-mode calls, difference",
)

# %% [markdown]
# ## Loading audio at another rate, and the speech front ends
#
# The speech chapters work at 16 kHz. `load_audio` reads any file soundfile can read, mixes it
# down to mono and resamples it to the rate asked for, and refuses (with the file's name) audio
# that is missing, unreadable, empty or not finite. We write the test signal to a 32 kHz file
# and read it back at 16 kHz.

# %%
with tempfile.TemporaryDirectory() as tmp:
    path = features.save_audio(Path(tmp) / "test_signal.wav", wav, cfg.sr)
    speech_wav, sr = features.load_audio(path, sr=cfg.speech_sr)
print(f"read back {speech_wav.size} samples at {sr} Hz")

# %% [markdown]
# Chapter 03 compares two inputs to the VQ-VAE, as the ZeroSpeech paper does: 80 log-mel bands
# and 13 MFCCs with their first and second time derivatives (Δ, ΔΔ), both from 25 ms windows
# every 10 ms. The MFCCs are a decorrelated, smoothed summary of the log-mel envelope: they keep
# the formant shape of the vowel and drop the fine harmonic detail. Chapter 04 uses the same
# MFCCs (39 or 36 dimensions).

# %%
logmel80 = features.log_mel(speech_wav, sr=sr, n_mels=80)  # (T, 80)
mfcc39 = features.mfcc_features(
    speech_wav, sr=sr, dim=39, cmvn=True
)  # (T, 39)
print(f"log-Mel-80 {logmel80.shape}, MFCC-39 {mfcc39.shape} (frames, dims)")
fig = plotting.spectrogram(
    logmel80, hop_s=0.01, tiers=tiers, title="log-Mel-80 (16 kHz)"
)
fig = plotting.spectrogram(
    mfcc39,
    hop_s=0.01,
    ylabel="coefficient",
    tiers=tiers,
    title="MFCC + Δ + ΔΔ (CMVN)",
)

# %% [markdown]
# ## A spectrogram back to sound: Griffin-Lim
#
# A magnitude spectrogram has no phase. Griffin-Lim finds a phase consistent with the
# magnitudes by alternating between the time and frequency domains; chapter 03's inverter
# predicts a linear magnitude spectrogram from discovered units and uses exactly this step to
# make audio. The spectral convergence $\lVert |S| - |\hat S| \rVert_F / \lVert S \rVert_F$
# measures how well the reconstruction's magnitudes match (0 is perfect).

# %%
mag = features.linear_spectrogram(speech_wav, sr=sr)  # (T, n_fft // 2 + 1)
recon = features.griffin_lim(
    mag, n_iter=cfg.griffin_lim_iters, sr=sr, length=speech_wav.size
)
convergence = features.spectral_convergence(
    mag, features.linear_spectrogram(recon, sr=sr)
)
print(
    f"spectral convergence after {cfg.griffin_lim_iters} iterations: "
    f"{convergence:.3f}"
)
fig = plotting.spectrogram(
    np.log(mag + 1e-4),
    hop_s=0.01,
    ylabel="FFT bin",
    tiers=tiers,
    title="linear magnitude (log scale)",
)
display(Audio(speech_wav, rate=sr), Audio(recon, rate=sr))

# %% [markdown]
# The first player is the original at 16 kHz, the second its Griffin-Lim reconstruction: the
# chirp and the noise come back nearly unchanged, and the vowel keeps its pitch and colour but
# gains the slightly phasey quality typical of Griffin-Lim, because a pulse train's phases are
# aligned and the algorithm only finds some consistent phase.
#
# The number goes into the results ledger with the preset, the seed and the environment, like
# every number in this book.

# %%
reporting.record_result(
    "00_data",
    "01_audio_features",
    {"griffin_lim_spectral_convergence": convergence},
    preset=preset,
    seed=cfg.seed,
    config={
        "griffin_lim_iters": cfg.griffin_lim_iters,
        "segment_s": cfg.segment_s,
    },
)

# %% [markdown]
# In this notebook we have
#
# - built a chirp–vowel–noise test signal and looked at it through every front end the book
#   uses;
# - computed PaSST's normalised Kaldi log-mel and seen its training-time band-edge jitter act on
#   the top bands;
# - read audio back at 16 kHz and computed log-Mel-80 and MFCC-39 for the speech chapters;
# - inverted a linear magnitude spectrogram with Griffin-Lim, listened to it, and recorded how
#   close it came.
