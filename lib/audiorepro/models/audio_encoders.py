"""Audio encoders by family, for the dual encoders of chapters 01 and 02.

:class:`AudioEncoderConfig` names an encoder family and its settings; :data:`AUDIO_ENCODERS` maps
each family to the function that builds it; :func:`build_audio_encoder` returns the module, its
feature size and the snippet length it embeds long audio with.

Every encoder maps a (B, 1, F, T) log-mel batch to ``(logits, features)`` and exposes the
feature size as ``num_features``. PaSST and ATST-Frame have a time encoding of ``snippet_s``;
longer audio goes through :func:`~audiorepro.models.snippets.embed_snippets`. The CNNs and
MobileNet take any length in one pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from audiorepro.config import ConfigError, field

__all__ = [
    "AUDIO_ENCODERS",
    "FRAMES_PER_SECOND",
    "AudioEncoderConfig",
    "MelBinPool",
    "build_audio_encoder",
]

FRAMES_PER_SECOND = 100  # PaSST log-mel: 10 ms hop


@dataclasses.dataclass(frozen=True)
class AudioEncoderConfig:
    """Which audio encoder, and its settings (paper (a) Table 2; paper (b) §4.2)."""

    audio_encoder: str = field(
        "passt",
        help="passt | cnn14 | cnn10 (paper Table 2) | atst | mobilenet (chapter 02, paper (b) §4.2).",
    )
    passt_variant: str = field("n", help="PaSST configuration: n | s | l | s20 | tiny | small.")
    snippet_s: float = field(
        10.0, help="PaSST positional-encoding length = snippet length (§3.4: 10 s)."
    )
    s_patchout_t: int | None = field(
        None, help="Structured patchout, time columns (None: the variant's; Table 2)."
    )
    s_patchout_f: int | None = field(
        None, help="Structured patchout, frequency rows (None: the variant's; Table 2)."
    )
    atst_variant: str = field(
        "base", help="ATST-Frame configuration: base (paper (b)) | small | tiny."
    )
    atst_freq_warp: float = field(
        0.1, help="ATST frequency warping: largest share of the top mel bins dropped (§4.2.2)."
    )
    mobilenet_variant: str = field(
        "mn40_as_ext", help="EfficientAT MobileNetV3: mn40_as_ext (paper (b)) | mn10 | mn01 ..."
    )
    cnn_base_channels: int = field(
        64, help="CNN14/CNN10 channels of the first block (PANNs: 64; smaller on CPU)."
    )
    cnn_mel_bins: int = field(
        64,
        help="Mel bands the CNNs see (PANNs: 64); the 128 PaSST bands are averaged in pairs.",
    )

    def __post_init__(self) -> None:
        if self.audio_encoder not in AUDIO_ENCODERS:
            raise ConfigError(
                f"audio_encoder: expected {' | '.join(AUDIO_ENCODERS)}, got {self.audio_encoder!r}"
            )

    @property
    def front_end(self) -> str:
        """The log-mel the audio encoder takes: ``atst`` (64 bands, 16 kHz) or ``passt``."""
        return "atst" if self.audio_encoder == "atst" else "passt"

    @property
    def snippet_frames(self) -> int:
        """Snippet length in log-mel frames."""
        return int(round(self.snippet_s * FRAMES_PER_SECOND))


class MelBinPool(nn.Module):
    """Averages groups of adjacent mel bands before an encoder: 128 PaSST bands → 64 for a CNN
    built, as PANNs, for 64 (an approximation of PANNs' own 64-band front end)."""

    def __init__(self, encoder: nn.Module, factor: int) -> None:
        super().__init__()
        if factor < 1 or 128 % factor:
            raise ValueError(f"mel pooling factor must divide 128, got {factor}")
        self.encoder = encoder
        self.factor = factor
        self.num_features = encoder.num_features

    def forward(self, x: torch.Tensor) -> Any:
        """(B, 1, 128, T) → the encoder's output on (B, 1, 128 / factor, T)."""
        pooled = torch.nn.functional.avg_pool2d(x, (self.factor, 1))  # (B, 1, F', T)
        return self.encoder(pooled)


Built = tuple[nn.Module, int, int | None]


def _passt(cfg: AudioEncoderConfig) -> Built:
    from audiorepro.models.passt import passt

    overrides: dict[str, Any] = {"img_size": (128, cfg.snippet_frames), "num_classes": 0}
    if cfg.s_patchout_t is not None:
        overrides["s_patchout_t"] = cfg.s_patchout_t
    if cfg.s_patchout_f is not None:
        overrides["s_patchout_f"] = cfg.s_patchout_f
    model = passt(cfg.passt_variant, **overrides)
    return model, int(model.num_features), cfg.snippet_frames


def _cnn(make_name: str) -> Callable[[AudioEncoderConfig], Built]:
    def build(cfg: AudioEncoderConfig) -> Built:
        from audiorepro.models import panns

        make = getattr(panns, make_name)
        model = make(mel_bins=cfg.cnn_mel_bins, classes_num=0, base_channels=cfg.cnn_base_channels)
        if cfg.cnn_mel_bins != 128:
            model = MelBinPool(model, 128 // cfg.cnn_mel_bins)
        return model, int(model.num_features), None

    return build


def _atst(cfg: AudioEncoderConfig) -> Built:
    from audiorepro.models.atst import atst

    frames = cfg.snippet_frames
    model = atst(cfg.atst_variant, spec_w=frames + 1, freq_warp=cfg.atst_freq_warp)
    return model, int(model.num_features), int(model.snippet_frames)


def _mobilenet(cfg: AudioEncoderConfig) -> Built:
    from audiorepro.models.mobilenet import mobilenet

    model = mobilenet(cfg.mobilenet_variant).use_channels_last()
    return model, int(model.num_features), None


AUDIO_ENCODERS: dict[str, Callable[[AudioEncoderConfig], Built]] = {
    "passt": _passt,
    "cnn14": _cnn("cnn14"),
    "cnn10": _cnn("cnn10"),
    # Chapter 02 (paper (b) §4.2): ATST-Frame (64 bands at 16 kHz) and MobileNetV3.
    "atst": _atst,
    "mobilenet": _mobilenet,
}
"""Encoder family → ``build(cfg) -> (module, feature size, snippet frames or None)``."""


def build_audio_encoder(cfg: AudioEncoderConfig) -> Built:
    """The audio encoder of ``cfg``: ``(module, feature size, snippet frames or None)``.

    PaSST gets a time encoding of ``snippet_s`` and embeds snippets; the CNNs take the whole
    (up to 30 s) input at once, as in paper (a) Table 3. ATST-Frame (chapter 02) gets a time
    encoding of ``snippet_s`` too (10 s in paper (b)) and the same snippet averaging; MobileNet
    takes any length, each clip on its own real frames.
    """
    if cfg.audio_encoder not in AUDIO_ENCODERS:
        raise ValueError(
            f"unknown audio encoder {cfg.audio_encoder!r}; known: {sorted(AUDIO_ENCODERS)}"
        )
    return AUDIO_ENCODERS[cfg.audio_encoder](cfg)
