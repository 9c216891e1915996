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
_TEXT_CACHE_STAMPS: dict[str, int | None] = {}
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
    if not model.text_pretrained:  # a random encoder differs per seed, or is one draw
        key["seed"] = seed if model.text_seed is None else model.text_seed
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


def _stamp(path: Path) -> int | None:
    return path.stat().st_mtime_ns if path.is_file() else None


def _text_cache(model: DualEncoderConfig, seed: int) -> dict[str, torch.Tensor]:
    """The caption-embedding cache of a frozen text encoder, shared in-process and on disk.
    A file written since it was read (by another process: :func:`embed_captions` in a worker)
    is read again, its vectors added to what this process holds."""
    path = _text_cache_path(model, seed)
    key = str(path)
    stamp = _stamp(path)
    if key not in _TEXT_CACHES or _TEXT_CACHE_STAMPS[key] != stamp:
        saved = _read_text_cache(path)
        cache = _TEXT_CACHES.setdefault(key, {})
        for caption, embedding in saved.items():
            cache.setdefault(caption, embedding)
        _TEXT_CACHE_SIZES[key] = len(saved)
        _TEXT_CACHE_STAMPS[key] = stamp
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
        _TEXT_CACHE_STAMPS[key] = _stamp(Path(key))


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
    data = RetrievalData(pretrain, finetune, validation, evaluation, features, root)
    if config.model.trainable_layers == 0 and config.model.text_pretrained:
        # A frozen pretrained text encoder embeds every caption once, here, for all pages, on
        # the training runs' threads. The paraphrases (twice as many) are embedded when caption
        # augmentation first draws them, into the run's own copy of this cache (build_model).
        workers = side_by_side_workers(config.train.torch_threads, config.train.device)
        embed_captions(config, data, workers=workers)
    return data


def shares_random_text(config: Config) -> bool:
    """Whether ``config``'s text encoder is a frozen random one drawn once for every seed
    (``model.text_seed``), whose caption cache :func:`embed_captions` fills once for all runs
    (otherwise each run embeds the captions it meets into its own copy)."""
    model = config.model
    return (
        model.trainable_layers == 0 and not model.text_pretrained and model.text_seed is not None
    )


def captions_embedded(config: Config, data: RetrievalData) -> bool:
    """Whether the caption cache of ``config.model``'s frozen text encoder holds every caption
    of the chapter (:func:`embed_captions` then has nothing to do)."""
    cache = _text_cache(config.model, config.model.text_seed or 0)
    everything = all_items(data.pretrain, data.validation, data.evaluation)
    return all(item.caption in cache for item in everything)


def embed_captions(config: Config, data: RetrievalData, *, workers: int = 1) -> int:
    """Embed every caption of the chapter (:func:`all_items`) that the caption cache of the
    frozen text encoder of ``config.model`` lacks, on the training runs' threads, in up to
    ``workers`` processes, and save the cache; returns how many were embedded. :func:`load_data`
    calls it for a pretrained encoder, and the chapter's graph once for a random encoder shared
    by every seed (:func:`shares_random_text`), before the runs that use it."""
    model = config.model
    if model.trainable_layers != 0 or not (model.text_pretrained or shares_random_text(config)):
        raise ValueError(
            "embed_captions: the text encoder must be frozen (trainable_layers 0), and "
            "pretrained or one random draw for every seed (model.text_seed)"
        )
    if captions_embedded(config, data):
        return 0
    seed = model.text_seed or 0
    encoder = (model.text_model, model.text_pretrained, seed)
    text = TextEncoder(
        model.text_model, pretrained=model.text_pretrained, trainable_layers=0, seed=seed
    )
    text._cache = _text_cache(model, seed)
    everything = all_items(data.pretrain, data.validation, data.evaluation)
    chunks = text.missing_chunks([i.caption for i in everything])
    workers = min(workers, len(chunks))
    threads = config.train.torch_threads
    if workers > 1:  # the same batches on the same threads, in one process per core
        parts = [chunks[i::workers] for i in range(workers)]
        embedded = map_processes(_embed_chunks, parts, shared=(encoder, threads), workers=workers)
        pairs = zip(sum(parts, []), sum(embedded, []), strict=True)
    else:
        with torch_threads(threads):
            pairs = zip(chunks, text.embed_chunks(chunks), strict=True)
    for chunk, embeddings in pairs:
        text.add_to_cache(chunk, embeddings)
    save_text_caches()
    return sum(len(chunk) for chunk in chunks)


def _embed_chunks(
    shared: tuple[tuple[str, bool, int], int | None], chunks: list[list[str]]
) -> list[torch.Tensor]:
    """A worker's part of :func:`embed_captions`: ``shared`` is the frozen text model (name,
    pretrained, seed) and the runs' torch threads."""
    (name, pretrained, seed), threads = shared
    with torch_threads(threads):
        encoder = TextEncoder(name, pretrained=pretrained, trainable_layers=0, seed=seed)
        return encoder.embed_chunks(chunks)
