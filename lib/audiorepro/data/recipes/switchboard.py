"""Switchboard word segments for acoustic word embeddings, in the Kamper/He layout.

The multi-view AWE chapter trains on isolated word tokens cut from Switchboard conversation
sides (``shared/reference/awe.md`` §4; Kamper, Wang & Livescu 2016; He, Wang & Livescu 2017).
The real data is LDC-licensed and distributed by nobody; the lists and features that recipes
produce have this layout, which :mod:`audiorepro.data.embedded.word_corpus` also writes::

    <root>/
      train.list  dev.list  test.list    one key per line: word_sw02001-A_000123-000245
      swbd.train.npz  swbd.dev.npz  ...  key -> float32 (frames, 39) MFCC + Δ + ΔΔ
      vocab.json                         agwe-recipe style vocabulary (below)

**Keys.** ``<word>_<side>_<start>-<end>``: the written word, the conversation side
(``sw02001-A``: conversation 2001, channel A), and the start and end of the token in 10 ms
frames from the start of the side, zero-padded to six digits. The word label is
``"_".join(key.split("_")[:-2])`` (a few Switchboard words carry markup such as ``word_1``).
:func:`parse_key` is strict: anything else is an error naming the file and line.

**Features.** ``swbd.<split>.npz`` maps each key to its frames, shape (T, F) with F = 39 (13
MFCCs with per-speaker CMVN, then Δ and ΔΔ: Kamper's ``kaldi_features/run.sh``). The number of
frames must equal ``end - start`` up to ``frame_tolerance`` (default 1) frames: Kaldi-based
recipes count a segment as ``end - start`` or ``end - start + 1`` frames (agwe-recipe counts
``ends - starts + 1`` but slices ``[start:end]``), so one frame either way is accepted and
anything more means the features do not belong to the key.

**Vocabulary.** ``vocab.json`` as read by agwe-recipe's ``src/multiview_vocab.py``:
``{"words_to_ids": {word: id}, "phones_to_ids": {phone: id}, "word_to_phones": {word:
[[phone, ...], ...]}}``, ids starting at 1 (0 is padding), a list of pronunciations per word of
which the first is used.

**Speakers.** A conversation side is one talker in one conversation; :class:`WordSplit` uses the
side as the speaker label unless a ``speaker_of_side`` mapping is given (a Switchboard talker
appears on several sides; the embedded corpus has one side per speaker).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from audiorepro.data.recipes.common import RecipeError
from audiorepro.storage import ArrayFileError, load_npz

SPLITS: tuple[str, ...] = ("train", "dev", "test")
"""The three Switchboard AWE splits (disjoint conversation sides)."""

KEY_PATTERN = re.compile(
    r"^(?P<word>\S+)_(?P<side>[A-Za-z0-9]+-[AB])_(?P<start>\d{6,})-(?P<end>\d{6,})$"
)
"""``<word>_<side>_<start>-<end>``: side like ``sw02001-A``, frames zero-padded to 6 digits."""

FRAME_SHIFT_S = 0.01
"""Key times are frames of 10 ms."""


class SwitchboardFormatError(RecipeError):
    """A malformed word list, feature file or vocabulary: ``path[:line]: message``."""


@dataclasses.dataclass(frozen=True)
class WordKey:
    """A parsed word-segment key.

    Attributes:
        key: the key as written.
        word: the word label (``"_".join(key.split("_")[:-2])``).
        side: the conversation side (``sw02001-A``).
        start: first frame (10 ms) of the token within the side.
        end: end frame (exclusive) of the token; ``end > start``.
    """

    key: str
    word: str
    side: str
    start: int
    end: int

    @property
    def num_frames(self) -> int:
        """``end - start``: the token's length in 10 ms frames."""
        return self.end - self.start


def parse_key(key: str) -> WordKey:
    """Parse ``word_sw02001-A_000123-000245`` strictly.

    Raises:
        ValueError: the key does not match :data:`KEY_PATTERN`, or ``end <= start``.
    """
    match = KEY_PATTERN.match(key) if isinstance(key, str) else None
    if match is None:
        raise ValueError(
            f"malformed key {key!r}: expected <word>_<side>_<start>-<end> such as "
            "'absolutely_sw02001-A_000123-000245' (side <letters/digits>-A|B, frames as "
            "6+ digits)"
        )
    start, end = int(match["start"]), int(match["end"])
    if end <= start:
        raise ValueError(f"key {key!r}: end frame {end} is not after start frame {start}")
    word = "_".join(key.split("_")[:-2])
    return WordKey(key=key, word=word, side=match["side"], start=start, end=end)


def format_key(word: str, side: str, start: int, end: int) -> str:
    """The key of a token: ``format_key("absolutely", "sw02001-A", 123, 245)`` ->
    ``absolutely_sw02001-A_000123-000245``; checked with :func:`parse_key`."""
    key = f"{word}_{side}_{start:06d}-{end:06d}"
    parsed = parse_key(key)
    if (parsed.word, parsed.side, parsed.start, parsed.end) != (word, side, start, end):
        raise ValueError(f"word {word!r} / side {side!r} do not round-trip through a key")
    return key


def read_word_list(path: str | os.PathLike[str]) -> list[WordKey]:
    """Read a word list (one key per non-blank line), in file order.

    Raises:
        SwitchboardFormatError: naming ``file:line`` for a malformed key, a line with more than
            one field, or a repeated key; or the file alone when it is missing or empty.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SwitchboardFormatError(path, None, "word list not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SwitchboardFormatError(path, None, f"cannot read the word list: {err}") from err
    keys: list[WordKey] = []
    first: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 1:
            raise SwitchboardFormatError(
                path, number, f"expected one key per line, got {len(fields)} fields: {line!r}"
            )
        try:
            parsed = parse_key(fields[0])
        except ValueError as err:
            raise SwitchboardFormatError(path, number, str(err)) from None
        if parsed.key in first:
            raise SwitchboardFormatError(
                path, number, f"key {parsed.key!r} repeated (first on line {first[parsed.key]})"
            )
        first[parsed.key] = number
        keys.append(parsed)
    if not keys:
        raise SwitchboardFormatError(path, None, "the word list holds no key")
    return keys


@dataclasses.dataclass(frozen=True)
class WordVocab:
    """The agwe-style vocabulary: word and phone ids (from 1; 0 is padding), pronunciations.

    Attributes:
        words_to_ids: word -> id.
        phones_to_ids: phone -> id.
        word_to_phones: word -> pronunciations (the first is the one used).
    """

    words_to_ids: dict[str, int]
    phones_to_ids: dict[str, int]
    word_to_phones: dict[str, list[list[str]]]

    def pronunciation(self, word: str) -> tuple[str, ...]:
        """The first pronunciation of ``word`` (``KeyError`` naming the word if absent)."""
        if word not in self.word_to_phones:
            raise KeyError(f"{word!r} has no pronunciation in the vocabulary")
        return tuple(self.word_to_phones[word][0])

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``vocab.json``."""
        return {
            "words_to_ids": dict(self.words_to_ids),
            "phones_to_ids": dict(self.phones_to_ids),
            "word_to_phones": {w: [list(p) for p in ps] for w, ps in self.word_to_phones.items()},
        }


def _check_ids(path: Path, name: str, mapping: Any) -> dict[str, int]:
    if not isinstance(mapping, dict) or not mapping:
        raise SwitchboardFormatError(path, None, f"{name}: expected a non-empty object")
    seen: dict[int, str] = {}
    for key, value in mapping.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SwitchboardFormatError(
                path, None, f"{name}[{key!r}]: expected an id >= 1 (0 is padding), got {value!r}"
            )
        if value in seen:
            raise SwitchboardFormatError(
                path, None, f"{name}[{key!r}]: id {value} is also {seen[value]!r}"
            )
        seen[value] = key
    return dict(mapping)


def load_vocab(path: str | os.PathLike[str]) -> WordVocab:
    """Read and check ``vocab.json``.

    Raises:
        SwitchboardFormatError: a missing or unreadable file, a missing key, ids that are not
            distinct integers >= 1, a word without pronunciations, or a pronunciation using a
            phone absent from ``phones_to_ids``; the message names the file and the entry.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SwitchboardFormatError(path, None, "vocabulary file not found") from None
    except (OSError, ValueError) as err:
        raise SwitchboardFormatError(path, None, f"not a readable JSON file: {err}") from err
    if not isinstance(data, dict):
        raise SwitchboardFormatError(path, None, "expected a JSON object")
    for name in ("words_to_ids", "phones_to_ids", "word_to_phones"):
        if name not in data:
            raise SwitchboardFormatError(path, None, f"missing key {name!r}")
    words = _check_ids(path, "words_to_ids", data["words_to_ids"])
    phones = _check_ids(path, "phones_to_ids", data["phones_to_ids"])
    prons = data["word_to_phones"]
    if not isinstance(prons, dict):
        raise SwitchboardFormatError(path, None, "word_to_phones: expected an object")
    for word, entries in prons.items():
        if (
            not isinstance(entries, list)
            or not entries
            or not all(isinstance(p, list) and p for p in entries)
        ):
            raise SwitchboardFormatError(
                path,
                None,
                f"word_to_phones[{word!r}]: expected a non-empty list of non-empty phone lists",
            )
        for pron in entries:
            unknown = [p for p in pron if p not in phones]
            if unknown:
                raise SwitchboardFormatError(
                    path,
                    None,
                    f"word_to_phones[{word!r}]: phones {unknown} are not in phones_to_ids",
                )
    return WordVocab(words, phones, {w: [list(p) for p in ps] for w, ps in prons.items()})


@dataclasses.dataclass(frozen=True, eq=False)
class WordSplit:
    """One split of word tokens with their features (and pronunciations when known).

    All lists are aligned (token ``i`` everywhere), in word-list order.

    Attributes:
        split: ``train``, ``dev`` or ``test``.
        keys: the keys as written.
        words: word labels.
        sides: conversation sides.
        speakers: speaker labels (the side, or ``speaker_of_side[side]``).
        starts: start frames; ``ends``: end frames (exclusive).
        feats: float32 arrays (T_i, F).
        pronunciations: the first pronunciation of each word from the vocabulary, or ``None``
            when loaded without one.
        word_ids: vocabulary ids (>= 1) or ``None``.
        phone_ids: phone ids (>= 1) of each pronunciation or ``None``.
        vocab: the vocabulary or ``None``.
    """

    split: str
    keys: list[str]
    words: list[str]
    sides: list[str]
    speakers: list[str]
    starts: list[int]
    ends: list[int]
    feats: list[np.ndarray]
    pronunciations: list[tuple[str, ...]] | None
    word_ids: list[int] | None
    phone_ids: list[list[int]] | None
    vocab: WordVocab | None

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def lengths(self) -> np.ndarray:
        """Frames per token, shape (N,), int64."""
        return np.array([f.shape[0] for f in self.feats], dtype=np.int64)

    @property
    def feature_dim(self) -> int:
        """F, the feature dimension."""
        return int(self.feats[0].shape[1])


def load_word_split(
    root: str | os.PathLike[str],
    split: str,
    *,
    feature_dim: int = 39,
    frame_tolerance: int = 1,
    vocab: WordVocab | str | os.PathLike[str] | None = "vocab.json",
    list_path: str | os.PathLike[str] | None = None,
    features_path: str | os.PathLike[str] | None = None,
    speaker_of_side: Mapping[str, str] | Callable[[str], str] | None = None,
) -> WordSplit:
    """Load ``<root>/<split>.list`` with ``<root>/swbd.<split>.npz`` (and ``vocab.json``).

    Args:
        root: the data folder.
        split: the split name (normally ``train``, ``dev`` or ``test``).
        feature_dim: the expected F of every feature matrix (39; 36 for 12 MFCCs + Δ + ΔΔ).
        frame_tolerance: how many frames a feature matrix may differ from ``end - start``
            (see the module docstring); 0 demands an exact match.
        vocab: a :class:`WordVocab`, a path (relative paths are under ``root``), or ``None`` to
            load without pronunciations.
        list_path: the word list (default ``<root>/<split>.list``).
        features_path: the features (default ``<root>/swbd.<split>.npz``).
        speaker_of_side: maps a side to its speaker (default: the side itself).

    Raises:
        SwitchboardFormatError: a malformed list line (file:line), a key without features, a
            feature matrix that is not 2-D float with ``feature_dim`` columns, or whose number
            of frames disagrees with its key (the message names the key and the npz file), a
            word missing from the vocabulary, or a malformed vocabulary.
    """
    root = Path(root)
    list_path = Path(list_path) if list_path is not None else root / f"{split}.list"
    features_path = (
        Path(features_path) if features_path is not None else root / f"swbd.{split}.npz"
    )
    entries = read_word_list(list_path)
    if isinstance(vocab, str | os.PathLike):
        vocab_file = Path(vocab)
        vocab = load_vocab(vocab_file if vocab_file.is_absolute() else root / vocab_file)

    if not features_path.is_file():
        raise SwitchboardFormatError(features_path, None, "feature file not found")
    feats = []
    try:
        archive = load_npz(
            features_path, expected=f"word features of shape (frames, {feature_dim})"
        )
    except ArrayFileError as err:
        raise SwitchboardFormatError(features_path, None, err.reason) from err
    available = set(archive)
    for entry in entries:
        if entry.key not in available:
            raise SwitchboardFormatError(
                features_path, None, f"no features for key {entry.key!r} (from {list_path})"
            )
        matrix = archive[entry.key]
        if matrix.ndim != 2 or matrix.shape[1] != feature_dim:
            raise SwitchboardFormatError(
                features_path,
                None,
                f"key {entry.key!r}: expected features of shape (frames, {feature_dim}), "
                f"got {matrix.shape}",
            )
        if not np.issubdtype(matrix.dtype, np.floating) or not np.isfinite(matrix).all():
            raise SwitchboardFormatError(
                features_path,
                None,
                f"key {entry.key!r}: expected finite floating-point features, got dtype "
                f"{matrix.dtype}"
                + ("" if not np.issubdtype(matrix.dtype, np.floating) else " with NaN/inf"),
            )
        if abs(matrix.shape[0] - entry.num_frames) > frame_tolerance:
            raise SwitchboardFormatError(
                features_path,
                None,
                f"key {entry.key!r}: {matrix.shape[0]} frames, but the key spans "
                f"{entry.end} - {entry.start} = {entry.num_frames} frames (tolerance "
                f"{frame_tolerance})",
            )
        feats.append(np.asarray(matrix, dtype=np.float32))

    pronunciations = word_ids = phone_ids = None
    if vocab is not None:
        missing = sorted({e.word for e in entries} - set(vocab.word_to_phones))
        missing_ids = sorted({e.word for e in entries} - set(vocab.words_to_ids))
        if missing or missing_ids:
            raise SwitchboardFormatError(
                list_path,
                None,
                f"words missing from the vocabulary (pronunciation: {missing[:10]}, id: "
                f"{missing_ids[:10]})",
            )
        pronunciations = [vocab.pronunciation(e.word) for e in entries]
        word_ids = [vocab.words_to_ids[e.word] for e in entries]
        phone_ids = [[vocab.phones_to_ids[p] for p in pron] for pron in pronunciations]

    def speaker(side: str) -> str:
        if speaker_of_side is None:
            return side
        if callable(speaker_of_side):
            return speaker_of_side(side)
        return speaker_of_side[side]

    return WordSplit(
        split=split,
        keys=[e.key for e in entries],
        words=[e.word for e in entries],
        sides=[e.side for e in entries],
        speakers=[speaker(e.side) for e in entries],
        starts=[e.start for e in entries],
        ends=[e.end for e in entries],
        feats=feats,
        pronunciations=pronunciations,
        word_ids=word_ids,
        phone_ids=phone_ids,
        vocab=vocab,
    )


UTTERANCE_PATTERN = re.compile(r"^(?P<side>[A-Za-z0-9]+-[AB])_(?P<start>\d{6,})-(?P<end>\d{6,})$")
"""Kaldi Switchboard utterance ids: ``sw02001-A_000098-001156`` (side, start and end in 10 ms)."""


def load_hdf5_word_split(
    features_path: str | os.PathLike[str],
    alignments_path: str | os.PathLike[str],
    split: str,
    *,
    feature_dim: int = 39,
    speaker_of_side: Mapping[str, str] | Callable[[str], str] | None = None,
) -> tuple[WordSplit, int]:
    """Word tokens cut from utterance features with word alignments (agwe-recipe's layout).

    agwe-recipe keeps one HDF5 file of utterance features (``fbank.<split>.hdf5``: utterance id
    -> (frames, F)) and one of alignments (``align-small.<split>.hdf5``: utterance id -> group
    with ``words`` (byte strings), ``starts`` and ``ends``, frames from the utterance start).
    As agwe-recipe's dataset does, a token is ``features[start:end]`` (it counts durations as
    ``end - start + 1`` but slices ``[start:end]``). The features must already be the model's
    input (``feature_dim`` columns, e.g. MFCC + Δ + ΔΔ). Each token gets the key of the list
    layout, ``<word>_<side>_<start>-<end>`` with frames from the start of the side (utterance
    start + offset), so both layouts give the same keys.

    Returns:
        ``(split, empty)``: the tokens in file order (utterances sorted by id), and the number
        of zero-length tokens (``end == start``) skipped.

    Raises:
        SwitchboardFormatError: naming the file and utterance (and the key where there is one):
            an utterance id that is not ``<side>_<start>-<end>``, an alignment group without
            ``words``/``starts``/``ends`` or with lists of different lengths, an utterance
            without features, features that are not (frames, ``feature_dim``) floats, or a word
            span outside the utterance or with ``end < start``.
    """
    import h5py

    features_path, alignments_path = Path(features_path), Path(alignments_path)
    for path in (features_path, alignments_path):
        if not path.is_file():
            raise SwitchboardFormatError(path, None, "HDF5 file not found")
    keys, words, sides, starts, ends, feats = [], [], [], [], [], []
    empty = 0

    def open_hdf5(path: Path) -> h5py.File:
        try:
            return h5py.File(path, "r")
        except OSError as err:
            raise SwitchboardFormatError(path, None, f"not a readable HDF5 file: {err}") from err

    feat_file = open_hdf5(features_path)
    align_file = open_hdf5(alignments_path)
    with feat_file, align_file:
        for utt in sorted(align_file):
            match = UTTERANCE_PATTERN.match(utt)
            if match is None:
                raise SwitchboardFormatError(
                    alignments_path,
                    None,
                    f"utterance {utt!r}: expected an id like 'sw02001-A_000098-001156'",
                )
            group = align_file[utt]
            missing = [k for k in ("words", "starts", "ends") if k not in group]
            if missing:
                raise SwitchboardFormatError(
                    alignments_path, None, f"utterance {utt!r}: no {', '.join(missing)}"
                )
            utt_words = [
                w.decode("utf-8") if isinstance(w, bytes) else str(w) for w in group["words"][()]
            ]
            utt_starts = [int(v) for v in group["starts"][()]]
            utt_ends = [int(v) for v in group["ends"][()]]
            if not len(utt_words) == len(utt_starts) == len(utt_ends):
                raise SwitchboardFormatError(
                    alignments_path,
                    None,
                    f"utterance {utt!r}: {len(utt_words)} words, {len(utt_starts)} starts, "
                    f"{len(utt_ends)} ends",
                )
            if utt not in feat_file:
                raise SwitchboardFormatError(features_path, None, f"no features for {utt!r}")
            matrix = feat_file[utt][()]
            if (
                matrix.ndim != 2
                or matrix.shape[1] != feature_dim
                or not np.issubdtype(matrix.dtype, np.floating)
            ):
                raise SwitchboardFormatError(
                    features_path,
                    None,
                    f"utterance {utt!r}: expected float features of shape (frames, "
                    f"{feature_dim}), got {matrix.dtype} {matrix.shape}",
                )
            offset = int(match["start"])
            for word, start, end in zip(utt_words, utt_starts, utt_ends, strict=True):
                if end == start:
                    empty += 1
                    continue
                if end < start:
                    raise SwitchboardFormatError(
                        alignments_path,
                        None,
                        f"utterance {utt!r}: word {word!r} ends (frame {end}) before it starts "
                        f"(frame {start})",
                    )
                try:
                    key = format_key(word, match["side"], offset + start, offset + end)
                except ValueError as err:
                    raise SwitchboardFormatError(
                        alignments_path, None, f"utterance {utt!r}: {err}"
                    ) from None
                if not 0 <= start < end <= matrix.shape[0]:
                    raise SwitchboardFormatError(
                        alignments_path,
                        None,
                        f"key {key!r} (utterance {utt!r}): span [{start}, {end}) is not inside "
                        f"its {matrix.shape[0]} frames",
                    )
                keys.append(key)
                words.append(word)
                sides.append(match["side"])
                starts.append(offset + start)
                ends.append(offset + end)
                feats.append(np.asarray(matrix[start:end], dtype=np.float32))
    if not keys:
        raise SwitchboardFormatError(alignments_path, None, "no word token in the alignments")

    def speaker(side: str) -> str:
        if speaker_of_side is None:
            return side
        return speaker_of_side(side) if callable(speaker_of_side) else speaker_of_side[side]

    split_data = WordSplit(
        split=split,
        keys=keys,
        words=words,
        sides=sides,
        speakers=[speaker(s) for s in sides],
        starts=starts,
        ends=ends,
        feats=feats,
        pronunciations=None,
        word_ids=None,
        phone_ids=None,
        vocab=None,
    )
    return split_data, empty


def key_seconds(entry: WordKey) -> tuple[float, float]:
    """``(start_s, end_s)`` of a key in seconds from the start of its side."""
    return entry.start * FRAME_SHIFT_S, entry.end * FRAME_SHIFT_S


__all__ = [
    "FRAME_SHIFT_S",
    "KEY_PATTERN",
    "UTTERANCE_PATTERN",
    "SPLITS",
    "SwitchboardFormatError",
    "WordKey",
    "WordSplit",
    "WordVocab",
    "format_key",
    "key_seconds",
    "load_hdf5_word_split",
    "load_vocab",
    "load_word_split",
    "parse_key",
    "read_word_list",
]
