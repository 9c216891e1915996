"""ZeroSpeech 2019 ("TTS without T") on disk: manifests, ABX item files and file lists.

The recipe reads a ZeroSpeech 2019 language folder, the real one or the embedded look-alike of
:mod:`audiorepro.data.embedded.zerospeech_corpus`, laid out as the challenge distributes it
(``shared/reference/zerospeech.md`` §5)::

    <language>/                      english or surprise (Indonesian)
      train/unit/S015_0000123456.wav unit-discovery speech, many speakers
      train/voice/V001_0000654321.wav  the target voice(s) V001 (and V002 for English)
      test/S002_0006942614.wav       test files (mostly triphone-sized excerpts)

All audio is 16 kHz mono 16-bit; the speaker is the file-name prefix before the first ``_``
(the convention of the challenge's baselines, e.g. ``andi611/ZeroSpeech-TTS-without-T``
``preprocess.py``). :func:`prepare_zerospeech2019` writes one lhotse manifest pair per split,
``train-unit``, ``train-voice`` and ``test``, with one whole-file supervision per wav.

It also reads and writes the text formats of the evaluation (§1.2, §2.1, §5):

- the ABX **item file** (ABXpy ``database.load``), whitespace separated, one header line
  ``#file onset offset #phone prev-phone next-phone speaker`` and one item per line, times in
  seconds, ``#file`` the test file name without extension (:func:`read_item_file`,
  :func:`write_item_file`);
- the **bitrate file list** ``share/2019/<lang>/bitrate_filelist.txt``: ``S011_4019527684.txt
  4.883875``, the embedding file name and the wav duration in seconds; the embedding file list
  has the same format (:func:`read_bitrate_filelist`, :func:`write_filelist`);
- the **synthesis list** ``synthesis.txt``: ``test/S002_0379088085 V002``, a test file to
  resynthesise in a target voice (:func:`read_synthesis_list`);
- the **embedding files** of a submission, ``<file id>.txt`` with one frame per line
  (space-separated floats: features, one-hot or codebook vectors), read by the ABX scorer and the
  bitrate alike (:func:`read_embedding_file`).

Every malformed line raises :class:`ZeroSpeechFormatError` naming ``file:line``, what was
expected and what was found.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from audiorepro.data.manifests import Recording, Supervision, write_manifest
from audiorepro.data.recipes.common import RecipeError

SPLITS: dict[str, str] = {
    "train-unit": "train/unit",
    "train-voice": "train/voice",
    "test": "test",
}
"""Manifest split name -> folder inside the language folder, as in the 2019 release."""

LANGUAGE_CODES: dict[str, str] = {"english": "en", "surprise": "id"}
"""ZeroSpeech 2019 language folder -> language code (the surprise language is Indonesian)."""

ITEM_HEADER: tuple[str, ...] = (
    "#file",
    "onset",
    "offset",
    "#phone",
    "prev-phone",
    "next-phone",
    "speaker",
)
"""Columns of a ZeroSpeech ABX item file (ABXpy: ``#file onset offset``, then the labels from
the second ``#`` column on)."""

SAMPLE_RATE = 16_000
"""Sampling rate of every ZeroSpeech 2019 wav (Hz)."""

_SPEAKER = re.compile(r"^(?P<speaker>[^_\s]+)_(?P<utterance>[^\s]+)$")


class ZeroSpeechFormatError(RecipeError):
    """A malformed ZeroSpeech file or folder: ``path:line: message``."""


@dataclasses.dataclass(frozen=True)
class AbxItem:
    """One line of an ABX item file: a phone token in its context, spoken by a speaker.

    Attributes:
        file: the test file name without extension (``S002_0006942614``).
        onset: start of the item in seconds from the start of the file.
        offset: end of the item in seconds (> onset).
        phone: the central phone (the ABX ``on`` label).
        prev_phone: the phone before it (context, the ``by`` label with ``next_phone``).
        next_phone: the phone after it.
        speaker: the speaker (the ``across`` label).
    """

    file: str
    onset: float
    offset: float
    phone: str
    prev_phone: str
    next_phone: str
    speaker: str

    @property
    def context(self) -> tuple[str, str]:
        """``(prev_phone, next_phone)``: the ABX ``by`` block the item belongs to."""
        return (self.prev_phone, self.next_phone)

    def line(self, decimals: int = 7) -> str:
        """The item as one item-file line (times with ``decimals`` decimals)."""
        return " ".join(
            (
                self.file,
                f"{self.onset:.{decimals}f}",
                f"{self.offset:.{decimals}f}",
                self.phone,
                self.prev_phone,
                self.next_phone,
                self.speaker,
            )
        )


def speaker_of(name: str) -> str:
    """The speaker of a ZeroSpeech file name: the prefix before the first ``_``.

    ``S002_0006942614.wav`` -> ``S002``; ``V001_0000654321`` -> ``V001``. A name without ``_``
    (or with an empty prefix) raises ``ValueError``.
    """
    stem = Path(name).name
    if stem.endswith((".wav", ".txt")):
        stem = stem[:-4]
    match = _SPEAKER.match(stem)
    if match is None:
        raise ValueError(
            f"{name!r}: expected a ZeroSpeech file name <speaker>_<utterance> (e.g. "
            "S002_0006942614.wav), the speaker being the prefix before the first '_'"
        )
    return match["speaker"]


def _number(value: str, path: Path, line: int, what: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ZeroSpeechFormatError(
            path, line, f"{what}: expected seconds, got {value!r}"
        ) from None
    if not math.isfinite(number):
        raise ZeroSpeechFormatError(path, line, f"{what}: expected finite seconds, got {value!r}")
    if not _DECIMAL.fullmatch(value):  # float() reads 0_5 as 5 and other scripts' digits
        why = (
            f" (an underscore is not a decimal point: Python reads {value!r} as {number:g})"
            if "_" in value
            else ""
        )
        raise ZeroSpeechFormatError(
            path,
            line,
            f"{what}: expected seconds written with the digits 0-9 and a point (0.5, 1.25, "
            f"2e-1), got {value!r}{why}",
        )
    return number


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A number of seconds as an item file or a file list holds it (as the segments tables'
``audiorepro.data.recordings._DECIMAL``)."""


def _read_text(path: Path) -> str:
    """A UTF-8 text file (a leading byte-order mark dropped); a missing or unreadable file
    raises :class:`ZeroSpeechFormatError`."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ZeroSpeechFormatError(path, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ZeroSpeechFormatError(path, None, f"cannot read the file: {err}") from err


def _text_lines(path: Path) -> list[tuple[int, list[str]]]:
    """``(line number, fields)`` of the non-blank lines of a UTF-8 text file."""
    return [
        (number, line.split())
        for number, line in enumerate(_read_text(path).splitlines(), start=1)
        if line.strip()
    ]


def read_embedding_file(
    path: str | os.PathLike[str], *, drop_single_column: bool = False
) -> np.ndarray:
    """One ZeroSpeech 2019 embedding file ``<file id>.txt`` → (frames, dim) float64.

    Every non-blank line is one frame of space-separated numbers, all lines of the same width.

    Args:
        path: the ``.txt`` file.
        drop_single_column: skip lines with a single column, as the official ABX loader
            (``zerospeech2020`` ``_load_features_2019``) does; the file must then keep at least
            one frame. The bitrate counts every line (False).

    Returns:
        (frames, dim) float64; (0, 0) for a file without frames when single columns are kept.

    Raises:
        ZeroSpeechFormatError: naming ``file:line``, for a non-numeric or non-finite value or a
            line whose width differs from the first frame's; naming the file, for an unreadable file or
            (``drop_single_column``) a file without a frame of more than one column.
    """
    path = Path(path)
    rows: list[list[float]] = []
    width = None
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        fields = line.split()
        if not fields or (drop_single_column and len(fields) == 1):
            continue
        try:
            row = [float(v) for v in fields]
        except ValueError:
            raise ZeroSpeechFormatError(
                path, number, f"expected space-separated numbers, got {line.strip()!r}"
            ) from None
        if not all(math.isfinite(v) for v in row):
            raise ZeroSpeechFormatError(
                path, number, f"non-finite value (NaN or inf) in {line.strip()[:80]!r}"
            )
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise ZeroSpeechFormatError(
                path, number, f"vector dimension {len(row)} differs from the first line's {width}"
            )
        rows.append(row)
    if drop_single_column and not rows and not _read_text(path).strip():
        raise ZeroSpeechFormatError(path, None, "empty: no frame to score (write it again)")
    if drop_single_column and not rows:
        raise ZeroSpeechFormatError(
            path,
            None,
            "no frame with more than one column: the official 2019 loader drops single-column "
            "lines, so write one-hot or codebook vectors, not one integer per line",
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), width or 0)


def read_item_file(path: str | os.PathLike[str]) -> list[AbxItem]:
    """Read and check an ABX item file; items in file order.

    The first non-blank line must be the header :data:`ITEM_HEADER`; every other non-blank
    line has seven whitespace-separated fields, finite times with ``0 <= onset < offset``.

    Raises:
        ZeroSpeechFormatError: naming ``file:line`` for a bad or missing header, a wrong number
            of fields, non-numeric or non-finite times, a negative onset or ``onset >= offset``,
            an item listed twice (same file, onset and offset) or listed with two labels (with
            the line it repeats and the count).
    """
    path = Path(path)
    lines = _text_lines(path)
    if not lines:
        raise ZeroSpeechFormatError(
            path, None, f"empty item file: expected the header {' '.join(ITEM_HEADER)!r}"
        )
    number, header = lines[0]
    if tuple(header) != ITEM_HEADER:
        raise ZeroSpeechFormatError(
            path,
            number,
            f"expected the header {' '.join(ITEM_HEADER)!r}, got {' '.join(header)!r}",
        )
    items = []
    for number, fields in lines[1:]:
        if len(fields) != len(ITEM_HEADER):
            raise ZeroSpeechFormatError(
                path,
                number,
                f"expected {len(ITEM_HEADER)} fields ({' '.join(ITEM_HEADER)}), "
                f"got {len(fields)}: {' '.join(fields)!r}",
            )
        file, onset_text, offset_text, phone, prev_phone, next_phone, speaker = fields
        onset = _number(onset_text, path, number, "onset")
        offset = _number(offset_text, path, number, "offset")
        if onset < 0:
            raise ZeroSpeechFormatError(path, number, f"onset must be >= 0 s, got {onset_text}")
        if onset >= offset:
            raise ZeroSpeechFormatError(
                path,
                number,
                f"onset must be < offset, got onset {onset_text} offset {offset_text}",
            )
        items.append(AbxItem(file, onset, offset, phone, prev_phone, next_phone, speaker))
    _check_repeats(path, [number for number, _ in lines[1:]], items)
    return items


def _check_repeats(path: Path, numbers: list[int], items: list[AbxItem]) -> None:
    """ZeroSpeechFormatError for an item listed twice (the same file, onset and offset: as A
    and X of a triplet it scores 0, so duplicates pull the error down) or listed with two
    labels, naming the first such line, the line it repeats and the count."""
    first: dict[tuple[str, float, float], int] = {}
    repeats, conflicts = [], []
    for k, item in enumerate(items):
        earlier = first.setdefault((item.file, item.onset, item.offset), k)
        if earlier != k:
            (repeats if items[earlier] == item else conflicts).append((k, earlier))
    for found, what in ((conflicts, "labels"), (repeats, "repeat")):
        if not found:
            continue
        k, earlier = found[0]
        item, other = items[k], items[earlier]
        where = f"item {item.file} {item.onset}-{item.offset}"
        if what == "repeat":
            message = (
                f"{where} repeats line {numbers[earlier]} ({len(repeats)} of the {len(items)} "
                "items repeat an earlier line): an item listed twice is its own X, so every "
                "repeat pulls the ABX error down; list each item once"
            )
        else:
            field, new, old = next(
                (name, a, b)
                for name, a, b in zip(
                    ITEM_HEADER[3:],
                    (item.phone, item.prev_phone, item.next_phone, item.speaker),
                    (other.phone, other.prev_phone, other.next_phone, other.speaker),
                    strict=True,
                )
                if a != b
            )
            message = (
                f"{where} is on line {numbers[earlier]} with other labels ({field} {new!r}, "
                f"not {old!r}; {len(conflicts)} item(s) of the {len(items)} listed with two "
                "labels): an item has one label; keep the right line"
            )
        raise ZeroSpeechFormatError(path, numbers[k], message)


def write_item_file(
    path: str | os.PathLike[str], items: Iterable[AbxItem], decimals: int = 7
) -> Path:
    """Write items as an ABX item file (header :data:`ITEM_HEADER`, one item per line).

    Seven decimals represent any multiple of 1/16000 s exactly, so whole-file items keep the
    exact wav duration. Labels must be non-empty and free of whitespace (``ValueError``).
    """
    path = Path(path)
    lines = [" ".join(ITEM_HEADER)]
    for i, item in enumerate(items):
        labels = (item.file, item.phone, item.prev_phone, item.next_phone, item.speaker)
        if any(not label or any(c.isspace() for c in label) for label in labels):
            raise ValueError(f"item {i}: labels must be non-empty without whitespace: {item}")
        if not 0 <= item.onset < item.offset:
            raise ValueError(f"item {i}: need 0 <= onset < offset, got {item}")
        lines.append(item.line(decimals))
    _write_text(path, "\n".join(lines) + "\n")
    return path


def read_bitrate_filelist(path: str | os.PathLike[str]) -> list[tuple[str, float]]:
    """Read a bitrate (or embedding) file list: ``[(name.txt, duration_s), ...]`` in order.

    Each non-blank line is ``<name>.txt <duration>``: the embedding file name and the duration
    of its wav in seconds (> 0), as in ``zerospeech2020/share/2019/<lang>/bitrate_filelist.txt``.

    Raises:
        ZeroSpeechFormatError: naming ``file:line`` for a wrong number of fields, a name not
            ending in ``.txt``, a non-numeric or non-positive duration, or a repeated name.
    """
    path = Path(path)
    entries = []
    seen: dict[str, int] = {}
    for number, fields in _text_lines(path):
        if len(fields) != 2:
            raise ZeroSpeechFormatError(
                path,
                number,
                f"expected 2 fields '<name>.txt <duration>', got {len(fields)}: "
                f"{' '.join(fields)!r}",
            )
        name, duration_text = fields
        if not name.endswith(".txt") or len(name) == 4:
            raise ZeroSpeechFormatError(
                path, number, f"expected an embedding file name ending in .txt, got {name!r}"
            )
        duration = _number(duration_text, path, number, "duration")
        if duration <= 0:
            raise ZeroSpeechFormatError(
                path, number, f"duration must be > 0 s, got {duration_text}"
            )
        if name in seen:
            raise ZeroSpeechFormatError(
                path, number, f"{name} is listed twice (first on line {seen[name]})"
            )
        seen[name] = number
        entries.append((name, duration))
    return entries


def write_filelist(path: str | os.PathLike[str], entries: Iterable[tuple[str, float]]) -> Path:
    """Write ``(name.txt, duration_s)`` pairs as a bitrate/embedding file list (6 decimals)."""
    lines = [f"{name} {duration:.6f}" for name, duration in entries]
    _write_text(Path(path), "".join(line + "\n" for line in lines))
    return Path(path)


def read_synthesis_list(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Read a synthesis list: ``[("test/S002_0379088085", "V002"), ...]``.

    Raises:
        ZeroSpeechFormatError: naming ``file:line`` for a line that is not ``test/<file> <voice>``.
    """
    path = Path(path)
    entries = []
    for number, fields in _text_lines(path):
        if len(fields) != 2 or not fields[0].startswith("test/") or len(fields[0]) == 5:
            raise ZeroSpeechFormatError(
                path,
                number,
                f"expected 'test/<file> <target voice>', got {' '.join(fields)!r}",
            )
        entries.append((fields[0], fields[1]))
    return entries


def _write_text(path: Path, text: str) -> None:
    """Write a text file atomically (temporary sibling, then ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def split_recordings(
    language_dir: str | os.PathLike[str], split: str
) -> list[tuple[Recording, str]]:
    """The wavs of one split as ``(Recording, speaker)``, sorted by file name.

    Sources are relative to ``language_dir``. Raises :class:`ZeroSpeechFormatError` when the
    split folder is missing, holds no wav, or a file name has no speaker prefix, and
    ``ValueError`` for an unknown split.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")
    root = Path(language_dir)
    folder = root / SPLITS[split]
    if not folder.is_dir():
        raise ZeroSpeechFormatError(
            folder, None, f"missing folder: a ZeroSpeech 2019 language folder has {SPLITS[split]}/"
        )
    wavs = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".wav")
    if not wavs:
        raise ZeroSpeechFormatError(folder, None, "no .wav files")
    out = []
    for wav in wavs:
        try:
            speaker = speaker_of(wav.name)
        except ValueError as err:
            raise ZeroSpeechFormatError(wav, None, str(err)) from None
        out.append((Recording.from_file(wav, relative_to=root), speaker))
    return out


def prepare_zerospeech2019(
    language_dir: str | os.PathLike[str],
    manifest_dir: str | os.PathLike[str] | None = None,
    language: str | None = None,
    splits: Sequence[str] = tuple(SPLITS),
) -> dict[str, dict[str, int]]:
    """Write ``<split>_recordings.jsonl.gz`` / ``<split>_supervisions.jsonl.gz`` for a language.

    One recording and one whole-file supervision (speaker from the file name, language code
    from :data:`LANGUAGE_CODES`, no text: the challenge gives none) per wav of ``train/unit``,
    ``train/voice`` and ``test``. Recording sources are relative to ``language_dir``, so
    ``python -m audiorepro.data check <manifest_dir> --root <language_dir>`` checks them.

    Args:
        language_dir: ``<...>/2019/english`` or ``<...>/2019/surprise`` (real or embedded).
        manifest_dir: where to write; defaults to ``<language_dir>/manifests``.
        language: language code for the supervisions; defaults from the folder name
            (``english`` -> ``en``, ``surprise`` -> ``id``), else ``None``.
        splits: which of :data:`SPLITS` to prepare.

    Returns:
        ``{split: {"recordings": n, "supervisions": n, "speakers": k}}``.
    """
    language_dir = Path(language_dir)
    if not language_dir.is_dir():
        raise ZeroSpeechFormatError(language_dir, None, "not a directory")
    manifest_dir = Path(manifest_dir) if manifest_dir is not None else language_dir / "manifests"
    if language is None:
        language = LANGUAGE_CODES.get(language_dir.name)
    counts = {}
    for split in splits:
        pairs = split_recordings(language_dir, split)
        recordings = [rec for rec, _ in pairs]
        supervisions = [
            Supervision(
                id=rec.id,
                recording_id=rec.id,
                start=0.0,
                duration=rec.duration,
                channel=0,
                language=language,
                speaker=speaker,
            )
            for rec, speaker in pairs
        ]
        write_manifest(manifest_dir / f"{split}_recordings.jsonl.gz", recordings)
        write_manifest(manifest_dir / f"{split}_supervisions.jsonl.gz", supervisions)
        counts[split] = {
            "recordings": len(recordings),
            "supervisions": len(supervisions),
            "speakers": len({s for _, s in pairs}),
        }
    return counts
