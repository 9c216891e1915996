"""Word segments for the multi-view AWE chapter: selection, phone sequences, batches.

:func:`prepare_split` reads a split in the Switchboard layout
(:func:`audiorepro.data.recipes.switchboard.load_word_split`: the embedded corpus of
:mod:`audiorepro.data.embedded.word_corpus` or the real lists and features; or agwe-recipe's
HDF5 utterance features with word alignments,
:func:`audiorepro.data.recipes.switchboard.load_hdf5_word_split`) and applies the
paper's selection (§3.1, following Settle et al. 2019): segments shorter than ``min_frames`` = 2
frames and words outside the training vocabulary are dropped, and both are counted. Each kept
word gets its phone-id sequence from ``vocab.json``; a word without a pronunciation is an error
naming its key, or, with ``unknown_words="symbol"``, the one-phone sequence of an extra unknown
symbol (id ``num_phones + 1``).

:class:`MultiViewDataset` and :func:`collate_multiview` make agwe-recipe's batches (its
``MultiViewDataset_IndividualWords.collate_fn``): padded MFCC frames of the segments, the phone
sequences of the batch's *unique* words, and each segment's index into them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from audiorepro.data.recipes.switchboard import (
    SwitchboardFormatError,
    WordVocab,
    load_hdf5_word_split,
    load_vocab,
    load_word_split,
)

UNKNOWN_WORDS = ("error", "symbol")
FORMATS = ("npz", "hdf5")


@dataclasses.dataclass(frozen=True, eq=False)
class WordSegments:
    """One split after selection: aligned lists, token ``i`` everywhere.

    Attributes:
        split: the split name.
        keys, words, speakers: per token.
        feats: float32 (T_i, F) MFCC + Δ + ΔΔ frames.
        phones: int64 phone-id sequences (ids >= 1; 0 is padding) of each token's word.
        word_phones: word -> its phone-id sequence (one entry per kept word type).
        num_phones: the largest phone id in use (the model's vocabulary size).
        dropped: ``{"short": n, "out_of_vocabulary": n}`` tokens dropped by the selection.
        first_short: where the first token dropped as short was and its length
            (``"SEG.tsv:82, 1 frame"``), where the selection knows it; else ``""``.
    """

    split: str
    keys: list[str]
    words: list[str]
    speakers: list[str]
    feats: list[np.ndarray]
    phones: list[np.ndarray]
    word_phones: dict[str, np.ndarray]
    num_phones: int
    dropped: dict[str, int]
    first_short: str = ""

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def feature_dim(self) -> int:
        """F."""
        return int(self.feats[0].shape[1])

    @property
    def types(self) -> list[str]:
        """The distinct words, sorted."""
        return sorted(self.word_phones)


def prepare_split(
    root: str | os.PathLike[str],
    split: str,
    *,
    vocab: WordVocab | str | os.PathLike[str] = "vocab.json",
    feature_dim: int = 39,
    min_frames: int = 2,
    training_words: Collection[str] | None = None,
    unknown_words: str = "error",
    max_tokens: int | None = None,
    source: str = "npz",
) -> WordSegments:
    """Load one split and apply the paper's selection (module docstring).

    Args:
        root: the corpus folder (``<split>.list``, ``swbd.<split>.npz``, ``vocab.json``).
        split: ``train``, ``dev`` or ``test``.
        vocab: the vocabulary or its path (relative paths are under ``root``).
        feature_dim: expected F (39, or 36 for 12 MFCCs + Δ + ΔΔ).
        min_frames: shorter segments are dropped (paper: 2).
        training_words: the training vocabulary; tokens of other words are dropped. ``None``:
            the words of ``vocab.words_to_ids`` (agwe-recipe's vocabulary).
        unknown_words: a kept word without a pronunciation: ``"error"`` (names the key) or
            ``"symbol"`` (the unknown phone, id ``max(phones_to_ids) + 1``).
        max_tokens: keep only the first this many tokens after selection (smoke runs).
        source: ``"npz"`` (``<split>.list`` + ``swbd.<split>.npz``) or ``"hdf5"`` (agwe-recipe's
            ``fbank.<split>.hdf5`` utterance features + ``align-small.<split>.hdf5`` word
            alignments, :func:`load_hdf5_word_split`; zero-length words count as short).

    Raises:
        SwitchboardFormatError: as :func:`load_word_split` (malformed keys name file:line; wrong
            feature dimension names the key), or a word without pronunciation (names the key).
        ValueError: an unknown ``unknown_words`` or nothing left after selection.
    """
    if unknown_words not in UNKNOWN_WORDS:
        raise ValueError(f"unknown_words must be one of {UNKNOWN_WORDS}, got {unknown_words!r}")
    root = Path(root)
    if not isinstance(vocab, WordVocab):
        path = Path(vocab)
        vocab = load_vocab(path if path.is_absolute() else root / path)
    if source not in FORMATS:
        raise ValueError(f"source must be one of {FORMATS}, got {source!r}")
    dropped = {"short": 0, "out_of_vocabulary": 0}
    if source == "hdf5":
        data, dropped["short"] = load_hdf5_word_split(
            root / f"fbank.{split}.hdf5",
            root / f"align-small.{split}.hdf5",
            split,
            feature_dim=feature_dim,
        )
    else:
        data = load_word_split(root, split, feature_dim=feature_dim, vocab=None)
    allowed = set(vocab.words_to_ids if training_words is None else training_words)
    unk_id = max(vocab.phones_to_ids.values()) + 1
    used_unknown = False
    keep: list[int] = []
    word_phones: dict[str, np.ndarray] = {}
    for i, (key, word, feats) in enumerate(zip(data.keys, data.words, data.feats, strict=True)):
        if feats.shape[0] < min_frames:
            dropped["short"] += 1
            continue
        if word not in allowed:
            dropped["out_of_vocabulary"] += 1
            continue
        if word not in word_phones:
            if word in vocab.word_to_phones:
                ids = [vocab.phones_to_ids[p] for p in vocab.pronunciation(word)]
            elif unknown_words == "symbol":
                ids, used_unknown = [unk_id], True
            else:
                raise SwitchboardFormatError(
                    root / f"{split}.list",
                    None,
                    f"key {key!r}: word {word!r} has no pronunciation in the vocabulary (pass "
                    "unknown_words='symbol' to map it to an unknown phone)",
                )
            word_phones[word] = np.asarray(ids, dtype=np.int64)
        keep.append(i)
        if max_tokens is not None and len(keep) >= max_tokens:
            break
    if not keep:
        raise ValueError(f"{root / split}: no token left after selection (dropped: {dropped})")
    words = [data.words[i] for i in keep]
    return WordSegments(
        split=split,
        keys=[data.keys[i] for i in keep],
        words=words,
        speakers=[data.speakers[i] for i in keep],
        feats=[data.feats[i] for i in keep],
        phones=[word_phones[w] for w in words],
        word_phones={w: word_phones[w] for w in sorted(set(words))},
        num_phones=unk_id if used_unknown else unk_id - 1,
        dropped=dropped,
    )


class MultiViewDataset(Dataset):
    """Items ``(feats (T, F) float32 tensor, phones (L,) int64 tensor, word)`` of a split."""

    def __init__(self, segments: WordSegments) -> None:
        self.segments = segments

    def __len__(self) -> int:
        return len(self.segments)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, str]:
        s = self.segments
        return torch.from_numpy(s.feats[index]), torch.from_numpy(s.phones[index]), s.words[index]


def pad_sequences(seqs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad with zeros: ``(B, T_max, ...)`` and ``lengths`` (B,) int64."""
    lengths = torch.tensor([s.shape[0] for s in seqs], dtype=torch.int64)
    out = seqs[0].new_zeros((len(seqs), int(lengths.max()), *seqs[0].shape[1:]))
    for i, s in enumerate(seqs):
        out[i, : s.shape[0]] = s
    return out, lengths


def collate_multiview(
    items: Sequence[tuple[torch.Tensor, torch.Tensor, str]],
) -> dict[str, torch.Tensor]:
    """A batch: ``feats`` (B, T, F), ``lengths`` (B,), the unique words' ``phones`` (W, L),
    ``phone_lengths`` (W,), ``inverse`` (B,) the word index of each segment (sorted words)."""
    feats, lengths = pad_sequences([it[0] for it in items])
    words = [it[2] for it in items]
    unique = sorted(set(words))
    index = {w: i for i, w in enumerate(unique)}
    first = {}
    for it in items:
        first.setdefault(it[2], it[1])
    phones, phone_lengths = pad_sequences([first[w] for w in unique])
    inverse = torch.tensor([index[w] for w in words], dtype=torch.int64)
    return {
        "feats": feats,
        "lengths": lengths,
        "phones": phones,
        "phone_lengths": phone_lengths,
        "inverse": inverse,
    }


__all__ = [
    "MultiViewDataset",
    "UNKNOWN_WORDS",
    "WordSegments",
    "collate_multiview",
    "pad_sequences",
    "prepare_split",
]
