"""Audio I/O and feature front ends.

- :mod:`~audiorepro.features.audio`: load (downmix, resample), atomic 16-bit WAV save, header.
- :mod:`~audiorepro.features.passt_mel`: PaSST's 32 kHz, 128-band normalised log-mel front end.
- :mod:`~audiorepro.features.atst_mel`: ATST-Frame's 16 kHz, 64-band min-max scaled log-mel.
- :mod:`~audiorepro.features.speech`: log-Mel-80 and MFCC + Δ + ΔΔ (ZeroSpeech, AWE chapters).
- :mod:`~audiorepro.features.spectrogram`: linear magnitude spectrogram and Griffin-Lim.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from audiorepro.features.atst_mel import ATST_SILENCE, AtstMel
    from audiorepro.features.audio import (
        AudioError,
        audio_info,
        load_audio,
        resample_type,
        save_audio,
    )
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

# The names are imported on first use (PEP 562), so that a module that needs one front end
# (the models import ``atst_mel``, plain torch) does not pull in librosa, scipy and soundfile:
# the paper-size models then import with torch, numpy, pyyaml and safetensors alone
# (``bench/gpu_check.py`` on a bare GPU machine).
_MODULE_OF = {
    "ATST_SILENCE": "atst_mel",
    "AtstMel": "atst_mel",
    "AudioError": "audio",
    "audio_info": "audio",
    "load_audio": "audio",
    "resample_type": "audio",
    "save_audio": "audio",
    "PasstMel": "passt_mel",
    "kaldi_mel_banks": "passt_mel",
    "kaldi_mel_scale": "passt_mel",
    "passt_mel_basis": "passt_mel",
    "griffin_lim": "spectrogram",
    "linear_spectrogram": "spectrogram",
    "spectral_convergence": "spectrogram",
    "VALID_MFCC_DIMS": "speech",
    "add_deltas": "speech",
    "apply_cmvn": "speech",
    "frame_params": "speech",
    "log_mel": "speech",
    "mfcc": "speech",
    "mfcc_features": "speech",
    "stft": "speech",
}


def __getattr__(name: str) -> Any:
    """Import the submodule that defines ``name`` on first access."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


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
