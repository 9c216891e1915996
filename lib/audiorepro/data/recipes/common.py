"""What the recipes share: :class:`RecipeError`, strict CSV reading, a recording from an audio
file's header, a whole-recording caption supervision, audio lookup and split checks."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import soundfile

from audiorepro.data.manifests import ManifestError, Recording, Supervision


class RecipeError(ValueError):
    """Malformed corpus input: ``path``, 1-based ``line`` (or ``None``) and what is wrong."""

    def __init__(self, path: str | os.PathLike[str], line: int | None, message: str) -> None:
        super().__init__(str(path), line, message)
        self.path = str(path)
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


def read_csv(
    path: str | os.PathLike[str],
    expected_header: Sequence[str],
    *,
    encoding: str = "utf-8",
    what: str = "",
) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of a CSV file with exactly ``expected_header``, as ``(line number, {column: value})``.

    Values are stripped of surrounding whitespace. The line number is where the row starts in
    the file (quoted fields may span lines). A UTF-8 byte-order mark is ignored.

    Raises:
        RecipeError: file missing (naming ``what`` it should be), undecodable, a header other
            than ``expected_header`` (both shown), or a row with a different number of fields.
    """
    path = Path(path)
    if not path.is_file():
        raise RecipeError(path, None, f"file not found{f' (expected {what})' if what else ''}")
    expected = list(expected_header)
    enc = "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding
    try:
        with open(path, encoding=enc, newline="") as f:
            reader = csv.reader(f)
            start = 1
            header = next(reader, None)
            if header is None:
                raise RecipeError(path, 1, f"empty file; expected the header {','.join(expected)}")
            if [h.strip() for h in header] != expected:
                raise RecipeError(
                    path,
                    1,
                    f"wrong CSV header: expected {','.join(expected)!r}, got {','.join(header)!r}",
                )
            start = reader.line_num + 1
            for row in reader:
                if not row or all(not v.strip() for v in row):
                    start = reader.line_num + 1
                    continue
                if len(row) != len(expected):
                    raise RecipeError(
                        path,
                        start,
                        f"expected {len(expected)} fields ({','.join(expected)}), got {len(row)}",
                    )
                yield start, {k: v.strip() for k, v in zip(expected, row, strict=True)}
                start = reader.line_num + 1
    except UnicodeDecodeError as err:
        raise RecipeError(path, None, f"not valid {encoding} text: {err}") from err
    except csv.Error as err:
        raise RecipeError(path, None, f"malformed CSV: {err}") from err


def recording_from_audio(
    audio: Path, recording_id: str, root: Path, listed_at: tuple[str | Path, int | None]
) -> Recording:
    """A :class:`Recording` from an audio file's header, its source relative to ``root``.

    Raises:
        RecipeError: the file is missing (located at ``listed_at``, where the corpus lists
            it), unreadable, or empty.
    """
    if not audio.is_file():
        raise RecipeError(*listed_at, f"audio file listed here is missing: {audio}")
    try:
        return Recording.from_file(audio, id=recording_id, relative_to=root)
    except (soundfile.LibsndfileError, RuntimeError, OSError) as err:
        raise RecipeError(audio, None, f"cannot read the audio file: {err}") from err
    except ManifestError as err:
        raise RecipeError(audio, None, f"not usable as a recording: {err.message}") from err


def caption_supervision(
    recording: Recording, supervision_id: str, text: str, custom: dict[str, Any]
) -> Supervision:
    """A supervision over the whole recording holding one caption (all channels)."""
    channels = recording.channel_ids
    return Supervision(
        id=supervision_id,
        recording_id=recording.id,
        start=0.0,
        duration=recording.duration,
        channel=channels[0] if len(channels) == 1 else channels,
        text=text,
        language="en",
        custom=custom,
    )


def find_audio(folder: Path, stem: str, extensions: Sequence[str]) -> Path:
    """``folder/<stem><ext>`` for the first extension that exists, else the first candidate."""
    candidates = [folder / f"{stem}{ext}" for ext in extensions]
    for path in candidates:
        if path.is_file():
            return path
    return candidates[0]


def check_splits(requested: Sequence[str], valid: Sequence[str], corpus: str) -> list[str]:
    """``requested`` as a list, or :class:`ValueError` naming the corpus's valid splits."""
    if isinstance(requested, str):
        requested = [requested]
    unknown = [s for s in requested if s not in valid]
    if unknown:
        raise ValueError(f"unknown {corpus} split(s) {unknown}; valid: {', '.join(valid)}")
    return list(requested)


__all__ = [
    "RecipeError",
    "caption_supervision",
    "check_splits",
    "find_audio",
    "read_csv",
    "recording_from_audio",
]
