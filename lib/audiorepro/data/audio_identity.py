"""Which audio files of a segments table are one recording: the same samples, whatever bytes.

A recording present twice (a FLAC export of a WAV, a WAV re-saved with a LIST chunk, the
same int16 samples written as float) would make an item of the table matched with a copy of
itself: an ABX error of 0 %, a same-word pair of AP 1 (sweep 2, F10: MFCC + DTW AP 0.727 ->
0.756 and within-speaker ABX 18.8 -> 12.3 % when every ``*_0.wav`` had a ``*_2.flac`` copy).
Comparing file bytes finds only byte-identical copies, so :class:`SameRecordings` compares the
decoded samples as every reader of a table gets them from
:func:`audiorepro.features.load_audio`: float32, mixed to mono, with the sample rate (a PCM_16
WAV, its FLAC and a float WAV of the same int16 values read the same, and so does a stereo
export of two equal channels).

Decoding costs more than hashing bytes (3,000 one-second 8 kHz WAVs: 0.19-0.26 s decoded and
hashed, 0.05-0.06 s of byte SHA-256, 0.08-0.11 s of header reads), and two files can hold the
same samples only if their headers give the same frames and rate. So a file is
decoded only when another file of the table has its frames and rate (fixed-length clips, as in Speech
Commands, all are; recordings cut by hand rarely). Both the header and the samples' hash are
remembered for the process per file identity (device, inode, size, modification time), as
:func:`audiorepro.storage.known_file_sha256` remembers bytes: a table read several times in
one command decodes each file once.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import soundfile as sf

from audiorepro.features.audio import AudioError, _read_librosa, audio_info

_SHAPE_MEMO: dict[tuple[int, int, int, int], tuple[int, int, int] | None] = {}
_SAMPLES_MEMO: dict[tuple[int, int, int, int], str | None] = {}

_BLOCK = 1 << 16
"""Frames decoded at a time while hashing: memory stays small for a long file, and a file
libsndfile cannot seek in (a GSM 6.10 WAV) reads to its end."""


def _identity(path: Path) -> tuple[int, int, int, int]:
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def audio_shape(path: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """``(frames, sample rate, channels)`` from the file's header (:func:`audio_info`), or
    ``None`` for a file that does not read as audio (empty, not audio); remembered per file
    identity."""
    path = Path(path)
    identity = _identity(path)
    if identity not in _SHAPE_MEMO:
        try:
            _SHAPE_MEMO[identity] = audio_info(path)
        except AudioError:
            _SHAPE_MEMO[identity] = None
    return _SHAPE_MEMO[identity]


def _mono(block: np.ndarray) -> np.ndarray:
    """(S, C) float32 -> (S,) as load_audio mixes it (the mean of the channels)."""
    return np.ascontiguousarray(block[:, 0] if block.shape[1] == 1 else block.mean(axis=1))


def _hash_samples(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with sf.SoundFile(os.fsencode(path)) as f:
            digest.update(f"float32 mono {int(f.samplerate)} Hz\n".encode())
            left = int(f.frames) if f.seekable() else -1  # -1: to the end
            while left != 0:
                want = _BLOCK if left < 0 else min(left, _BLOCK)
                block = f.read(frames=want, dtype="float32", always_2d=True)
                if not len(block):
                    break
                digest.update(_mono(block).tobytes())
                left = left if left < 0 else left - len(block)
        return digest.hexdigest()
    except (sf.LibsndfileError, RuntimeError):
        pass  # a format libsndfile does not open: librosa's fallback, as load_audio does
    except Exception:  # noqa: BLE001 - a file that does not decode is compared by its bytes
        return None
    try:
        data, rate = _read_librosa(path, 0.0, None)
    except Exception:  # noqa: BLE001 - audioread raises several unrelated exception types
        return None
    digest = hashlib.sha256(f"float32 mono {rate} Hz\n".encode())
    digest.update(_mono(data).tobytes())
    return digest.hexdigest()


def samples_sha256(path: str | os.PathLike[str]) -> str | None:
    """SHA-256 of the file's decoded float32 samples mixed to mono (native byte order) after
    its sample rate, or ``None`` for a file that does not decode;
    remembered per file identity (a file rewritten in place is decoded again)."""
    path = Path(path)
    identity = _identity(path)
    if identity not in _SAMPLES_MEMO:
        _SAMPLES_MEMO[identity] = _hash_samples(path)
    return _SAMPLES_MEMO[identity]


Span = tuple[float | None, float | None]


class SameRecordings:
    """Rows of a table (audio file, start, end, line) given one at a time, in table order;
    :meth:`add` finds an earlier row of another file of the same samples for the same times.

    A file is decoded only once another file of the table has the same frames and rate
    (:func:`audio_shape`); a file that does not read as audio is compared by its bytes (two
    rows of one such file under two names are still one recording).
    """

    def __init__(self) -> None:
        # header -> {file: its rows (span, line) so far}; keyed: headers of 2+ files
        self._groups: dict[tuple[str, object], dict[Path, list[tuple[Span, int]]]] = {}
        self._keyed: set[tuple[str, object]] = set()
        self._rows: dict[tuple[tuple[str, object], Span], tuple[Path, int]] = {}

    @staticmethod
    def _group(path: Path) -> tuple[str, object]:
        shape = audio_shape(path)
        if shape is not None:
            return ("header", shape[:2])  # frames, rate: channels are mixed
        from audiorepro.storage import known_file_sha256

        return ("bytes", known_file_sha256(path))

    @staticmethod
    def _key(path: Path, group: tuple[str, object]) -> tuple[str, object]:
        if group[0] == "bytes":
            return group
        digest = samples_sha256(path)
        if digest is None:  # reads a header but does not decode
            from audiorepro.storage import known_file_sha256

            return ("bytes", known_file_sha256(path))
        return ("samples", digest)

    def add(
        self, path: Path, start: float | None, end: float | None, line: int
    ) -> tuple[Path, int] | None:
        """Note the row ``line`` of ``path`` (resolved) from ``start`` to ``end`` (``None``:
        the whole file). Returns ``(other file, its line)`` for an earlier row of another file
        of the same samples and times, else ``None``."""
        group = self._group(path)
        files = self._groups.setdefault(group, {})
        files.setdefault(path, []).append(((start, end), line))
        if len(files) < 2:
            return None
        if group not in self._keyed:  # the second file of this header: decode the earlier
            self._keyed.add(group)
            for other, rows in files.items():
                key = self._key(other, group)
                for span, other_line in rows if other != path else rows[:-1]:
                    self._rows.setdefault((key, span), (other, other_line))
        found = self._rows.setdefault((self._key(path, group), (start, end)), (path, line))
        return None if found[0] == path else found
