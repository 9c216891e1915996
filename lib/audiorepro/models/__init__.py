"""Models, one module per family.

Audio encoders share one interface: ``forward(feats (B, 1, F, T)) -> (logits, features)``, the
feature size in ``num_features`` (also ``embed_dim``), and ``max_frames`` (the longest input;
``None`` for the CNNs, the time-encoding length for PaSST; longer audio goes through
:func:`embed_snippets`).

- :mod:`~audiorepro.models.audio_encoders`: the encoder families by name and their factory
  (``build_audio_encoder(AudioEncoderConfig(audio_encoder="cnn14"))``), ``MelBinPool``, the
  released AudioSet checkpoints (``RELEASED_CHECKPOINTS``, ``audio_pretrained``) and our own
  files in their layouts (``save_released_layout``).
- :mod:`~audiorepro.models.dual_encoder`: the dual encoder, its config and factory, and the
  distillation student.
- :mod:`~audiorepro.models.passt`: PaSST audio spectrogram transformer (variants N, S, L, S20 of
  paper (a) Table 2 and small CPU configurations).
- :mod:`~audiorepro.models.panns`: CNN14 and CNN10 of PANNs.
- :mod:`~audiorepro.models.vit`: the pre-norm ViT block PaSST and ATST-Frame share.
- :mod:`~audiorepro.models.snippets`: long audio as the mean embedding of fixed-length snippets.
- :mod:`~audiorepro.models.atst`: ATST-Frame frame-based spectrogram transformer (paper (b)
  §4.2.2), frequency warping, checkpoint loading (its front end is
  :class:`audiorepro.features.AtstMel`).
- :mod:`~audiorepro.models.mobilenet`: EfficientAT MobileNetV3 (``mn40_as_ext``, paper (b)
  §4.2.3), checkpoint loading.
- :mod:`~audiorepro.models.pretrained`: released weights from local files, strict key checks.
"""

from audiorepro.models.atst import ATSTFrame, atst, atst_frame_base, atst_frame_tiny
from audiorepro.models.audio_encoders import (
    AUDIO_ENCODERS,
    RELEASED_CHECKPOINTS,
    AudioEncoderConfig,
    MelBinPool,
    build_audio_encoder,
    load_audio_pretrained,
    resolve_audio_pretrained,
    save_released_layout,
)
from audiorepro.models.mobilenet import MN, mn40_as_ext, mobilenet
from audiorepro.models.panns import CNN, cnn10, cnn14, load_panns_checkpoint
from audiorepro.models.passt import (
    PASST_CONFIGS,
    PaSST,
    count_parameters,
    load_passt_checkpoint,
    passt,
    passt_l,
    passt_n,
    passt_s,
    passt_s20,
    passt_small,
    passt_tiny,
)
from audiorepro.models.pretrained import load_pretrained, load_state_dict_file
from audiorepro.models.snippets import embed_snippets, snippet_mask

__all__ = [
    "ATSTFrame",
    "AUDIO_ENCODERS",
    "CNN",
    "MN",
    "atst",
    "atst_frame_base",
    "atst_frame_tiny",
    "mn40_as_ext",
    "mobilenet",
    "PASST_CONFIGS",
    "PaSST",
    "AudioEncoderConfig",
    "MelBinPool",
    "RELEASED_CHECKPOINTS",
    "build_audio_encoder",
    "load_audio_pretrained",
    "resolve_audio_pretrained",
    "save_released_layout",
    "cnn10",
    "cnn14",
    "count_parameters",
    "embed_snippets",
    "load_panns_checkpoint",
    "load_passt_checkpoint",
    "load_pretrained",
    "load_state_dict_file",
    "passt",
    "passt_l",
    "passt_n",
    "passt_s",
    "passt_s20",
    "passt_small",
    "passt_tiny",
    "snippet_mask",
]
