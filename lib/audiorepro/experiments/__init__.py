"""One module per chapter, each of the same shape: a ``Config`` (frozen dataclass composed of a
corpus spec, a model config and a training section, loaded from the chapter's YAML presets),
``load_data(config)``, the chapter's training steps, ``evaluate(...)``, ``PAPER`` (the paper's
numbers with their table references) and ``findings(...)`` (the paper-vs-ours table). The book's
pages call these; nothing below this package imports it.
"""
