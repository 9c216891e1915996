"""One recording present twice under other bytes (sweep 2, F10): a segments table refuses it
through every command, and finds it decoding only the files that could be copies."""

from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile as sf

from audiorepro.cli import main
from audiorepro.data import audio_identity
from audiorepro.data.recordings import RecordingsError, read_segments

HEADER = "path\tword\tspeaker\tstart\tend\n"


def take(seed: int, frames: int = 2400) -> np.ndarray:
    """int16 samples of a noisy vowel-like take."""
    rng = np.random.default_rng(seed)
    t = np.arange(frames) / 8000
    tone = 0.2 * np.sin(2 * np.pi * (150 + 40 * seed) * t) * np.hanning(frames)
    return ((tone + rng.normal(0, 0.02, frames)) * 32767).astype(np.int16)


def test_awe_dtw_refuses_a_table_with_a_flac_copy_naming_both_files(tmp_path, capsys):
    """The sweep's case: every ``*_0.wav`` has a ``*_2.flac`` export; ``awe dtw`` scored it,
    AP 0.727 -> 0.756, exit 0. Now exit 1 and one paragraph naming both files and lines."""
    rows = []
    for speaker, seed0 in (("S1", 0), ("S2", 10)):
        for word, seed in (("yes", 1), ("no", 2)):
            for take_no in (0, 1):
                name = f"{speaker}_{word}_{take_no}.wav"
                sf.write(tmp_path / name, take(seed0 + seed + 3 * take_no), 8000)
                rows.append(f"{name}\t{word}\t{speaker}\t\t\n")
    sf.write(tmp_path / "S2_no_2.flac", take(10 + 2), 8000, subtype="PCM_16")  # of S2_no_0
    table = tmp_path / "t.tsv"
    table.write_text(HEADER + "".join(rows))
    assert main(["awe", "dtw", "--segments", str(table)]) == 0  # without the copy: scored
    capsys.readouterr()
    table.write_text(HEADER + "".join(rows) + "S2_no_2.flac\tno\tS2\t\t\n")
    assert main(["awe", "dtw", "--segments", str(table)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert (
        "t.tsv:10: S2_no_2.flac: the same recording as "
        f"{(tmp_path / 'S2_no_0.wav').resolve()}, line 8: the two files hold the same samples "
        "(one a FLAC or re-saved copy of the other)"
    ) in " ".join(err.split())


def test_only_files_of_one_length_are_decoded_and_each_once(tmp_path, monkeypatch):
    """Files whose headers differ (frames, rate or channels) cannot be copies and are not
    decoded; a table read again in the same process decodes nothing again, and a file
    rewritten in place is decoded again."""
    decoded = []
    real = audio_identity._hash_samples
    monkeypatch.setattr(
        audio_identity, "_hash_samples", lambda p: decoded.append(p.name) or real(p)
    )
    lines = []
    for i in range(6):
        sf.write(tmp_path / f"f{i}.wav", take(i, 2400 + 80 * i), 8000)  # all lengths differ
        lines.append(f"f{i}.wav\tw{i % 2}\tS{i % 2}\t\t\n")
    sf.write(tmp_path / "g.wav", take(7, 2400), 8000)  # f0's length, other samples
    lines.append("g.wav\tw0\tS2\t\t\n")
    table = tmp_path / "t.tsv"
    table.write_text(HEADER + "".join(lines))
    assert len(read_segments(table)) == 7
    assert sorted(decoded) == ["f0.wav", "g.wav"]
    assert len(read_segments(table)) == 7 and len(decoded) == 2  # remembered
    sf.write(tmp_path / "g.wav", take(0, 2400), 8000, format="WAV", subtype="PCM_24")
    os.utime(tmp_path / "g.wav", ns=(1, 1))  # a new modification time, as a rewrite has
    with pytest.raises(RecordingsError, match=r"t.tsv:8: g.wav: the same recording as .*f0.wav, "
                       r"line 2: the two files hold the same samples"):  # fmt: skip
        read_segments(table)
    assert sorted(decoded) == ["f0.wav", "g.wav", "g.wav"]


def test_byte_copies_of_a_file_that_is_not_audio_are_still_refused(tmp_path):
    """A whole-file row of a file that does not decode is not refused by the table reader (the
    command that reads it names it); two names of its bytes are still one recording."""
    sf.write(tmp_path / "a.wav", take(0), 8000)
    (tmp_path / "junk.wav").write_bytes(b"not audio at all" * 64)
    (tmp_path / "junk2.wav").write_bytes(b"not audio at all" * 64)
    (tmp_path / "other.wav").write_bytes(b"not audio either" * 64)
    table = tmp_path / "t.tsv"
    table.write_text(HEADER + "a.wav\tyes\tS1\t\t\njunk.wav\tno\tS1\t\t\nother.wav\tno\tS2\t\t\n")
    assert len(read_segments(table)) == 3
    table.write_text(HEADER + "a.wav\tyes\tS1\t\t\njunk.wav\tno\tS1\t\t\njunk2.wav\tno\tS2\t\t\n")
    with pytest.raises(RecordingsError, match=r"t.tsv:4: junk2.wav: the same recording as "
                       r".*junk.wav, line 3: the two files are byte for byte the same"):  # fmt: skip
        read_segments(table)


def test_a_stereo_export_of_two_equal_channels_reads_as_the_mono_file_and_is_refused(tmp_path):
    """Every reader mixes a file to mono: a stereo export of a mono take (the channel twice)
    reads as the take itself; a stereo file of two other channels is another recording."""
    mono = take(0)
    sf.write(tmp_path / "a.wav", mono, 8000)
    sf.write(tmp_path / "st.wav", np.stack([mono, mono], axis=1), 8000)
    sf.write(tmp_path / "two.wav", np.stack([mono, take(1)], axis=1), 8000)
    table = tmp_path / "t.tsv"
    table.write_text(HEADER + "a.wav\tyes\tS1\t\t\ntwo.wav\tyes\tS2\t\t\n")
    assert len(read_segments(table)) == 2
    table.write_text(HEADER + "a.wav\tyes\tS1\t\t\nst.wav\tyes\tS2\t\t\n")
    with pytest.raises(RecordingsError, match=r"t.tsv:3: st.wav: the same recording as .*a.wav, "
                       r"line 2: the two files hold the same samples once mixed to mono"):  # fmt: skip
        read_segments(table)
