"""AudioCaps (Kim et al., NAACL 2019) as distributed, to manifests.

Input (``cdjkim/audiocaps`` CSVs plus the AudioSet clips downloaded separately)::

    dataset/{train,val,test}.csv    audiocap_id,youtube_id,start_time,caption
    audio/Y<youtube_id>.wav|.flac|.mp3

Train has one caption per clip; val and test have five rows per clip (same ``youtube_id``).
Audio files follow AudioSet's naming, ``'Y' + youtube_id`` (salsa ``audio_caps.py``). Output:
one recording per clip (id ``Y<youtube_id>``) and one supervision per CSV row (id
``<audiocap_id>``, ``custom``: ``caption_index`` within the clip from 0, ``audiocap_id``,
``youtube_id``, ``start_time``).

YouTube clips disappear, so real downloads miss some; ``allow_missing=True`` skips their rows
and counts them (salsa skips them silently), otherwise a missing clip is an error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from audiorepro.data.manifests import write_manifest
from audiorepro.data.recipes.common import (
    RecipeError,
    caption_supervision,
    check_splits,
    find_audio,
    read_csv,
    recording_from_audio,
)

AUDIOCAPS_SPLITS = ("train", "val", "test")
COLUMNS = ("audiocap_id", "youtube_id", "start_time", "caption")
AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3")


def _number(value: str, path: Path, line: int, column: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise RecipeError(path, line, f"{column} must be a number, got {value!r}") from None
    if number < 0:
        raise RecipeError(path, line, f"{column} must be >= 0, got {value!r}")
    return int(number) if number.is_integer() else number


def prepare_audiocaps(
    corpus_dir: str | os.PathLike[str],
    manifest_dir: str | os.PathLike[str],
    splits: tuple[str, ...] | list[str] = AUDIOCAPS_SPLITS,
    audio_dir: str | os.PathLike[str] | None = None,
    allow_missing: bool = False,
) -> dict[str, dict[str, int]]:
    """Write AudioCaps manifests.

    Args:
        corpus_dir: folder with ``dataset/{split}.csv``; sources are relative to it.
        manifest_dir: output folder.
        splits: any of ``train``, ``val``, ``test``.
        audio_dir: where the ``Y<youtube_id>`` files are (default ``corpus_dir/audio``); it
            must lie inside ``corpus_dir``.
        allow_missing: skip rows whose clip is missing instead of raising.

    Returns:
        ``{split: {"recordings", "supervisions", "missing"}}`` (missing: skipped clips).

    Raises:
        RecipeError: CSV missing or with another header, an empty caption or youtube_id, a
            non-numeric start_time, a duplicate audiocap_id, missing (unless
            ``allow_missing``) or unreadable audio.
        ValueError: unknown split.
    """
    corpus_dir, manifest_dir = Path(corpus_dir), Path(manifest_dir)
    audio_dir = corpus_dir / "audio" if audio_dir is None else Path(audio_dir)
    counts: dict[str, dict[str, int]] = {}
    for split in check_splits(splits, AUDIOCAPS_SPLITS, "AudioCaps"):
        path = corpus_dir / "dataset" / f"{split}.csv"
        recordings: dict[str, Any] = {}
        missing: set[str] = set()
        supervisions = []
        per_clip: dict[str, int] = {}
        seen_ids: dict[str, int] = {}
        for line, row in read_csv(path, COLUMNS, what=f"the AudioCaps {split} captions (CSV)"):
            cap_id, youtube_id, caption = row["audiocap_id"], row["youtube_id"], row["caption"]
            for column in ("audiocap_id", "youtube_id", "caption"):
                if not row[column]:
                    raise RecipeError(path, line, f"{column} is empty")
            if cap_id in seen_ids:
                raise RecipeError(
                    path,
                    line,
                    f"duplicate audiocap_id {cap_id!r} (first on line {seen_ids[cap_id]})",
                )
            seen_ids[cap_id] = line
            start_time = _number(row["start_time"], path, line, "start_time")
            rec_id = f"Y{youtube_id}"
            if youtube_id in missing:
                continue
            if rec_id not in recordings:
                audio = find_audio(audio_dir, rec_id, AUDIO_EXTENSIONS)
                if not audio.is_file() and allow_missing:
                    missing.add(youtube_id)
                    continue
                recordings[rec_id] = recording_from_audio(audio, rec_id, corpus_dir, (path, line))
            index = per_clip.get(rec_id, 0)
            per_clip[rec_id] = index + 1
            custom = {
                "caption_index": index,
                "audiocap_id": int(cap_id) if cap_id.isdigit() else cap_id,
                "youtube_id": youtube_id,
                "start_time": start_time,
            }
            supervisions.append(caption_supervision(recordings[rec_id], cap_id, caption, custom))
        if not recordings:
            raise RecipeError(path, None, "no captioned clips with audio")
        write_manifest(manifest_dir / f"{split}_recordings.jsonl.gz", recordings.values())
        write_manifest(manifest_dir / f"{split}_supervisions.jsonl.gz", supervisions)
        counts[split] = {
            "recordings": len(recordings),
            "supervisions": len(supervisions),
            "missing": len(missing),
        }
    return counts
