"""The ``audiorepro`` command on files as other programs and disks leave them: a telephony
codec, a microphone's offset and no signal, a file name that is not UTF-8, a link that loops,
a macOS ``._`` copy. Each is read, or left out and named, or refused with one paragraph naming
the file (exit status 1).

Found by the second sweep of odd inputs (F3, F7, F12, F13)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile as sf
from test_cli_odd_inputs import RATE, SMOKE, folder, vowel
from test_cli_safety import one_paragraph, run_cli

from audiorepro.cli import main


def whole_file_table(audio, table):
    """A segments table of every file under ``audio``: ``S<n>_<word>.wav`` says ``word``."""
    rows = [f"{p.name}\t{p.stem[3:]}\t{p.stem[:2]}\t\t\n" for p in sorted(audio.iterdir())]
    table.write_text("path\tword\tspeaker\tstart\tend\n" + "".join(rows))
    return table


# ------------------------------------------------------------------------ a telephony codec


def test_a_gsm_wav_among_pcm_files_is_read_by_the_commands(tmp_path, capsys):
    """A GSM 6.10 WAV (Asterisk voicemail) stopped every reader with 'frames must be specified
    for non-seekable files', naming no file; it is read like the PCM files beside it."""
    audio = folder(tmp_path / "audio")
    sf.write(audio / "S1_a.wav", vowel("a", 110), RATE, subtype="GSM610", format="WAV")
    table = whole_file_table(audio, audio / "seg.tsv")
    code, out, err = run_cli(capsys, "awe", "dtw", "--segments", table)
    assert code == 0, err
    assert "non-seekable" not in out + err


# ----------------------------------------------------------------------- a microphone's offset


def test_a_file_of_a_constant_offset_is_refused_as_silent_naming_it(tmp_path, capsys):
    """A file of pure DC (a disconnected microphone's offset, -26 dBFS) passed the silent-file
    check, looking only at the peak, and was scored as a word (exit 0)."""
    audio = folder(tmp_path / "audio")
    sf.write(audio / "S3_u.wav", np.full(RATE, 0.05), RATE, subtype="PCM_16")
    table = whole_file_table(audio, audio / "seg.tsv")
    code, out, err = run_cli(capsys, "awe", "dtw", "--segments", table)
    assert code == 1 and one_paragraph(err), err
    assert "S3_u.wav: silent: a constant offset (DC 0.05) and no signal" in err


# ------------------------------------------------------------------ a name that is not UTF-8


@pytest.fixture(scope="module")
def units_run(tmp_path_factory):
    """A units run trained once for the module (4 steps of the smoke preset)."""
    root = tmp_path_factory.mktemp("odd_files")
    audio = folder(root / "audio")
    code = main(["units", "train", "--audio", str(audio), *SMOKE, "--out", str(root / "u")])
    assert code == 0
    return root / "u"


def test_a_file_name_that_is_not_utf8_is_refused_by_every_command_naming_it(
    tmp_path, capsys, units_run
):
    """A Latin-1 name (``S1_g\\xe4rden_0.wav`` from unzip of a Windows zip) stopped
    ``segments``, ``units encode`` and ``units train`` with "'utf-8' codec can't encode
    character '\\udce4'", naming no file: each refuses it in one paragraph naming the file with
    its byte escaped and saying how to rename it; nothing is written."""
    audio = folder(tmp_path / "audio")
    os.rename(os.fsencode(audio / "S1_a.wav"), os.fsencode(audio) + b"/S1_g\xe4rden_0.wav")
    for argv in (
        ("segments", "--audio", audio, "--word-of", "field:2", "--out", tmp_path / "seg.tsv"),
        ("units", "encode", units_run, "--audio", audio, "--out", tmp_path / "sub"),
        ("units", "train", "--audio", audio, *SMOKE, "--out", tmp_path / "run"),
    ):
        code, out, err = run_cli(capsys, *argv)
        assert code == 1 and one_paragraph(err), err
        assert err.startswith(
            f"audiorepro: error: {audio}/S1_g\\xe4rden_0.wav: the file name is not UTF-8 "
            "(byte 0xe4)"
        ), err
        assert "convmv -f latin1 -t utf8" in err and "codec" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audio"]


# ------------------------------------------------------------- links that loop, macOS copies


def test_segments_leaves_out_a_link_that_loops_and_a_damaged_mac_copy_naming_them(
    tmp_path, capsys
):
    """A looping link stopped ``segments`` and ``units encode`` ('too many levels of symbolic
    links'); a damaged ``._S1_a.wav`` (not AppleDouble bytes) beside ``S1_a.wav`` got a row of
    its own (word ``S1``, speaker ``.``) that the next command could not decode. Both are left
    out of the table and named, as a broken link and a real AppleDouble file are."""
    audio = folder(tmp_path / "audio")
    (audio / "loopA.wav").symlink_to("loopB.wav")
    (audio / "loopB.wav").symlink_to("loopA.wav")
    (audio / "._S1_a.wav").write_bytes(np.random.default_rng(0).bytes(4096))
    (audio / "._S2_a.wav").write_bytes(b"\x00\x05\x16\x07" + bytes(60))  # a real one
    table = tmp_path / "seg.tsv"
    code, out, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", "field:2", "--out", table
    )
    assert code == 0, err
    rows = table.read_text().splitlines()[1:]
    assert len(rows) == 9 and not any("._" in row or "loop" in row for row in rows)
    assert (
        "left out 4: ._S1_a.wav (macOS metadata (a ._ file beside S1_a.wav), not audio), " in out
    )
    assert "._S2_a.wav (macOS metadata (an AppleDouble ._ file), not audio)" in out
    assert "loopA.wav (a link that loops), loopB.wav (a link that loops)" in out
