"""Audio-caption datasets over the ClothoV2, AudioCaps and WavCaps manifests (paper §2.4, §2.5).

The recipes of :mod:`audiorepro.data.recipes` turn each corpus (real download or the embedded
look-alike) into manifests; this module reads them into :class:`CaptionItem` lists, one item per
caption, which concatenate freely for multi-corpus pretraining (paper §2.4: ClothoV2 development
+ AudioCaps + WavCaps minus the clips that overlap the Clotho evaluation split, which the WavCaps
recipe drops).

Audio enters the models as PaSST log-mel (:class:`audiorepro.features.PasstMel`, eval mode),
computed once per recording and cached on disk (:func:`log_mel_features`). The training dataset
then follows §2.5: a recording longer than ``max_frames`` (30 s at paper scale) contributes a
random crop of that length (or its start, ``crop="start"``, which chapter 02's stage 2 uses), and
:func:`collate_captions` zero-pads a batch to its longest item.
Caption augmentation (§3.5, "GPT augmentation") replaces a caption by one of its paraphrases
with probability ``paraphrase_prob`` (0.3 in the paper).

Randomness (crops, paraphrases) is a function of ``(seed, epoch, index)``, so training resumes
exactly (see :mod:`audiorepro.training.loop`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from audiorepro.data.manifests import find_manifests, read_recordings, read_supervisions
from audiorepro.data.recipes import RecipeError, prepare_audio_caption_manifests
from audiorepro.features.atst_mel import AtstMel
from audiorepro.features.audio import load_audio
from audiorepro.features.passt_mel import PasstMel
from audiorepro.paths import data_dir

CORPORA = ("clotho", "audiocaps", "wavcaps")
PRETRAIN_SPLITS = {
    "clotho": ("development",),
    "audiocaps": ("train", "val", "test"),  # paper §2.4.2: all three splits for pretraining
    "wavcaps": ("train",),
}
"""Which splits of each corpus the paper pretrains on."""
SAMPLE_RATE = 32_000
SILENCE_LOG_MEL = (math.log(1e-5) + 4.5) / 5
"""PaSST's normalised log-mel of a zero waveform (``PasstMel``: ``(log(0 + 1e-5) + 4.5) / 5``)."""


class RetrievalDataError(ValueError):
    """A manifest or item the retrieval data code cannot use (names the file and the item)."""


@dataclasses.dataclass(frozen=True)
class CaptionItem:
    """One caption of one recording.

    Attributes:
        corpus: ``clotho``, ``audiocaps`` or ``wavcaps``.
        recording_id: unique within the corpus.
        audio: absolute path of the audio file.
        caption: the caption text.
        paraphrases: alternative captions for caption augmentation (may be empty).
        duration: the recording's duration in seconds.
    """

    corpus: str
    recording_id: str
    audio: str
    caption: str
    paraphrases: tuple[str, ...] = ()
    duration: float = 0.0

    @property
    def key(self) -> str:
        """``corpus/recording_id``: unique across corpora."""
        return f"{self.corpus}/{self.recording_id}"


def prepare_caption_manifests(corpora_dir: str | os.PathLike[str]) -> Path:
    """Manifests of a corpora folder (``clotho/``, ``audiocaps/``, ``wavcaps/``, real or
    embedded), written once by the recipes next to it and reused.

    ``<corpora_dir>_manifests/{clotho,audiocaps,wavcaps}``, built in a temporary folder and
    renamed into place, so concurrent callers never see a partial set.
    """
    corpora_dir = Path(corpora_dir)
    out = corpora_dir.parent / f"{corpora_dir.name}_manifests"
    if (out / ".complete").is_file():
        return out
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    counts = prepare_audio_caption_manifests(corpora_dir, tmp)
    (tmp / ".complete").write_text(json.dumps(counts, sort_keys=True))
    try:
        tmp.rename(out)
    except OSError:  # another process finished first
        if not (out / ".complete").is_file():
            raise
    return out


def load_caption_items(
    manifest_dir: str | os.PathLike[str],
    corpus: str,
    split: str,
    root: str | os.PathLike[str],
) -> list[CaptionItem]:
    """The captions of one split of one corpus, in manifest order.

    Args:
        manifest_dir: folder of ``<split>_recordings.jsonl.gz`` / ``<split>_supervisions…``.
        corpus: ``clotho``, ``audiocaps`` or ``wavcaps`` (names the items).
        split: the split name in the manifest file names.
        root: folder the recordings' relative sources are relative to.

    Raises:
        RetrievalDataError: no manifests for the split, an empty caption, a supervision of an
            unknown recording, or an audio file that does not exist (file and id named).
    """
    if corpus not in CORPORA:
        raise RetrievalDataError(f"unknown corpus {corpus!r}; valid: {', '.join(CORPORA)}")
    if not Path(manifest_dir).is_dir():
        raise RetrievalDataError(f"{manifest_dir}: manifest folder not found")
    pair = find_manifests(manifest_dir).get(split, {})
    if "recordings" not in pair or "supervisions" not in pair:
        raise RetrievalDataError(
            f"{manifest_dir}: no manifests for split {split!r} (expected "
            f"{split}_recordings.jsonl.gz and {split}_supervisions.jsonl.gz)"
        )
    rec_path, sup_path = pair["recordings"], pair["supervisions"]
    recordings = {r.id: r for r in read_recordings(rec_path)}
    items = []
    for line, sup in enumerate(read_supervisions(sup_path), start=1):
        rec = recordings.get(sup.recording_id)
        if rec is None:
            raise RetrievalDataError(
                f"{sup_path}:{line}: supervision {sup.id!r} names unknown recording "
                f"{sup.recording_id!r}"
            )
        if not (sup.text or "").strip():
            raise RetrievalDataError(f"{sup_path}:{line}: supervision {sup.id!r}: empty caption")
        audio = rec.sources[0].path(root)
        if not audio.is_file():
            raise RetrievalDataError(
                f"{rec_path}: recording {rec.id!r} points at a missing file {audio}"
            )
        paraphrases = tuple((sup.custom or {}).get("paraphrases", ()))
        items.append(CaptionItem(corpus, rec.id, str(audio), sup.text, paraphrases, rec.duration))
    return items


def caption_items(
    corpora_dir: str | os.PathLike[str], corpus: str, splits: Sequence[str]
) -> list[CaptionItem]:
    """Items of splits of one corpus in a corpora folder (manifests written on first use)."""
    corpora_dir = Path(corpora_dir)
    manifests = prepare_caption_manifests(corpora_dir)
    items: list[CaptionItem] = []
    for split in splits:
        items += load_caption_items(manifests / corpus, corpus, split, corpora_dir / corpus)
    return items


# ------------------------------------------------------------------------------ features


def _cache_key(paths: Sequence[str], config: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    for path in paths:
        stat = os.stat(path)
        digest.update(f"{path}|{stat.st_size}|{int(stat.st_mtime)}".encode())
    return digest.hexdigest()[:20]


FRONT_ENDS = ("passt", "atst")
"""Front ends of the retrieval audio encoders: PaSST's 128-band log-mel at 32 kHz (PaSST, the
CNNs, MobileNet) and ATST-Frame's 64-band scaled log-mel at 16 kHz."""


def log_mel_features(
    items: Sequence[CaptionItem],
    *,
    max_seconds: float | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    verbose: bool = False,
    front_end: str = "passt",
) -> dict[str, torch.Tensor]:
    """Log-mel of every distinct recording: ``{item.key: (T, F) float16}``.

    ``front_end="passt"`` (default): eval-mode :class:`PasstMel` at 32 kHz, F = 128.
    ``front_end="atst"``: ATST-Frame's :class:`~audiorepro.features.AtstMel` at 16 kHz,
    F = 64 (paper (b) §4.4: each model's own spectrogram recipe).

    Computed once and cached in ``<cache_dir or data dir/cache/retrieval>/<hash>.pt``, the hash
    covering the files (path, size, modification time), the front end and ``max_seconds``.
    ``max_seconds`` keeps only the start of longer recordings (saves memory when training crops
    shorter windows anyway).

    Raises:
        RetrievalDataError: audio that cannot be read, or shorter than one 16-frame patch.
        ValueError: an unknown front end.
    """
    if front_end not in FRONT_ENDS:
        raise ValueError(f"unknown front end {front_end!r}; known: {', '.join(FRONT_ENDS)}")
    by_key: dict[str, str] = {}
    for item in items:
        by_key.setdefault(item.key, item.audio)
    keys = sorted(by_key)
    cache = Path(cache_dir) if cache_dir is not None else data_dir() / "cache" / "retrieval"
    config: dict[str, Any] = {"max_seconds": max_seconds, "v": 1}
    if front_end != "passt":  # the PaSST cache keeps its earlier name
        config["front_end"] = front_end
    path = cache / f"{_cache_key([by_key[k] for k in keys], config)}.pt"
    if path.is_file():
        return torch.load(path)
    if front_end == "atst":
        mel, sample_rate, n_fft, bands = AtstMel().eval(), 16_000, 1024, 64
    else:
        mel, sample_rate, bands = PasstMel().eval(), SAMPLE_RATE, 128
        n_fft = mel.n_fft
    feats: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for i, k in enumerate(keys):
            wav, _ = load_audio(by_key[k], sr=sample_rate, duration=max_seconds)
            if wav.size <= n_fft // 2 + 1:
                x = torch.zeros(bands, 0)
            else:
                x = mel(torch.from_numpy(np.ascontiguousarray(wav, dtype=np.float32))[None])
                x = x.reshape(x.shape[-2], x.shape[-1])  # (F, T)
            if x.shape[-1] < 16:
                raise RetrievalDataError(
                    f"{by_key[k]}: {x.shape[-1]} frames of log-mel ({wav.size / sample_rate:.3f} s)"
                    " is shorter than one 16-frame patch"
                )
            feats[k] = x.T.to(torch.float16).contiguous()  # (T, F)
            if verbose and (i + 1) % 500 == 0:
                print(f"log-mel: {i + 1}/{len(keys)} recordings", flush=True)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    torch.save(feats, tmp)
    os.replace(tmp, path)
    return feats


# ------------------------------------------------------------------------------ datasets

CROPS = ("random", "start")
"""Where :class:`CaptionDataset` takes a training crop from a longer recording."""


class CaptionDataset(Dataset):
    """Caption-level training items: ``{"feats": (T, F), "caption": str, "audio_id": int,
    "key": str}`` (``key``: the recording's :attr:`CaptionItem.key`).

    Args:
        items: caption items (one or several corpora concatenated).
        features: ``{item.key: (T, F)}`` log-mel, e.g. from :func:`log_mel_features`.
        max_frames: crop length for longer recordings (paper: 30 s = 3000 frames).
        crop: ``"random"`` (default): a random window of ``max_frames``, new each epoch
            (paper §2.5); ``"start"``: the first ``max_frames`` of the recording, every epoch,
            as evaluation and the stage-2 teachers of chapter 02 embed it.
        paraphrase_prob: probability of swapping the caption for one of its paraphrases
            (paper §3.5: 0.3 when fine-tuning with augmentation; 0 otherwise).
        seed: base seed of the crops and swaps.
        freqm, timem: SpecAugment (Park et al. 2019) on the cached log-mel, as the official
            dcase2023 code applies it to PaSST's input (not stated in the paper): one band
            mask of width uniform in ``[0, freqm)`` and one frame mask of width uniform in
            ``[0, timem)``, set to 0, the normalised log-mel's approximate mean (torchaudio's
            ``FrequencyMasking``/``TimeMasking``). 0 turns each off (salsa's default). The
            masks come from their own random stream, so turning them on leaves the crops
            and swaps unchanged.
    """

    def __init__(
        self,
        items: Sequence[CaptionItem],
        features: Mapping[str, torch.Tensor],
        *,
        max_frames: int | None = None,
        crop: str = "random",
        paraphrase_prob: float = 0.0,
        seed: int = 0,
        freqm: int = 0,
        timem: int = 0,
    ) -> None:
        if freqm < 0 or timem < 0:
            raise RetrievalDataError(f"freqm and timem must be >= 0, got {freqm} and {timem}")
        if crop not in CROPS:
            raise RetrievalDataError(f"crop must be one of {', '.join(CROPS)}, got {crop!r}")
        if not items:
            raise RetrievalDataError("no caption items")
        missing = sorted({i.key for i in items if i.key not in features})
        if missing:
            raise RetrievalDataError(
                f"no features for {len(missing)} recordings, e.g. {missing[0]}"
            )
        if not 0.0 <= paraphrase_prob <= 1.0:
            raise RetrievalDataError(f"paraphrase_prob must be in [0, 1], got {paraphrase_prob}")
        self.items = list(items)
        self.features = features
        self.max_frames = max_frames
        self.crop = crop
        self.paraphrase_prob = paraphrase_prob
        self.seed = seed
        self.freqm, self.timem = int(freqm), int(timem)
        self.epoch = 0
        keys = sorted({i.key for i in self.items})
        self.audio_index = {k: n for n, k in enumerate(keys)}

    def __len__(self) -> int:
        return len(self.items)

    def set_epoch(self, epoch: int) -> None:
        """Select the random crops and caption swaps of ``epoch``."""
        self.epoch = epoch

    def __getitem__(self, index: int) -> dict[str, Any]:
        item = self.items[index]
        rng = np.random.default_rng([self.seed, self.epoch, index])
        feats = self.features[item.key]  # (T, F)
        if self.max_frames is not None and feats.shape[0] > self.max_frames:
            start = 0
            if self.crop == "random":
                start = int(rng.integers(feats.shape[0] - self.max_frames + 1))
            feats = feats[start : start + self.max_frames]
        caption = item.caption
        if item.paraphrases and rng.random() < self.paraphrase_prob:
            caption = item.paraphrases[int(rng.integers(len(item.paraphrases)))]
        if self.freqm or self.timem:
            feats = spec_augment(
                feats,
                self.freqm,
                self.timem,
                np.random.default_rng([self.seed, self.epoch, index, 1]),
            )
        return {
            "feats": feats,
            "caption": caption,
            "audio_id": self.audio_index[item.key],
            "key": item.key,
        }


def spec_augment(
    feats: torch.Tensor, freqm: int, timem: int, rng: np.random.Generator
) -> torch.Tensor:
    """A copy of ``feats`` (T, F) with one band mask of width uniform in ``[0, freqm)`` and one
    frame mask of width uniform in ``[0, timem)`` set to 0 (widths are clipped to the input;
    a width of 0 masks nothing)."""
    out = feats.clone()
    num_frames, num_bins = out.shape
    for width_max, size, axis in ((freqm, num_bins, 1), (timem, num_frames, 0)):
        if width_max <= 0:
            continue
        width = min(int(rng.integers(width_max)), size)
        start = int(rng.integers(size - width + 1))
        if axis == 1:
            out[:, start : start + width] = 0.0
        else:
            out[start : start + width] = 0.0
    return out


def collate_captions(
    examples: Sequence[Mapping[str, Any]], pad_value: float = SILENCE_LOG_MEL
) -> dict[str, Any]:
    """Zero-pad to the batch's longest item (paper §2.5).

    Padding is applied to the waveforms in the paper; on cached log-mel the equivalent is the
    log-mel of silence, ``pad_value`` (:data:`SILENCE_LOG_MEL` for the PaSST front end).

    Returns:
        ``feats`` (B, T_max, F) float32, ``lengths`` (B,), ``captions`` (list of B),
        ``audio_ids`` (B,) int64, ``keys`` (list of B recording keys).
    """
    lengths = torch.tensor([e["feats"].shape[0] for e in examples])
    num_bins = examples[0]["feats"].shape[1]
    feats = torch.full((len(examples), int(lengths.max()), num_bins), pad_value)
    for i, e in enumerate(examples):
        feats[i, : e["feats"].shape[0]] = e["feats"].float()
    return {
        "feats": feats,
        "lengths": lengths,
        "captions": [e["caption"] for e in examples],
        "audio_ids": torch.tensor([e["audio_id"] for e in examples], dtype=torch.long),
        "keys": [e.get("key", "") for e in examples],
    }


@dataclasses.dataclass(frozen=True)
class EvaluationSet:
    """A retrieval evaluation split: every caption a query with one relevant recording.

    Attributes:
        keys: the distinct recordings, in first-appearance order (columns of the scores).
        captions: every caption (rows of the scores).
        targets: for each caption, the index of its recording in ``keys``.
    """

    keys: tuple[str, ...]
    captions: tuple[str, ...]
    targets: tuple[int, ...]

    @classmethod
    def from_items(cls, items: Sequence[CaptionItem]) -> EvaluationSet:
        """Build it from caption items (e.g. the Clotho evaluation split)."""
        keys: dict[str, int] = {}
        for item in items:
            keys.setdefault(item.key, len(keys))
        return cls(
            tuple(keys),
            tuple(i.caption for i in items),
            tuple(keys[i.key] for i in items),
        )


def caption_statistics(corpora: Mapping[str, Sequence[CaptionItem]]) -> Any:
    """One row per named item list: clips, captions, captions per clip, words per caption
    (mean), clip duration (mean, max, s) and paraphrases per caption (mean)."""
    import pandas as pd

    rows = []
    for name, items in corpora.items():
        clips = {i.key: i.duration for i in items}
        words = [len(i.caption.split()) for i in items]
        rows.append(
            {
                "corpus": name,
                "clips": len(clips),
                "captions": len(items),
                "captions/clip": round(len(items) / max(1, len(clips)), 2),
                "words/caption": round(float(np.mean(words)), 1) if words else 0.0,
                "mean duration (s)": round(float(np.mean(list(clips.values()))), 1),
                "max duration (s)": round(float(np.max(list(clips.values()))), 1),
                "paraphrases/caption": round(
                    float(np.mean([len(i.paraphrases) for i in items])), 1
                ),
            }
        )
    return pd.DataFrame(rows)


def generic_flags(
    corpora_dir: str | os.PathLike[str], split: str, items: Sequence[CaptionItem]
) -> list[bool] | None:
    """Whether each ClothoV2-layout caption item of ``split`` is *generic*: written by the
    embedded generator from a table of captions that fit many clips ("several sounds happen one
    after another"), read from ``clotho/embedded_scenes_{split}.jsonl``. Each line holds a
    clip's ``file_name`` and one flag per caption, in the order of the captions file; a clip's
    k-th item in ``items`` takes its k-th flag. ``None`` for a corpus without that file (the real
    ClothoV2 has no such labels).

    Raises:
        RetrievalDataError: an item whose clip has no line, or more items than flags.
    """
    path = Path(corpora_dir) / "clotho" / f"embedded_scenes_{split}.jsonl"
    if not path.is_file():
        return None
    flags: dict[str, list[bool]] = {}
    with open(path, encoding="utf-8") as f:
        for text in f:
            if text.strip():
                row = json.loads(text)
                flags[row["file_name"]] = [bool(g) for g in row.get("generic", [])]
    seen: dict[str, int] = {}
    out = []
    for item in items:
        name = Path(item.audio).name
        k = seen.get(item.key, 0)
        seen[item.key] = k + 1
        if name not in flags or k >= len(flags[name]):
            raise RetrievalDataError(
                f"{path}: no generic flag for caption {k + 1} of {name!r} ({item.caption!r})"
            )
        out.append(flags[name][k])
    return out


def caption_sharing(
    items: Sequence[CaptionItem], generic: Sequence[bool] | None = None
) -> dict[str, float]:
    """How many captions of ``items`` describe more than one clip, as measured numbers.

    Paper (b) §2 argues that the binary targets of L_sup are wrong wherever a caption describes
    several clips (its Table 1 lists captions given word for word to two recordings). Two kinds
    are counted here, over caption items (one per caption of a clip):

    - ``shared``: share of the items whose exact text was written for two or more distinct
      clips of ``items`` (word for word, the kind the corpus itself proves);
    - ``generic``: share flagged generic (``generic``, one flag per item, e.g. from
      :func:`generic_flags`; NaN when not given): captions that fit many clips whatever their
      wording;
    - ``shared_or_generic``: either of the two.

    Also ``captions`` (items), ``clips`` (distinct recordings), ``shared_texts`` (distinct texts
    written for several clips) and ``clips_per_shared_text`` (mean clips of such a text, NaN
    when there is none).
    """
    if generic is not None and len(generic) != len(items):
        raise RetrievalDataError(f"{len(generic)} generic flags for {len(items)} caption items")
    clips_of: dict[str, set[str]] = {}
    for item in items:
        clips_of.setdefault(item.caption, set()).add(item.key)
    shared = [len(clips_of[i.caption]) > 1 for i in items]
    multi = [len(keys) for keys in clips_of.values() if len(keys) > 1]
    n = max(1, len(items))
    either = [s or bool(g) for s, g in zip(shared, generic or [False] * len(items), strict=True)]
    return {
        "captions": float(len(items)),
        "clips": float(len({i.key for i in items})),
        "shared": sum(shared) / n,
        "shared_texts": float(len(multi)),
        "clips_per_shared_text": float(np.mean(multi)) if multi else math.nan,
        "generic": math.nan if generic is None else sum(map(bool, generic)) / n,
        "shared_or_generic": sum(either) / n,
    }


def manifest_counts(corpora_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """What the recipes reported when they wrote the manifests of ``corpora_dir`` (counts per
    corpus and split, WavCaps clips excluded for overlapping the Clotho evaluation split)."""
    path = prepare_caption_manifests(corpora_dir) / ".complete"
    return json.loads(path.read_text())


__all__ = [
    "CORPORA",
    "CROPS",
    "PRETRAIN_SPLITS",
    "CaptionDataset",
    "CaptionItem",
    "EvaluationSet",
    "RecipeError",
    "RetrievalDataError",
    "collate_captions",
    "caption_items",
    "caption_sharing",
    "caption_statistics",
    "generic_flags",
    "manifest_counts",
    "load_caption_items",
    "log_mel_features",
    "prepare_caption_manifests",
]
