"""Models, one module per family.

- :mod:`~audiorepro.models.passt`: PaSST audio spectrogram transformer (variants N, S, L, S20 of
  paper (a) Table 2 and small CPU configurations), checkpoint loading.
- :mod:`~audiorepro.models.snippets`: long audio as the mean embedding of fixed-length snippets.
- :mod:`~audiorepro.models.atst`: ATST-Frame frame-based spectrogram transformer (paper (b)
  §4.2.2), its front end and frequency warping, checkpoint loading.
- :mod:`~audiorepro.models.mobilenet`: EfficientAT MobileNetV3 (``mn40_as_ext``, paper (b)
  §4.2.3), checkpoint loading.
"""

from audiorepro.models.atst import ATSTFrame, AtstMel, atst, atst_frame_base, atst_frame_tiny
from audiorepro.models.mobilenet import MN, mn40_as_ext, mobilenet
from audiorepro.models.passt import (
    PASST_CONFIGS,
    PaSST,
    load_passt_checkpoint,
    passt,
    passt_l,
    passt_n,
    passt_s,
    passt_s20,
    passt_small,
    passt_tiny,
)
from audiorepro.models.snippets import embed_snippets

__all__ = [
    "ATSTFrame",
    "AtstMel",
    "MN",
    "atst",
    "atst_frame_base",
    "atst_frame_tiny",
    "mn40_as_ext",
    "mobilenet",
    "PASST_CONFIGS",
    "PaSST",
    "embed_snippets",
    "load_passt_checkpoint",
    "passt",
    "passt_l",
    "passt_n",
    "passt_s",
    "passt_s20",
    "passt_small",
    "passt_tiny",
]
