"""Speech as feature frames: per-file features of a folder of wavs, cut into training segments.

- :func:`load_features` computes MFCC-39, log-Mel-80 or linear magnitudes for every wav of a
  folder (10 ms frames), cached in a :class:`~audiorepro.storage.RunStore` under a key of the
  files' *contents* (:func:`features_key`), so a moved or copied corpus hits the cache and an
  edited one misses it;
- :class:`SegmentDataset` / :func:`collate_segments`: utterances cut into consecutive segments
  of a fixed number of frames, with their speaker, padded into batches (the VQ-VAE's input);
- :func:`normalize_features`: per-utterance or per-speaker mean and variance normalisation;
  :func:`average_frames`: frames averaged in windows of ``stride`` (a code rate);
- :class:`PairDataset` / :func:`collate_pairs`: aligned (codebook vectors, magnitudes) segment
  pairs padded into batches (the codebook inverter's input).
"""

from __future__ import annotations

import collections
import hashlib
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from audiorepro.features import linear_spectrogram, load_audio, log_mel, mfcc_features
from audiorepro.features.audio import AudioWarning
from audiorepro.storage import RunStore, load_npz

__all__ = [
    "FEATURES",
    "FEATURES_VERSION",
    "FEATURE_NORMS",
    "HOP_S",
    "PairDataset",
    "SAMPLE_RATE",
    "SPEAKER_NORM_SECONDS",
    "SegmentDataset",
    "average_frames",
    "collate_pairs",
    "collate_segments",
    "feature_function",
    "feature_of",
    "features_key",
    "load_features",
    "load_wav_features",
    "normalize_features",
    "short_speakers",
]

FEATURES = {"mfcc": 39, "logmel": 80}
"""Input features of the VQ-VAE and their dimension F."""
SAMPLE_RATE = 16_000
HOP_S = 0.01
FEATURE_NORMS = ("none", "utterance", "speaker")
"""Input normalisations of :func:`normalize_features`."""
# Bump when a change to the code changes what a cached feature file would hold.
FEATURES_VERSION = 3

_digests: dict[tuple[int, int, int, int], str] = {}
_loaded: collections.OrderedDict[
    tuple[str, ...], tuple[dict[str, np.ndarray], tuple[str, ...]]
] = collections.OrderedDict()
AUDIO_WARNINGS_FILE = "audio_warnings.json"
"""The :class:`~audiorepro.features.audio.AudioWarning` messages of a cached feature set's
files (a file cut short, float samples far over full scale), said again each time the set is
read from the store: the audio is not read again."""
_LOADED_SETS = 8
"""Feature sets a process keeps once loaded from a run store (the least recently used go)."""


def feature_function(feature: str) -> Callable[[np.ndarray], np.ndarray]:
    """``wav (S,) → (T, F)`` at 16 kHz, 10 ms frames: ``mfcc`` (MFCC + Δ + ΔΔ, 39), ``logmel``
    (80) or ``linear`` (magnitudes, 257)."""
    if feature == "mfcc":
        return lambda wav: mfcc_features(wav, SAMPLE_RATE, dim=39)
    if feature == "logmel":
        return lambda wav: log_mel(wav, SAMPLE_RATE, n_mels=80)
    if feature == "linear":
        return lambda wav: linear_spectrogram(wav, SAMPLE_RATE)
    raise ValueError(f"feature must be mfcc, logmel or linear, got {feature!r}")


def feature_of(input_dim: int) -> str:
    """The feature of :data:`FEATURES` with dimension ``input_dim`` (39: mfcc, 80: logmel)."""
    for name, dim in FEATURES.items():
        if dim == input_dim:
            return name
    raise ValueError(f"no input feature has dimension {input_dim}; features: {FEATURES}")


def _file_digest(path: Path) -> str:
    stat = path.stat()
    memo = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if memo not in _digests:
        _digests[memo] = hashlib.sha1(path.read_bytes()).hexdigest()
    return _digests[memo]


def _wavs(folder: Path) -> list[Path]:
    wavs = sorted(Path(folder).glob("*.wav"))
    if not wavs:
        raise FileNotFoundError(f"{folder}: no .wav files")
    return wavs


def _files_key(paths: Mapping[str, Path], feature: str) -> dict[str, object]:
    content = hashlib.sha1()
    for name, path in sorted(paths.items()):
        # a name that is not UTF-8 (a Latin-1 file name) is keyed by its own bytes
        content.update(f"{name}\t{_file_digest(Path(path))}\n".encode("utf-8", "surrogateescape"))
    return {"feature": feature, "version": FEATURES_VERSION, "content": content.hexdigest()}


def features_key(folder: str | Path, feature: str) -> dict[str, object]:
    """What defines the features of a folder: the feature, the code's version and one SHA-1 over
    every wav's name and SHA-1 of its bytes (not the folder's path)."""
    return _files_key({p.stem: p for p in _wavs(Path(folder))}, feature)


def load_features(
    folder: str | Path, feature: str, store: RunStore | None = None
) -> dict[str, np.ndarray]:
    """``{file id: (T, F) float32}`` for every wav of ``folder`` (10 ms frames).

    ``feature``: ``mfcc``, ``logmel`` or ``linear`` (:func:`feature_function`). With a
    ``store``, the features are kept as one run of kind ``features`` keyed by
    :func:`features_key`, and computed only the first time.
    """
    return load_wav_features({p.stem: p for p in _wavs(Path(folder))}, feature, store)


def load_wav_features(
    paths: Mapping[str, str | Path], feature: str, store: RunStore | None = None
) -> dict[str, np.ndarray]:
    """``{name: (T, F) float32}`` for the wavs ``{name: path}`` at any sample rate (resampled to
    16 kHz, 10 ms frames); cached in ``store`` under the files' names and contents, as
    :func:`load_features`. A set loaded from the store is kept for the process (the
    :data:`_LOADED_SETS` last ones, known by their cache file's identity, so a cache rewritten
    or damaged since is read again): later calls get copies of its arrays. The
    :class:`~audiorepro.features.audio.AudioWarning` of its files (cut short, samples far over
    full scale) are kept with a cached set and said again each time it is read."""
    paths = {name: Path(p) for name, p in paths.items()}
    if not paths:
        raise ValueError("no wav file to compute features of")
    fn = feature_function(feature)

    def compute() -> dict[str, np.ndarray]:
        return {
            name: fn(load_audio(p, sr=SAMPLE_RATE)[0]).astype(np.float32)
            for name, p in sorted(paths.items())
        }

    if store is None:
        return compute()

    def build(tmp: Path) -> dict[str, int]:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", AudioWarning)
            out = compute()
        notes = []
        for w in said:  # the audio's warnings are kept with the features, said by load()
            if issubclass(w.category, AudioWarning):
                notes.append(str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        with open(tmp / "features.npz", "wb") as fh:
            np.savez(fh, **out)
        if notes:
            (tmp / AUDIO_WARNINGS_FILE).write_text(
                json.dumps(list(dict.fromkeys(notes)), indent=1), encoding="utf-8"
            )
        return {"files": len(out)}

    def load(run) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
        said = run.path / AUDIO_WARNINGS_FILE
        notes = json.loads(said.read_text(encoding="utf-8")) if said.is_file() else []
        feats = load_npz(
            run.file("features.npz"), expected=f"{feature} features of {len(paths)} wavs"
        )
        return feats, tuple(str(note) for note in notes)

    key = _files_key(paths, feature)
    cache = store.run("features", key).path / "features.npz"

    def identity() -> tuple[str, ...]:
        stat = cache.stat() if cache.is_file() else None
        seen = (stat.st_ino, stat.st_size, stat.st_mtime_ns) if stat else None
        return (str(cache), str(seen))

    memo = identity()
    if memo not in _loaded:
        read = store.cached("features", key, build, load)
        memo = identity()  # a file just written, or replaced, is known by its new identity
        _loaded[memo] = read
        while len(_loaded) > _LOADED_SETS:
            _loaded.popitem(last=False)
    _loaded.move_to_end(memo)
    feats, notes = _loaded[memo]
    for note in notes:
        warnings.warn(note, AudioWarning, stacklevel=2)
    return {name: x.copy() for name, x in feats.items()}  # a caller may write to them


class SegmentDataset(Dataset):
    """Utterances cut into consecutive segments of ``segment_frames`` (the last one shorter).

    Items are ``(feats (T, F) float32, speaker index)``; deterministic, so training resumes
    exactly. Segments shorter than ``min_frames`` are dropped.
    """

    def __init__(
        self,
        utterances: Sequence[np.ndarray],
        speakers: Sequence[int],
        segment_frames: int,
        min_frames: int = 8,
    ) -> None:
        self.items: list[tuple[np.ndarray, int]] = []
        for feats, spk in zip(utterances, speakers, strict=True):
            for start in range(0, len(feats), segment_frames):
                seg = feats[start : start + segment_frames]
                if len(seg) >= min_frames:
                    self.items.append((seg, int(spk)))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.items[index]


def collate_segments(
    batch: Sequence[tuple[np.ndarray, int]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad to the longest: feats (B, T, F), lengths (B,), speakers (B,)."""
    lengths = torch.tensor([len(x) for x, _ in batch])
    feats = torch.zeros(len(batch), int(lengths.max()), batch[0][0].shape[1])
    for i, (x, _) in enumerate(batch):
        feats[i, : len(x)] = torch.from_numpy(np.asarray(x))
    return feats, lengths, torch.tensor([s for _, s in batch])


class PairDataset(Dataset):
    """Aligned ``(input (T, D), target (S, F))`` segment pairs, e.g. the codebook vectors of a
    segment and its magnitudes at ``S = r·T`` frames (the inverter's training data)."""

    def __init__(self, items: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.items[index]


def collate_pairs(
    batch: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad both sides to their longest: inputs (B, T, D), input lengths (B,), targets
    (B, S, F), target lengths (B,)."""
    code_lengths = torch.tensor([len(v) for v, _ in batch])
    lengths = torch.tensor([len(m) for _, m in batch])
    vectors = torch.zeros(len(batch), int(code_lengths.max()), batch[0][0].shape[1])
    mags = torch.zeros(len(batch), int(lengths.max()), batch[0][1].shape[1])
    for i, (v, m) in enumerate(batch):
        vectors[i, : len(v)] = torch.from_numpy(v)
        mags[i, : len(m)] = torch.from_numpy(m)
    return vectors, code_lengths, mags, lengths


def normalize_features(
    feats: Sequence[np.ndarray],
    mode: str,
    speakers: Sequence[str] | None = None,
    eps: float = 1e-5,
) -> list[np.ndarray]:
    """Mean and variance normalisation of utterances ``feats`` (each (T, F)), per dimension.

    ``mode``: ``none`` (copies as float32), ``utterance`` (each utterance by its own mean and
    standard deviation over its frames) or ``speaker`` (each utterance by the mean and standard
    deviation over every frame of its speaker, ``speakers[i]`` naming the speaker of
    ``feats[i]``). Standard deviations are floored at ``eps``. Returns float32 arrays of the
    input shapes.
    """
    if mode not in FEATURE_NORMS:
        raise ValueError(f"feature normalisation must be one of {FEATURE_NORMS}, got {mode!r}")
    arrays = [np.asarray(x, dtype=np.float64) for x in feats]
    for i, x in enumerate(arrays):
        if x.ndim != 2 or len(x) == 0:
            raise ValueError(f"utterance {i}: expected (T, F) with T >= 1, got shape {x.shape}")
    if mode == "none":
        return [x.astype(np.float32) for x in arrays]
    if mode == "utterance":
        groups = [[i] for i in range(len(arrays))]
    else:
        if speakers is None or len(speakers) != len(arrays):
            n = None if speakers is None else len(speakers)
            raise ValueError(
                f"speaker normalisation needs one speaker per utterance: got {n} "
                f"speakers for {len(arrays)} utterances"
            )
        by_speaker: dict[str, list[int]] = {}
        for i, spk in enumerate(speakers):
            by_speaker.setdefault(spk, []).append(i)
        groups = list(by_speaker.values())
    out: list[np.ndarray] = [np.empty(0, np.float32)] * len(arrays)
    for group in groups:
        pooled = np.concatenate([arrays[i] for i in group])  # (sum T, F)
        mean, std = pooled.mean(0), np.maximum(pooled.std(0), eps)
        for i in group:
            out[i] = ((arrays[i] - mean) / std).astype(np.float32)
    return out


SPEAKER_NORM_SECONDS = 10.0
"""The least audio (seconds) of every speaker for ``units train`` and ``awe train`` to
normalise per speaker (:func:`short_speakers`): a mean and a variance per dimension need a few
hundred frames."""


def short_speakers(seconds: Mapping[str, float]) -> list[str]:
    """The speakers of ``{speaker: seconds of audio}`` with less than
    :data:`SPEAKER_NORM_SECONDS`, sorted: too little audio to normalise them by their own."""
    return sorted(s for s, t in seconds.items() if t < SPEAKER_NORM_SECONDS)


def few_seconds_note(seconds: Mapping[str, float], where: str) -> str:
    """``""`` when every speaker of ``{speaker: seconds}`` has :data:`SPEAKER_NORM_SECONDS` of
    audio; else why a run that normalises per speaker gives their files other numbers than
    it would with more of their audio, for the commands that encode or embed with the
    statistics of what they are given (``where``: ``"among the files encoded"``)."""
    short = short_speakers(seconds)
    if not short:
        return ""
    first = short[0]
    return (
        f"{len(short)} of the {len(seconds)} speakers have less than "
        f"{SPEAKER_NORM_SECONDS:g} s of audio {where} ({first}: {seconds[first]:.1f} s), and "
        "the run normalises per speaker with the statistics of that audio: their files get "
        "other numbers with other files beside them; give all of a speaker's recordings "
        "together"
    )


def average_frames(feats: np.ndarray, stride: int) -> np.ndarray:
    """(T, F) → (ceil(T / stride), F): the mean of each window of ``stride`` frames, the last
    window holding what is left; the frame rate of a VQ-VAE that downsamples by ``stride``."""
    x = np.asarray(feats, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"average_frames: expected (T, F), got shape {x.shape}")
    if stride < 1:
        raise ValueError(f"average_frames: stride must be >= 1, got {stride}")
    n = -(-len(x) // stride)
    sums = np.add.reduceat(x, np.arange(n) * stride, axis=0) if n else x[:0]
    counts = np.minimum(stride, len(x) - np.arange(n) * stride)
    return (sums / counts[:, None]).astype(np.float32)
