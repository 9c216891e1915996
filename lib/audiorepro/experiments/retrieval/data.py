"""Chapter 01's data: the three caption corpora with their log-mel (:func:`load_data`), and the
frozen text encoder's caption cache, embedded once for every page and run."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from audiorepro.data.retrieval import CaptionItem, EvaluationSet, log_mel_features
from audiorepro.experiments.retrieval.config import Config, store
from audiorepro.models.dual_encoder import DualEncoderConfig
from audiorepro.models.text import TextEncoder
from audiorepro.parallel import map_processes, side_by_side_workers
from audiorepro.paths import data_dir
from audiorepro.repro import torch_threads

_TEXT_CACHES: dict[str, dict[str, torch.Tensor]] = {}
_TEXT_CACHE_SIZES: dict[str, int] = {}
TEXT_CACHE_VERSION = 6
"""How the caption cache is computed. Part of every run's key: the cached vectors feed
training. 6: each caption's vector is the one it gets alone (batches of one token count, one
thread: :meth:`~audiorepro.models.text.TextEncoder.missing_chunks`), whatever was cached
before; under 5, padded batches of whatever was missing gave a caption other last bits when
something else (a smaller corpus, an earlier call) had filled part of the cache first, and
runs of the same key differed between builds."""


def _text_cache_path(model: DualEncoderConfig, seed: int) -> Path:
    key: dict[str, Any] = {
        "model": model.text_model, "pretrained": model.text_pretrained, "v": TEXT_CACHE_VERSION
    }  # fmt: skip
    if not model.text_pretrained:
        key["seed"] = seed  # a random encoder differs per seed
    return store().run("text_cache", key).path / "captions.pt"


def _read_text_cache(path: Path) -> dict[str, torch.Tensor]:
    """A saved cache: the captions and one (N, D) tensor of their embeddings (one tensor
    loads in a fraction of the time thousands of small ones take)."""
    if not path.is_file():
        return {}
    saved = torch.load(path)
    if set(saved) != {"captions", "embeddings"} or len(saved["captions"]) != len(
        saved["embeddings"]
    ):
        raise ValueError(f"{path}: not a caption-embedding cache (captions + embeddings)")
    return dict(zip(saved["captions"], saved["embeddings"], strict=True))


def _text_cache(model: DualEncoderConfig, seed: int) -> dict[str, torch.Tensor]:
    """The caption-embedding cache of a frozen text encoder, shared in-process and on disk."""
    path = _text_cache_path(model, seed)
    key = str(path)
    if key not in _TEXT_CACHES:
        cache = _read_text_cache(path)
        _TEXT_CACHES[key] = cache
        _TEXT_CACHE_SIZES[key] = len(cache)
    return _TEXT_CACHES[key]


def save_text_caches() -> None:
    """Write the chapter's caption caches that were added to since loading (:func:`load_data`
    fills them; a model embeds into its own copy, :func:`build_model`)."""
    from audiorepro.storage import atomic_write

    for key, cache in _TEXT_CACHES.items():
        if len(cache) == _TEXT_CACHE_SIZES[key]:
            continue
        saved = {"captions": list(cache), "embeddings": torch.stack(list(cache.values()))}
        atomic_write(key, lambda tmp, saved=saved: torch.save(saved, tmp))
        _TEXT_CACHE_SIZES[key] = len(cache)


@dataclasses.dataclass
class RetrievalData:
    """Everything the chapter's pages train and evaluate on.

    Attributes:
        pretrain: ``{corpus: caption items}`` of the pretraining splits (paper §2.4).
        finetune: the Clotho development captions (fine-tuning, §3.5).
        validation: the Clotho validation captions, on which every run selects its model
            (:class:`Selection`).
        evaluation: the Clotho evaluation captions (the paper's test split).
        features: cached log-mel of every recording above.
        root: the corpora folder.
    """

    pretrain: dict[str, list[CaptionItem]]
    finetune: list[CaptionItem]
    validation: list[CaptionItem]
    evaluation: list[CaptionItem]
    features: dict[str, torch.Tensor]
    root: Path
    _front_ends: dict[str, dict[str, torch.Tensor]] = dataclasses.field(
        default_factory=dict, repr=False
    )

    def features_for(self, model: DualEncoderConfig) -> dict[str, torch.Tensor]:
        """The log-mel the audio encoder of ``model`` takes: :attr:`features` (PaSST front end) or,
        for ATST-Frame, its own 64-band features of the same recordings (computed once)."""
        if model.front_end == "passt":
            return self.features
        if model.front_end not in self._front_ends:
            everything = all_items(self.pretrain, self.validation, self.evaluation)
            self._front_ends[model.front_end] = log_mel_features(
                everything, front_end=model.front_end
            )
        return self._front_ends[model.front_end]

    def training_items(
        self, corpora: Sequence[str], max_items: int | None = None
    ) -> list[CaptionItem]:
        """The pretraining captions of ``corpora``, at most ``max_items`` of each, concatenated."""
        items: list[CaptionItem] = []
        for corpus in corpora:
            if corpus not in self.pretrain:
                raise ValueError(f"unknown corpus {corpus!r}; known: {', '.join(self.pretrain)}")
            items += self.pretrain[corpus][:max_items]
        return items

    @property
    def eval_set(self) -> EvaluationSet:
        """The evaluation split as queries (captions) and items (recordings)."""
        return EvaluationSet.from_items(self.evaluation)


def all_items(
    pretrain: Mapping[str, Sequence[CaptionItem]],
    validation: Sequence[CaptionItem],
    evaluation: Sequence[CaptionItem],
) -> list[CaptionItem]:
    """Every caption item of the chapter, whose recordings get log-mel features and whose
    captions a frozen text encoder embeds once: pretraining, validation, evaluation."""
    return [i for items in pretrain.values() for i in items] + [*validation, *evaluation]


def load_data(config: Config) -> RetrievalData:
    """The three corpora of ``config.corpus`` as caption items, with their log-mel cached; the
    Clotho validation split, which selects the models, cut to ``max_eval_items`` as the
    evaluation split.

    ``smoke`` and ``embedded`` generate (or reuse) the embedded corpora; ``paper`` reads the real
    downloads from ``corpus.root``, laid out as ``clotho/``, ``audiocaps/``, ``wavcaps/`` in
    their distributed formats. Both go through the same recipes
    (:func:`~audiorepro.data.retrieval.prepare_caption_manifests`).
    """
    from audiorepro.data.embedded.generate import ensure_corpora
    from audiorepro.data.retrieval import PRETRAIN_SPLITS, caption_items

    spec = config.corpus
    if spec.kind == "paper" or spec.root is not None:
        root = spec.resolve(data_dir() / "real")
    else:
        root = Path(
            ensure_corpora(spec.kind, spec.seed, only=["audio_caption"], verbose=False)[
                "audio_caption"
            ]
        )
    pretrain = {
        corpus: caption_items(root, corpus, PRETRAIN_SPLITS[corpus])[: config.max_train_items]
        for corpus in ("clotho", "audiocaps", "wavcaps")
    }
    finetune = pretrain["clotho"]
    validation = caption_items(root, "clotho", ["validation"])[: config.max_eval_items]
    evaluation = caption_items(root, "clotho", ["evaluation"])[: config.max_eval_items]
    everything = all_items(pretrain, validation, evaluation)
    features = log_mel_features(everything)
    model = config.model
    if model.trainable_layers == 0 and model.text_pretrained:
        # A frozen pretrained text encoder embeds every caption once, here, for all pages, on
        # the training runs' threads. The paraphrases (twice as many) are embedded when caption
        # augmentation first draws them, into the run's own copy of this cache (build_model).
        captions = [i.caption for i in everything]
        text = TextEncoder(model.text_model, trainable_layers=0)
        text._cache = _text_cache(model, 0)
        chunks = text.missing_chunks(captions)
        workers = min(
            side_by_side_workers(config.train.torch_threads, config.train.device), len(chunks)
        )
        threads = config.train.torch_threads
        if workers > 1:  # the same batches on the same threads, in one process per core
            parts = [chunks[i::workers] for i in range(workers)]
            shared = (model.text_model, threads)
            embedded = map_processes(_embed_chunks, parts, shared=shared, workers=workers)
            pairs = zip(sum(parts, []), sum(embedded, []), strict=True)
        else:
            with torch_threads(threads):
                pairs = zip(chunks, text.embed_chunks(chunks), strict=True)
        for chunk, embeddings in pairs:
            text.add_to_cache(chunk, embeddings)
        save_text_caches()
    return RetrievalData(pretrain, finetune, validation, evaluation, features, root)


def _embed_chunks(model: tuple[str, int | None], chunks: list[list[str]]) -> list[torch.Tensor]:
    """A worker's part of :func:`load_data`'s caption embedding: ``model`` is the frozen text
    model's name and the runs' torch threads."""
    name, threads = model
    with torch_threads(threads):
        return TextEncoder(name, trainable_layers=0).embed_chunks(chunks)
