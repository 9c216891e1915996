"""The chapters: one module per paper, each of one shape.

- :mod:`audiorepro.experiments.retrieval`: chapter 01, PaSST + text encoder retrieval (DCASE 2023).
- :mod:`audiorepro.experiments.distillation`: chapter 02, ensemble knowledge distillation
  (DCASE 2024).
- :mod:`audiorepro.experiments.zerospeech`: chapter 03, Transformer VQ-VAE units, ABX, bitrate.
- :mod:`audiorepro.experiments.awe`: chapter 04, multi-view acoustic word embeddings.

Each module has a ``Config`` (a frozen dataclass composed of a :class:`~audiorepro.config.CorpusSpec`,
the model family's config, a training section and the chapter's own fields, loaded from
``book/<chapter>/presets/<preset>.yaml``), ``load_data(config)``, the chapter's training steps,
``evaluate(...)``, ``PAPER`` (the paper's numbers, with table and figure references) and
``findings(records, config, preset)`` (the paper-vs-ours table with a verdict per claim). The
book's pages call these; the generic training loop, models, losses and metrics live below and
never import this package.
"""
