"""The embedded audio-caption corpora, written in the real ClothoV2, AudioCaps and WavCaps layouts.

The retrieval chapters run offline on generated sound scenes
(:mod:`~audiorepro.data.embedded.scenes`), but the loading code must be the code that reads the
real corpora. So :func:`generate_audio_caption_corpora` writes each corpus exactly as its
download looks (file names, CSV headers and quoting, JSON structure, encodings; see
``shared/reference/retrieval.md``, "ClothoV2/AudioCaps/WavCaps loading"), and the recipes of
:mod:`audiorepro.data.recipes` turn either into manifests. Layout under ``out_dir``::

    clotho/
      clotho_audio_{development,validation,evaluation}/<file_name>.wav   32 kHz mono 16-bit
      clotho_captions_{split}.csv     file_name,caption_1,...,caption_5 (UTF-8, pandas quoting)
      clotho_metadata_{split}.csv     file_name,keywords,sound_id,sound_link,start_end_samples,
                                      manufacturer,license (ISO-8859-1, as the real one)
      clotho_paraphrases_{split}.json {caption: [paraphrase, ...]}: stands in for the
                                      GPT-augmented captions (Primus et al., DCASE 2023)
      embedded_scenes_{split}.jsonl   not in the real corpus: each clip's scene (events,
                                      times, attributes) and which captions are generic
    audiocaps/
      dataset/{train,val,test}.csv    audiocap_id,youtube_id,start_time,caption; one caption
                                      per clip in train, five rows per clip in val and test
      audio/Y<youtube_id>.wav         AudioSet file naming; 10 s clips
    wavcaps/
      json_files/SoundBible/sb_final.json, json_files/FreeSound/fsd_final.json
                                      {"num_captions_per_audio": 1, "data": [{"id", "caption",
                                      "audio", "duration", ...source fields}]}
      audio/<Source>/<id>.flac        FLAC like the real release (libFLAC output is
                                      byte-identical for identical samples)
      dcase2024_task6_excluded_freesound_ids.csv
                                      header sound_id: FreeSound ids that overlap the Clotho
                                      evaluation split (these clips hold the same 16-bit
                                      samples as Clotho evaluation clips, as in the real WavCaps)
    .complete                         JSON marker: preset, seed, config, counts, version

Every clip is a deterministic function of ``(seed, corpus, split, index)`` through its own
random streams, so the same seed gives byte-identical files whatever the generation order.
The corpus is written into a temporary sibling folder that is renamed into place when
complete; a folder without the marker is never taken for a finished corpus.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from audiorepro.config import ConfigError, field, to_dict
from audiorepro.data.embedded.atomic import generate_atomically
from audiorepro.data.embedded.corpus_presets import CORPUS_PRESETS, corpus_preset
from audiorepro.data.embedded.scenes import (
    AUDIOCAPS_STYLE,
    CLOTHO_STYLE,
    WAVCAPS_STYLE,
    Caption,
    CaptionStyle,
    Scene,
    SceneConfig,
    Speech,
    render_scene,
    sample_scene,
    scene_keywords,
    write_captions,
)
from audiorepro.data.embedded.sound_events import SAMPLE_RATE
from audiorepro.data.recipes import prepare_audiocaps, prepare_clotho, prepare_wavcaps
from audiorepro.data.sources import write_sources_yaml
from audiorepro.features.audio import save_audio, write_error
from audiorepro.parallel import ProcessStream

CLOTHO_SPLITS = ("development", "validation", "evaluation")
AUDIOCAPS_SPLITS = ("train", "val", "test")
WAVCAPS_SOURCES = ("SoundBible", "FreeSound")
WAVCAPS_JSON = {"SoundBible": "sb_final.json", "FreeSound": "fsd_final.json"}
"""Per-source JSON file names of the WavCaps release (``json_files/<Source>/<name>``)."""
WAVCAPS_EXCLUSION_CSV = "dcase2024_task6_excluded_freesound_ids.csv"
"""The DCASE 2024 list of FreeSound ids to drop from WavCaps (header ``sound_id``)."""
CLOTHO_PARAPHRASES = "clotho_paraphrases_{split}.json"
"""Paraphrase file name per Clotho split: JSON ``{caption: [paraphrase, ...]}``."""
# The completion marker and stale-folder rules are shared with the speech corpora.

"""Completion marker inside a finished corpus folder (JSON)."""
MANIFEST_DIR = "manifests"
SOURCES_FILE = "sources.yaml"
FORMAT_VERSION = 2
"""Bumped whenever the generated files change for the same seed and config."""

_CLOTHO_COLUMNS = ("file_name",) + tuple(f"caption_{k}" for k in range(1, 6))
_CLOTHO_METADATA_COLUMNS = (
    "file_name",
    "keywords",
    "sound_id",
    "sound_link",
    "start_end_samples",
    "manufacturer",
    "license",
)
_AUDIOCAPS_COLUMNS = ("audiocap_id", "youtube_id", "start_time", "caption")
_YOUTUBE_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
# Freesound user names; several need ISO-8859-1 (the encoding of Clotho's metadata files).
_MANUFACTURERS = (
    "fieldrec_anna",
    "jürgen_audio",
    "sonidos_de_josé",
    "kleinrauschen",
    "måns_sound",
    "Øyvind.rec",
    "françois_fx",
    "the_recordist",
    "quietplaces",
    "d.müller",
)
_LICENSES = (
    "http://creativecommons.org/publicdomain/zero/1.0/",
    "http://creativecommons.org/licenses/by/3.0/",
    "http://creativecommons.org/licenses/by-nc/3.0/",
)
# Stream ids: np.random.default_rng([seed, corpus, split, index, purpose]).
_CLOTHO, _AUDIOCAPS, _WAVCAPS, _IDS = 1, 2, 3, 9
_SCENE, _AUDIO, _CAPTIONS, _META = 0, 1, 2, 3


@dataclasses.dataclass(frozen=True)
class AudioCaptionCorpusConfig:
    """Sizes and scene statistics of the embedded caption corpora (one per preset)."""

    clotho_clips: tuple[int, int, int] = field(
        (960, 260, 260), help="ClothoV2 clips per split: development, validation, evaluation"
    )
    audiocaps_clips: tuple[int, int, int] = field(
        (400, 50, 50), help="AudioCaps clips per split: train (1 caption), val, test (5 each)"
    )
    wavcaps_clips: tuple[int, int] = field(
        (200, 400), help="WavCaps clips per source: SoundBible, FreeSound"
    )
    wavcaps_clotho_overlap: int = field(
        20, help="FreeSound clips identical to Clotho evaluation clips (the exclusion CSV)"
    )
    snippet_s: float = field(
        4.0, help="audio encoder snippet (s); Clotho and FreeSound clips last up to 3 snippets"
    )
    min_duration_s: float = field(3.0, help="shortest Clotho clip (s)")
    audiocaps_duration_s: float = field(10.0, help="AudioCaps clip duration (s), as AudioSet")
    max_events: int = field(4, help="most foreground events per Clotho scene")
    background_prob: float = field(0.4, help="probability of a background bed")
    overlap_prob: float = field(0.35, help="probability that two consecutive events overlap")
    speech_prob: float = field(0.25, help="probability of a spoken phrase (with a synthesiser)")
    generic_caption_prob: float = field(
        0.15, help="probability that a Clotho/AudioCaps caption is generic (shared by clips)"
    )
    paraphrases: tuple[int, int] = field((2, 4), help="paraphrases per Clotho caption (range)")

    def __post_init__(self) -> None:
        for name, size in (("clotho_clips", 3), ("audiocaps_clips", 3), ("wavcaps_clips", 2)):
            value = getattr(self, name)
            if len(value) != size or any(not isinstance(v, int) or v < 1 for v in value):
                raise ConfigError(f"{name} must be {size} positive integers, got {value!r}")
        overlap = self.wavcaps_clotho_overlap
        if not 0 <= overlap <= min(self.clotho_clips[2], self.wavcaps_clips[1]):
            raise ConfigError(
                f"wavcaps_clotho_overlap must be in [0, min(Clotho evaluation clips, FreeSound "
                f"clips)] = [0, {min(self.clotho_clips[2], self.wavcaps_clips[1])}], got {overlap}"
            )
        if not 0 < self.min_duration_s <= 3 * self.snippet_s:
            raise ConfigError(
                f"need 0 < min_duration_s <= 3 * snippet_s, got {self.min_duration_s} and "
                f"{self.snippet_s}"
            )
        if self.audiocaps_duration_s < 1.0:
            raise ConfigError(
                f"audiocaps_duration_s must be >= 1 s, got {self.audiocaps_duration_s}"
            )
        low, high = self.paraphrases
        if not 1 <= low <= high:
            raise ConfigError(
                f"paraphrases must be (low, high), 1 <= low <= high, got {low, high}"
            )
        self.scene_config("clotho")  # validates the probabilities and max_events

    @property
    def max_duration_s(self) -> float:
        """Longest Clotho clip: three snippets (30 s at paper scale, 12 s at 4 s snippets)."""
        return 3 * self.snippet_s

    def scene_config(self, corpus: str) -> SceneConfig:
        """The :class:`SceneConfig` of a corpus (``clotho``, ``audiocaps``, ``soundbible``,
        ``freesound``)."""
        common = {
            "background_prob": self.background_prob,
            "overlap_prob": self.overlap_prob,
            "speech_prob": self.speech_prob,
            "sample_rate": SAMPLE_RATE,
        }
        if corpus == "clotho":
            return SceneConfig(self.min_duration_s, self.max_duration_s, self.max_events, **common)
        if corpus == "audiocaps":
            d = self.audiocaps_duration_s
            return SceneConfig(d, d, min(3, self.max_events), **common)
        if corpus == "soundbible":
            return SceneConfig(1.5, max(1.5, min(8.0, self.max_duration_s)), 2, **common)
        if corpus == "freesound":
            return SceneConfig(2.0, max(2.0, self.max_duration_s), 2, **common)
        raise ValueError(f"unknown corpus {corpus!r}")


def audio_caption_config(preset: str, **overrides: Any) -> AudioCaptionCorpusConfig:
    """The configuration of a preset (``smoke`` or ``embedded``) with single-field overrides.

    Raises:
        ConfigError: unknown preset (``paper`` included: it uses the real corpora), unknown
            override key, or invalid value.
    """
    if preset not in CORPUS_PRESETS:
        raise ConfigError(
            f"unknown preset {preset!r} for the embedded audio-caption corpora; valid: "
            f"{', '.join(CORPUS_PRESETS)} (the paper preset prepares the real ClothoV2, "
            "AudioCaps and WavCaps with audiorepro.data.recipes)"
        )
    return corpus_preset(AudioCaptionCorpusConfig, preset, "audio_caption", overrides)


@dataclasses.dataclass(frozen=True)
class AudioCaptionCorpora:
    """Where the generated corpora lie and how large they are.

    Attributes:
        root: the corpus folder (``out_dir``).
        counts: ``{corpus: {split or source: {"clips": n, "captions": m}}}`` plus
            ``{"wavcaps_excluded": k}``.
        reused: ``True`` when a complete corpus with the same settings was already there.
    """

    root: Path
    counts: dict[str, Any]
    reused: bool

    @property
    def clotho(self) -> Path:
        """The ClothoV2-layout folder."""
        return self.root / "clotho"

    @property
    def audiocaps(self) -> Path:
        """The AudioCaps-layout folder."""
        return self.root / "audiocaps"

    @property
    def wavcaps(self) -> Path:
        """The WavCaps-layout folder."""
        return self.root / "wavcaps"


# --- one clip ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Clip:
    scene: Scene
    wav: np.ndarray
    captions: list[Caption]
    keywords: list[str]


def _streams(seed: int, corpus: int, split: int, index: int) -> list[np.random.Generator]:
    return [np.random.default_rng([seed, corpus, split, index, k]) for k in range(4)]


def _make_clip(
    key: tuple[int, int, int, int],
    scene_config: SceneConfig,
    style: CaptionStyle,
    num_captions: int,
    generic_prob: float,
    paraphrases: tuple[int, int],
    duration: float | None = None,
    caption_key: tuple[int, int, int, int] | None = None,
    render: bool = True,
    *,
    speech: Speech | None,
) -> _Clip:
    """Scene, audio, captions and keywords of one clip, from its key's random streams.

    ``caption_key`` words the captions from another key's streams (a WavCaps copy of a Clotho
    clip: the same scene, its own terse caption); ``render=False`` skips the audio (``wav`` is
    then empty).
    """
    scene_rng, audio_rng, _, _ = _streams(*key)
    _, _, caption_rng, meta_rng = _streams(*(caption_key or key))
    scene, speech_wav = sample_scene(scene_rng, scene_config, speech, duration)
    if render:
        wav = render_scene(scene, audio_rng, speech_wav, SAMPLE_RATE)
    else:
        wav = np.zeros(0, dtype=np.float32)
    captions = write_captions(scene, caption_rng, style, num_captions, generic_prob, paraphrases)
    return _Clip(scene, wav, captions, scene_keywords(scene, meta_rng))


def _make_clip_call(speech: Speech | None, call: tuple[Any, ...]) -> _Clip:
    """One clip from ``(args, kwargs)`` of :func:`_make_clip` without ``speech`` (a
    :class:`~audiorepro.parallel.ProcessStream` item: every clip depends only on its key's
    streams, so it is the same bytes in any process)."""
    args, kwargs = call
    return _make_clip(*args, speech=speech, **kwargs)


Clips = Callable[[Sequence[tuple[Any, ...]]], Iterator[_Clip]]
"""What the writers call to make their clips, in order (a ``ProcessStream`` of
:func:`_make_clip_call`)."""


def _title(scene: Scene) -> str:
    return " and ".join(e.event_class for e in scene.events)


# --- writers ----------------------------------------------------------------------------------


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence], encoding: str):
    """CSV as pandas' ``to_csv(index=False)`` writes it: minimal quoting, ``\\n`` line ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding=encoding, newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
        f.write("\n")


def _write_flac(path: Path, wav: np.ndarray, sr: int) -> None:
    """16-bit FLAC; int16 samples are stored as they are, floats are clipped to [-1, 1]."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = wav if wav.dtype == np.int16 else np.clip(wav, -1.0, 1.0)
    try:
        sf.write(str(path), data, sr, subtype="PCM_16", format="FLAC")
    except (sf.LibsndfileError, OSError) as err:
        raise write_error(path, err) from err


def _unique_ids(rng: np.random.Generator, count: int, low: int, high: int) -> list[int]:
    return [int(v) for v in rng.choice(np.arange(low, high), size=count, replace=False)]


def _youtube_ids(rng: np.random.Generator, count: int) -> list[str]:
    """``count`` distinct fake 11-character YouTube ids."""
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < count:
        chars = rng.integers(len(_YOUTUBE_ALPHABET), size=11)
        text = "".join(_YOUTUBE_ALPHABET[c] for c in chars)
        if text not in seen:
            seen.add(text)
            ids.append(text)
    return ids


def _overlap_pairs(config: AudioCaptionCorpusConfig) -> dict[int, int]:
    """``{FreeSound index: Clotho evaluation index}`` of the clips that WavCaps duplicates."""
    k = config.wavcaps_clotho_overlap
    if k == 0:
        return {}
    fsd = np.linspace(0, config.wavcaps_clips[1] - 1, k).round().astype(int)
    ev = np.linspace(0, config.clotho_clips[2] - 1, k).round().astype(int)
    return {int(f): int(e) for f, e in zip(fsd, ev, strict=True)}


def _write_clotho(
    root: Path, config: AudioCaptionCorpusConfig, seed: int, clips: Clips
) -> tuple[dict[str, Any], list[int], list[Path]]:
    """Write the ClothoV2 layout; returns counts, the evaluation clips' sound ids and files."""
    scene_config = config.scene_config("clotho")
    total = sum(config.clotho_clips) + config.wavcaps_clips[1]
    sound_ids = _unique_ids(np.random.default_rng([seed, _IDS, 0]), total, 10_000, 700_000)
    counts: dict[str, Any] = {}
    offset = 0
    evaluation_ids: list[int] = []
    evaluation_files: list[Path] = []
    for split_code, (split, size) in enumerate(
        zip(CLOTHO_SPLITS, config.clotho_clips, strict=True)
    ):
        audio_dir = root / f"clotho_audio_{split}"
        audio_dir.mkdir(parents=True, exist_ok=True)
        caption_rows, metadata_rows, scene_lines = [], [], []
        paraphrases: dict[str, list[str]] = {}
        prefix = {"development": "dev", "validation": "val", "evaluation": "eval"}[split]
        calls = [
            (
                (
                    (seed, _CLOTHO, split_code, index),
                    scene_config,
                    CLOTHO_STYLE,
                    5,
                    config.generic_caption_prob,
                    config.paraphrases,
                ),
                {},
            )
            for index in range(size)
        ]
        for index, clip in enumerate(clips(calls)):
            file_name = f"{prefix} {index:04d} {_title(clip.scene)}.wav"
            save_audio(audio_dir / file_name, clip.wav, SAMPLE_RATE)
            caption_rows.append([file_name] + [c.text for c in clip.captions])
            for caption in clip.captions:
                paraphrases.setdefault(caption.text, list(caption.paraphrases))
            meta_rng = np.random.default_rng([seed, _CLOTHO, split_code, index, _META + 1])
            sound_id = sound_ids[offset + index]
            user = _MANUFACTURERS[meta_rng.integers(len(_MANUFACTURERS))]
            start = int(meta_rng.integers(0, 20)) * SAMPLE_RATE
            metadata_rows.append(
                [
                    file_name,
                    ";".join(clip.keywords),
                    sound_id,
                    f"https://freesound.org/people/{urllib.parse.quote(user)}/sounds/{sound_id}",
                    f"[{start}, {start + len(clip.wav)}]",
                    user,
                    _LICENSES[meta_rng.integers(len(_LICENSES))],
                ]
            )
            scene_lines.append(
                {
                    "file_name": file_name,
                    "scene": clip.scene.to_dict(),
                    "generic": [c.generic for c in clip.captions],
                }
            )
            if split == "evaluation":
                evaluation_ids.append(sound_id)
                evaluation_files.append(audio_dir / file_name)
        _write_csv(root / f"clotho_captions_{split}.csv", _CLOTHO_COLUMNS, caption_rows, "utf-8")
        _write_csv(
            root / f"clotho_metadata_{split}.csv",
            _CLOTHO_METADATA_COLUMNS,
            metadata_rows,
            "iso-8859-1",
        )
        _write_json(root / CLOTHO_PARAPHRASES.format(split=split), paraphrases)
        with open(root / f"embedded_scenes_{split}.jsonl", "w", encoding="utf-8") as f:
            for line in scene_lines:
                f.write(json.dumps(line) + "\n")
        counts[split] = {"clips": size, "captions": 5 * size}
        offset += size
    return counts, evaluation_ids, evaluation_files


def _write_audiocaps(
    root: Path, config: AudioCaptionCorpusConfig, seed: int, clips: Clips
) -> dict[str, Any]:
    scene_config = config.scene_config("audiocaps")
    ids_rng = np.random.default_rng([seed, _IDS, 1])
    total_clips = sum(config.audiocaps_clips)
    youtube_ids = _youtube_ids(ids_rng, total_clips)
    per_clip = (1, 5, 5)
    total_rows = sum(n * k for n, k in zip(config.audiocaps_clips, per_clip, strict=True))
    audiocap_ids = _unique_ids(ids_rng, total_rows, 1, 120_000)
    counts: dict[str, Any] = {}
    clip_offset = row_offset = 0
    for split_code, split in enumerate(AUDIOCAPS_SPLITS):
        size, num_captions = config.audiocaps_clips[split_code], per_clip[split_code]
        rows = []
        calls = [
            (
                (
                    (seed, _AUDIOCAPS, split_code, index),
                    scene_config,
                    AUDIOCAPS_STYLE,
                    num_captions,
                    config.generic_caption_prob,
                    (1, 1),
                ),
                {"duration": config.audiocaps_duration_s},
            )
            for index in range(size)
        ]
        for index, clip in enumerate(clips(calls)):
            youtube_id = youtube_ids[clip_offset + index]
            save_audio(root / "audio" / f"Y{youtube_id}.wav", clip.wav, SAMPLE_RATE)
            start_rng = np.random.default_rng([seed, _AUDIOCAPS, split_code, index, _META + 1])
            start_time = int(start_rng.integers(0, 300))
            for caption in clip.captions:
                rows.append([audiocap_ids[row_offset], youtube_id, start_time, caption.text])
                row_offset += 1
        _write_csv(root / "dataset" / f"{split}.csv", _AUDIOCAPS_COLUMNS, rows, "utf-8")
        counts[split] = {"clips": size, "captions": size * num_captions}
        clip_offset += size
    return counts


def _write_wavcaps(
    root: Path,
    config: AudioCaptionCorpusConfig,
    seed: int,
    clips: Clips,
    evaluation_ids: Sequence[int],
    evaluation_files: Sequence[Path],
) -> dict[str, Any]:
    ids_rng = np.random.default_rng([seed, _IDS, 2])
    soundbible_ids = _unique_ids(ids_rng, config.wavcaps_clips[0], 1000, 3000)
    total = sum(config.clotho_clips) + config.wavcaps_clips[1]
    freesound_pool = _unique_ids(np.random.default_rng([seed, _IDS, 0]), total, 10_000, 700_000)
    freesound_ids = freesound_pool[sum(config.clotho_clips) :]
    pairs = _overlap_pairs(config)
    counts: dict[str, Any] = {}
    excluded: list[int] = []
    for source_code, source in enumerate(WAVCAPS_SOURCES):
        scene_config = config.scene_config(source.lower())
        entries = []
        calls = []
        for index in range(config.wavcaps_clips[source_code]):
            own_key = (seed, _WAVCAPS, source_code, index)
            if source == "FreeSound" and index in pairs:
                # A Clotho evaluation recording (its scene; its 16-bit samples copied from the
                # Clotho file) with a WavCaps caption: the overlap the DCASE list removes.
                key = (seed, _CLOTHO, CLOTHO_SPLITS.index("evaluation"), pairs[index])
                call = (key, config.scene_config("clotho"), WAVCAPS_STYLE, 1, 0.1, (1, 1))
                calls.append((call, {"caption_key": own_key, "render": False}))
            else:
                calls.append(((own_key, scene_config, WAVCAPS_STYLE, 1, 0.1, (1, 1)), {}))
        for index, clip in enumerate(clips(calls)):
            if source == "FreeSound" and index in pairs:
                clotho_index = pairs[index]
                samples, _ = sf.read(str(evaluation_files[clotho_index]), dtype="int16")
                clip = dataclasses.replace(clip, wav=samples)
                clip_id = evaluation_ids[clotho_index]
                excluded.append(clip_id)
            else:
                clip_id = (soundbible_ids if source == "SoundBible" else freesound_ids)[index]
            audio_rel = f"audio/{source}/{clip_id}.flac"
            _write_flac(root / audio_rel, clip.wav, SAMPLE_RATE)
            duration = round(len(clip.wav) / SAMPLE_RATE, 6)
            caption = clip.captions[0].text
            title = _title(clip.scene).title()
            author = _MANUFACTURERS[(clip_id * 7) % len(_MANUFACTURERS)]
            if source == "SoundBible":
                entry = {
                    "title": title,
                    "description": f"{title} recorded for the embedded corpus.",
                    "author": author,
                    "href": f"{clip_id}-{title.replace(' ', '-')}.html",
                    "caption": caption,
                    "id": str(clip_id),
                    "duration": duration,
                    "audio": audio_rel,
                    "download_link": f"https://soundbible.com/grab.php?id={clip_id}&type=wav",
                }
            else:
                entry = {
                    "id": str(clip_id),
                    "file_name": f"{title}.wav",
                    "href": f"/people/{urllib.parse.quote(author)}/sounds/{clip_id}/",
                    "tags": clip.keywords,
                    "description": f"{title}.",
                    "author": author,
                    "duration": duration,
                    "download_link": f"https://freesound.org/people/{urllib.parse.quote(author)}"
                    f"/sounds/{clip_id}/download/",
                    "caption": caption,
                    "audio": audio_rel,
                }
            entries.append(entry)
        _write_json(
            root / "json_files" / source / WAVCAPS_JSON[source],
            {"num_captions_per_audio": 1, "data": entries},
        )
        counts[source] = {"clips": len(entries), "captions": len(entries)}
    _write_csv(root / WAVCAPS_EXCLUSION_CSV, ("sound_id",), [[i] for i in excluded], "utf-8")
    counts["excluded"] = len(excluded)
    return counts


# --- generation with a completion marker ------------------------------------------------------


def _speech_name(speech: Speech | None) -> str | None:
    if speech is None:
        return None
    name = getattr(speech, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(speech, "__qualname__", type(speech).__name__)


_SOURCES = {
    "clotho": ("ClothoV2", "https://zenodo.org/records/4783391", prepare_clotho),
    "audiocaps": ("AudioCaps", "https://audiocaps.github.io/", prepare_audiocaps),
    "wavcaps": ("WavCaps", "https://huggingface.co/datasets/cvssp/WavCaps", prepare_wavcaps),
}


def _write_manifests_and_sources(root: Path) -> None:
    """Run the real corpora's recipes on the generated folders: ``<corpus>/manifests/`` and a
    ``<corpus>/sources.yaml`` with the expected counts, so ``python -m audiorepro.data check``
    verifies each corpus like a downloaded one."""
    for corpus, (title, homepage, prepare) in _SOURCES.items():
        counts = prepare(root / corpus, root / corpus / MANIFEST_DIR)
        data = {
            "name": f"{corpus}_embedded",
            "description": (
                f"{title} look-alike of procedurally synthesised sound scenes, written by "
                "audiorepro.data.embedded.audio_caption in the real corpus's layout."
            ),
            "homepage": homepage,
            "licence": "Generated locally by audiorepro (MIT); contains no third-party recordings.",
            "citation": "@misc{audiorepro, title = {audiorepro embedded corpora}, year = {2026}}\n",
            "sampling_rate": SAMPLE_RATE,
            "files": [],
            "expected_counts": {
                split: {"recordings": c["recordings"], "supervisions": c["supervisions"]}
                for split, c in counts.items()
                # WavCaps also counts per source; only the manifest files' splits are checked
                if (root / corpus / MANIFEST_DIR / f"{split}_recordings.jsonl.gz").is_file()
            },
        }
        write_sources_yaml(root / corpus / SOURCES_FILE, data)


def _settings(preset: str, seed: int, config: AudioCaptionCorpusConfig, speech) -> dict:
    from audiorepro import __version__

    return {
        "preset": preset,
        "seed": seed,
        "config": to_dict(config),
        "speech": _speech_name(speech),
        "version": __version__,
        "format": FORMAT_VERSION,
    }


def generate_audio_caption_corpora(
    out_dir: str | os.PathLike[str],
    preset: str = "embedded",
    seed: int = 0,
    speech: Speech | None = None,
    *,
    config: AudioCaptionCorpusConfig | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
) -> AudioCaptionCorpora:
    """Generate the ClothoV2, AudioCaps and WavCaps look-alikes under ``out_dir`` (or reuse).

    A complete corpus already in ``out_dir`` with the same preset, seed, configuration, speech
    synthesiser name, library version and format is reused as is. Otherwise everything is
    written into a temporary sibling folder (``.<name>.partial-<pid>-<random>``), the marker
    :data:`MARKER` is written last, and the folder is renamed to ``out_dir``; a previous
    generated corpus with other settings is replaced. A crash leaves ``out_dir`` untouched.

    Args:
        out_dir: the corpus folder to create (``clotho/``, ``audiocaps/``, ``wavcaps/`` inside).
        preset: ``smoke`` or ``embedded`` (the sizes: :func:`audio_caption_config`).
        seed: the corpus seed; equal seeds give byte-identical files.
        speech: optional ``speech(text, rng) -> (wav 32 kHz float32, transcript)``; its
            ``name`` attribute (or qualified name) is recorded in the marker.
        config: replaces the preset's configuration (recorded in the marker).
        progress: called with a short message after each corpus part (for notebooks).
        workers: processes that make the clips ahead of the writer (1: here); the files are
            the same bytes for any number. With more than one, ``speech`` must pickle (a
            module-level function or an object such as
            :class:`~audiorepro.data.embedded.generate.EspeakPhraseSpeech`).

    Raises:
        ConfigError: unknown preset.
        FileExistsError: ``out_dir`` exists, is not empty and holds no marker (not a corpus
            this function wrote: it is never deleted).
    """
    out_dir = Path(out_dir)
    if config is None:
        config = audio_caption_config(preset)
    elif preset not in CORPUS_PRESETS:
        audio_caption_config(preset)  # raises the unknown-preset error
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    seed = int(seed)
    settings = _settings(preset, seed, config, speech)

    say = progress or (lambda message: None)

    def build(tmp: Path) -> dict[str, Any]:
        with ProcessStream(_make_clip_call, shared=speech, workers=workers) as clips:
            clotho_counts, eval_ids, eval_files = _write_clotho(
                tmp / "clotho", config, seed, clips
            )
            say(f"clotho: {clotho_counts}")
            audiocaps_counts = _write_audiocaps(tmp / "audiocaps", config, seed, clips)
            say(f"audiocaps: {audiocaps_counts}")
            wavcaps_counts = _write_wavcaps(
                tmp / "wavcaps", config, seed, clips, eval_ids, eval_files
            )
            say(f"wavcaps: {wavcaps_counts}")
        excluded = wavcaps_counts.pop("excluded")
        _write_manifests_and_sources(tmp)
        return {
            "clotho": clotho_counts,
            "audiocaps": audiocaps_counts,
            "wavcaps": wavcaps_counts,
            "wavcaps_excluded": excluded,
        }

    counts, reused = generate_atomically(out_dir, settings, build)
    return AudioCaptionCorpora(out_dir, counts, reused=reused)
