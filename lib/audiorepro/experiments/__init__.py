"""The four chapters' experiments, one module each, all of one shape: ``Config``,
``load_data``, the chapter's training steps, ``evaluate``, ``PAPER`` (the paper's numbers) and
``findings`` (the paper-vs-ours table). The book's pages call these.

- :mod:`audiorepro.experiments.retrieval`: chapter 01, the PaSST + text-transformer dual encoder.
- :mod:`audiorepro.experiments.distillation`: chapter 02, ensemble knowledge distillation.
- :mod:`audiorepro.experiments.zerospeech`: chapter 03, the Transformer VQ-VAE on ZeroSpeech.
- :mod:`audiorepro.experiments.awe`: chapter 04, multi-view acoustic word embeddings.
"""
