"""Audio I/O and feature front ends.

- :mod:`~audiorepro.features.audio`: load (downmix, resample), atomic 16-bit WAV save, header.
- :mod:`~audiorepro.features.passt_mel`: PaSST's 32 kHz, 128-band normalised log-mel front end.
- :mod:`~audiorepro.features.atst_mel`: ATST-Frame's 16 kHz, 64-band min-max scaled log-mel.
- :mod:`~audiorepro.features.speech`: log-Mel-80 and MFCC + Δ + ΔΔ (ZeroSpeech, AWE chapters).
- :mod:`~audiorepro.features.spectrogram`: linear magnitude spectrogram and Griffin-Lim.
"""

from audiorepro.features.atst_mel import ATST_SILENCE, AtstMel
from audiorepro.features.audio import AudioError, audio_info, load_audio, resample_type, save_audio
from audiorepro.features.passt_mel import (
    PasstMel,
    kaldi_mel_banks,
    kaldi_mel_scale,
    passt_mel_basis,
)
from audiorepro.features.spectrogram import (
    griffin_lim,
    linear_spectrogram,
    spectral_convergence,
)
from audiorepro.features.speech import (
    VALID_MFCC_DIMS,
    add_deltas,
    apply_cmvn,
    frame_params,
    log_mel,
    mfcc,
    mfcc_features,
    stft,
)

__all__ = [
    "ATST_SILENCE",
    "AtstMel",
    "VALID_MFCC_DIMS",
    "AudioError",
    "PasstMel",
    "add_deltas",
    "apply_cmvn",
    "audio_info",
    "frame_params",
    "griffin_lim",
    "kaldi_mel_banks",
    "kaldi_mel_scale",
    "linear_spectrogram",
    "load_audio",
    "log_mel",
    "mfcc",
    "mfcc_features",
    "passt_mel_basis",
    "resample_type",
    "save_audio",
    "spectral_convergence",
    "stft",
]
