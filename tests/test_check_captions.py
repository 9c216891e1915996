"""The caption-corpora check lists every problem at once, with file, line and what is wrong."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import soundfile as sf

from audiorepro.data.check_captions import check_caption_corpora, main

SR = 32000


def _wav(path, seconds):
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.zeros(int(seconds * SR), np.float32), SR)


def _corpora(root):
    clotho = root / "clotho"
    clotho.mkdir(parents=True)
    (clotho / "clotho_captions_development.csv").write_text(
        "file_name,caption_1,caption_2,caption_3,caption_4,caption_5\n"
        "a.wav,one,two,,four,five\n"
        "b.wav,one,two,three,four,five\n"
        "c.wav,one,two,three,four,five\n"
    )
    _wav(clotho / "clotho_audio_development" / "a.wav", 1.0)
    _wav(clotho / "clotho_audio_development" / "c.wav", 0.05)  # shorter than one patch
    (clotho / "clotho_captions_evaluation.csv").write_text("file,caption\nx.wav,hello\n")
    audiocaps = root / "audiocaps"
    (audiocaps / "dataset").mkdir(parents=True)
    (audiocaps / "dataset" / "train.csv").write_text(
        "audiocap_id,youtube_id,start_time,caption\n1,abc,0,a dog barks\n2,def,10,\n"
    )
    _wav(audiocaps / "audio" / "Ydef.wav", 1.0)
    wavcaps = root / "wavcaps" / "json_files" / "SoundBible"
    wavcaps.mkdir(parents=True)
    (wavcaps / "sb_final.json").write_text(
        json.dumps({"num_captions_per_audio": 1, "data": [{"id": "7", "caption": " "}]})
    )


def test_every_problem_is_reported(tmp_path):
    _corpora(tmp_path)
    problems = check_caption_corpora(tmp_path)
    text = "\n".join(problems)
    assert len(problems) == 8, text
    assert "clotho_captions_development.csv:2: caption_3 of 'a.wav' is empty" in text
    assert "clotho_captions_development.csv:3: audio file listed here is missing" in text
    assert "c.wav: 0.050 s of audio is shorter than one PaSST patch" in text
    assert (
        "clotho_captions_evaluation.csv:1: wrong CSV columns: expected "
        "'file_name,caption_1,caption_2,caption_3,caption_4,caption_5', got 'file,caption'"
    ) in text
    assert "train.csv:2: audio file listed here is missing" in text and "Yabc.wav" in text
    assert "train.csv:3: caption of '2' is empty" in text
    assert "sb_final.json: data[0]: caption of '7' is empty" in text
    assert "data[0]: audio file listed here is missing" in text and "7.flac" in text


def test_cli_exit_status(tmp_path, capsys):
    _corpora(tmp_path / "bad")
    assert main([str(tmp_path / "bad")]) == 1
    assert capsys.readouterr().out.strip().endswith("8 problems in " + str(tmp_path / "bad"))
    (tmp_path / "ok" / "clotho").mkdir(parents=True)
    assert main([str(tmp_path / "ok")]) == 0
    result = subprocess.run(
        [sys.executable, "-m", "audiorepro.data.check_captions", str(tmp_path / "none")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "holds none of" in result.stderr


def test_duplicate_and_empty_clotho_file_names_are_reported_like_the_recipe_refuses_them(tmp_path):
    clotho = tmp_path / "clotho"
    clotho.mkdir()
    (clotho / "clotho_captions_development.csv").write_text(
        "file_name,caption_1,caption_2,caption_3,caption_4,caption_5\n"
        "a.wav,one,two,three,four,five\n"
        ",one,two,three,four,five\n"
        "a.wav,six,seven,eight,nine,ten\n"
    )
    _wav(clotho / "clotho_audio_development" / "a.wav", 1.0)
    assert check_caption_corpora(tmp_path) == [
        f"{clotho / 'clotho_captions_development.csv'}:3: empty file_name",
        f"{clotho / 'clotho_captions_development.csv'}:4: duplicate file_name 'a.wav' "
        "(first on line 2)",
    ]
