"""Embedded audio-caption corpora: scenes, captions, real-corpus layouts, determinism."""

from __future__ import annotations

import collections
import csv
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiorepro.config import ConfigError
from audiorepro.data.embedded.atomic import MARKER
from audiorepro.data.embedded.audio_caption import (
    WAVCAPS_EXCLUSION_CSV,
    audio_caption_config,
    generate_audio_caption_corpora,
)
from audiorepro.data.embedded.scenes import (
    AUDIOCAPS_STYLE,
    CLOTHO_STYLE,
    WAVCAPS_STYLE,
    Scene,
    SceneConfig,
    SceneEvent,
    generic_caption_groups,
    render_scene,
    sample_scene,
    scene_keywords,
    word_count,
    write_captions,
)
from audiorepro.data.embedded.sound_events import SAMPLE_RATE, EventAttributes
from audiorepro.data.manifests import read_recordings
from audiorepro.data.sources import load_sources

CLOTHO_HEADER = "file_name,caption_1,caption_2,caption_3,caption_4,caption_5"
SPLITS = ("development", "validation", "evaluation")


@pytest.fixture(scope="session")
def smoke_corpus(session_data_dir: Path):
    """The smoke preset, generated once per test session (other test modules reuse it)."""
    return generate_audio_caption_corpora(session_data_dir / "audio_caption_smoke", "smoke", 0)


def _clotho_rows(root: Path, split: str) -> list[dict[str, str]]:
    with open(root / "clotho" / f"clotho_captions_{split}.csv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _tree_hashes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _tiny_config(**overrides):
    values = dict(
        clotho_clips=(2, 1, 2),
        audiocaps_clips=(1, 1, 1),
        wavcaps_clips=(1, 2),
        wavcaps_clotho_overlap=1,
        snippet_s=1.5,
    )
    values.update(overrides)
    return audio_caption_config("smoke", **values)


def fake_speech(text: str, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """A stand-in synthesiser: one vowel-like buzz per word, 32 kHz."""
    t = np.arange(int(0.25 * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = rng.uniform(100, 200)
    word = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6)) * np.hanning(len(t))
    gap = np.zeros(int(0.08 * SAMPLE_RATE))
    wav = np.concatenate([np.concatenate([word, gap]) for _ in text.split()])
    return (0.3 * wav).astype(np.float32), text


# --- scenes and captions ------------------------------------------------------------------------


def test_scenes_fit_their_clip_and_are_deterministic():
    config = SceneConfig(min_duration_s=3.0, max_duration_s=12.0)
    durations = []
    for i in range(40):
        scene, speech_wav = sample_scene(np.random.default_rng([5, i]), config)
        again, _ = sample_scene(np.random.default_rng([5, i]), config)
        assert scene == again and speech_wav is None
        assert 3.0 <= scene.duration <= 12.0
        assert 1 <= len(scene.events) <= 4
        assert [e.start for e in scene.events] == sorted(e.start for e in scene.events)
        assert len({e.event_class for e in scene.events}) == len(scene.events)
        for event in scene.events:
            assert 0 <= event.start and event.end <= scene.duration + 1 / SAMPLE_RATE
        if scene.background is not None:
            assert scene.background.attributes.duration == scene.duration
            assert scene.background.event_class not in {e.event_class for e in scene.events}
        durations.append(scene.duration)
    assert max(durations) > 9.0 and min(durations) < 5.0  # long clips span several snippets


def test_render_scene_places_events_where_the_scene_says():
    event = SceneEvent("beep", EventAttributes(pitch="high", tempo="fast", duration=1.0), 2.0)
    scene = Scene(duration=4.0, events=(event,))
    wav = render_scene(scene, np.random.default_rng(0))
    assert wav.shape == (4 * SAMPLE_RATE,) and wav.dtype == np.float32

    def rms(a: int, b: int) -> float:
        return float(np.sqrt(np.mean(wav[a * SAMPLE_RATE : b * SAMPLE_RATE] ** 2)))

    assert rms(2, 3) > 50 * rms(0, 2)  # only the noise floor before the event
    assert rms(2, 3) > 50 * rms(3, 4)
    assert scene.position(0) == "middle"


def test_speech_plugs_in_through_the_callable():
    config = SceneConfig(min_duration_s=6.0, max_duration_s=8.0, speech_prob=1.0)
    scene, speech_wav = sample_scene(np.random.default_rng(3), config, speech=fake_speech)
    assert scene.transcript is not None and speech_wav is not None
    spoken = [e for e in scene.events if e.event_class == "speech"]
    assert len(spoken) == 1
    assert spoken[0].duration * SAMPLE_RATE == pytest.approx(len(speech_wav))
    wav = render_scene(scene, np.random.default_rng(4), speech_wav)
    assert np.isfinite(wav).all()
    with pytest.raises(ValueError, match="pass its speech_wav"):
        render_scene(scene, np.random.default_rng(4))
    words = {"speaks", "talks", "says", "speaking", "talking", "voice"}
    texts = [c.text.lower() for c in write_captions(scene, np.random.default_rng(5))]
    assert any(words & set(t.rstrip(".").split()) for t in texts)

    def broken(text, rng):
        return np.zeros(0, np.float32), text

    with pytest.raises(ValueError, match="non-silent finite mono wav"):
        sample_scene(np.random.default_rng(3), config, speech=broken)


@pytest.mark.parametrize("style", [CLOTHO_STYLE, AUDIOCAPS_STYLE, WAVCAPS_STYLE])
def test_captions_fit_the_style_and_paraphrases_differ(style):
    config = SceneConfig(max_duration_s=12.0)
    for i in range(30):
        scene, _ = sample_scene(np.random.default_rng([8, i]), config)
        captions = write_captions(scene, np.random.default_rng([9, i]), style, generic_prob=0.3)
        assert len(captions) == 5
        assert len({c.text for c in captions}) == 5
        for caption in captions:
            assert style.min_words <= word_count(caption.text) <= style.max_words, caption.text
            assert caption.text[0].isupper()
            assert caption.text.endswith(".") == style.final_period
            assert 2 <= len(caption.paraphrases) <= 4
            assert caption.text not in caption.paraphrases
            assert len(set(caption.paraphrases)) == len(caption.paraphrases)
            assert " a e" not in caption.text and " an b" not in caption.text  # articles fixed


def test_generic_captions_are_shared_across_clips_and_true_of_them():
    config = SceneConfig(max_duration_s=12.0)
    clips_of: dict[str, set[int]] = collections.defaultdict(set)
    for i in range(80):
        scene, _ = sample_scene(np.random.default_rng([11, i]), config)
        for caption in write_captions(scene, np.random.default_rng([12, i]), generic_prob=0.5):
            if caption.generic:
                clips_of[caption.text].add(i)
    assert max(len(clips) for clips in clips_of.values()) >= 4

    then = Scene(
        6.0,
        (
            SceneEvent("bell", EventAttributes(loudness="quiet", duration=1.0), 0.5),
            SceneEvent("drip", EventAttributes(loudness="quiet", duration=1.0), 3.0),
        ),
    )
    assert generic_caption_groups(then) == ["sequence", "quiet", "water", "ringing"]
    overlap = dataclasses.replace(
        then, events=(then.events[0], dataclasses.replace(then.events[1], start=1.0))
    )
    assert "overlap" in generic_caption_groups(overlap)
    assert "sequence" not in generic_caption_groups(overlap)


def test_captions_name_relations_and_attributes_truthfully():
    bell = SceneEvent("bell", EventAttributes(pitch="low", loudness="loud", duration=1.5), 0.2)
    dog = SceneEvent("bark", EventAttributes(pitch="high", loudness="loud", duration=1.5), 4.0)
    scene = Scene(6.0, (bell, dog))
    texts = []
    for seed in range(40):
        texts += [c.text.lower() for c in write_captions(scene, np.random.default_rng(seed))]
    text = " ".join(texts)
    assert "while" not in text  # the events do not overlap
    assert any(w in text for w in ("then", "after", "followed by", "before"))
    for wrong in ("high-pitched bell", "shrill bell", "deep dog", "big dog", "faint", "quiet"):
        assert wrong not in text
    assert any(w in text for w in ("deep bell", "low bell", "low-pitched bell"))
    assert any(w in text for w in ("small dog", "yappy", "high-pitched dog"))


def test_keywords_are_three_to_six_and_come_from_the_scene():
    for i in range(30):
        scene, _ = sample_scene(np.random.default_rng([13, i]), SceneConfig())
        keywords = scene_keywords(scene, np.random.default_rng([14, i]))
        assert 3 <= len(keywords) <= 6 and len(set(keywords)) == len(keywords)
        assert all(k == k.lower() and ";" not in k for k in keywords)


# --- the generated corpora ----------------------------------------------------------------------


def test_clotho_layout_and_captions(smoke_corpus):
    root = smoke_corpus.root
    config = audio_caption_config("smoke")
    all_captions = []
    for split, size in zip(SPLITS, config.clotho_clips, strict=True):
        path = root / "clotho" / f"clotho_captions_{split}.csv"
        assert path.read_text(encoding="utf-8").splitlines()[0] == CLOTHO_HEADER
        rows = _clotho_rows(root, split)
        assert len(rows) == size
        for row in rows:
            assert (root / "clotho" / f"clotho_audio_{split}" / row["file_name"]).is_file()
            captions = [row[f"caption_{k}"] for k in range(1, 6)]
            assert all(8 <= word_count(c) <= 20 for c in captions), captions
            assert len(set(captions)) == 5
            all_captions += captions
        info = sf.info(str(root / "clotho" / f"clotho_audio_{split}" / rows[0]["file_name"]))
        assert (info.samplerate, info.channels, info.subtype) == (SAMPLE_RATE, 1, "PCM_16")
        assert 3.0 <= info.duration <= 3 * config.snippet_s + 1e-6

        raw = (root / "clotho" / f"clotho_metadata_{split}.csv").read_bytes()
        with pytest.raises(UnicodeDecodeError):
            raw.decode("utf-8")  # Latin-1 bytes, as in the real metadata files
        metadata = list(csv.DictReader(raw.decode("iso-8859-1").splitlines()))
        assert list(metadata[0]) == [
            "file_name",
            "keywords",
            "sound_id",
            "sound_link",
            "start_end_samples",
            "manufacturer",
            "license",
        ]
        assert [m["file_name"] for m in metadata] == [r["file_name"] for r in rows]
        assert all(3 <= len(m["keywords"].split(";")) <= 6 for m in metadata)

        paraphrases = json.loads(
            (root / "clotho" / f"clotho_paraphrases_{split}.json").read_text(encoding="utf-8")
        )
        for row in rows:
            for k in range(1, 6):
                variants = paraphrases[row[f"caption_{k}"]]
                assert 2 <= len(variants) <= 4 and row[f"caption_{k}"] not in variants
    # Generic captions recur across clips: partial matches between clips exist.
    assert max(collections.Counter(all_captions).values()) >= 2


def test_audiocaps_layout(smoke_corpus):
    root = smoke_corpus.root / "audiocaps"
    config = audio_caption_config("smoke")
    for split, clips, per_clip in zip(
        ("train", "val", "test"), config.audiocaps_clips, (1, 5, 5), strict=True
    ):
        path = root / "dataset" / f"{split}.csv"
        assert path.read_text().splitlines()[0] == "audiocap_id,youtube_id,start_time,caption"
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        per_video = collections.Counter(r["youtube_id"] for r in rows)
        assert len(per_video) == clips and set(per_video.values()) == {per_clip}
        assert len({r["audiocap_id"] for r in rows}) == len(rows)
        for youtube_id in per_video:
            assert len(youtube_id) == 11
            info = sf.info(str(root / "audio" / f"Y{youtube_id}.wav"))
            assert info.duration == pytest.approx(config.audiocaps_duration_s)


def test_wavcaps_layout_and_clotho_overlap(smoke_corpus):
    root = smoke_corpus.root
    config = audio_caption_config("smoke")
    entries = {}
    for source, name, size in (
        ("SoundBible", "sb_final.json", config.wavcaps_clips[0]),
        ("FreeSound", "fsd_final.json", config.wavcaps_clips[1]),
    ):
        data = json.loads((root / "wavcaps" / "json_files" / source / name).read_text())
        assert data["num_captions_per_audio"] == 1 and len(data["data"]) == size
        for entry in data["data"]:
            assert {"id", "caption", "audio", "duration"} <= set(entry)
            audio = root / "wavcaps" / "audio" / source / f"{entry['id']}.flac"
            assert sf.info(str(audio)).duration == pytest.approx(entry["duration"])
            assert 3 <= word_count(entry["caption"]) <= 13
        entries[source] = {e["id"]: e for e in data["data"]}

    with open(root / "wavcaps" / WAVCAPS_EXCLUSION_CSV, newline="") as f:
        excluded = [row["sound_id"] for row in csv.DictReader(f)]
    assert len(excluded) == config.wavcaps_clotho_overlap >= 1
    metadata = list(
        csv.DictReader(
            (root / "clotho" / "clotho_metadata_evaluation.csv")
            .read_text(encoding="iso-8859-1")
            .splitlines()
        )
    )
    clotho_file = {m["sound_id"]: m["file_name"] for m in metadata}
    for sound_id in excluded:
        assert sound_id in entries["FreeSound"] and sound_id in clotho_file
        wavcaps, _ = sf.read(str(root / "wavcaps" / "audio" / "FreeSound" / f"{sound_id}.flac"))
        clotho, _ = sf.read(
            str(root / "clotho" / "clotho_audio_evaluation" / clotho_file[sound_id])
        )
        assert np.array_equal(wavcaps, clotho)  # the same recording in both corpora


def test_same_seed_gives_byte_identical_corpora(smoke_corpus, tmp_path):
    again = generate_audio_caption_corpora(tmp_path / "again", "smoke", 0)
    assert not again.reused
    first, second = _tree_hashes(smoke_corpus.root), _tree_hashes(again.root)
    assert len(first) > 80 and first == second
    other = generate_audio_caption_corpora(tmp_path / "other", "smoke", 1, config=_tiny_config())
    assert _tree_hashes(other.root) != _tree_hashes(
        generate_audio_caption_corpora(tmp_path / "base", "smoke", 0, config=_tiny_config()).root
    )


def test_clips_made_by_two_processes_are_the_same_bytes_as_made_here(tmp_path):
    # more clips per split than the maker keeps in flight (4 per worker), speech in every scene
    config = _tiny_config(clotho_clips=(11, 2, 3), wavcaps_clips=(1, 9), speech_prob=1.0)
    here = generate_audio_caption_corpora(
        tmp_path / "here", "smoke", 0, fake_speech, config=config
    )
    two = generate_audio_caption_corpora(
        tmp_path / "two", "smoke", 0, fake_speech, config=config, workers=2
    )
    assert not two.reused and two.counts == here.counts
    assert _tree_hashes(two.root) == _tree_hashes(here.root)
    assert len(_tree_hashes(here.root)) > 30


def test_marker_reuse_and_partial_folders(tmp_path):
    config = _tiny_config()
    out = tmp_path / "corpus"
    first = generate_audio_caption_corpora(out, "smoke", 0, config=config)
    marker = json.loads((out / MARKER).read_text())
    assert marker["preset"] == "smoke" and marker["seed"] == 0
    assert marker["counts"]["clotho"]["evaluation"] == {"clips": 2, "captions": 10}
    assert marker["counts"]["wavcaps_excluded"] == 1 and marker["version"]
    stamp = (out / MARKER).stat().st_mtime_ns
    again = generate_audio_caption_corpora(out, "smoke", 0, config=config)
    assert again.reused and again.counts == first.counts
    assert (out / MARKER).stat().st_mtime_ns == stamp

    # Other settings: the generated corpus is replaced, not reused.
    changed = generate_audio_caption_corpora(out, "smoke", 1, config=config)
    assert not changed.reused and json.loads((out / MARKER).read_text())["seed"] == 1

    # A folder without the marker (a half-copied corpus) is never taken as complete.
    partial = tmp_path / "partial"
    (partial / "clotho").mkdir(parents=True)
    (partial / "clotho" / "clotho_captions_development.csv").write_text(CLOTHO_HEADER + "\n")
    with pytest.raises(FileExistsError, match="no .complete marker"):
        generate_audio_caption_corpora(partial, "smoke", 0, config=config)
    (partial / MARKER).write_text("{not json")
    with pytest.raises(FileExistsError):
        generate_audio_caption_corpora(partial, "smoke", 0, config=config)

    # Temporary folders of crashed runs (dead pid) are cleaned up; nothing else is left.
    stale = tmp_path / f".fresh.partial-{2**22 + 12345}-abcd"
    (stale / "clotho").mkdir(parents=True)
    fresh = generate_audio_caption_corpora(tmp_path / "fresh", "smoke", 0, config=config)
    assert not fresh.reused and not stale.exists()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []
    assert os.listdir(tmp_path / "fresh")  # the corpus itself


def test_presets_and_bad_settings():
    smoke, embedded = audio_caption_config("smoke"), audio_caption_config("embedded")
    assert smoke.clotho_clips == (24, 8, 8) and embedded.clotho_clips == (960, 260, 260)
    assert embedded.audiocaps_clips == (400, 50, 50) and sum(embedded.wavcaps_clips) == 600
    assert embedded.max_duration_s == 12.0
    assert audio_caption_config("smoke", snippet_s=4.0).max_duration_s == 12.0
    with pytest.raises(ConfigError, match="unknown preset 'paper'.*smoke, embedded"):
        audio_caption_config("paper")
    with pytest.raises(ConfigError, match="unknown preset 'tiny'"):
        generate_audio_caption_corpora("/nonexistent/never", "tiny", 0)
    with pytest.raises(ConfigError, match="unknown key 'clotho_clip'.*clotho_clips"):
        audio_caption_config("smoke", clotho_clip=(1, 1, 1))
    with pytest.raises(ConfigError, match="wavcaps_clotho_overlap"):
        audio_caption_config("smoke", wavcaps_clotho_overlap=9)
    with pytest.raises(ConfigError, match="clotho_clips must be 3 positive integers"):
        audio_caption_config("smoke", clotho_clips=(1, 0, 1))
    with pytest.raises(ConfigError, match="unknown sound event class"):
        SceneConfig(classes=("bell", "gong"))
    with pytest.raises(ValueError, match="seed must be an integer"):
        generate_audio_caption_corpora("/nonexistent/never", "smoke", -1)


@pytest.mark.parametrize("corpus", ["clotho", "audiocaps", "wavcaps"])
def test_each_generated_corpus_passes_the_check_cli_with_its_counts(smoke_corpus, corpus):
    root = smoke_corpus.root / corpus
    done = subprocess.run(
        [sys.executable, "-m", "audiorepro.data", "check", str(root / "manifests")]
        + ["--root", str(root), "--sources", str(root / "sources.yaml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    expected = load_sources(root / "sources.yaml").expected_counts
    counts = smoke_corpus.counts
    if corpus == "clotho":
        assert {s: c.recordings for s, c in expected.items()} == {
            s: counts["clotho"][s]["clips"] for s in SPLITS
        }
        assert all(c.supervisions == 5 * c.recordings for c in expected.values())
    elif corpus == "audiocaps":
        assert {s: c.supervisions for s, c in expected.items()} == {
            s: counts["audiocaps"][s]["captions"] for s in ("train", "val", "test")
        }
    else:
        clips = sum(v["clips"] for v in counts["wavcaps"].values())
        assert expected["train"].recordings == clips - counts["wavcaps_excluded"]
    # a corrupted copy fails the same check, naming the manifest line
    broken = root.parent.parent / f"broken_{corpus}"
    if not broken.exists():
        shutil.copytree(root, broken)
        manifest = sorted((broken / "manifests").glob("*_recordings.jsonl.gz"))[0]
        (broken / read_recordings(manifest)[0].sources[0].source).write_bytes(b"not audio")
    done = subprocess.run(
        [sys.executable, "-m", "audiorepro.data", "check", str(broken / "manifests")]
        + ["--root", str(broken), "--sources", str(broken / "sources.yaml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "recordings.jsonl.gz:" in done.stdout, done.stdout
