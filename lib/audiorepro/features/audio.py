"""Audio file I/O: load (decode, downmix, resample), save atomically, read header information.

Every problem with a file (missing, unreadable, undecodable, empty, non-finite samples, float
samples far beyond full scale; read as mono, a silent file or channels that cancel) is reported
as an :class:`AudioError` whose message starts with the file path and says what was wrong, so
that a failure deep inside a data loader or a manifest check points at the offending file.

Decoding uses soundfile (libsndfile: WAV, FLAC, OGG, MP3, ...). Only files libsndfile cannot read
are handed to ``librosa.load`` (audioread backends such as ffmpeg, when one is installed).
Resampling uses librosa with the ``soxr_hq`` filter when the ``soxr`` package is importable
(librosa depends on it), otherwise scipy's polyphase resampler (``res_type="polyphase"``).
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np
import soundfile as sf

from audiorepro.paths import free_space

__all__ = [
    "AudioError",
    "AudioWarning",
    "CANCEL_DB",
    "EmptyAudioError",
    "HOT_PEAK",
    "LOUD_PEAK",
    "SHORT_SECONDS",
    "SILENT_PEAK",
    "audio_info",
    "channels_cancel",
    "load_audio",
    "resample_type",
    "save_audio",
    "silence",
    "too_short",
]

CANCEL_DB = 40.0
"""How far (dB) the mono mix of a multi-channel file may lie below its channels before
:func:`load_audio` refuses the file: a channel phase-inverted against another (``R = -L``)
mixes to silence; natural stereo loses a few dB at most."""


SILENT_PEAK = 10 ** (-70 / 20)
"""A file whose every sample lies below this (-70 dBFS, a few steps of 16-bit audio), or
within this of its mean (a constant offset and no signal), is silent (:func:`silence`):
:func:`load_audio` refuses it read whole as mono, and ``units train`` leaves it out
(:func:`audiorepro.data.recordings.content_problem`)."""


LOUD_PEAK = 10 ** (40 / 20)
"""A file whose samples reach this (+40 dBFS, 100 times full scale) holds float samples that
are not audio in [-1, 1], usually integer sample values (up to 32767) written as floats:
:func:`load_audio` refuses it rather than read it 90 dB louder than every other file (PCM
formats always decode within [-1, 1]; a float file a few dB over full scale is read)."""


HOT_PEAK = 2.0
"""A file whose samples go beyond this (+6 dBFS, twice full scale) but stay below
:data:`LOUD_PEAK` holds float samples of a gain or scaling slip (``y * 10`` before writing):
:func:`load_audio` reads them as they are and warns once per file (:class:`AudioWarning`),
naming the file and its peak; a float file a few dB over full scale (a mix's overshoot) is read
without a word."""


SHORT_SECONDS = 0.01
"""A file shorter than this (one 10 ms frame of the features) is too short to hold a word or to
be judged silent (1 sample is "a constant offset and no signal" to :func:`silence`): ``units
train`` leaves it out as too short (:func:`audiorepro.data.recordings.content_problem`), and
:func:`load_audio` calls a silent one too short (a write cut short, not a microphone's
offset)."""


class AudioError(Exception):
    """A problem with an audio file; the message names the file and the problem."""


class EmptyAudioError(AudioError):
    """An audio file of no sample (a header alone, or 0 bytes): ``units train`` leaves it out as
    it leaves out files too short to train on; every other reader refuses it."""


class AudioWarning(UserWarning):
    """An audio file that reads, but not whole: a WAV cut short of what its header says (an
    interrupted copy or download). The commands print it once as ``audiorepro: warning: ...``."""


STREAM_PLACEHOLDER = 0x7FFF0000
"""A WAV data size at or above this is a placeholder that a program writing to a pipe puts in
the header (``0xFFFFFFFF``, ``0x7FFFF000``), not a length the file fell short of."""


def _wav_data_sizes(log: str) -> tuple[int, int | None] | None:
    """``(bytes the WAV header gives its data, bytes the file holds or None when as many)``
    from libsndfile's header log (``SoundFile.extra_info``); None when the log has no data
    chunk (not a WAV)."""
    match = re.search(r"^data\s*:\s*(\d+)(?:\s*\(should be (\d+)\))?", log, re.MULTILINE)
    if match is None:
        return None
    return int(match.group(1)), None if match.group(2) is None else int(match.group(2))


def _check_whole_wav(path: Path, log: str, frames: int, rate: int) -> None:
    """Warn (:class:`AudioWarning`) when a WAV's data ends before its header says (libsndfile
    reads the samples there are), unless the header's size is a stream's placeholder."""
    sizes = _wav_data_sizes(log)
    if sizes is None or sizes[1] is None or not sizes[1] < sizes[0] < STREAM_PLACEHOLDER:
        return
    declared, held = sizes
    said = frames * declared / max(held, 1) / rate
    warnings.warn(
        f"{path}: cut short: its header says {said:.3f} s of audio ({declared} bytes), the "
        f"file holds {frames / rate:.3f} s ({held} bytes); the {frames / rate:.3f} s there are "
        "are read (an interrupted copy or download? copy the file again to have all of it)",
        AudioWarning,
        stacklevel=3,
    )


def resample_type() -> str:
    """The ``res_type`` that :func:`load_audio` passes to ``librosa.resample``.

    ``"soxr_hq"`` when the ``soxr`` package is importable, else ``"polyphase"`` (scipy's
    ``resample_poly``, always available since librosa depends on scipy).
    """
    try:
        import soxr  # noqa: F401
    except ImportError:
        return "polyphase"
    return "soxr_hq"


def _describe(err: BaseException) -> str:
    # audioread's NoBackendError has an empty message.
    text = str(err).strip()
    if type(err).__name__ == "NoBackendError" and not text:
        text = "no installed backend (e.g. ffmpeg) could decode the file"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def write_error(path: Path, err: BaseException) -> AudioError:
    """An :class:`AudioError` for a write of ``path`` that failed with ``err``, naming the file,
    the error and the space left where it was written: libsndfile reports a full disk as
    ``System error.`` and nothing more."""
    return AudioError(
        f"{path}: could not write ({_describe(err)}); {free_space(path)} on that disk"
    )


def _check_exists(path: Path) -> None:
    if not path.exists():
        raise AudioError(f"{path}: file not found")
    if not path.is_file():
        raise AudioError(f"{path}: not a regular file")
    if not os.access(path, os.R_OK):  # libsndfile says only "System error."
        raise AudioError(
            f"{path}: permission denied: the file cannot be read; check its permissions "
            "(e.g. chmod a+r) or leave it out"
        )
    if path.stat().st_size == 0:  # libsndfile says "Format not recognised."
        raise EmptyAudioError(f"{path}: empty file (0 bytes): no audio in it")


def channels_cancel(data: np.ndarray) -> float | None:
    """How many dB the mono mix of ``data`` (C, S) lies below its channels' mean power when it
    lies more than :data:`CANCEL_DB` below them (channels that cancel when averaged), else None
    (one channel, silent channels, or a mix that keeps the signal)."""
    if data.ndim != 2 or data.shape[0] < 2:
        return None
    power = float(np.mean(np.square(data, dtype=np.float64)))
    if power < 1e-12:  # silent channels: nothing to lose
        return None
    mix = float(np.mean(np.square(data.mean(axis=0), dtype=np.float64)))
    drop = 10 * np.log10(power / max(mix, 1e-30))
    return float(drop) if drop > CANCEL_DB else None


def silence(data: np.ndarray, axis: int = -1) -> str | None:
    """Why the samples ``data`` (any shape, time along ``axis``) are silent, or None: ``every
    sample is 0``, ``peak -90 dBFS, below -70 dBFS`` (:data:`SILENT_PEAK`), or ``a constant
    offset (DC 0.05) and no signal``: silence is judged after each channel's mean is removed,
    so a file of a disconnected microphone's offset (a constant far above -70 dBFS) is silent,
    and a recording of speech over a small offset is not."""
    peak = float(np.max(np.abs(data))) if data.size else 0.0
    if peak == 0.0:
        return "every sample is 0"
    if peak < SILENT_PEAK:
        return f"peak {20 * np.log10(peak):.0f} dBFS, below {20 * np.log10(SILENT_PEAK):.0f} dBFS"
    mean = np.mean(data, axis=axis, dtype=np.float64)  # each channel's offset
    above = np.max(data, axis=axis).astype(np.float64) - mean
    below = mean - np.min(data, axis=axis).astype(np.float64)
    rest = float(np.max(np.maximum(above, below)))  # the peak around the offset
    if rest >= SILENT_PEAK:
        return None
    dc = float(np.ravel(mean)[np.argmax(np.abs(np.ravel(mean)))])
    beside = (  # below float32 resolution: the offset's own rounding, not a signal
        f" (peak {20 * np.log10(rest):.0f} dBFS around it, below "
        f"{20 * np.log10(SILENT_PEAK):.0f} dBFS)"
        if rest > 2.0**-24
        else ""
    )
    return f"a constant offset (DC {dc:.2g}) and no signal{beside}"


def too_short(samples: int, sr: int) -> str | None:
    """``too short: 1 sample (0.06 ms), less than one 10 ms frame`` for a file of fewer than
    :data:`SHORT_SECONDS` of samples at ``sr``, else None."""
    if samples >= SHORT_SECONDS * sr:
        return None
    return (
        f"too short: {samples} sample{'' if samples == 1 else 's'} "
        f"({1000 * samples / sr:.2f} ms), less than one {1000 * SHORT_SECONDS:.0f} ms frame"
    )


_PEAKS: dict[tuple, float] = {}


def _file_peak(path: Path, fallback: float) -> float:
    """The largest absolute sample of the whole file at ``path`` (read in blocks, remembered by
    the file's identity), so that a warning about an excerpt names the file's own peak, the
    same each time; ``fallback`` when libsndfile cannot read the file."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _PEAKS:
        try:
            peak = 0.0
            for block in sf.blocks(os.fsencode(path), blocksize=1 << 16, dtype="float32"):
                if block.size:
                    peak = max(peak, float(np.max(np.abs(block))))
            _PEAKS[key] = peak
        except Exception:  # noqa: BLE001 - a file only librosa reads: the excerpt's peak
            return fallback
    return max(_PEAKS[key], fallback)


def _warn_hot(path: Path, peak: float, whole: bool) -> None:
    """Warn (:class:`AudioWarning`) that ``path`` holds samples beyond :data:`HOT_PEAK`, named
    by the whole file's peak (``peak`` when ``whole``), once per file: the message is the same
    for every excerpt read."""
    peak = peak if whole else _file_peak(path, peak)
    warnings.warn(
        f"{path}: samples reach {peak:.3g}, {20 * np.log10(peak):.0f} dB above full scale "
        f"(more than {20 * np.log10(HOT_PEAK):.0f} dB): they are read as they are, "
        f"{peak:.3g} times full scale, and move the statistics of the files normalised with "
        "this one (its speaker's); if a gain or scaling slip wrote them, write the file again "
        "within [-1, 1] (e.g. sox in.wav out.wav gain -n -1)",
        AudioWarning,
        stacklevel=3,
    )


def _read_blocks(f: sf.SoundFile, start: int, frames: int, block: int = 65536) -> np.ndarray:
    """Read ``frames`` frames (-1: to the end) after the first ``start`` of a file libsndfile
    cannot seek in (a GSM 6.10 WAV): in blocks, skipping by reading, until the end. Returns
    (S, C) float32."""
    while start > 0:
        skipped = f.read(frames=min(start, block), dtype="float32", always_2d=True)
        if len(skipped) == 0:
            return np.zeros((0, f.channels), dtype=np.float32)
        start -= len(skipped)
    blocks = []
    left = frames
    while left != 0:
        want = block if left < 0 else min(left, block)
        data = f.read(frames=want, dtype="float32", always_2d=True)
        if len(data) == 0:
            break
        blocks.append(data)
        left = left if left < 0 else left - len(data)
    if not blocks:
        return np.zeros((0, f.channels), dtype=np.float32)
    return np.concatenate(blocks)


def _read_soundfile(
    path: Path, offset: float, duration: float | None
) -> tuple[np.ndarray, int, int]:
    """Decode with libsndfile. Returns (data (S, C) float32, sr, total frames in the file).

    A file libsndfile cannot seek in (a GSM 6.10 WAV, Asterisk voicemail's format) is read in
    blocks until its end (:func:`_read_blocks`). The path goes to libsndfile as bytes, so a
    name that is not UTF-8 opens too."""
    with sf.SoundFile(os.fsencode(path)) as f:
        native_sr = int(f.samplerate)
        total = int(f.frames)
        _check_whole_wav(path, f.extra_info, total, native_sr)
        if total == 0 and (sizes := _wav_data_sizes(f.extra_info)) and sizes[0] == 0:
            size = path.stat().st_size
            if size > 1024:  # more than a header
                raise EmptyAudioError(
                    f"{path}: its WAV header gives 0 bytes of samples, and the file is {size} "
                    "bytes: the program that wrote it did not finish the header (a stream); "
                    "write it again whole (e.g. sox in.wav out.wav), or leave it out"
                )
        start = int(round(offset * native_sr))
        frames = -1 if duration is None else int(round(duration * native_sr))
        if not f.seekable():
            return _read_blocks(f, start, frames), native_sr, total
        if start > 0:
            # Seeking past the end raises in libsndfile; an empty read gives the clearer error.
            if start >= total:
                return np.zeros((0, f.channels), dtype=np.float32), native_sr, total
            f.seek(start)
        data = f.read(frames=frames, dtype="float32", always_2d=True)
    return data, native_sr, total


def _read_librosa(path: Path, offset: float, duration: float | None) -> tuple[np.ndarray, int]:
    """Decode through librosa's audioread fallback. Returns (data (S, C) float32, sr)."""
    import librosa

    with warnings.catch_warnings():
        # librosa warns that audioread is deprecated each time it falls back to it.
        warnings.simplefilter("ignore")
        data, native_sr = librosa.load(
            str(path), sr=None, mono=False, offset=offset, duration=duration, dtype=np.float32
        )
    data = np.asarray(data, dtype=np.float32)
    data = data[:, None] if data.ndim == 1 else data.T
    return data, int(native_sr)


def load_audio(
    path: str | os.PathLike,
    sr: int | None,
    *,
    mono: bool = True,
    offset: float = 0.0,
    duration: float | None = None,
) -> tuple[np.ndarray, int]:
    """Read an audio file as float32 samples in [-1, 1], downmixed and resampled.

    Args:
        path: the audio file (any format libsndfile reads; others via ``librosa.load``).
        sr: the sample rate to return, resampled with librosa (``soxr_hq`` if available, see
            :func:`resample_type`); ``None`` keeps the file's own rate.
        mono: average the channels into one (the default). If False, all channels are kept.
        offset: start reading this many seconds into the file.
        duration: read at most this many seconds (``None``: to the end).

    Returns:
        ``(wav, sr)``: ``wav`` is float32 with shape (S,) when ``mono`` (else (C, S), channels
        first as in librosa), ``sr`` the rate of ``wav``.

    Raises:
        AudioError: the file is missing, cannot be read (permission denied) or decoded, holds
            no samples (:class:`EmptyAudioError`; or none after ``offset``), holds NaN/inf
            samples or samples of :data:`LOUD_PEAK` or more (samples beyond :data:`HOT_PEAK`
            are read and warned of once per file, :class:`AudioWarning`), or (``mono``)
            would read as silence: the whole file (no ``offset`` nor ``duration``: an excerpt
            may be a pause) is silent (:func:`silence`, below :data:`SILENT_PEAK`; called too
            short when shorter than one frame, :func:`too_short`), or its channels cancel when
            mixed (:func:`channels_cancel`). The message names the file and the problem.
        ValueError: an invalid ``sr``, ``offset`` or ``duration`` argument.
    """
    path = Path(path)
    if sr is not None and (
        isinstance(sr, bool) or not isinstance(sr, int | np.integer) or sr <= 0
    ):
        raise ValueError(f"sr must be a positive integer or None, got {sr!r}")
    if not np.isfinite(offset) or offset < 0:
        raise ValueError(f"offset must be a finite number of seconds >= 0, got {offset!r}")
    if duration is not None and (not np.isfinite(duration) or duration <= 0):
        raise ValueError(
            f"duration must be a positive number of seconds or None, got {duration!r}"
        )
    _check_exists(path)

    total = None
    try:
        data, native_sr, total = _read_soundfile(path, offset, duration)
    except AudioError:
        raise
    except (sf.LibsndfileError, RuntimeError) as sf_err:
        try:
            data, native_sr = _read_librosa(path, offset, duration)
        except Exception as lr_err:  # audioread raises several unrelated exception types
            raise AudioError(
                f"{path}: cannot decode audio: not readable by soundfile ({sf_err}) "
                f"nor by librosa/audioread ({_describe(lr_err)})"
            ) from sf_err
    except Exception as err:  # noqa: BLE001 - whatever soundfile raises, name the file
        raise AudioError(
            f"{path}: cannot decode audio: soundfile failed reading it ({_describe(err)}); "
            "convert it to 16-bit PCM WAV (e.g. sox in.wav -b 16 out.wav) or leave it out"
        ) from err

    if data.shape[0] == 0:
        if offset > 0 and (total is None or total > 0):
            raise AudioError(
                f"{path}: no samples after offset {offset} s (past the end of the file)"
            )
        raise EmptyAudioError(f"{path}: empty audio (the file contains zero samples)")
    finite = np.isfinite(data)
    if not finite.all():
        bad = int((~finite).sum())
        first = int(np.flatnonzero(~finite.all(axis=1))[0])
        raise AudioError(
            f"{path}: {bad} non-finite sample value(s) (NaN/inf), the first at sample {first}"
        )
    peak = float(np.max(np.abs(data)))
    if peak >= LOUD_PEAK:
        first = int(np.flatnonzero((np.abs(data) >= LOUD_PEAK).any(axis=1))[0])
        raise AudioError(
            f"{path}: samples reach {peak:.6g} (first at sample {first}), "
            f"{20 * np.log10(peak):.0f} dB above full scale: float samples are read as audio in "
            "[-1, 1], and these look like integer sample values written as floats; divide them "
            "by 32768 and write the file again, or leave it out"
        )

    whole = offset == 0 and duration is None
    if peak > HOT_PEAK:
        _warn_hot(path, peak, whole)
    if mono and whole and (why := silence(data, axis=0)) is not None:
        if (short := too_short(data.shape[0], native_sr)) is not None:
            raise AudioError(
                f"{path}: {short} (a write cut short?), so it holds no word; leave it out "
                "(units train leaves such files out and names them)"
            )
        raise AudioError(
            f"{path}: silent: {why}, so the file would read as silence; leave it out (units "
            "train leaves such files out and names them)"
        )
    if mono and (drop := channels_cancel(data.T)) is not None:
        raise AudioError(
            f"{path}: its {data.shape[1]} channels cancel when mixed to mono (the mix is "
            f"{min(drop, 300.0):.0f} dB below them: one channel is another inverted), so the "
            "file would read as silence; keep one channel (e.g. sox in.wav out.wav remix 1) "
            "or leave the file out"
        )
    wav = data.mean(axis=1) if mono else data.T  # (S,) or (C, S)
    if sr is not None and sr != native_sr:
        import librosa

        wav = librosa.resample(
            wav, orig_sr=native_sr, target_sr=int(sr), res_type=resample_type(), axis=-1
        )
        native_sr = int(sr)
    return np.ascontiguousarray(wav, dtype=np.float32), native_sr


def save_audio(path: str | os.PathLike, wav: np.ndarray, sr: int) -> Path:
    """Write ``wav`` as a 16-bit PCM WAV file, atomically.

    The samples go to a temporary file in the destination folder, which then replaces ``path``
    with ``os.replace``, so a reader never sees a half-written file and an interrupted write
    leaves any previous file intact. Missing parent folders are created. Samples outside [-1, 1]
    are clipped (16-bit PCM cannot hold them; libsndfile would otherwise wrap around).

    Args:
        path: destination file (conventionally ``*.wav``).
        wav: float samples, shape (S,) or (C, S) (channels first).
        sr: sample rate in Hz.

    Returns:
        The destination path.

    Raises:
        ValueError: ``wav`` has the wrong shape, no samples or non-finite values, or ``sr`` is
            not a positive integer. The message names the destination file.
        AudioError: the file could not be written (a full disk, no permission): the message
            names it, the error, and the space left on its file system.
    """
    path = Path(path)
    wav = np.asarray(wav)
    if isinstance(sr, bool) or not isinstance(sr, int | np.integer) or sr <= 0:
        raise ValueError(f"{path}: sr must be a positive integer, got {sr!r}")
    if wav.ndim not in (1, 2) or wav.shape[-1] == 0 or wav.size == 0:
        raise ValueError(f"{path}: wav must have shape (S,) or (C, S) with S > 0, got {wav.shape}")
    if not np.issubdtype(wav.dtype, np.number) or not np.isfinite(wav).all():
        raise ValueError(f"{path}: wav must hold finite numbers (found NaN/inf or non-numbers)")
    data = np.clip(wav.astype(np.float32), -1.0, 1.0)
    data = data if data.ndim == 1 else data.T  # soundfile wants (S, C)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        sf.write(tmp, data, int(sr), subtype="PCM_16", format="WAV")
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, sf.LibsndfileError | OSError):
            raise write_error(path, err) from err
        raise
    return path


def audio_info(path: str | os.PathLike) -> tuple[int, int, int]:
    """Read only the header of an audio file: ``(num_samples, sr, channels)``.

    Cheap (no decoding) for every format libsndfile reads; the manifest checker calls it for each
    recording. Files libsndfile cannot open are decoded in full with ``librosa.load``, as in
    :func:`load_audio`, so both functions accept the same files.

    Raises:
        AudioError: the file is missing, cannot be read, or holds zero samples
            (:class:`EmptyAudioError`).
    """
    path = Path(path)
    _check_exists(path)
    try:
        info = sf.info(os.fsencode(path))
        num_samples, sr, channels = int(info.frames), int(info.samplerate), int(info.channels)
    except (sf.LibsndfileError, RuntimeError) as sf_err:
        try:
            data, sr = _read_librosa(path, 0.0, None)
        except Exception as lr_err:
            raise AudioError(
                f"{path}: cannot read audio header: not readable by soundfile ({sf_err}) "
                f"nor by librosa/audioread ({_describe(lr_err)})"
            ) from sf_err
        num_samples, channels = int(data.shape[0]), int(data.shape[1])
    except Exception as err:  # noqa: BLE001 - whatever soundfile raises, name the file
        raise AudioError(
            f"{path}: cannot read audio header: soundfile failed reading it ({_describe(err)})"
        ) from err
    if num_samples == 0:
        raise EmptyAudioError(f"{path}: empty audio (the file contains zero samples)")
    return num_samples, sr, channels
