"""Summaries of the embedded corpora for the data page (``book/00_data/02_embedded_corpora.py``).

Everything here reads the corpora the way the chapters do: through the manifests, the ABX item
file, the Switchboard-style word lists and the ClothoV2 CSVs, so a table on the page is a
statement about the files the models will see, not about the generator's intentions.
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audiorepro.config import field
from audiorepro.data.manifests import find_manifests, read_recordings, read_supervisions
from audiorepro.data.recipes.switchboard import key_seconds, read_word_list
from audiorepro.data.recipes.zerospeech import read_item_file
from audiorepro.features import load_audio
from audiorepro.plotting import Tier

MANIFEST_DIR = "manifests"


@dataclass(frozen=True)
class CorporaPageConfig:
    """Parameters of the embedded-corpora page (``book/00_data/presets/corpora/*.yaml``)."""

    corpus_preset: str = field("embedded", help="which embedded corpora to show: smoke | embedded")
    seed: int = field(0, help="corpus seed; equal seeds give byte-identical corpora")
    example: int = field(0, help="index of the utterance and the scene shown as examples")
    word: str = field("", help="word whose tokens are played; empty = most frequent train word")


def _splits(manifest_dir: Path) -> dict[str, tuple[Path, Path]]:
    """``{split: (recordings, supervisions)}`` for the manifests in a folder, in file order."""
    return {
        split: (files["recordings"], files["supervisions"])
        for split, files in find_manifests(manifest_dir).items()
        if "recordings" in files and "supervisions" in files
    }


def manifest_summary(corpus_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per split of ``corpus_dir/manifests``: recordings, supervisions, speakers, hours.

    ``speakers`` counts the distinct ``speaker`` fields of the supervisions (0 when the corpus
    has none, as caption corpora); ``mean_s`` is the mean recording duration in seconds.
    """
    rows = []
    for split, (rec_path, sup_path) in _splits(Path(corpus_dir) / MANIFEST_DIR).items():
        recordings, supervisions = read_recordings(rec_path), read_supervisions(sup_path)
        durations = np.array([r.duration for r in recordings])
        rows.append(
            {
                "split": split,
                "recordings": len(recordings),
                "supervisions": len(supervisions),
                "speakers": len({s.speaker for s in supervisions if s.speaker}),
                "hours": round(durations.sum() / 3600, 3),
                "mean_s": round(float(durations.mean()), 2),
            }
        )
    return pd.DataFrame(rows).set_index("split")


def aligned_utterance(
    language_dir: str | os.PathLike[str], split: str = "train-unit", index: int = 0
) -> tuple[np.ndarray, int, dict[str, Tier], str]:
    """The ``index``-th utterance of a ZeroSpeech-layout split with its word and phone tiers.

    Returns:
        ``(wav, sr, tiers, text)``: wav (S,) float32, ``tiers = {"word": [...], "phone":
        [...]}`` as ``(label, start_s, end_s)`` from the manifest alignment, and the transcript.
    """
    language_dir = Path(language_dir)
    rec_path, sup_path = _splits(language_dir / MANIFEST_DIR)[split]
    recording = read_recordings(rec_path)[index]
    supervision = next(s for s in read_supervisions(sup_path) if s.recording_id == recording.id)
    wav, sr = load_audio(language_dir / recording.sources[0].source, None)
    tiers = {
        kind: [(a.symbol, a.start, a.start + a.duration) for a in supervision.alignment[kind]]
        for kind in ("word", "phone")
        if supervision.alignment and kind in supervision.alignment
    }
    return wav, sr, tiers, supervision.text or ""


def abx_summary(item_file: str | os.PathLike[str]) -> tuple[dict[str, int], pd.Series]:
    """What an ABX item file holds, and how often each central phone occurs.

    Returns:
        ``(counts, phones)``: counts of items, files, speakers, phones, contexts (previous and
        next phone) and triphone cells (phone in context) that at least two speakers share, which
        are the cells the across-speaker task can use; ``phones`` item counts per phone, most
        frequent first.
    """
    items = read_item_file(item_file)
    cells: dict[tuple[str, str, str], set[str]] = {}
    for it in items:
        cells.setdefault((it.phone, it.prev_phone, it.next_phone), set()).add(it.speaker)
    counts = {
        "items": len(items),
        "files": len({it.file for it in items}),
        "speakers": len({it.speaker for it in items}),
        "phones": len({it.phone for it in items}),
        "contexts": len({(it.prev_phone, it.next_phone) for it in items}),
        "cells shared by >= 2 speakers": sum(len(s) >= 2 for s in cells.values()),
    }
    phones = pd.Series(Counter(it.phone for it in items)).sort_values(ascending=False)
    return counts, phones


def word_summary(words_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per split of the Switchboard-style word corpus (``{split}.list`` keys).

    Columns: tokens, word types, speakers (conversation sides), types also seen in train, and the
    token length in 10 ms frames (min, median, max) from the keys' frame spans.
    """
    words_dir = Path(words_dir)
    keys = {s: read_word_list(words_dir / f"{s}.list") for s in ("train", "dev", "test")}
    train_types = {k.word for k in keys["train"]}
    rows = []
    for split, entries in keys.items():
        frames = np.array([k.end - k.start for k in entries])
        types = {k.word for k in entries}
        rows.append(
            {
                "split": split,
                "tokens": len(entries),
                "types": len(types),
                "speakers": len({k.side for k in entries}),
                "types seen in train": len(types & train_types),
                "frames min": int(frames.min()),
                "frames median": int(np.median(frames)),
                "frames max": int(frames.max()),
            }
        )
    return pd.DataFrame(rows).set_index("split")


def word_lengths(words_dir: str | os.PathLike[str], split: str = "train") -> np.ndarray:
    """Token lengths in 10 ms frames of one split, from its key list."""
    return np.array([k.end - k.start for k in read_word_list(Path(words_dir) / f"{split}.list")])


def word_tokens(
    words_dir: str | os.PathLike[str], word: str = "", split: str = "train", n: int = 3
) -> tuple[str, list[tuple[str, np.ndarray, int]]]:
    """Up to ``n`` tokens of one word from different speakers, cut from their side's audio.

    ``word=""`` takes the most frequent word of the split. Returns ``(word, [(key, wav, sr)])``.
    """
    words_dir = Path(words_dir)
    entries = read_word_list(words_dir / f"{split}.list")
    if not word:
        word = Counter(k.word for k in entries).most_common(1)[0][0]
    chosen: dict[str, Any] = {}
    for k in entries:
        if k.word == word and k.side not in chosen:
            chosen[k.side] = k
    if not chosen:
        raise KeyError(f"word {word!r} has no token in {words_dir / f'{split}.list'}")
    tokens = []
    for k in list(chosen.values())[:n]:
        start, end = key_seconds(k)
        wav, sr = load_audio(
            words_dir / "audio" / f"{k.side}.wav", None, offset=start, duration=end - start
        )
        tokens.append((k.key, wav, sr))
    return word, tokens


def _clotho_rows(clotho_dir: Path, split: str) -> list[dict[str, str]]:
    path = clotho_dir / f"clotho_captions_{split}.csv"
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def caption_summary(clotho_dir: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, list]]:
    """Caption statistics per ClothoV2-layout split, and the caption word counts behind them.

    Columns: clips, captions, words per caption (mean, min, max), clip duration (mean, max, in s,
    from the manifest), and the share of captions that are word for word a caption of another
    clip too (the generic captions that make a query's relevant clip ambiguous).
    """
    clotho_dir = Path(clotho_dir)
    rows, lengths = [], {}
    durations = {
        split: np.array([r.duration for r in read_recordings(rec)])
        for split, (rec, _) in _splits(clotho_dir / MANIFEST_DIR).items()
    }
    for split in ("development", "validation", "evaluation"):
        table = _clotho_rows(clotho_dir, split)
        captions = [row[f"caption_{k}"] for row in table for k in range(1, 6)]
        clips_of = Counter(c for row in table for c in {row[f"caption_{k}"] for k in range(1, 6)})
        words = [len(c.split()) for c in captions]
        lengths[split] = words
        rows.append(
            {
                "split": split,
                "clips": len(table),
                "captions": len(captions),
                "words mean": round(float(np.mean(words)), 1),
                "words min": min(words),
                "words max": max(words),
                "duration mean s": round(float(durations[split].mean()), 1),
                "duration max s": round(float(durations[split].max()), 1),
                "shared captions %": round(100 * np.mean([clips_of[c] > 1 for c in captions]), 1),
            }
        )
    return pd.DataFrame(rows).set_index("split"), lengths


def scene_example(
    clotho_dir: str | os.PathLike[str], split: str = "development", index: int = 0
) -> dict[str, Any]:
    """One ClothoV2-layout clip: its audio path, five captions, paraphrases, keywords, events.

    ``events`` is the generator's own description of the scene (class, start, duration and
    attributes of each event), read from ``embedded_scenes_<split>.jsonl``; the real corpus has
    no such file, and no model reads it.
    """
    clotho_dir = Path(clotho_dir)
    row = _clotho_rows(clotho_dir, split)[index]
    captions = [row[f"caption_{k}"] for k in range(1, 6)]
    paraphrases = json.loads(
        (clotho_dir / f"clotho_paraphrases_{split}.json").read_text(encoding="utf-8")
    )
    # The real metadata files are Latin-1, and so are these.
    with open(clotho_dir / f"clotho_metadata_{split}.csv", encoding="iso-8859-1") as f:
        metadata = {m["file_name"]: m for m in csv.DictReader(f)}
    with open(clotho_dir / f"embedded_scenes_{split}.jsonl", encoding="utf-8") as f:
        scenes = {d["file_name"]: d for d in map(json.loads, f)}
    scene = scenes[row["file_name"]]["scene"]
    return {
        "file_name": row["file_name"],
        "path": clotho_dir / f"clotho_audio_{split}" / row["file_name"],
        "captions": captions,
        "paraphrases": {c: paraphrases.get(c, []) for c in captions},
        "keywords": metadata[row["file_name"]]["keywords"].split(";"),
        "events": pd.DataFrame(scene["events"]),
        "background": (scene.get("background") or {}).get("event_class"),
    }


__all__ = [
    "CorporaPageConfig",
    "abx_summary",
    "aligned_utterance",
    "caption_summary",
    "manifest_summary",
    "scene_example",
    "word_lengths",
    "word_summary",
    "word_tokens",
]
