"""Chapter 02's data: chapter 01's corpora (:func:`load_data` of ``config.retrieval``), of which
stage 2 trains on the Clotho development captions (:func:`finetune_items`), and how many of
those captions describe more than one clip."""

from __future__ import annotations

import pandas as pd

from audiorepro.data.retrieval import CaptionItem, caption_sharing, generic_flags
from audiorepro.experiments.distillation.config import Config
from audiorepro.experiments.retrieval.data import RetrievalData


def finetune_items(config: Config, data: RetrievalData) -> list[CaptionItem]:
    """Stage 2's training captions: the Clotho development split (at most
    ``finetune_max_items``)."""
    return list(data.finetune[: config.finetune_max_items])


def captions_of_several_clips(config: Config, data: RetrievalData) -> pd.DataFrame:
    """How many development captions describe more than one clip, measured
    (:func:`~audiorepro.data.retrieval.caption_sharing`): on the whole Clotho development split
    and on the stage-2 training captions, the share (%) written word for word for several clips,
    the share generic (embedded corpora only: the generator's flag, NaN on the real corpus), and
    either."""
    rows = []
    for label, items in (
        ("Clotho development split", data.finetune),
        ("stage-2 training captions", finetune_items(config, data)),
    ):
        flags = generic_flags(data.root, "development", items)
        shares = caption_sharing(items, flags)
        rows.append(
            {
                "captions": label,
                "items": int(shares["captions"]),
                "clips": int(shares["clips"]),
                "word for word on several clips (%)": 100 * shares["shared"],
                "distinct shared texts": int(shares["shared_texts"]),
                "generic (%)": 100 * shares["generic"],
                "either (%)": 100 * shares["shared_or_generic"],
            }
        )
    return pd.DataFrame(rows).set_index("captions").round(2)
