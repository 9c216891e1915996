"""One module per chapter, each of the same shape: a ``Config`` (frozen, composed of the corpus,
model and training sections), ``load_data``, the chapter's training steps, ``evaluate``, ``PAPER``
(the paper's numbers with their table references) and ``findings`` (the paper-vs-ours table).
The book's pages call these; nothing below this package imports it.
"""
