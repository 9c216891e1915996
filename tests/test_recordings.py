"""``audiorepro.data.recordings``: file ids of a folder of anyone's recordings."""

from __future__ import annotations

import warnings
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


def write_stereo(path, left, right, rate=16000):
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, np.stack([left, right], axis=1).astype(np.float32), rate)


def speech_like(seconds=0.5, rate=16000, seed=0):
    """Noise under a slow envelope: not silent, not one repeated frame."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * rng.standard_normal(t.size) * (0.6 + 0.4 * np.sin(7 * t))).astype(np.float32)


def test_the_scan_names_every_file_it_does_not_use_and_follows_linked_folders(tmp_path):
    from audiorepro.data.recordings import scan_folder

    audio, elsewhere = tmp_path / "audio", tmp_path / "elsewhere"
    write(audio / "S1_a.wav")
    write(audio / "sub" / "S2_b.flac")
    write(elsewhere / "S3_c.wav")
    (audio / "spk3").symlink_to(elsewhere, target_is_directory=True)
    (audio / "S4_d.wav").symlink_to(tmp_path / "gone.wav")  # dangling
    (audio / "notes.txt").write_text("a transcript")
    sf.write(audio / "S5_e.wave", np.zeros(800, dtype=np.float32), 8000, format="WAV")
    (audio / "._S1_a.wav").write_bytes(b"\x00\x05\x16\x07" + bytes(60))  # macOS metadata
    (audio / "again").symlink_to(audio, target_is_directory=True)  # a loop
    write(audio / "._S6_f.wav")  # a wav whose name starts with ._ is a wav
    scan = scan_folder(audio)
    assert list(scan.files) == ["._S6_f", "S1_a", "S2_b", "S3_c"]
    assert scan.files["S3_c"] == audio / "spk3" / "S3_c.wav"
    assert scan.linked_folders == [audio / "spk3"]
    reasons = {p.name: r for p, r in scan.left_out}
    assert set(reasons) == {"S4_d.wav", "notes.txt", "S5_e.wave", "._S1_a.wav", "again"}
    assert reasons["S4_d.wav"].startswith("broken link to ")
    assert reasons["notes.txt"] == "not audio: .txt"
    assert "a WAV file by its header" in reasons["S5_e.wave"]
    assert "macOS" in reasons["._S1_a.wav"]
    assert "already read" in reasons["again"]
    note = scan.note()
    assert note.startswith("4 files (1 linked folder followed: spk3); left out 5: ")
    assert "S4_d.wav (broken link to " in note
    assert find_wavs(audio) == scan.files


def test_one_file_reached_twice_through_links_is_read_once_and_named(tmp_path):
    from audiorepro.data.recordings import scan_folder

    write(tmp_path / "S1_a.wav")
    (tmp_path / "S1_copy.wav").symlink_to(tmp_path / "S1_a.wav")
    scan = scan_folder(tmp_path)
    assert list(scan.files) == ["S1_a"]
    assert scan.left_out == [(tmp_path / "S1_copy.wav", "the same file as S1_a.wav (a link)")]


def test_channels_that_cancel_in_the_mono_mix_are_refused_naming_the_file(tmp_path):
    from audiorepro.features import AudioError, load_audio

    x = speech_like()
    write_stereo(tmp_path / "cancel.wav", x, -x)
    with pytest.raises(AudioError, match=r"cancel.wav: its 2 channels cancel when mixed to mono"):
        load_audio(tmp_path / "cancel.wav", 16000)
    wav, _ = load_audio(tmp_path / "cancel.wav", 16000, mono=False)  # the channels themselves
    assert wav.shape[0] == 2
    write_stereo(tmp_path / "fine.wav", x, 0.5 * x)
    assert load_audio(tmp_path / "fine.wav", 16000)[0].std() > 0.1
    write_stereo(tmp_path / "one.wav", x, np.zeros_like(x))  # one channel silent: fine
    assert load_audio(tmp_path / "one.wav", 16000)[0].std() > 0.05


def test_content_problems_are_named_for_training(tmp_path):
    from audiorepro.data.recordings import content_problem

    x = speech_like()
    write_stereo(tmp_path / "cancel.wav", x, -x)
    sf.write(tmp_path / "silent.wav", np.zeros(8000, dtype=np.float32), 16000)
    sf.write(tmp_path / "fine.wav", x, 16000)
    assert content_problem(tmp_path / "fine.wav") is None
    assert content_problem(tmp_path / "silent.wav") == "silent: every sample is 0"
    sf.write(tmp_path / "dc.wav", np.full(8000, 0.05), 16000, subtype="PCM_16")  # a mic's offset
    assert (
        content_problem(tmp_path / "dc.wav") == "silent: a constant offset (DC 0.05) and no signal"
    )
    sf.write(tmp_path / "offset.wav", 0.05 + x, 16000)  # speech over an offset trains
    assert content_problem(tmp_path / "offset.wav") is None
    assert content_problem(tmp_path / "cancel.wav").startswith(
        "its 2 channels cancel when mixed to mono"
    )


def test_a_map_line_repeated_or_contradicted_is_an_error_naming_both_lines(tmp_path):
    write(tmp_path / "a" / "x1.wav")
    write(tmp_path / "a" / "x2.wav")
    wavs = find_wavs(tmp_path)
    table = tmp_path / "map.tsv"
    table.write_text("x1\tanna\nx2\tbob\nx1.wav\tanna\n")
    with pytest.raises(RecordingsError, match=r"map.tsv:3: file 'x1' listed again \(line 1\)"):
        speakers_of(wavs, str(table), tmp_path)
    table.write_text("x1\tanna\nx2\tbob\nx1\tcarl\n")
    with pytest.raises(
        RecordingsError, match=r"map.tsv:3: file 'x1': speaker 'carl' here, 'anna' on line 1"
    ):
        speakers_of(wavs, str(table), tmp_path)
    table.write_text("a/x1\tanna\nx2\tbob\nx1\tcarl\n")  # by path and by name: one file
    with pytest.raises(RecordingsError, match=r"map.tsv:3: .*'carl' here, 'anna' on line 1"):
        speakers_of(wavs, str(table), tmp_path)


def test_a_segment_listed_twice_or_with_two_words_names_both_lines(tmp_path):
    from audiorepro.data.recordings import read_segments

    write(tmp_path / "S1_a.wav", seconds=0.5)
    head = "path\tword\tspeaker\tstart\tend\n"
    table = tmp_path / "seg.tsv"
    table.write_text(head + "S1_a.wav\tyes\tS1\t0.1\t0.3\nS1_a.wav\tno\tS1\t0.2\t0.4\n"
                     "S1_a.wav\tyes\tS1\t0.10\t0.30\n")  # fmt: skip
    with pytest.raises(RecordingsError, match=r"seg.tsv:4: .*the same segment as line 2"):
        read_segments(table)
    table.write_text(head + "S1_a.wav\tyes\tS1\t\t\n./S1_a.wav\tno\tS1\t\t\n")
    with pytest.raises(RecordingsError, match=r"seg.tsv:3: .*'no' here, 'yes' on line 2"):
        read_segments(table)


def test_one_token_listed_twice_is_refused_and_a_word_said_twice_in_a_row_is_not(tmp_path):
    from audiorepro.data.recordings import read_segments

    write(tmp_path / "S1_a.wav", seconds=1.0)
    head = "path\tword\tspeaker\tstart\tend\n"
    table = tmp_path / "seg.tsv"

    def rows(*lines):
        table.write_text(head + "".join(f"S1_a.wav\t{line}\n" for line in lines))
        return table

    # "no no": two tokens sharing a boundary's 20 ms; another word over both is fine
    ok = rows("no\tS1\t0.10\t0.32", "no\tS1\t0.30\t0.50", "yes\tS1\t0.0\t1.0")
    assert [r.word for r in read_segments(ok)] == ["no", "no", "yes"]
    # the whole file and an excerpt of it, listed in either order, with or without durations
    for lines in (("no\tS1\t\t", "no\tS1\t0.2\t0.4"), ("no\tS1\t0.2\t0.4", "no\tS1\t\t")):
        for check_audio in (True, False):
            with pytest.raises(
                RecordingsError,
                match=r"seg.tsv:3: S1_a.wav .*the word 'no' of line 2 .* again, sharing 100 %",
            ):
                read_segments(rows(*lines), check_audio=check_audio)
    # looser bounds around one token: 0.20 of the shorter 0.25 s shared (80 %)
    with pytest.raises(RecordingsError, match=r"seg.tsv:4: .*\(0.15-0.4 s\) again, sharing 80 %"):
        read_segments(rows("no\tS1\t0.15\t0.4", "yes\tS1\t0.5\t0.7", "No\tS1\t0.2\t0.45"))
    # a row inside an earlier long one, another word between them in the table
    with pytest.raises(RecordingsError, match=r"seg.tsv:4: .*line 2 \(0-0.9 s\)"):
        read_segments(rows("no\tS1\t0\t0.9", "yes\tS1\t0.1\t0.3", "no\tS1\t0.5\t0.7"))


def test_a_row_far_longer_than_the_others_is_warned_of_naming_the_longest(tmp_path):
    """A whole recording among words (or an end time in ms) weighs as hundreds of words: the
    table is read, and the longest such row is named with how many there are."""
    from audiorepro.data.recordings import InputWarning, read_segments

    head = "path\tword\tspeaker\tstart\tend\n"
    rng = np.random.default_rng(0)
    for name, seconds in [*((f"w{k}", 0.5) for k in range(5)), ("talk", 60.0)]:
        noise = 0.1 * rng.standard_normal(int(8000 * seconds)).astype(np.float32)
        sf.write(tmp_path / f"{name}.wav", noise, 8000)
    table = tmp_path / "seg.tsv"
    words = "".join(f"w{k}.wav\tw{k}\tS1\t\t\n" for k in range(5))
    table.write_text(head + words + "talk.wav\tnews\tS1\t\t\ntalk.wav\tx\tS1\t1\t7.5\n")
    with pytest.warns(InputWarning) as caught:
        assert len(read_segments(table)) == 7
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(
        "seg.tsv:7: talk.wav (the whole file) is 60.0 s long, 120 times the table's median row "
        "(0.50 s); 1 more row as long: a row is one spoken word"
    ) or message.startswith(f"{table}:7: talk.wav (the whole file) is 60.0 s long, 120 times"), (
        message
    )
    assert "check its start and end (seconds)" in message
    # long rows alone (utterances), or one just over the rule's 5 s: no warning
    for rows in ("talk.wav\tnews\tS1\t\t\n", words + "talk.wav\tx\tS1\t0\t4.9\n"):
        table.write_text(head + rows)
        with warnings.catch_warnings():
            warnings.simplefilter("error", InputWarning)
            read_segments(table)
    table.write_text(head + words + "talk.wav\tx\tS1\t0\t5.5\n")  # 5.5 s, 11 times 0.5 s
    with pytest.warns(InputWarning, match=r"seg.tsv:7: talk.wav \(0-5.5 s\) is 5.5 s long, 11 "):
        read_segments(table)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        read_segments(table, check_audio=False)  # no audio read, no lengths known


def test_a_lexicon_line_repeated_is_an_error_and_another_pronunciation_is_kept_apart(tmp_path):
    from audiorepro.data.recordings import read_lexicon

    lexicon = tmp_path / "lex.txt"
    lexicon.write_text("HELLO HH AH L OW\nWORLD W ER L D\nhello HH AH L OW\n")
    with pytest.raises(RecordingsError, match=r"lex.txt:3: 'hello' listed again \(line 1\)"):
        read_lexicon(lexicon)
    lexicon.write_text("HELLO HH AH L OW\nHELLO HH EH L OW\n")  # Kaldi's way: a variant
    assert read_lexicon(lexicon) == {"hello": ("HH", "AH", "L", "OW")}


@pytest.mark.filterwarnings("ignore")  # a 4-row AP is a weak estimate, and says so
def test_words_are_compared_lower_cased_in_tables_training_and_scores(tmp_path):
    from audiorepro.data.recordings import WORD_RULE, read_segments, word_label
    from audiorepro.experiments.awe.recordings import embeddings_ap

    assert word_label(" Yes ") == "yes" and "lower" in WORD_RULE
    write(tmp_path / "S1_a.wav", seconds=0.5)
    table = tmp_path / "seg.tsv"
    table.write_text(
        "path\tword\tspeaker\tstart\tend\nS1_a.wav\tYes\tS1\t0.1\t0.2\nS1_a.wav\tyes\tS1\t0.2\t0.3\n"
    )
    assert [r.word for r in read_segments(table)] == ["yes", "yes"]
    emb = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]], dtype=np.float32)
    np.savez(tmp_path / "e.npz", embeddings=emb, labels=np.array(["Yes", "yes", "no", "NO"]))
    np.savez(tmp_path / "f.npz", embeddings=emb, labels=np.array(["yes", "yes", "no", "no"]))
    assert embeddings_ap(tmp_path / "e.npz") == embeddings_ap(tmp_path / "f.npz") == 1.0


def test_units_train_prints_every_file_it_left_out_and_the_linked_folder_it_read(tmp_path, capsys):
    from audiorepro.cli import main

    audio, other = tmp_path / "audio", tmp_path / "other"
    audio.mkdir()
    other.mkdir()
    for k, speaker in enumerate(("S1", "S2")):
        for i in range(2):
            sf.write(audio / f"{speaker}_{i}.wav", speech_like(seed=2 * k + i), 16000)
    sf.write(other / "S3_0.wav", speech_like(seed=9), 16000)
    (audio / "spk3").symlink_to(other, target_is_directory=True)
    (audio / "S4_0.wav").symlink_to(tmp_path / "gone.wav")
    (audio / "S5_0.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(32))
    x = speech_like(seed=5)
    write_stereo(audio / "S6_0.wav", x, -x)
    sf.write(audio / "S7_0.wav", np.zeros(8000, dtype=np.float32), 16000)
    sf.write(audio / "S8_0.wav", speech_like(seconds=0.03), 16000)
    code = main(
        ["units", "train", "--audio", str(audio), "--preset", "smoke", "--set",
         "train.max_steps=2", "--set", "train.segment_frames=32", "--out", str(tmp_path / "u")]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    line = out.splitlines()[0]
    assert line.startswith(
        "trained on 3 speakers, 5 files (1 linked folder followed: spk3); left out 5: "
    ), line
    for name, why in [
        ("S4_0.wav", "broken link to "),
        ("S5_0.mp4", "MP4/M4A audio or video by its header, a format not read here"),
        ("S6_0.wav", "its 2 channels cancel when mixed to mono"),
        ("S7_0.wav", "silent: every sample is 0"),
        ("S8_0.wav", "too short: 4 frames of 10 ms, training needs 8"),
    ]:
        assert f"{name} ({why}" in line, (name, line)
    code = main(["units", "encode", str(tmp_path / "u"), "--audio", str(audio), "--out",
                 str(tmp_path / "sub")])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1 and "S6_0.wav: its 2 channels cancel when mixed to mono" in err
    # what training left out, encoding refuses, each named with why
    for name, why in [
        ("S6_0.wav", "S7_0.wav: silent: every sample is 0"),
        ("S7_0.wav", "S8_0.wav: too short: 4 frames of 10 ms, fewer than the 8 units train"),
    ]:
        (audio / name).unlink()
        code = main(["units", "encode", str(tmp_path / "u"), "--audio", str(audio), "--out",
                     str(tmp_path / "sub")])  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 1 and why in err, err
        assert not (tmp_path / "sub").exists()
    (audio / "S8_0.wav").unlink()
    code = main(["units", "encode", str(tmp_path / "u"), "--audio", str(audio), "--out",
                 str(tmp_path / "sub")])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"{audio}: 5 files (1 linked folder followed: spk3); left out 2: S4_0.wav" in out


def test_units_train_with_no_usable_file_says_why_each_was_left_out(tmp_path, capsys):
    from audiorepro.cli import main

    audio = tmp_path / "audio"
    audio.mkdir()
    sf.write(audio / "S1_0.wav", np.zeros(8000, dtype=np.float32), 16000)
    (audio / "S1_1.wav").symlink_to(tmp_path / "gone.wav")
    code = main(["units", "train", "--audio", str(audio), "--preset", "smoke",
                 "--out", str(tmp_path / "u")])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1 and not (tmp_path / "u").exists()
    assert f"{audio}: no file to train on: 0 files; left out 2: S1_1.wav (broken link to " in err
    assert "S1_0.wav (silent: every sample is 0)" in err


@pytest.mark.filterwarnings("ignore")  # a 4-row AP is a weak estimate, and says so
def test_awe_ap_prints_the_word_rule_it_scored_by(tmp_path, capsys):
    from audiorepro.cli import main
    from audiorepro.data.recordings import WORD_RULE

    emb = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]], dtype=np.float32)
    np.savez(tmp_path / "e.npz", embeddings=emb, labels=np.array(["Yes", "yes", "no", " NO"]))
    code = main(["awe", "ap", str(tmp_path / "e.npz")])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()  # a hand-made .npz: no baseline, and one line saying why
    assert lines[0] == WORD_RULE and lines[1].startswith("no baseline: ") and lines[2] == "1.0000"


def test_field_rule_reads_free_spoken_digit_names(tmp_path):
    """``field:N[:SEP]``: the N-th field of the name (7_jackson_32: word 7, speaker jackson)."""
    from audiorepro.data.recordings import labels_of, speaker_rule

    for name in ("7_jackson_32", "7_theo_1", "0_jackson_5", "0_theo_12"):
        write(tmp_path / "fsdd" / f"{name}.wav")
    wavs = find_wavs(tmp_path / "fsdd")
    assert speakers_of(wavs, "field:2") == {
        "7_jackson_32": "jackson",
        "7_theo_1": "theo",
        "0_jackson_5": "jackson",
        "0_theo_12": "theo",
    }
    assert labels_of(wavs, "field:1", what="word") == labels_of(wavs, "prefix", what="word")
    assert set(labels_of(wavs, "field:3", what="word").values()) == {"32", "1", "5", "12"}
    with pytest.raises(RecordingsError, match=r"7_jackson_32.wav.*field:4: expected a file"):
        speakers_of({"7_jackson_32": wavs["7_jackson_32"]}, "field:4")
    for bad in ("field:0", "field:x", "field:", "field:2: "):
        with pytest.raises(RecordingsError, match=r"rule field:N"):
            speakers_of(wavs, bad)
    write(tmp_path / "dash" / "84-121123-0000.flac")
    dashed = find_wavs(tmp_path / "dash")
    assert speakers_of(dashed, "field:2:-") == {"84-121123-0000": "121123"}
    with pytest.raises(RecordingsError, match=r"at least 2 fields separated by '_'"):
        speakers_of(dashed, "field:2")
    assert speaker_rule("field:2") == "field:2"
    assert speaker_rule("field:2:-") == "field:2:-"
    # fields are counted in the name as written: a space does not start one (prefix ends there)
    write(tmp_path / "spaced" / "anna lee_7_3.wav")
    spaced = find_wavs(tmp_path / "spaced")
    assert list(spaced) == ["anna_lee_7_3"]
    assert speakers_of(spaced, "field:1") == {"anna_lee_7_3": "anna_lee"}
    assert labels_of(spaced, "field:2", what="word") == {"anna_lee_7_3": "7"}
    assert speakers_of(spaced, "prefix") == {"anna_lee_7_3": "anna"}


def test_a_speaker_rule_that_takes_the_word_is_named():
    from audiorepro.data.recordings import one_word_speakers

    digits = [(w, w) for w in ("0", "7", "7", "0", "3")]  # 7_jackson_32 read with prefix
    found = one_word_speakers(digits)
    assert found is not None
    assert "each of the 3 speakers says one word only" in found and "field:2" in found
    right = [("0", "jackson"), ("7", "jackson"), ("0", "theo"), ("7", "theo")]
    assert one_word_speakers(right) is None
    assert one_word_speakers([("7", "jackson"), ("0", "jackson")]) is None  # one speaker
    assert one_word_speakers([("7", "jackson"), ("7", "theo")]) is None  # one word
    assert one_word_speakers([("Yes", "a"), ("yes ", "a"), ("no", "b")]) is not None
    assert one_word_speakers([]) is None


def test_audio_in_a_format_not_read_is_an_error_naming_it(tmp_path):
    """Asterisk's raw .gsm prompts, TIMIT's .sph: an error, not a file left out unnoticed."""
    write(tmp_path / "a" / "S1_x.wav")
    for suffix in (".gsm", ".sph", ".mp3", ".ULAW"):
        odd = tmp_path / "a" / f"S2_y{suffix}"
        odd.write_bytes(bytes(330))
        with pytest.raises(RecordingsError, match=r"1 audio file\(s\) .* format not read here"):
            find_wavs(tmp_path / "a")
        odd.unlink()
    assert list(find_wavs(tmp_path / "a")) == ["S1_x"]


def test_rules_say_what_they_expect(tmp_path):
    from audiorepro.data.recordings import labels_of

    write(tmp_path / "f" / "0_carlo_0.wav")
    write(tmp_path / "f" / "1_carlo_0.wav")
    wavs = find_wavs(tmp_path / "f")
    # a separator the names do not hold would make every name its own word
    with pytest.raises(RecordingsError, match=r"field:1:-: expected a file name of at least 2"):
        labels_of(wavs, "field:1:-", what="word")
    with pytest.raises(RecordingsError, match=r"without spaces, / or :"):
        labels_of(wavs, "field:1:_:x", what="word")
    with pytest.raises(RecordingsError, match=r"^prefix:: word rule prefix:SEP"):
        labels_of(wavs, "prefix:", what="word")
    write(tmp_path / "g" / "Sprecher Ä" / "x.wav")
    with pytest.raises(RecordingsError, match=r"rename the folder \(e.g. 'Sprecher_Ä'\)"):
        labels_of(find_wavs(tmp_path / "g"), "parent", what="speaker", one_token=True)


def test_map_lines_that_name_no_file_are_named(tmp_path):
    """A map line by absolute path or ./path under the folder names its file; one naming no
    file (a typo, another folder) is named in a warning with its line, not dropped unsaid."""
    from audiorepro.data.recordings import InputWarning, labels_of

    root = tmp_path / "audio"
    for name in ("a", "b", "c"):
        write(root / "carlo" / f"{name}.wav")
    wavs = find_wavs(root)
    words = tmp_path / "words.tsv"
    words.write_text(
        f"{root / 'carlo' / 'a.wav'}\tx\n./carlo/b.wav\ty\ncarlo/typo.wav\tw\nc\tz\n"
        "/elsewhere/c.wav\tv\n"
    )
    with pytest.warns(InputWarning, match=r"2 lines name no file under .*line 3 'carlo/typo'"):
        found = labels_of(wavs, str(words), root, "word", every_file=False)
    assert found == {"a": "x", "b": "y", "c": "z"}
    words.write_text("carlo/a.wav\tx\ncarlo/b\ty\nc.wav\tz\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert labels_of(wavs, str(words), root, "word") == {"a": "x", "b": "y", "c": "z"}


def test_numbers_in_digits_are_said_as_english_words():
    from audiorepro.data.recordings import spoken_number

    said = {
        "0": "zero", "7": "seven", "13": "thirteen", "20": "twenty", "42": "forty two",
        "100": "one hundred", "105": "one hundred five", "310": "three hundred ten",
        "1000": "one thousand", "2024": "two thousand twenty four",
        "999999": "nine hundred ninety nine thousand nine hundred ninety nine",
        "07": "zero seven", "00": "zero zero",
    }  # fmt: skip
    for word, words in said.items():
        assert spoken_number(word) == tuple(words.split()), word
    for word in ("1000000", "x7", "7b", "-3", "4.5", "", "\u0663"):  # ٣: not an ASCII digit
        assert spoken_number(word) is None, word


def test_the_cmu_lexicon_reads_digit_labels_as_the_words_a_digits_corpus_says():
    from audiorepro.data.recordings import cmudict_lexicon

    lexicon = cmudict_lexicon(["7", "Seven", "42", "forty", "two", "zz9q"])
    assert lexicon["7"] == lexicon["seven"] == ("S", "EH", "V", "AH", "N")
    assert lexicon["42"] == lexicon["forty"] + lexicon["two"]
    assert "zz9q" not in lexicon  # the caller names the line


def test_a_table_of_two_files_that_are_the_same_bytes_is_refused_naming_both(tmp_path):
    """A recording copied under another name (some telephone prompt packages hold such
    copies) would be an item matched with itself: ABX 0 %, a pair of AP 1."""
    from audiorepro.data.recordings import read_segments

    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        sf.write(tmp_path / f"{name}.wav", rng.normal(0, 0.1, 800).astype(np.float32), 8000)
    (tmp_path / "copy.wav").write_bytes((tmp_path / "a.wav").read_bytes())
    head = "path\tword\tspeaker\tstart\tend\n"
    table = tmp_path / "t.tsv"
    table.write_text(head + "a.wav\tyes\tS1\t\t\nb.wav\tno\tS1\t\t\ncopy.wav\tyes\tS2\t\t\n")
    with pytest.raises(RecordingsError, match=r"t.tsv:4: copy.wav: the same recording as .*a.wav, "
                       r"line 2: the two files are byte for byte the same"):  # fmt: skip
        read_segments(table)
    # other times of the copy are other segments; without the audio checked, nothing is read
    table.write_text(head + "a.wav\tyes\tS1\t0\t0.05\ncopy.wav\tno\tS2\t0.05\t0.1\n")
    assert len(read_segments(table)) == 2
    table.write_text(head + "a.wav\tyes\tS1\t0\t0.05\ncopy.wav\tyes\tS2\t0\t0.05\n")
    with pytest.raises(RecordingsError, match=r"t.tsv:3: copy.wav \(0-0.05 s\): the same"):
        read_segments(table)
    assert len(read_segments(table, check_audio=False)) == 2


def test_a_file_name_with_a_tab_is_refused_with_what_to_do(tmp_path):
    """A table holds one path per tab-separated field: a name with a tab is refused, naming the
    file and saying to rename it, and no table is written."""
    from audiorepro.data.recordings import write_folder_segments

    words = tmp_path / "audio" / "yes"
    words.mkdir(parents=True)
    for name in ("S1_a.wav", "S1_b\tc.wav"):
        sf.write(words / name, np.zeros(800, dtype=np.float32), 8000)
    with pytest.raises(RecordingsError, match=r"tab or line break .*rename the file") as err:
        write_folder_segments(tmp_path / "audio", tmp_path / "seg.tsv")
    assert "S1_b\tc.wav" in str(err.value)
    assert not (tmp_path / "seg.tsv").exists()


def latin1_name(path, name):
    """Rename ``path`` to the bytes ``name`` (a name that is not UTF-8); the new path."""
    import os

    new = os.path.join(os.fsencode(path.parent), name)
    os.rename(os.fsencode(path), new)
    return Path(os.fsdecode(new))


def test_a_file_name_that_is_not_utf8_is_refused_naming_its_bytes(tmp_path):
    """A Latin-1 name (unzip of a Windows zip) stopped segments, units encode and units train
    with a codec error naming no file: the scan refuses it, its bytes escaped, saying how to
    rename it; another file of such a name is left out and named in the same escape."""
    from audiorepro.data.recordings import scan_folder

    write(tmp_path / "audio" / "S1_garden_1.wav")
    write(tmp_path / "audio" / "S1_garden_0.wav")
    latin1 = latin1_name(tmp_path / "audio" / "S1_garden_0.wav", b"S1_g\xe4rden_0.wav")
    with pytest.raises(RecordingsError, match=r"S1_g\\xe4rden_0\.wav: the file name is not "
                       r"UTF-8 \(byte 0xe4\).*rename it, e.g\. convmv -f latin1 -t utf8"):  # fmt: skip
        find_wavs(tmp_path / "audio")
    Path(latin1).rename(tmp_path / "audio" / "S1_garden_0.wav")
    (tmp_path / "audio" / "notes.txt").write_text("a transcript")
    latin1_name(tmp_path / "audio" / "notes.txt", b"n\xf6tes.txt")
    note = scan_folder(tmp_path / "audio").note()
    assert note == "2 files; left out 1: n\\xf6tes.txt (not audio: .txt)"
    note.encode("utf-8")  # prints on any terminal
    write(tmp_path / "audio" / "garden" / "S2_a.wav")
    latin1_name(tmp_path / "audio" / "garden", b"g\xe4rden")
    with pytest.raises(RecordingsError, match=r"S2_a\.wav: the folder name g\\xe4rden is not "):
        find_wavs(tmp_path / "audio")


def test_the_features_of_a_file_name_that_is_not_utf8_are_keyed_by_its_bytes(tmp_path):
    from audiorepro.data.speech_segments import features_key

    write(tmp_path / "S1_garden_0.wav")
    latin1_name(tmp_path / "S1_garden_0.wav", b"S1_g\xe4rden_0.wav")
    key = features_key(tmp_path, "mfcc")
    write(tmp_path / "S1_garden_0.wav")
    assert features_key(tmp_path, "mfcc")["content"] != key["content"]


def test_a_link_that_loops_and_a_damaged_mac_copy_are_left_out_and_named(tmp_path):
    """A looping link stopped the whole scan ('too many levels of symbolic links') where a
    broken link is left out; a ``._x.wav`` beside ``x.wav`` whose bytes are not AppleDouble (a
    damaged copy) was read as a recording. Both are left out and named; a wav named ``._y.wav``
    with no ``y.wav`` beside it is still read."""
    from audiorepro.data.recordings import scan_folder

    write(tmp_path / "S1_a.wav")
    write(tmp_path / "._S2_b.wav")
    (tmp_path / "loopA.wav").symlink_to("loopB.wav")
    (tmp_path / "loopB.wav").symlink_to("loopA.wav")
    (tmp_path / "S9_x.wav").symlink_to("S9_x.wav")
    (tmp_path / "spk9").symlink_to("spk9", target_is_directory=True)
    (tmp_path / "._S1_a.wav").write_bytes(np.random.default_rng(0).bytes(4096))
    scan = scan_folder(tmp_path)
    assert list(scan.files) == ["._S2_b", "S1_a"]
    reasons = {p.name: why for p, why in scan.left_out}
    assert reasons == {
        "._S1_a.wav": "macOS metadata (a ._ file beside S1_a.wav), not audio",
        "S9_x.wav": "a link that loops",
        "loopA.wav": "a link that loops",
        "loopB.wav": "a link that loops",
        "spk9": "a link that loops",
    }


def _speech_like(seed, frames=800):
    """int16 samples of noise, as a recorder writes them."""
    return (np.random.default_rng(seed).normal(0, 0.1, frames) * 32767).astype(np.int16)


def _with_list_chunk(wav: Path, out: Path) -> None:
    """``wav`` re-saved as an editor does: the same samples, a LIST/INFO chunk after fmt."""
    data = wav.read_bytes()
    assert data[12:16] == b"fmt "
    fmt_end = 20 + int.from_bytes(data[16:20], "little")
    info = b"INFO" + b"ISFT" + (14).to_bytes(4, "little") + b"Audacity 3.4\0\0"
    chunk = b"LIST" + len(info).to_bytes(4, "little") + info
    body = data[8:fmt_end] + chunk + data[fmt_end:]
    out.write_bytes(b"RIFF" + len(body).to_bytes(4, "little") + body)


@pytest.mark.parametrize("copy", ["flac", "list_chunk", "float"])
def test_a_copy_of_the_same_samples_under_other_bytes_is_refused_naming_both(tmp_path, copy):
    """A FLAC export of a WAV, a WAV re-saved with a LIST chunk, or a float WAV of the same
    int16 samples are other bytes but the same recording: as two rows an item is matched with
    itself (sweep 2, F10: MFCC + DTW AP 0.727 -> 0.756, within-speaker ABX 18.8 -> 12.3 %)."""
    from audiorepro.data.recordings import read_segments

    sf.write(tmp_path / "a.wav", _speech_like(0), 8000, subtype="PCM_16")
    sf.write(tmp_path / "b.wav", _speech_like(1), 8000, subtype="PCM_16")
    if copy == "flac":
        name = "a_2.flac"
        sf.write(tmp_path / name, _speech_like(0), 8000, subtype="PCM_16")
    elif copy == "list_chunk":
        name = "a_2.wav"
        _with_list_chunk(tmp_path / "a.wav", tmp_path / name)
        assert sf.read(tmp_path / name, dtype="int16")[0].tolist() == _speech_like(0).tolist()
    else:
        name = "a_2.wav"
        as_float = _speech_like(0).astype(np.float32) / 32768  # as a float export scales them
        sf.write(tmp_path / name, as_float, 8000, subtype="FLOAT")
    assert (tmp_path / name).read_bytes() != (tmp_path / "a.wav").read_bytes()
    head = "path\tword\tspeaker\tstart\tend\n"
    table = tmp_path / "t.tsv"
    table.write_text(head + f"a.wav\tyes\tS1\t\t\nb.wav\tno\tS1\t\t\n{name}\tyes\tS2\t\t\n")
    with pytest.raises(RecordingsError, match=rf"t.tsv:4: {name}: the same recording as .*a.wav, "
                       r"line 2: the two files hold the same samples \(one a FLAC or re-saved "
                       r"copy of the other\), so as two rows the item would be matched with a "
                       r"copy of itself"):  # fmt: skip
        read_segments(table)
    # the same times of both: refused; other times: other segments
    table.write_text(head + f"a.wav\tyes\tS1\t0\t0.05\n{name}\tyes\tS2\t0\t0.05\n")
    with pytest.raises(RecordingsError, match=rf"t.tsv:3: {name} \(0-0.05 s\): the same rec"):
        read_segments(table)
    table.write_text(head + f"a.wav\tyes\tS1\t0\t0.05\n{name}\tno\tS2\t0.05\t0.1\n")
    assert len(read_segments(table)) == 2
    assert len(read_segments(table, check_audio=False)) == 2


def test_a_file_with_one_sample_changed_is_not_a_copy(tmp_path):
    """Two takes of one length differ in their samples: one sample apart is another file."""
    from audiorepro.data.recordings import read_segments

    samples = _speech_like(0)
    sf.write(tmp_path / "a.wav", samples, 8000, subtype="PCM_16")
    samples[400] += 1
    sf.write(tmp_path / "a_2.flac", samples, 8000, subtype="PCM_16")
    sf.write(tmp_path / "a_3.wav", _speech_like(0), 16000, subtype="PCM_16")  # another rate
    table = tmp_path / "t.tsv"
    table.write_text(
        "path\tword\tspeaker\tstart\tend\n"
        "a.wav\tyes\tS1\t\t\na_2.flac\tyes\tS2\t\t\na_3.wav\tyes\tS3\t\t\n"
    )
    assert [r.line for r in read_segments(table)] == [2, 3, 4]


def test_a_table_saved_by_a_spreadsheet_is_refused_saying_how_to_save_it(tmp_path):
    """Quoted fields, commas or semicolons for tabs, empty columns after the last: the header
    error says which, and how to save the table; another wrong header says only what it
    expected."""
    from audiorepro.data.recordings import read_segments

    table = tmp_path / "excel.tsv"
    cases = {
        '"path"\t"word"\t"speaker"\t"start"\t"end"': "(quoted fields)",
        "path,word,speaker,start,end": "(commas between fields)",
        '"path";"word";"speaker";"start";"end"': "(semicolons, quoted fields)",
        "path\tword\tspeaker\tstart\tend\t\t": "(empty columns after the last)",
    }
    for header, said in cases.items():
        table.write_text(header + "\r\n")
        with pytest.raises(RecordingsError) as caught:
            read_segments(table)
        message = str(caught.value)
        assert message.startswith(f"{table}:1: expected the tab-separated header")
        assert f"a spreadsheet's way of saving a table {said}; save it as plain" in message
    table.write_text("path\tword\tspeaker\n")
    with pytest.raises(RecordingsError) as caught:
        read_segments(table)
    assert "spreadsheet" not in str(caught.value)


def test_an_end_written_to_the_millisecond_at_the_end_of_its_file_is_the_end_of_the_file(
    tmp_path,
):
    """Annotation tools write times to the millisecond: the last word of a file of 3.371625 s
    ends at 3.372, half a millisecond past its last sample. It is read; an end 1 ms past is
    refused, with the duration's every digit and by how much."""
    from audiorepro.data.recordings import read_segments

    rng = np.random.default_rng(0)
    sf.write(tmp_path / "al.wav", 0.1 * rng.standard_normal(26973).astype(np.float32), 8000)
    table = tmp_path / "seg.tsv"
    head = "path\tword\tspeaker\tstart\tend\n"
    table.write_text(head + "al.wav\tfour\tal\t2.900\t3.372\n")
    (row,) = read_segments(table)
    assert row.end == 3.372
    table.write_text(head + "al.wav\tfour\tal\t2.900\t3.373\n")
    with pytest.raises(
        RecordingsError,
        match=r"seg.tsv:2: end: 3.373 s is past the end of .*al.wav \(3.371625 s: 26973 samples "
        r"at 8000 Hz\), by 1.375 ms",
    ):
        read_segments(table)


def test_speakers_that_differ_only_in_case_are_warned_of(tmp_path):
    """``cy_0.wav`` and ``CY_5.wav`` (renamed by hand), or a speaker column typed ``Cy``: each
    name is a speaker of its own, so "across speakers" would set a voice against itself."""
    from audiorepro.data.recordings import InputWarning, read_segments

    rng = np.random.default_rng(0)
    for name in ("cy_0", "CY_5", "al_0", "al_5"):
        sf.write(tmp_path / f"{name}.wav", 0.1 * rng.standard_normal(800).astype(np.float32), 8000)
    with pytest.warns(InputWarning, match=r"speakers 'CY' and 'cy' differ only in letter case"):
        assert sorted(set(speakers_of(find_wavs(tmp_path), "prefix", tmp_path).values())) == [
            "CY", "al", "cy",
        ]  # fmt: skip
    table = tmp_path / "seg.tsv"
    table.write_text(
        "path\tword\tspeaker\tstart\tend\n"
        "cy_0.wav\tzero\tcy\t\t\nCY_5.wav\tfive\tCy \t\t\nal_0.wav\tzero\tal\t\t\n"
    )
    with pytest.warns(InputWarning, match=r"seg.tsv: speakers 'Cy' and 'cy' differ only") as w:
        read_segments(table)
    assert "name them alike (or give --speaker-of a MAP.tsv)" in str(w[0].message)
    with warnings.catch_warnings():  # distinct speakers: nothing said
        warnings.simplefilter("error", InputWarning)
        speakers_of({"a": tmp_path / "al_0.wav", "b": tmp_path / "cy_0.wav"}, "prefix")
