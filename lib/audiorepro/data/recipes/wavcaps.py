"""WavCaps (Mei et al., 2023) as distributed on Hugging Face, to manifests.

Input (``cvssp/WavCaps``; salsa ``data/datasets/wavcaps.py`` reads the same files)::

    json_files/AudioSet_SL/as_final.json
    json_files/BBC_Sound_Effects/bbc_final.json
    json_files/FreeSound/fsd_final_2s.json   (or fsd_final.json)
    json_files/SoundBible/sb_final.json
    audio/<Source>/<id>.flac                 (AudioSet_SL ids end in ".wav": stripped)
    dcase2024_task6_excluded_freesound_ids.csv   header sound_id (optional)

Each JSON file is ``{"num_captions_per_audio": 1, "data": [{"id", "caption", "audio",
"duration", ...}]}`` (a bare list of entries, as in older copies, is also read). Sources whose
JSON file is absent are skipped. FreeSound entries whose id is in the exclusion CSV (the DCASE
2024 list of clips that overlap the Clotho evaluation split) are dropped. Output: one split,
``train``: a recording per clip (id ``<Source>/<id>``) and a supervision per caption (id
``<Source>/<id>-0``, ``custom``: ``caption_index`` 0, ``source``, ``wavcaps_id``, and
``keywords`` from FreeSound ``tags`` / SoundBible ``title`` / BBC ``category`` when present).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from audiorepro.data.manifests import write_manifest
from audiorepro.data.recipes.common import (
    RecipeError,
    caption_supervision,
    find_audio,
    read_csv,
    recording_from_audio,
)

WAVCAPS_SOURCES: dict[str, tuple[str, ...]] = {
    "AudioSet_SL": ("as_final.json",),
    "BBC_Sound_Effects": ("bbc_final.json",),
    "FreeSound": ("fsd_final_2s.json", "fsd_final.json"),
    "SoundBible": ("sb_final.json",),
}
"""Source folder -> JSON file names, in order of preference (salsa reads ``fsd_final_2s``)."""
EXCLUSION_CSV = "dcase2024_task6_excluded_freesound_ids.csv"
AUDIO_EXTENSIONS = (".flac", ".wav", ".mp3")


def read_exclusions(path: str | os.PathLike[str]) -> set[str]:
    """The ids of an exclusion CSV with the single column ``sound_id``.

    Raises:
        RecipeError: another header, or an empty id (``file:line``).
    """
    path = Path(path)
    ids = set()
    for line, row in read_csv(path, ("sound_id",), what="the DCASE exclusion list"):
        if not row["sound_id"]:
            raise RecipeError(path, line, "empty sound_id")
        ids.add(row["sound_id"])
    return ids


def _entries(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise RecipeError(path, None, f"cannot read the WavCaps JSON: {err}") from err
    if isinstance(data, dict):
        if not isinstance(data.get("data"), list):
            raise RecipeError(path, None, 'expected {"num_captions_per_audio": 1, "data": [...]}')
        data = data["data"]
    if not isinstance(data, list):
        raise RecipeError(path, None, f"expected a JSON object or list, got {type(data).__name__}")
    return data


def _keywords(entry: dict[str, Any]) -> list[str]:
    if isinstance(entry.get("tags"), list):
        return [str(t) for t in entry["tags"]]
    if isinstance(entry.get("title"), str):
        return [entry["title"]]
    if isinstance(entry.get("category"), str):
        return [c.strip(" []'") for c in entry["category"].split(",") if c.strip(" []'")]
    return []


def prepare_wavcaps(
    corpus_dir: str | os.PathLike[str],
    manifest_dir: str | os.PathLike[str],
    sources: tuple[str, ...] | list[str] | None = None,
    exclusion_csv: str | os.PathLike[str] | None = None,
    allow_missing: bool = False,
) -> dict[str, dict[str, int]]:
    """Write WavCaps manifests (one split, ``train``).

    Args:
        corpus_dir: folder with ``json_files/`` and ``audio/``; sources are relative to it.
        manifest_dir: output folder.
        sources: source folders to read (default: every one of :data:`WAVCAPS_SOURCES`
            whose JSON exists).
        exclusion_csv: FreeSound ids to drop (default ``corpus_dir/``:data:`EXCLUSION_CSV`
            when it exists).
        allow_missing: skip entries whose audio is missing instead of raising.

    Returns:
        ``{"train": {"recordings", "supervisions", "excluded", "missing"}, <Source>:
        {"recordings", "supervisions"}, ...}``.

    Raises:
        RecipeError: no JSON file found, a malformed JSON file, an entry without ``id`` or with
            an empty caption (``file: data[i]``), a duplicate id, a malformed exclusion CSV,
            missing (unless ``allow_missing``) or unreadable audio.
        ValueError: an unknown source name.
    """
    corpus_dir, manifest_dir = Path(corpus_dir), Path(manifest_dir)
    if sources is None:
        sources = list(WAVCAPS_SOURCES)
        explicit = False
    else:
        unknown = [s for s in sources if s not in WAVCAPS_SOURCES]
        if unknown:
            raise ValueError(
                f"unknown WavCaps source(s) {unknown}; valid: {', '.join(WAVCAPS_SOURCES)}"
            )
        explicit = True
    if exclusion_csv is None:
        default = corpus_dir / EXCLUSION_CSV
        excluded_ids = read_exclusions(default) if default.is_file() else set()
    else:
        excluded_ids = read_exclusions(exclusion_csv)

    recordings, supervisions = [], []
    counts: dict[str, dict[str, int]] = {}
    excluded = missing = 0
    for source in sources:
        candidates = [corpus_dir / "json_files" / source / n for n in WAVCAPS_SOURCES[source]]
        json_path = next((p for p in candidates if p.is_file()), None)
        if json_path is None:
            if explicit:
                raise RecipeError(candidates[0], None, f"file not found (WavCaps {source} JSON)")
            continue
        seen: set[str] = set()
        n_before = len(recordings)
        for i, entry in enumerate(_entries(json_path)):
            where = f"data[{i}]"
            if not isinstance(entry, dict) or entry.get("id") in (None, ""):
                raise RecipeError(json_path, None, f"{where}: expected an object with an 'id'")
            clip_id = str(entry["id"])
            caption = entry.get("caption")
            if not isinstance(caption, str) or not caption.strip():
                raise RecipeError(json_path, None, f"{where} (id {clip_id!r}): empty caption")
            if clip_id in seen:
                raise RecipeError(json_path, None, f"{where}: duplicate id {clip_id!r}")
            seen.add(clip_id)
            if source == "FreeSound" and clip_id in excluded_ids:
                excluded += 1
                continue
            stem = clip_id
            for ext in (".wav", ".flac", ".mp3"):
                stem = stem[: -len(ext)] if stem.lower().endswith(ext) else stem
            audio = find_audio(corpus_dir / "audio" / source, stem, AUDIO_EXTENSIONS)
            if not audio.is_file() and allow_missing:
                missing += 1
                continue
            rec_id = f"{source}/{stem}"
            where_listed = (f"{json_path} ({where}, id {clip_id!r})", None)
            recording = recording_from_audio(audio, rec_id, corpus_dir, where_listed)
            recordings.append(recording)
            custom = {
                "caption_index": 0,
                "source": source,
                "wavcaps_id": clip_id,
                "keywords": _keywords(entry),
            }
            supervisions.append(
                caption_supervision(recording, f"{rec_id}-0", caption.strip(), custom)
            )
        n = len(recordings) - n_before
        counts[source] = {"recordings": n, "supervisions": n}
    if not counts:
        raise RecipeError(
            corpus_dir / "json_files",
            None,
            "no WavCaps JSON found (expected json_files/<Source>/<name>_final.json for "
            f"{', '.join(WAVCAPS_SOURCES)})",
        )
    write_manifest(manifest_dir / "train_recordings.jsonl.gz", recordings)
    write_manifest(manifest_dir / "train_supervisions.jsonl.gz", supervisions)
    counts["train"] = {
        "recordings": len(recordings),
        "supervisions": len(supervisions),
        "excluded": excluded,
        "missing": missing,
    }
    return counts
