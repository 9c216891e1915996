"""Models, one module per family.

- :mod:`~audiorepro.models.passt`: PaSST audio spectrogram transformer (variants N, S, L, S20 of
  paper (a) Table 2 and small CPU configurations), checkpoint loading.
- :mod:`~audiorepro.models.snippets`: long audio as the mean embedding of fixed-length snippets.
"""

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
