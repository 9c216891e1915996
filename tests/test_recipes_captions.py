"""ClothoV2, AudioCaps and WavCaps recipes on real-format files, hand-written and generated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiorepro.data.embedded.audio_caption import generate_audio_caption_corpora
from audiorepro.data.manifests import check_manifest_dir, read_recordings, read_supervisions
from audiorepro.data.recipes import (
    RecipeError,
    prepare_audio_caption_manifests,
    prepare_audiocaps,
    prepare_clotho,
    prepare_wavcaps,
)

SR = 32000
CLOTHO_HEADER = "file_name,caption_1,caption_2,caption_3,caption_4,caption_5"


def _wav(path: Path, seconds: float = 0.5, fmt: str = "WAV") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    noise = np.random.default_rng(len(path.name)).standard_normal(int(seconds * SR)) * 0.1
    sf.write(str(path), noise, SR, subtype="PCM_16", format=fmt)
    return path


def _assert_clean(manifest_dir: Path, root: Path) -> None:
    problems = check_manifest_dir(manifest_dir, root)
    assert problems == [], "\n".join(map(str, problems))


# --- ClothoV2 ------------------------------------------------------------------------------------

CLOTHO_CSV = (
    CLOTHO_HEADER + "\n"
    'Distorted AM Radio noise.wav,A radio hisses loudly.,"Static, then a voice.",'
    "Noise from a radio.,A muffled radio is playing.,Someone tunes an old radio.\n"
    'gravel walk.wav,A person walks on gravel.,"Crunching steps, slow and steady.",'
    "Footsteps on a gravel path.,Someone is walking outside.,Shoes crunch on small stones.\n"
)
CLOTHO_METADATA = (
    "file_name,keywords,sound_id,sound_link,start_end_samples,manufacturer,license\n"
    "Distorted AM Radio noise.wav,noise;radio;static,156133,"
    'https://freesound.org/people/x/sounds/156133,"[0, 16000]",jürgen,'
    "http://creativecommons.org/licenses/by/3.0/\n"
    "gravel walk.wav,gravel;walking;footsteps,200,https://freesound.org/people/y/sounds/200,"
    '"[0, 16000]",anna,http://creativecommons.org/publicdomain/zero/1.0/\n'
)


def _clotho(root: Path, audio_folder: str = "clotho_audio_development") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "clotho_captions_development.csv").write_text(CLOTHO_CSV, encoding="utf-8")
    (root / "clotho_metadata_development.csv").write_bytes(CLOTHO_METADATA.encode("iso-8859-1"))
    _wav(root / audio_folder / "Distorted AM Radio noise.wav")
    _wav(root / audio_folder / "gravel walk.wav", 0.7)
    return root


def test_clotho_hand_written(tmp_path):
    root = _clotho(tmp_path / "clotho")
    paraphrases = {"Static, then a voice.": ["A voice after static.", "Static, and a voice."]}
    (root / "clotho_paraphrases_development.json").write_text(json.dumps(paraphrases))
    counts = prepare_clotho(root, tmp_path / "m", splits=("development",))
    assert counts == {"development": {"recordings": 2, "supervisions": 10}}
    _assert_clean(tmp_path / "m", root)

    recordings = read_recordings(tmp_path / "m" / "development_recordings.jsonl.gz")
    assert [r.id for r in recordings] == ["Distorted AM Radio noise", "gravel walk"]
    assert (
        recordings[0].sources[0].source == "clotho_audio_development/Distorted AM Radio noise.wav"
    )
    assert recordings[1].num_samples == int(0.7 * SR)
    sups = read_supervisions(tmp_path / "m" / "development_supervisions.jsonl.gz")
    second = sups[1]
    assert second.id == "Distorted AM Radio noise-2" and second.text == "Static, then a voice."
    assert second.custom["caption_index"] == 2
    assert second.custom["keywords"] == ["noise", "radio", "static"]
    assert second.custom["sound_id"] == 156133
    assert second.custom["paraphrases"] == paraphrases["Static, then a voice."]
    assert sups[0].custom["paraphrases"] == []  # a caption without paraphrases
    assert second.duration == pytest.approx(0.5) and second.start == 0.0


def test_clotho_reads_the_extracted_archive_layout(tmp_path):
    root = _clotho(tmp_path / "clotho", audio_folder="development")
    (root / "clotho_metadata_development.csv").unlink()  # metadata is optional
    counts = prepare_clotho(root, tmp_path / "m", splits=["development"])
    assert counts["development"]["supervisions"] == 10
    sups = read_supervisions(tmp_path / "m" / "development_supervisions.jsonl.gz")
    assert "keywords" not in sups[0].custom and "paraphrases" not in sups[0].custom
    _assert_clean(tmp_path / "m", root)


def test_clotho_errors_name_the_file_and_line(tmp_path):
    root = _clotho(tmp_path / "clotho")
    csv_path = root / "clotho_captions_development.csv"

    csv_path.write_text("file_name,caption1,caption2\nx.wav,a,b\n")
    with pytest.raises(RecipeError) as err:
        prepare_clotho(root, tmp_path / "m", splits=["development"])
    message = str(err.value)
    assert str(csv_path) in message and "wrong CSV header" in message
    assert CLOTHO_HEADER in message and "file_name,caption1,caption2" in message

    csv_path.write_text(CLOTHO_CSV.replace("Noise from a radio.", ""))
    with pytest.raises(RecipeError, match=rf"{csv_path}:2: caption_3 of .* is empty"):
        prepare_clotho(root, tmp_path / "m", splits=["development"])

    csv_path.write_text(CLOTHO_CSV.replace("gravel walk.wav", "missing clip.wav"))
    with pytest.raises(RecipeError, match=r":3: .*has no row in clotho_metadata"):
        prepare_clotho(root, tmp_path / "m", splits=["development"])
    (root / "clotho_metadata_development.csv").unlink()
    with pytest.raises(
        RecipeError, match=rf"{csv_path}:3: audio file listed here is missing: .*missing clip.wav"
    ):
        prepare_clotho(root, tmp_path / "m", splits=["development"])

    csv_path.write_text(CLOTHO_CSV)
    (root / "clotho_audio_development" / "gravel walk.wav").write_bytes(b"RIFF not audio")
    with pytest.raises(RecipeError, match=r"gravel walk.wav: cannot read the audio file"):
        prepare_clotho(root, tmp_path / "m", splits=["development"])

    (root / "clotho_paraphrases_development.json").write_text('{"a": "not a list"}')
    with pytest.raises(RecipeError, match="paraphrases of 'a' must be a list"):
        prepare_clotho(root, tmp_path / "m", splits=["development"])

    with pytest.raises(RecipeError, match="file not found .*ClothoV2 validation captions"):
        (root / "clotho_audio_validation").mkdir()
        prepare_clotho(root, tmp_path / "m", splits=["validation"])
    with pytest.raises(ValueError, match="unknown ClothoV2 split"):
        prepare_clotho(root, tmp_path / "m", splits=["train"])
    assert not (tmp_path / "m").exists()  # nothing written on errors


# --- AudioCaps -----------------------------------------------------------------------------------


def _audiocaps(root: Path) -> Path:
    (root / "dataset").mkdir(parents=True)
    (root / "dataset" / "train.csv").write_text(
        "audiocap_id,youtube_id,start_time,caption\n"
        "91139,r1nicOVtvkQ,130,A woman talks nearby as water pours\n"
        '58146,UDGBjjwyaqE,20,"Multiple clanging and clanking sounds, then a man speaks"\n'
    )
    (root / "dataset" / "val.csv").write_text(
        "audiocap_id,youtube_id,start_time,caption\n"
        + "".join(f"{100 + k},-AheI8Epim4,30,A dog barks {k}\n" for k in range(5))
        + "".join(f"{200 + k},ZzzzWwwwXx_,0,Rain falls {k}\n" for k in range(5))
    )
    for youtube_id in ("r1nicOVtvkQ", "UDGBjjwyaqE", "-AheI8Epim4", "ZzzzWwwwXx_"):
        _wav(root / "audio" / f"Y{youtube_id}.wav", 1.0)
    return root


def test_audiocaps_hand_written(tmp_path):
    root = _audiocaps(tmp_path / "audiocaps")
    counts = prepare_audiocaps(root, tmp_path / "m", splits=("train", "val"))
    assert counts["train"] == {"recordings": 2, "supervisions": 2, "missing": 0}
    assert counts["val"] == {"recordings": 2, "supervisions": 10, "missing": 0}
    _assert_clean(tmp_path / "m", root)
    sups = read_supervisions(tmp_path / "m" / "val_supervisions.jsonl.gz")
    assert [s.recording_id for s in sups[:5]] == ["Y-AheI8Epim4"] * 5
    assert [s.custom["caption_index"] for s in sups[:6]] == [0, 1, 2, 3, 4, 0]
    assert sups[0].id == "100" and sups[0].custom["start_time"] == 30
    train = read_supervisions(tmp_path / "m" / "train_supervisions.jsonl.gz")
    assert train[1].text == "Multiple clanging and clanking sounds, then a man speaks"


def test_audiocaps_missing_clips_and_errors(tmp_path):
    root = _audiocaps(tmp_path / "audiocaps")
    (root / "audio" / "YUDGBjjwyaqE.wav").unlink()
    train_csv = root / "dataset" / "train.csv"
    with pytest.raises(RecipeError, match=rf"{train_csv}:3: audio file listed here is missing"):
        prepare_audiocaps(root, tmp_path / "m", splits=["train"])
    counts = prepare_audiocaps(root, tmp_path / "m", splits=["train"], allow_missing=True)
    assert counts["train"] == {"recordings": 1, "supervisions": 1, "missing": 1}
    _assert_clean(tmp_path / "m", root)

    train_csv.write_text("audiocap_id,youtube_id,caption\n1,r1nicOVtvkQ,x\n")
    with pytest.raises(RecipeError, match="expected 'audiocap_id,youtube_id,start_time,caption'"):
        prepare_audiocaps(root, tmp_path / "m", splits=["train"])
    train_csv.write_text("audiocap_id,youtube_id,start_time,caption\n1,r1nicOVtvkQ,30,\n")
    with pytest.raises(RecipeError, match=rf"{train_csv}:2: caption is empty"):
        prepare_audiocaps(root, tmp_path / "m", splits=["train"])
    train_csv.write_text("audiocap_id,youtube_id,start_time,caption\n1,r1nicOVtvkQ,soon,x\n")
    with pytest.raises(RecipeError, match="start_time must be a number, got 'soon'"):
        prepare_audiocaps(root, tmp_path / "m", splits=["train"])
    train_csv.write_text(
        "audiocap_id,youtube_id,start_time,caption\n1,r1nicOVtvkQ,3,x\n1,r1nicOVtvkQ,3,y\n"
    )
    with pytest.raises(RecipeError, match=":3: duplicate audiocap_id '1' \\(first on line 2\\)"):
        prepare_audiocaps(root, tmp_path / "m", splits=["train"])


# --- WavCaps -------------------------------------------------------------------------------------


def _wavcaps(root: Path) -> Path:
    sb = {
        "num_captions_per_audio": 1,
        "data": [
            {
                "title": "Service Bell",
                "caption": "Someone is ringing a bell.",
                "id": "2218",
                "duration": 0.5,
                "audio": "wav_path",
            },
        ],
    }
    fsd = {
        "num_captions_per_audio": 1,
        "data": [
            {
                "id": "180913",
                "tags": ["rain", "roof"],
                "caption": "Rain is falling on a roof.",
                "duration": 0.5,
                "audio": "wav_path",
            },
            {
                "id": "555",
                "tags": ["bell"],
                "caption": "A bell rings.",
                "duration": 0.5,
                "audio": "wav_path",
            },
        ],
    }
    as_sl = [{"id": "Y06-g5jz-OGc.wav", "caption": "Music is playing.", "duration": 0.5}]
    for source, name, data in (
        ("SoundBible", "sb_final.json", sb),
        ("FreeSound", "fsd_final.json", fsd),
        ("AudioSet_SL", "as_final.json", as_sl),
    ):
        path = root / "json_files" / source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    _wav(root / "audio" / "SoundBible" / "2218.flac", fmt="FLAC")
    _wav(root / "audio" / "FreeSound" / "180913.flac", fmt="FLAC")
    _wav(root / "audio" / "FreeSound" / "555.flac", fmt="FLAC")
    _wav(root / "audio" / "AudioSet_SL" / "Y06-g5jz-OGc.flac", fmt="FLAC")
    (root / "dcase2024_task6_excluded_freesound_ids.csv").write_text("sound_id\n555\n")
    return root


def test_wavcaps_hand_written_applies_the_exclusion_list(tmp_path):
    root = _wavcaps(tmp_path / "wavcaps")
    counts = prepare_wavcaps(root, tmp_path / "m")
    assert counts["train"] == {"recordings": 3, "supervisions": 3, "excluded": 1, "missing": 0}
    assert counts["FreeSound"] == {"recordings": 1, "supervisions": 1}
    _assert_clean(tmp_path / "m", root)
    sups = {
        s.recording_id: s
        for s in read_supervisions(tmp_path / "m" / "train_supervisions.jsonl.gz")
    }
    assert set(sups) == {"AudioSet_SL/Y06-g5jz-OGc", "FreeSound/180913", "SoundBible/2218"}
    assert sups["FreeSound/180913"].custom == {
        "caption_index": 0,
        "source": "FreeSound",
        "wavcaps_id": "180913",
        "keywords": ["rain", "roof"],
    }
    assert sups["SoundBible/2218"].custom["keywords"] == ["Service Bell"]

    (tmp_path / "empty.csv").write_text("sound_id\n")
    every = prepare_wavcaps(root, tmp_path / "all", exclusion_csv=tmp_path / "empty.csv")
    assert every["train"]["recordings"] == 4 and every["train"]["excluded"] == 0


def test_wavcaps_errors(tmp_path):
    root = _wavcaps(tmp_path / "wavcaps")
    exclusions = root / "dcase2024_task6_excluded_freesound_ids.csv"
    exclusions.write_text("id\n555\n")
    with pytest.raises(RecipeError, match=r"expected 'sound_id', got 'id'"):
        prepare_wavcaps(root, tmp_path / "m")
    exclusions.write_text("sound_id\n555\n")

    sb_json = root / "json_files" / "SoundBible" / "sb_final.json"
    sb_json.write_text(json.dumps({"data": [{"id": "1", "caption": " "}]}))
    with pytest.raises(RecipeError, match=r"sb_final.json: data\[0\] \(id '1'\): empty caption"):
        prepare_wavcaps(root, tmp_path / "m")
    sb_json.write_text(json.dumps({"data": [{"id": "1", "caption": "A bell."}]}))
    with pytest.raises(
        RecipeError, match=r"audio file listed here is missing: .*SoundBible/1.flac"
    ):
        prepare_wavcaps(root, tmp_path / "m", sources=["SoundBible"])
    counts = prepare_wavcaps(root, tmp_path / "m", sources=["SoundBible"], allow_missing=True)
    assert counts["train"]["missing"] == 1
    sb_json.write_text("[1, 2")
    with pytest.raises(RecipeError, match="cannot read the WavCaps JSON"):
        prepare_wavcaps(root, tmp_path / "m")
    with pytest.raises(RecipeError, match=r"bbc_final.json: file not found"):
        prepare_wavcaps(root, tmp_path / "m", sources=["BBC_Sound_Effects"])
    with pytest.raises(ValueError, match="unknown WavCaps source"):
        prepare_wavcaps(root, tmp_path / "m", sources=["Freesound"])


# --- the generated corpora through the same recipes ----------------------------------------------


def test_recipes_on_the_generated_smoke_corpora(session_data_dir, tmp_path):
    corpora = generate_audio_caption_corpora(session_data_dir / "audio_caption_smoke", "smoke", 0)
    counts = prepare_audio_caption_manifests(corpora.root, tmp_path / "manifests")
    clotho = corpora.counts["clotho"]
    for split in ("development", "validation", "evaluation"):
        assert counts["clotho"][split] == {
            "recordings": clotho[split]["clips"],
            "supervisions": clotho[split]["captions"],
        }
    for split in ("train", "val", "test"):
        assert (
            counts["audiocaps"][split]["supervisions"]
            == corpora.counts["audiocaps"][split]["captions"]
        )
    wavcaps_clips = sum(v["clips"] for v in corpora.counts["wavcaps"].values())
    excluded = corpora.counts["wavcaps_excluded"]
    assert counts["wavcaps"]["train"]["excluded"] == excluded >= 1
    assert counts["wavcaps"]["train"]["recordings"] == wavcaps_clips - excluded
    for corpus in ("clotho", "audiocaps", "wavcaps"):
        _assert_clean(tmp_path / "manifests" / corpus, corpora.root / corpus)

    sups = read_supervisions(
        tmp_path / "manifests" / "clotho" / "development_supervisions.jsonl.gz"
    )
    assert all(2 <= len(s.custom["paraphrases"]) <= 4 for s in sups)
    assert all(3 <= len(s.custom["keywords"]) <= 6 for s in sups)
    assert {s.custom["caption_index"] for s in sups} == {1, 2, 3, 4, 5}
