"""audiorepro: four audio and speech papers reimplemented end to end.

The library behind the book: data (manifests, embedded corpora, real-corpus recipes), features,
models, losses, metrics, an accelerate training loop and the results ledger. Notebooks in
``book/`` import from here and define nothing longer than a few lines.
"""

__version__ = "0.1.0"
