"""The ``audiorepro`` command on files as other programs and disks leave them: a telephony codec,
a file name that is not UTF-8, a link that loops, a macOS ``._`` copy. Each is read, or left
out and named, or refused with one paragraph naming the file (exit status 1).

Found by the second sweep of odd inputs (F3, F7, F13)."""

from __future__ import annotations

import soundfile as sf
from test_cli_odd_inputs import RATE, folder, vowel
from test_cli_safety import run_cli


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
