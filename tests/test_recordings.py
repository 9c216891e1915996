"""``audiorepro.data.recordings``: file ids of a folder of anyone's recordings."""

from __future__ import annotations

from pathlib import Path

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


def test_a_byte_order_mark_and_windows_line_ends_read_as_the_plain_table(tmp_path):
    from audiorepro.data.recordings import read_segments

    write(tmp_path / "S1_a.wav", seconds=0.5)
    rows = [
        "path\tword\tspeaker\tstart\tend",
        "S1_a.wav\tyes\tS1\t0.1\t0.3",
        "S1_a.wav\tno\tS1\t\t",
    ]
    plain, excel = tmp_path / "plain.tsv", tmp_path / "excel.tsv"
    plain.write_text("\n".join(rows) + "\n", encoding="utf-8")
    excel.write_bytes(("\r\n".join(rows) + "\r\n").encode("utf-8-sig"))
    strip = [(s.path, s.word, s.speaker, s.start, s.end, s.line) for s in read_segments(plain)]
    assert strip == [
        (s.path, s.word, s.speaker, s.start, s.end, s.line) for s in read_segments(excel)
    ]
    assert strip[0][1:5] == ("yes", "S1", 0.1, 0.3)
    speaker_map = tmp_path / "map.tsv"
    speaker_map.write_bytes("S1_a\tanna\r\n".encode("utf-8-sig"))
    assert speakers_of(find_wavs(tmp_path), str(speaker_map), tmp_path) == {"S1_a": "anna"}
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("\n".join(rows[:2] + ["S1_a.wav\tcaf\xe9\tS1\t\t"]).encode("latin-1"))
    with pytest.raises(RecordingsError, match=r"latin.tsv: cannot read the file as UTF-8"):
        read_segments(latin)


def test_a_lexicon_in_the_cmu_releases_latin1_encoding_reads(tmp_path):
    from audiorepro.data.recordings import read_lexicon

    lexicon = tmp_path / "cmudict-0.7b"
    text = ";;; # CMUdict -- Major Version: 0.07\nCAF\xc9  K AE0 F EY1\nCAFE  K AE0 F EY1\n"
    text += "CAFE(1)  K AH0 F EY1\nHELLO  HH AH0 L OW1\n"
    lexicon.write_bytes(text.encode("latin-1"))
    assert read_lexicon(lexicon) == {
        "caf\xe9": ("K", "AE0", "F", "EY1"),
        "cafe": ("K", "AE0", "F", "EY1"),
        "hello": ("HH", "AH0", "L", "OW1"),
    }
    lexicon.write_bytes(("\ufeff" + text.replace("\xc9", "\xe9")).encode("utf-8"))
    assert read_lexicon(lexicon)["caf\xe9"] == ("K", "AE0", "F", "EY1")


def test_prefix_with_another_separator_reads_librispeech_names(tmp_path):
    from audiorepro.data.recordings import speaker_rule

    write(tmp_path / "84" / "121123" / "84-121123-0000.flac")
    write(tmp_path / "84" / "121123" / "84-121123-0001.flac")
    write(tmp_path / "174" / "50561" / "174-50561-0000.flac")
    wavs = find_wavs(tmp_path)
    assert speakers_of(wavs, "prefix:-") == {
        "84-121123-0000": "84",
        "84-121123-0001": "84",
        "174-50561-0000": "174",
    }
    # the folder a LibriSpeech file is in is its chapter, not its speaker
    assert set(speakers_of(wavs, "parent").values()) == {"121123", "50561"}
    with pytest.raises(RecordingsError, match=r"expected a file name <speaker>_<rest>.flac.*"):
        speakers_of(wavs, "prefix")
    with pytest.raises(
        RecordingsError, match=r"names like '174-50561-0000': --speaker-of prefix:-"
    ):
        speakers_of(wavs, "prefix")
    with pytest.raises(RecordingsError, match=r"prefix:SEP: expected a separator"):
        speakers_of(wavs, "prefix:")
    assert speaker_rule("prefix:-") == "prefix:-"
    assert speaker_rule("parent") == "parent"
    assert speaker_rule("map.tsv") == str(Path("map.tsv").resolve())
