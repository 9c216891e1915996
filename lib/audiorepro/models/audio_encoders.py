"""Audio encoders by name, for presets: ``audio_encoder("passt_tiny", img_size=(128, 400))``.

Every encoder maps a (B, 1, F, T) log-mel batch to ``(logits, features)``, exposes the feature
size as ``num_features`` (and ``embed_dim``) and the longest input in frames as ``max_frames``
(``None`` for the CNNs, which take any length; the time-encoding length for PaSST, beyond which
audio goes through :func:`~audiorepro.models.snippets.embed_snippets`).
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from audiorepro.models.panns import cnn10, cnn14
from audiorepro.models.passt import passt_l, passt_n, passt_s, passt_s20, passt_small, passt_tiny

__all__ = ["AUDIO_ENCODERS", "audio_encoder"]

AUDIO_ENCODERS: dict[str, Callable[..., nn.Module]] = {
    "passt_n": passt_n,
    "passt_s": passt_s,
    "passt_l": passt_l,
    "passt_s20": passt_s20,
    "passt_tiny": passt_tiny,
    "passt_small": passt_small,
    "cnn14": cnn14,
    "cnn10": cnn10,
}


def audio_encoder(name: str, **kwargs) -> nn.Module:
    """Build the audio encoder ``name`` (a key of :data:`AUDIO_ENCODERS`) with its constructor
    arguments ``kwargs`` (PaSST: ``img_size``, ``num_classes``, ``s_patchout_t``, ...; CNNs:
    ``mel_bins``, ``classes_num``, ``base_channels``)."""
    if name not in AUDIO_ENCODERS:
        raise ValueError(f"unknown audio encoder {name!r}; known: {sorted(AUDIO_ENCODERS)}")
    return AUDIO_ENCODERS[name](**kwargs)
