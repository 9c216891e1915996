"""ClothoV2 (Drossos et al., ICASSP 2020) as distributed, to manifests.

Input, one folder (the real download extracted, or the embedded look-alike)::

    clotho_captions_{split}.csv     file_name,caption_1,caption_2,caption_3,caption_4,caption_5
    clotho_metadata_{split}.csv     file_name,keywords,sound_id,sound_link,start_end_samples,
                                    manufacturer,license (ISO-8859-1; optional)
    clotho_audio_{split}/<file_name>  or  {split}/<file_name>   (the 7z archives extract to
                                    ``development/``, ``validation/``, ``evaluation/``)
    clotho_paraphrases_{split}.json optional: {caption: [paraphrase, ...]}

The captions file is read as salsa's ``Clotho_v2Dataset`` reads it (pandas on the captions,
joined with the metadata read as ISO-8859-1; ``shared/reference/retrieval.md``). Output:
``<split>_recordings.jsonl.gz`` (one recording per audio file, id = file name without ``.wav``)
and ``<split>_supervisions.jsonl.gz``: five supervisions per file, ids ``<recording>-<k>``,
``text`` the caption and ``custom``: ``caption_index`` (1-5, the CSV column), ``keywords``
(metadata, split at ``;``), ``sound_id`` and, when the paraphrase file exists,
``paraphrases``.
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
    check_splits,
    read_csv,
    recording_from_audio,
)

CLOTHO_SPLITS = ("development", "validation", "evaluation")
CAPTION_COLUMNS = ("file_name",) + tuple(f"caption_{k}" for k in range(1, 6))
METADATA_COLUMNS = (
    "file_name",
    "keywords",
    "sound_id",
    "sound_link",
    "start_end_samples",
    "manufacturer",
    "license",
)
PARAPHRASE_FILE = "clotho_paraphrases_{split}.json"


def _audio_dir(corpus_dir: Path, split: str) -> Path:
    for name in (f"clotho_audio_{split}", split):
        if (corpus_dir / name).is_dir():
            return corpus_dir / name
    raise RecipeError(
        corpus_dir,
        None,
        f"no audio folder for split {split!r}: expected clotho_audio_{split}/ or {split}/",
    )


def read_paraphrases(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """A paraphrase file: JSON ``{caption: [paraphrase, ...]}``.

    Raises:
        RecipeError: not JSON, not an object, or a value that is not a list of non-empty
            strings (the message names the caption).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise RecipeError(path, None, f"cannot read the paraphrase JSON: {err}") from err
    if not isinstance(data, dict):
        raise RecipeError(path, None, "expected a JSON object {caption: [paraphrases]}")
    for caption, variants in data.items():
        if not isinstance(variants, list) or not all(
            isinstance(v, str) and v.strip() for v in variants
        ):
            raise RecipeError(
                path, None, f"paraphrases of {caption!r} must be a list of non-empty strings"
            )
    return data


def _read_metadata(path: Path) -> dict[str, dict[str, Any]]:
    metadata: dict[str, dict[str, Any]] = {}
    for line, row in read_csv(path, METADATA_COLUMNS, encoding="iso-8859-1"):
        name = row["file_name"]
        if not name:
            raise RecipeError(path, line, "empty file_name")
        if name in metadata:
            raise RecipeError(path, line, f"duplicate file_name {name!r}")
        keywords = [k.strip() for k in row["keywords"].split(";") if k.strip()]
        sound_id = row["sound_id"]
        metadata[name] = {
            "keywords": keywords,
            "sound_id": int(sound_id) if sound_id.isdigit() else sound_id or None,
        }
    return metadata


def prepare_clotho(
    corpus_dir: str | os.PathLike[str],
    manifest_dir: str | os.PathLike[str],
    splits: tuple[str, ...] | list[str] = CLOTHO_SPLITS,
) -> dict[str, dict[str, int]]:
    """Write ClothoV2 manifests; returns ``{split: {"recordings": n, "supervisions": m}}``.

    Sources are written relative to ``corpus_dir``; check with
    ``python -m audiorepro.data check <manifest_dir> --root <corpus_dir>``.

    Raises:
        RecipeError: captions CSV missing or with a header other than
            ``file_name,caption_1..caption_5``, an empty caption (``file:line`` and the
            column), a duplicate file name, a file missing from the metadata (when the
            metadata file exists), a listed audio file missing on disk, unreadable audio, a
            malformed paraphrase file.
        ValueError: an unknown split name.
    """
    corpus_dir, manifest_dir = Path(corpus_dir), Path(manifest_dir)
    counts: dict[str, dict[str, int]] = {}
    for split in check_splits(splits, CLOTHO_SPLITS, "ClothoV2"):
        captions_csv = corpus_dir / f"clotho_captions_{split}.csv"
        metadata_csv = corpus_dir / f"clotho_metadata_{split}.csv"
        paraphrase_json = corpus_dir / PARAPHRASE_FILE.format(split=split)
        metadata = _read_metadata(metadata_csv) if metadata_csv.is_file() else None
        paraphrases = read_paraphrases(paraphrase_json) if paraphrase_json.is_file() else None
        audio_dir = _audio_dir(corpus_dir, split)

        recordings, supervisions = [], []
        seen: dict[str, int] = {}
        rows = read_csv(captions_csv, CAPTION_COLUMNS, what=f"the ClothoV2 {split} captions (CSV)")
        for line, row in rows:
            name = row["file_name"]
            if not name:
                raise RecipeError(captions_csv, line, "empty file_name")
            if name in seen:
                raise RecipeError(
                    captions_csv,
                    line,
                    f"duplicate file_name {name!r} (first on line {seen[name]})",
                )
            seen[name] = line
            for k in range(1, 6):
                if not row[f"caption_{k}"]:
                    raise RecipeError(captions_csv, line, f"caption_{k} of {name!r} is empty")
            if metadata is not None and name not in metadata:
                raise RecipeError(
                    captions_csv, line, f"{name!r} has no row in {metadata_csv.name}"
                )
            rec_id = name[:-4] if name.lower().endswith(".wav") else name
            recording = recording_from_audio(
                audio_dir / name, rec_id, corpus_dir, (captions_csv, line)
            )
            recordings.append(recording)
            meta = metadata.get(name, {}) if metadata is not None else {}
            for k in range(1, 6):
                text = row[f"caption_{k}"]
                custom: dict[str, Any] = {"caption_index": k}
                if meta:
                    custom["keywords"] = meta["keywords"]
                    custom["sound_id"] = meta["sound_id"]
                if paraphrases is not None:
                    custom["paraphrases"] = paraphrases.get(text, [])
                supervisions.append(caption_supervision(recording, f"{rec_id}-{k}", text, custom))
        if not recordings:
            raise RecipeError(captions_csv, None, "no captioned files")
        write_manifest(manifest_dir / f"{split}_recordings.jsonl.gz", recordings)
        write_manifest(manifest_dir / f"{split}_supervisions.jsonl.gz", supervisions)
        counts[split] = {"recordings": len(recordings), "supervisions": len(supervisions)}
    return counts
