"""``audiorepro.data.recordings``: file ids of a folder of anyone's recordings."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from audiorepro.data.recordings import RecordingsError, find_wavs, ids_under, speakers_of


def write(path, seconds=0.1, rate=8000):
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, np.zeros(int(seconds * rate), dtype=np.float32), rate, format=None)


def test_unique_names_keep_the_zerospeech_flat_ids_even_in_subfolders(tmp_path):
    write(tmp_path / "a" / "S1_one.wav")
    write(tmp_path / "b" / "c" / "S2_two.WAV")
    write(tmp_path / "S3 three.flac")
    (tmp_path / "notes.txt").write_text("not audio")
    wavs = find_wavs(tmp_path)
    assert list(wavs) == ["S1_one", "S2_two", "S3_three"]
    assert wavs["S2_two"] == tmp_path / "b" / "c" / "S2_two.WAV"
    assert speakers_of(wavs, "prefix") == {"S1_one": "S1", "S2_two": "S2", "S3_three": "S3"}
    assert ids_under(tmp_path)[(tmp_path / "S3 three.flac").resolve()] == "S3_three"


def test_a_repeated_name_makes_every_id_a_path_under_the_folder(tmp_path):
    write(tmp_path / "spk1" / "001.wav")
    write(tmp_path / "spk2" / "001.wav")
    write(tmp_path / "spk2" / "002.wav")
    wavs = find_wavs(tmp_path)
    assert list(wavs) == ["spk1/001", "spk2/001", "spk2/002"]
    assert speakers_of(wavs, "parent") == {
        "spk1/001": "spk1",
        "spk2/001": "spk2",
        "spk2/002": "spk2",
    }
    table = tmp_path / "map.tsv"
    table.write_text("spk1/001.wav\tA\nspk2/001\tB\n002\tB\n")
    assert speakers_of(wavs, str(table), tmp_path) == {
        "spk1/001": "A",
        "spk2/001": "B",
        "spk2/002": "B",
    }
    table.write_text("001\tA\n002\tB\n")
    with pytest.raises(RecordingsError, match=r"map.tsv:1: file '001' names several files"):
        speakers_of(wavs, str(table), tmp_path)


def test_two_files_of_one_id_even_by_path_are_refused(tmp_path):
    write(tmp_path / "x.wav")
    write(tmp_path / "x.flac")
    with pytest.raises(RecordingsError, match=r"x.wav: file id 'x' also used by .*x.flac"):
        find_wavs(tmp_path)
    with pytest.raises(RecordingsError, match="no audio files"):
        (tmp_path / "empty").mkdir() or find_wavs(tmp_path / "empty")


def test_audio_in_a_format_not_read_is_an_error_not_a_silent_skip(tmp_path):
    write(tmp_path / "S1_one.wav")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "S1_two.MP3").write_bytes(b"ID3")
    with pytest.raises(
        RecordingsError, match=r"S1_two.MP3: 1 audio file\(s\) under .* not read here"
    ):
        find_wavs(tmp_path)
