"""Recording and supervision manifests in lhotse's JSONL format, read and checked strictly.

A corpus is described by two kinds of manifest lines, one JSON object per line (lhotse,
Żelasko et al. 2021, arXiv:2110.12561, ``RecordingSet`` / ``SupervisionSet`` ``.jsonl``):

- a :class:`Recording` is one audio file (or several files, one per channel group) with its
  sampling rate, its length in samples and in seconds, and the channel ids it provides::

      {"id": "rec1", "sources": [{"type": "file", "channels": [0], "source": "wav/rec1.wav"}],
       "sampling_rate": 16000, "num_samples": 48000, "duration": 3.0, "channel_ids": [0]}

- a :class:`Supervision` is a time span of a recording with its labels (text, speaker, language,
  free fields in ``custom``, time alignments in ``alignment``)::

      {"id": "rec1-0", "recording_id": "rec1", "start": 0.5, "duration": 1.2, "channel": 0,
       "text": "a dog barks", "custom": {"caption_index": 0}}

Files ending in ``.gz`` are gzip-compressed. Optional fields that are ``None`` are left out of
the written line, as lhotse does, so lhotse reads these manifests and we read lhotse's.

Every malformed line raises :class:`ManifestError` naming ``file:line``, the field, what was
expected and what was found. Tolerances (seconds):

- ``duration`` of a recording may differ from ``num_samples / sampling_rate`` by at most
  :data:`DURATION_TOLERANCE` (1 ms): lhotse writes the exact quotient, so a larger gap means the
  manifest was edited or written from the wrong file.
- a supervision (and each alignment item inside it) may overrun the end of its recording (or of
  the supervision) by at most ``max(1 ms, one sample)``: times written with a few decimals round
  up past the last sample.

:func:`validate` cross-checks recordings against supervisions; :func:`check_audio` checks the
manifests against the audio files' headers; :func:`check_manifest_dir` runs every check on a
directory of manifests (it is what ``python -m audiorepro.data check`` calls).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import soundfile

from audiorepro.data.problems import Problem
from audiorepro.data.sources import CorpusSources, load_sources, verify_downloads

DURATION_TOLERANCE = 1e-3
"""Largest allowed gap (s) between a recording's ``duration`` and ``num_samples/sampling_rate``."""

BOUNDS_TOLERANCE = 1e-3
"""Largest allowed overrun (s) of a span past its container; widened to one sample if larger."""

RECORDING_KEYS = (
    "id",
    "sources",
    "sampling_rate",
    "num_samples",
    "duration",
    "channel_ids",
    "transforms",
)
SUPERVISION_KEYS = (
    "id",
    "recording_id",
    "start",
    "duration",
    "channel",
    "text",
    "language",
    "speaker",
    "gender",
    "custom",
    "alignment",
)
SOURCE_KEYS = ("type", "channels", "source")
ALIGNMENT_KEYS = ("symbol", "start", "duration", "score")

MANIFEST_NAME = re.compile(r"^(?P<split>.+)_(?P<kind>recordings|supervisions)\.jsonl(?:\.gz)?$")
"""How manifest files in a directory are named: ``<split>_recordings.jsonl[.gz]`` and
``<split>_supervisions.jsonl[.gz]`` (``train_recordings.jsonl.gz`` belongs to split ``train``)."""

LHOTSE_RECIPE_NAME = re.compile(
    r"^(?P<corpus>[^_]+)_(?P<kind>recordings|supervisions)_(?P<split>.+)\.jsonl(?:\.gz)?$"
)
"""Lhotse recipes' own naming, also accepted: ``<corpus>_recordings_<split>.jsonl.gz``
(``librispeech_supervisions_dev-clean.jsonl.gz`` belongs to split ``dev-clean``)."""


class ManifestError(ValueError):
    """A malformed manifest line (or manifest object): file, 1-based line, field, and why.

    ``path`` and ``line`` are ``None`` when the object was built in code rather than read from a
    file; :func:`read_manifest` always fills them in.
    """

    def __init__(self, path: str | None, line: int | None, field: str, message: str) -> None:
        super().__init__(path, line, field, message)
        self.path = path
        self.line = line
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return str(self.problem)

    @property
    def problem(self) -> Problem:
        """The error as a :class:`Problem`, for checks that report every error at once."""
        return Problem(self.path or "<manifest>", self.line, self.field, self.message)

    def located(
        self, path: str | os.PathLike[str] | None, line: int | None, prefix: str = ""
    ) -> ManifestError:
        """A copy placed at ``path:line``, with ``prefix`` put in front of the field name."""
        return ManifestError(
            str(path) if path is not None else self.path,
            line if line is not None else self.line,
            f"{prefix}{self.field}",
            self.message,
        )


# --- value checks shared by the dataclasses ---------------------------------------------------


def _describe(value: Any) -> str:
    """A value as JSON would name it: ``string '16000'``, ``null``, ``list [0, 1]``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {_short(repr(value))}"
    if isinstance(value, list | tuple):
        return f"list {_short(repr(list(value)))}"
    if isinstance(value, dict):
        return f"object {_short(repr(value))}"
    return f"{type(value).__name__} {_short(repr(value))}"


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fail(field: str, expected: str, value: Any) -> ManifestError:
    return ManifestError(None, None, field, f"expected {expected}, got {_describe(value)}")


def _is_int(value: Any) -> bool:
    # bool is an int subclass; JSON true must never pass as a sample count.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_str(field: str, value: Any, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, str) or not value:
        raise _fail(field, "a non-empty string" + (" or null" if optional else ""), value)


def _check_int(field: str, value: Any, *, minimum: int) -> None:
    if not _is_int(value) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise _fail(field, what, value)


def _check_seconds(field: str, value: Any, *, positive: bool) -> None:
    if not _is_number(value) or value < 0 or (positive and value == 0):
        what = "a positive number of seconds" if positive else "a number of seconds >= 0"
        raise _fail(field, what, value)


def _int_tuple(field: str, value: Any) -> tuple[int, ...]:
    """A non-empty list of distinct channel indices (>= 0), as a tuple."""
    if not isinstance(value, list | tuple) or not value:
        raise _fail(field, "a non-empty list of channel indices", value)
    for v in value:
        if not _is_int(v) or v < 0:
            raise _fail(field, "a list of integers >= 0", value)
    if len(set(value)) != len(value):
        raise _fail(field, "distinct channel indices", value)
    return tuple(value)


def _overrun_tolerance(sampling_rate: int | None) -> float:
    if sampling_rate is None:
        return BOUNDS_TOLERANCE
    return max(BOUNDS_TOLERANCE, 1.0 / sampling_rate)


def _parse_keys(
    data: Any, what: str, keys: Sequence[str], required: Sequence[str]
) -> dict[str, Any]:
    """Check a JSON object's keys: every required key present, no unknown key."""
    if not isinstance(data, dict):
        raise _fail(what, "a JSON object", data)
    unknown = [k for k in data if k not in keys]
    if unknown:
        raise ManifestError(
            None,
            None,
            str(unknown[0]),
            f"unknown field in {what} (allowed: {', '.join(keys)})",
        )
    for key in required:
        if key not in data:
            raise ManifestError(None, None, key, f"missing required field of {what}")
    return data


# --- the manifest dataclasses ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AudioSource:
    """Where a recording's audio lives: one file providing the listed channels.

    Attributes:
        type: always ``"file"`` (lhotse also knows ``url``/``command``/``memory``; audiorepro
            reads local files only).
        channels: channel ids this file provides, in file order; a mono file is ``(0,)``.
        source: the file path; a relative path is resolved against the audio root given to the
            loaders and to ``check`` (``--root``), so manifests stay valid when the corpus moves.
    """

    type: str
    channels: tuple[int, ...]
    source: str

    def __post_init__(self) -> None:
        if self.type != "file":
            raise _fail("type", "'file' (the only source type audiorepro reads)", self.type)
        object.__setattr__(self, "channels", _int_tuple("channels", self.channels))
        _check_str("source", self.source)

    def to_dict(self) -> dict[str, Any]:
        """The lhotse JSON object ``{"type", "channels", "source"}``."""
        return {"type": self.type, "channels": list(self.channels), "source": self.source}

    @classmethod
    def from_dict(cls, data: Any) -> AudioSource:
        """Parse lhotse's JSON object; raises :class:`ManifestError` (without a location)."""
        data = _parse_keys(data, "an audio source", SOURCE_KEYS, SOURCE_KEYS)
        return cls(**data)

    def path(self, root: str | os.PathLike[str] | None = None) -> Path:
        """The file's path: ``source`` itself if absolute, else ``root / source``."""
        path = Path(self.source)
        if path.is_absolute() or root is None:
            return path
        return Path(root) / path


@dataclasses.dataclass(frozen=True)
class Recording:
    """One recording: audio source(s), sampling rate, length; lhotse's ``Recording``.

    Lists given to the constructor are stored as tuples, so equal manifests compare equal.
    ``origin`` is the ``(path, line)`` the recording was read from (``None`` when built in code);
    it is neither serialised nor compared.

    Attributes:
        id: unique within its manifest.
        sources: one :class:`AudioSource` per file; most corpora have exactly one.
        sampling_rate: Hz, as stored in the file (no resampling implied).
        num_samples: samples per channel in the file.
        duration: seconds; ``num_samples / sampling_rate`` within :data:`DURATION_TOLERANCE`.
        channel_ids: every channel id the sources provide.
        transforms: lhotse's audio transforms (speed perturbation, ...), kept as written.
    """

    id: str
    sources: tuple[AudioSource, ...]
    sampling_rate: int
    num_samples: int
    duration: float
    channel_ids: tuple[int, ...]
    transforms: tuple[dict[str, Any], ...] | None = None
    origin: tuple[str, int] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        _check_str("id", self.id)
        if not isinstance(self.sources, list | tuple) or not self.sources:
            raise _fail("sources", "a non-empty list of audio sources", self.sources)
        for i, source in enumerate(self.sources):
            if not isinstance(source, AudioSource):
                raise _fail(f"sources[{i}]", "an AudioSource", source)
        object.__setattr__(self, "sources", tuple(self.sources))
        _check_int("sampling_rate", self.sampling_rate, minimum=1)
        _check_int("num_samples", self.num_samples, minimum=1)
        _check_seconds("duration", self.duration, positive=True)
        object.__setattr__(self, "channel_ids", _int_tuple("channel_ids", self.channel_ids))
        provided = sorted(c for s in self.sources for c in s.channels)
        if sorted(self.channel_ids) != provided:
            raise ManifestError(
                None,
                None,
                "channel_ids",
                f"expected the channels the sources provide {provided}, "
                f"got {list(self.channel_ids)}",
            )
        expected = self.num_samples / self.sampling_rate
        if abs(self.duration - expected) > DURATION_TOLERANCE:
            raise ManifestError(
                None,
                None,
                "duration",
                f"expected num_samples / sampling_rate = {self.num_samples}/"
                f"{self.sampling_rate} = {expected:.6f} s (tolerance "
                f"{DURATION_TOLERANCE * 1e3:g} ms), got {self.duration!r}",
            )
        if self.transforms is not None:
            if not isinstance(self.transforms, list | tuple) or not all(
                isinstance(t, dict) for t in self.transforms
            ):
                raise _fail("transforms", "null or a list of objects", self.transforms)
            object.__setattr__(self, "transforms", tuple(self.transforms))

    @property
    def num_channels(self) -> int:
        """Number of channels over all sources."""
        return len(self.channel_ids)

    def to_dict(self) -> dict[str, Any]:
        """The lhotse JSON object; ``transforms`` is left out when ``None``, as lhotse does."""
        data: dict[str, Any] = {
            "id": self.id,
            "sources": [s.to_dict() for s in self.sources],
            "sampling_rate": self.sampling_rate,
            "num_samples": self.num_samples,
            "duration": self.duration,
            "channel_ids": list(self.channel_ids),
        }
        if self.transforms is not None:
            data["transforms"] = [dict(t) for t in self.transforms]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Recording:
        """Parse lhotse's JSON object; raises :class:`ManifestError` (without a location)."""
        data = _parse_keys(data, "a recording", RECORDING_KEYS, RECORDING_KEYS[:-1])
        sources = data["sources"]
        if not isinstance(sources, list) or not sources:
            raise _fail("sources", "a non-empty list of audio sources", sources)
        parsed = []
        for i, source in enumerate(sources):
            try:
                parsed.append(AudioSource.from_dict(source))
            except ManifestError as err:
                raise err.located(None, None, prefix=f"sources[{i}].") from None
        return cls(**{**data, "sources": parsed})

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        id: str | None = None,
        relative_to: str | os.PathLike[str] | None = None,
    ) -> Recording:
        """A recording built from an audio file's header (no samples are read).

        Args:
            path: the audio file.
            id: the recording id; defaults to the file name without its suffix.
            relative_to: the audio root; ``source`` is written relative to it (POSIX
                separators) so that the manifest does not depend on where the corpus lives.
        """
        path = Path(path)
        info = soundfile.info(str(path))
        if relative_to is None:
            source = str(path)
        else:
            # abspath (not resolve) so that a symlinked corpus root still contains its files.
            absolute, root = Path(os.path.abspath(path)), Path(os.path.abspath(relative_to))
            if not absolute.is_relative_to(root):
                raise ValueError(f"{path} is not inside the audio root {relative_to}")
            source = absolute.relative_to(root).as_posix()
        channels = tuple(range(info.channels))
        return cls(
            id=id if id is not None else path.stem,
            sources=(AudioSource("file", channels, source),),
            sampling_rate=info.samplerate,
            num_samples=info.frames,
            duration=info.frames / info.samplerate,
            channel_ids=channels,
        )


@dataclasses.dataclass(frozen=True)
class AlignmentItem:
    """One aligned symbol (a phone, a word): times in seconds from the recording's start.

    lhotse writes items as ``[symbol, start, duration, score]`` lists since v1.8 and as objects
    before; we write the object form ``{"symbol", "start", "duration", "score"}`` (keys in field
    order, which lhotse still reads) and read both.
    """

    symbol: str
    start: float
    duration: float
    score: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.symbol, str):
            raise _fail("symbol", "a string", self.symbol)
        _check_seconds("start", self.start, positive=False)
        _check_seconds("duration", self.duration, positive=False)
        if self.score is not None and not _is_number(self.score):
            raise _fail("score", "a number or null", self.score)

    @property
    def end(self) -> float:
        """``start + duration`` (s)."""
        return self.start + self.duration

    def to_dict(self) -> dict[str, Any]:
        """``{"symbol", "start", "duration", "score"}``."""
        return {
            "symbol": self.symbol,
            "start": self.start,
            "duration": self.duration,
            "score": self.score,
        }

    @classmethod
    def from_dict(cls, data: Any) -> AlignmentItem:
        """Parse an item written as an object or as a ``[symbol, start, duration(, score)]``."""
        if isinstance(data, list):
            if len(data) not in (3, 4):
                raise _fail("", "[symbol, start, duration] or [.., score]", data)
            return cls(*data)
        data = _parse_keys(data, "an alignment item", ALIGNMENT_KEYS, ALIGNMENT_KEYS[:3])
        return cls(**data)


@dataclasses.dataclass(frozen=True)
class Supervision:
    """A labelled time span of a recording; lhotse's ``SupervisionSegment``.

    ``origin`` is the ``(path, line)`` it was read from (``None`` when built in code); it is
    neither serialised nor compared. Instances holding ``custom`` or ``alignment`` are not
    hashable (those are dicts).

    Attributes:
        id: unique within its manifest.
        recording_id: the :class:`Recording` it annotates.
        start: seconds from the recording's start (>= 0).
        duration: seconds (> 0).
        channel: the channel id, or a tuple of ids for a span shared by several channels.
        text: transcript or caption.
        language: language name or code.
        speaker: speaker id.
        gender: speaker gender as the corpus states it.
        custom: free JSON fields (caption index, keywords, pronunciation, ...).
        alignment: ``{"phone": (AlignmentItem, ...), "word": (...)}``; items must lie inside the
            supervision (within the overrun tolerance).
    """

    id: str
    recording_id: str
    start: float
    duration: float
    channel: int | tuple[int, ...] = 0
    text: str | None = None
    language: str | None = None
    speaker: str | None = None
    gender: str | None = None
    custom: dict[str, Any] | None = None
    alignment: dict[str, tuple[AlignmentItem, ...]] | None = None
    origin: tuple[str, int] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        _check_str("id", self.id)
        _check_str("recording_id", self.recording_id)
        _check_seconds("start", self.start, positive=False)
        _check_seconds("duration", self.duration, positive=True)
        if isinstance(self.channel, list | tuple):
            object.__setattr__(self, "channel", _int_tuple("channel", self.channel))
        elif not _is_int(self.channel) or self.channel < 0:
            raise _fail("channel", "a channel index >= 0 or a list of them", self.channel)
        for name in ("text", "language", "speaker", "gender"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise _fail(name, "a string or null", value)
        if self.custom is not None and (
            not isinstance(self.custom, dict) or not all(isinstance(k, str) for k in self.custom)
        ):
            raise _fail("custom", "null or an object with string keys", self.custom)
        if self.alignment is not None:
            object.__setattr__(self, "alignment", self._checked_alignment(self.alignment))

    def _checked_alignment(self, alignment: Any) -> dict[str, tuple[AlignmentItem, ...]]:
        if not isinstance(alignment, dict):
            raise _fail("alignment", "null or an object {kind: [items]}", alignment)
        tolerance = _overrun_tolerance(None)
        checked = {}
        for kind, items in alignment.items():
            if not isinstance(kind, str) or not isinstance(items, list | tuple):
                raise _fail(f"alignment.{kind}", "a list of alignment items", items)
            for i, item in enumerate(items):
                where = f"alignment.{kind}[{i}]"
                if not isinstance(item, AlignmentItem):
                    raise _fail(where, "an AlignmentItem", item)
                if item.start < self.start - tolerance or item.end > self.end + tolerance:
                    raise ManifestError(
                        None,
                        None,
                        where,
                        f"{item.symbol!r} spans {item.start:.4f}-{item.end:.4f} s, outside the "
                        f"supervision {self.start:.4f}-{self.end:.4f} s (tolerance "
                        f"{tolerance * 1e3:g} ms)",
                    )
            checked[kind] = tuple(items)
        return checked

    @property
    def end(self) -> float:
        """``start + duration`` (s)."""
        return self.start + self.duration

    @property
    def channels(self) -> tuple[int, ...]:
        """``channel`` as a tuple, whether one channel or several."""
        return self.channel if isinstance(self.channel, tuple) else (self.channel,)

    def to_dict(self) -> dict[str, Any]:
        """The lhotse JSON object; optional fields that are ``None`` are left out."""
        data: dict[str, Any] = {
            "id": self.id,
            "recording_id": self.recording_id,
            "start": self.start,
            "duration": self.duration,
            "channel": list(self.channel) if isinstance(self.channel, tuple) else self.channel,
        }
        for name in ("text", "language", "speaker", "gender", "custom"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.alignment is not None:
            data["alignment"] = {
                kind: [item.to_dict() for item in items] for kind, items in self.alignment.items()
            }
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Supervision:
        """Parse lhotse's JSON object; raises :class:`ManifestError` (without a location)."""
        data = _parse_keys(data, "a supervision", SUPERVISION_KEYS, SUPERVISION_KEYS[:4])
        alignment = data.get("alignment")
        if isinstance(alignment, dict):
            parsed: dict[str, list[AlignmentItem]] = {}
            for kind, items in alignment.items():
                if not isinstance(items, list):
                    raise _fail(f"alignment.{kind}", "a list of alignment items", items)
                parsed[kind] = []
                for i, item in enumerate(items):
                    try:
                        parsed[kind].append(AlignmentItem.from_dict(item))
                    except ManifestError as err:
                        prefix = f"alignment.{kind}[{i}]" + ("." if err.field else "")
                        raise err.located(None, None, prefix=prefix) from None
            data = {**data, "alignment": parsed}
        return cls(**data)


Item = Recording | Supervision


def item_from_dict(data: Any) -> Item:
    """A :class:`Recording` (the object has ``sources``) or a :class:`Supervision` (it has
    ``recording_id``); raises :class:`ManifestError` (without a location)."""
    if isinstance(data, dict) and "sources" in data:
        return Recording.from_dict(data)
    if isinstance(data, dict) and "recording_id" in data:
        return Supervision.from_dict(data)
    raise _fail(
        "<line>",
        "a recording (an object with 'sources') or a supervision (with 'recording_id')",
        data,
    )


# --- reading and writing -----------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a plain or gzipped UTF-8 file; I/O errors become
    :class:`ManifestError` at the line where reading stopped."""
    lineno = 0
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, text in enumerate(f, start=1):
                yield lineno, text
    except FileNotFoundError:
        raise ManifestError(str(path), None, "file", "manifest file not found") from None
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise ManifestError(
            str(path), lineno + 1, "file", f"cannot read the manifest: {err}"
        ) from err


def _parse_file(
    path: str | os.PathLike[str],
    expected: type | None = None,
    problems: list[Problem] | None = None,
) -> tuple[list[Item], int]:
    """Parse a manifest, returning its items and its number of non-blank lines.

    With ``problems=None`` the first malformed line raises; otherwise every malformed line is
    appended to ``problems`` and skipped, so a check can report them all.
    """
    path = Path(path)
    items: list[Item] = []
    first_line: dict[tuple[type, str], int] = {}
    records = 0

    def report(err: ManifestError) -> None:
        if problems is None:
            raise err
        problems.append(err.problem)

    try:
        for lineno, text in _lines(path):
            if not text.strip():
                continue  # a blank line (a trailing newline) holds no record
            records += 1
            try:
                try:
                    data = json.loads(text, parse_constant=_reject_constant)
                except ValueError as err:
                    raise ManifestError(None, None, "<line>", f"not valid JSON: {err}") from err
                item = item_from_dict(data)
                if expected is not None and not isinstance(item, expected):
                    raise ManifestError(
                        None,
                        None,
                        "<line>",
                        f"expected a {expected.__name__.lower()} in this manifest, "
                        f"got a {type(item).__name__.lower()}",
                    )
                key = (type(item), item.id)
                if key in first_line:
                    raise ManifestError(
                        None,
                        None,
                        "id",
                        f"duplicate {type(item).__name__.lower()} id {item.id!r} "
                        f"(first on line {first_line[key]})",
                    )
            except ManifestError as err:
                report(err.located(path, lineno))
                continue
            first_line[key] = lineno
            object.__setattr__(item, "origin", (str(path), lineno))
            items.append(item)
    except ManifestError as err:
        if err.path != str(path) or problems is None:
            raise
        problems.append(err.problem)
    return items, records


def read_manifest(path: str | os.PathLike[str]) -> list[Item]:
    """Every recording and supervision in a ``.jsonl`` / ``.jsonl.gz`` manifest, in file order.

    The type of each line is detected from its keys (see :func:`item_from_dict`); blank lines
    are skipped. Raises :class:`ManifestError` at the first malformed line or duplicate id.
    """
    return _parse_file(path)[0]


def read_recordings(path: str | os.PathLike[str]) -> list[Recording]:
    """The recordings of a manifest; a supervision line is a :class:`ManifestError`."""
    return _parse_file(path, Recording)[0]  # type: ignore[return-value]


def read_supervisions(path: str | os.PathLike[str]) -> list[Supervision]:
    """The supervisions of a manifest; a recording line is a :class:`ManifestError`."""
    return _parse_file(path, Supervision)[0]  # type: ignore[return-value]


def write_manifest(path: str | os.PathLike[str], items: Iterable[Item]) -> Path:
    """Write items as JSONL (gzip if ``path`` ends in ``.gz``), atomically; returns the path.

    The file is written to a temporary name in the same directory and moved into place with
    ``os.replace``, so a reader never sees half a manifest. Gzip output has no timestamp or
    file name in its header, so equal manifests are byte-identical files. Duplicate ids (per
    type) raise :class:`ManifestError` at the line they would have had, and nothing is written.
    """
    path = Path(path)
    lines = []
    first_line: dict[tuple[type, str], int] = {}
    for lineno, item in enumerate(items, start=1):
        if not isinstance(item, Recording | Supervision):
            raise ManifestError(
                str(path), lineno, "<line>", f"expected a Recording or a Supervision, got {item!r}"
            )
        key = (type(item), item.id)
        if key in first_line:
            raise ManifestError(
                str(path),
                lineno,
                "id",
                f"duplicate {type(item).__name__.lower()} id {item.id!r} "
                f"(first on line {first_line[key]})",
            )
        first_line[key] = lineno
        try:
            lines.append(json.dumps(item.to_dict(), ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError) as err:
            raise ManifestError(
                str(path), lineno, "custom", f"not JSON-serialisable: {err}"
            ) from err
    payload = "".join(line + "\n" for line in lines).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            if path.name.endswith(".gz"):
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                    gz.write(payload)
            else:
                raw.write(payload)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# --- checks ------------------------------------------------------------------------------------


def _where(item: Item, default_path: str, index: int) -> tuple[str, int]:
    return item.origin if item.origin is not None else (default_path, index + 1)


def validate(
    recordings: Sequence[Recording], supervisions: Sequence[Supervision]
) -> list[Problem]:
    """Cross-check supervisions against recordings; every problem, none raised.

    Reports duplicate recording or supervision ids, supervisions whose ``recording_id`` is
    unknown, whose channel the recording lacks, or that end after the recording (tolerance
    ``max(1 ms, one sample)``). Problems point at each item's ``origin``; items built in code
    are located as ``<recordings>:i`` / ``<supervisions>:i`` (1-based position in the list).
    """
    problems = []
    by_id: dict[str, Recording] = {}
    first_at: dict[str, tuple[str, int]] = {}
    for i, rec in enumerate(recordings):
        path, line = _where(rec, "<recordings>", i)
        if rec.id in by_id:
            first = first_at[rec.id]
            problems.append(
                Problem(
                    path,
                    line,
                    "id",
                    f"duplicate recording id {rec.id!r} (first at {first[0]}:{first[1]})",
                )
            )
            continue
        by_id[rec.id] = rec
        first_at[rec.id] = (path, line)
    seen: dict[str, tuple[str, int]] = {}
    for i, sup in enumerate(supervisions):
        path, line = _where(sup, "<supervisions>", i)
        if sup.id in seen:
            first = seen[sup.id]
            problems.append(
                Problem(
                    path,
                    line,
                    "id",
                    f"duplicate supervision id {sup.id!r} (first at {first[0]}:{first[1]})",
                )
            )
            continue
        seen[sup.id] = (path, line)
        rec = by_id.get(sup.recording_id)
        if rec is None:
            problems.append(
                Problem(path, line, "recording_id", f"unknown recording {sup.recording_id!r}")
            )
            continue
        missing = sorted(set(sup.channels) - set(rec.channel_ids))
        if missing:
            problems.append(
                Problem(
                    path,
                    line,
                    "channel",
                    f"recording {rec.id!r} has channels {list(rec.channel_ids)}, not {missing}",
                )
            )
        tolerance = _overrun_tolerance(rec.sampling_rate)
        if sup.end > rec.duration + tolerance:
            field = "start" if sup.start >= rec.duration else "duration"
            problems.append(
                Problem(
                    path,
                    line,
                    field,
                    f"supervision {sup.start:.4f}-{sup.end:.4f} s ends "
                    f"after recording {rec.id!r} ({rec.duration:.4f} s, tolerance "
                    f"{tolerance * 1e3:g} ms)",
                )
            )
    return problems


SAMPLE_BLOCK = 1 << 18
"""Frames decoded at a time by :func:`check_samples` (bounded memory on long recordings)."""


def check_samples(audio: Path, where: tuple[str, int | None], field: str) -> list[Problem]:
    """Decode every sample of ``audio``: a problem if it cannot be decoded or holds NaN or
    infinite samples (their count and the first one's frame index)."""
    path, line = where
    bad = first = decoded = 0
    try:
        with soundfile.SoundFile(str(audio)) as fh:
            for block in fh.blocks(blocksize=SAMPLE_BLOCK, dtype="float64", always_2d=True):
                finite = np.isfinite(block)
                if not finite.all():
                    if not bad:
                        first = decoded + int(np.argmin(finite.all(axis=1)))
                    bad += int((~finite).sum())
                decoded += block.shape[0]
    except (soundfile.SoundFileError, RuntimeError, OSError) as err:
        return [Problem(path, line, field, f"cannot decode the samples of {audio}: {err}")]
    if not bad:
        return []
    message = (
        f"{audio}: {bad} non-finite (NaN or inf) sample(s), the first at frame {first}; "
        "expected finite samples"
    )
    return [Problem(path, line, field, message)]


def check_audio(
    recordings: Sequence[Recording], root: str | os.PathLike[str], *, samples: bool = False
) -> list[Problem]:
    """Check every recording against its audio file's header; every problem, none raised.

    Each file source must exist (relative sources are resolved under ``root``), be readable
    by libsndfile (soundfile), and agree with the manifest on sampling rate, number of samples
    and number of channels. By default only headers are read, so this is fast on large corpora
    but blind to the samples (a file full of NaN passes); ``samples=True`` also decodes every
    file (:func:`check_samples`): undecodable or short data and NaN or infinite samples are
    problems naming the file.
    """
    problems = []
    for i, rec in enumerate(recordings):
        path, line = _where(rec, "<recordings>", i)
        for j, source in enumerate(rec.sources):
            field = f"sources[{j}]"
            audio = source.path(root)
            if not audio.is_file():
                problems.append(
                    Problem(path, line, f"{field}.source", f"audio file not found: {audio}")
                )
                continue
            try:
                info = soundfile.info(str(audio))
            except (soundfile.SoundFileError, RuntimeError, OSError) as err:
                problems.append(
                    Problem(
                        path,
                        line,
                        f"{field}.source",
                        f"cannot read the audio header of {audio}: {err}",
                    )
                )
                continue
            if info.samplerate != rec.sampling_rate:
                problems.append(
                    Problem(
                        path,
                        line,
                        "sampling_rate",
                        f"manifest says {rec.sampling_rate} Hz, {audio} is {info.samplerate} Hz",
                    )
                )
            if info.frames != rec.num_samples:
                problems.append(
                    Problem(
                        path,
                        line,
                        "num_samples",
                        f"manifest says {rec.num_samples}, {audio} has {info.frames}",
                    )
                )
            if info.channels != len(source.channels):
                problems.append(
                    Problem(
                        path,
                        line,
                        f"{field}.channels",
                        f"manifest lists "
                        f"{len(source.channels)} channel(s) {list(source.channels)}, "
                        f"{audio} has {info.channels}",
                    )
                )
            if samples:
                problems.extend(check_samples(audio, (path, line), f"{field}.samples"))
    return problems


def find_manifests(
    manifest_dir: str | os.PathLike[str], problems: list[Problem] | None = None
) -> dict[str, dict[str, Path]]:
    """``{split: {"recordings": path, "supervisions": path}}`` for the manifests in a directory.

    Files are named ``<split>_recordings.jsonl[.gz]`` and ``<split>_supervisions.jsonl[.gz]``
    (see :data:`MANIFEST_NAME`), or as lhotse recipes name them,
    ``<corpus>_recordings_<split>.jsonl.gz`` (:data:`LHOTSE_RECIPE_NAME`); the directory is not searched recursively. A ``*recordings*``
    or ``*supervisions*`` JSONL file that breaks the rule, or a split with both a ``.jsonl`` and
    a ``.jsonl.gz`` of the same kind, is appended to ``problems`` (when given) and skipped.
    """
    found: dict[str, dict[str, Path]] = {}
    for path in sorted(Path(manifest_dir).iterdir()):
        if not path.is_file() or not re.search(r"\.jsonl(\.gz)?$", path.name):
            continue
        match = MANIFEST_NAME.match(path.name) or LHOTSE_RECIPE_NAME.match(path.name)
        if match is None:
            if problems is not None and re.search("recordings|supervisions", path.name):
                problems.append(
                    Problem(
                        str(path),
                        None,
                        "name",
                        "expected <split>_recordings.jsonl[.gz] "
                        "or <split>_supervisions.jsonl[.gz]; file skipped",
                    )
                )
            continue
        split, kind = match["split"], match["kind"]
        if kind in found.get(split, {}):
            if problems is not None:
                problems.append(
                    Problem(
                        str(path),
                        None,
                        "name",
                        f"split {split!r} already has a {kind} "
                        f"manifest {found[split][kind].name}; file skipped",
                    )
                )
            continue
        found.setdefault(split, {})[kind] = path
    return found


def check_manifest_dir(
    manifest_dir: str | os.PathLike[str],
    root: str | os.PathLike[str],
    sources: CorpusSources | str | os.PathLike[str] | None = None,
    checksums: bool = False,
    samples: bool = False,
) -> list[Problem]:
    """Every problem with a directory of manifests and the audio they describe.

    Reads each split's ``<split>_recordings.jsonl[.gz]`` and ``<split>_supervisions.jsonl[.gz]``
    (every malformed line is a problem; the rest are checked), then runs :func:`validate`
    and :func:`check_audio` (relative sources under ``root``). With ``sources`` (a
    :class:`~audiorepro.data.sources.CorpusSources` or the path of a ``sources.yaml``) it also
    checks the corpus sampling rate and that each split's number of recording and supervision
    lines equals ``expected_counts``; with ``checksums=True`` it checks the downloaded files
    listed in ``files`` under ``root`` (:func:`~audiorepro.data.sources.verify_downloads`).
    Audio files are checked by their headers only unless ``samples=True``, which decodes every
    one and reports NaN or infinite samples (:func:`check_audio`).

    Raises:
        NotADirectoryError: ``manifest_dir`` is not a directory.
        ValueError: ``checksums=True`` without ``sources``.
        SourcesError: the ``sources.yaml`` is malformed.
    """
    manifest_dir = Path(manifest_dir)
    if not manifest_dir.is_dir():
        raise NotADirectoryError(f"{manifest_dir}: not a directory of manifests")
    if checksums and sources is None:
        raise ValueError("checksums=True needs sources (the sources.yaml listing the files)")
    if isinstance(sources, str | os.PathLike):
        sources = load_sources(sources)

    problems: list[Problem] = []
    splits = find_manifests(manifest_dir, problems)
    if not splits:
        problems.append(
            Problem(
                str(manifest_dir),
                None,
                "manifests",
                "no <split>_recordings.jsonl[.gz] or <split>_supervisions.jsonl[.gz] files",
            )
        )
    counts: dict[str, dict[str, int]] = {}
    for split, files in sorted(splits.items()):
        recordings: list[Any] = []
        supervisions: list[Any] = []
        counts[split] = {"recordings": 0, "supervisions": 0}
        if "recordings" in files:
            recordings, counts[split]["recordings"] = _parse_file(
                files["recordings"], Recording, problems
            )
        else:
            problems.append(
                Problem(
                    str(files["supervisions"]),
                    None,
                    "recordings",
                    f"split {split!r} has supervisions but no {split}_recordings.jsonl[.gz]",
                )
            )
        if "supervisions" in files:
            supervisions, counts[split]["supervisions"] = _parse_file(
                files["supervisions"], Supervision, problems
            )
        if sources is not None and sources.sampling_rate is not None:
            rate_at = ":".join(str(p) for p in sources.where("sampling_rate") if p is not None)
            for rec in recordings:
                if rec.sampling_rate != sources.sampling_rate:
                    problems.append(
                        Problem(
                            *rec.origin,
                            "sampling_rate",
                            f"expected the corpus rate "
                            f"{sources.sampling_rate} Hz ({rate_at}), got {rec.sampling_rate}",
                        )
                    )
        if "recordings" in files:
            # Without a recordings manifest every supervision would also be "unknown".
            problems.extend(validate(recordings, supervisions))
        problems.extend(check_audio(recordings, root, samples=samples))

    if sources is not None:
        problems.extend(_check_counts(sources, counts, manifest_dir))
        if checksums:
            problems.extend(verify_downloads(sources, root, checksums=True))
    return problems


def _check_counts(
    sources: CorpusSources, counts: Mapping[str, Mapping[str, int]], manifest_dir: Path
) -> list[Problem]:
    """Compare each split's number of manifest lines with ``expected_counts``."""
    problems = []
    for split, expected in sources.expected_counts.items():
        for kind in ("recordings", "supervisions"):
            want = getattr(expected, kind)
            got = counts.get(split, {}).get(kind, 0)
            if got != want:
                path, line = sources.where(f"expected_counts.{split}.{kind}")
                problems.append(
                    Problem(
                        path,
                        line,
                        f"expected_counts.{split}.{kind}",
                        f"expected {want} "
                        f"{kind} in split {split!r}, found {got} in {manifest_dir}",
                    )
                )
    for split in counts:
        if split not in sources.expected_counts:
            path, line = sources.where("expected_counts")
            problems.append(
                Problem(
                    path,
                    line,
                    "expected_counts",
                    f"no expected counts for split {split!r} (found in {manifest_dir})",
                )
            )
    return problems
