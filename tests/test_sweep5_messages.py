"""Messages that pointed the wrong way (sweep 5: 5, 7, 8, 9.1, 9.2, 9.4, 9.5, 9.6, 10.3): a float
file tens of times over full scale read without a word, numpy's advice to unpickle a table, a
1-sample file called a constant offset, a spreadsheet's trailing tab in a map, a UTF-16 lexicon
read as Latin-1, a 300-digit number of milliseconds, ``0_5`` read as 5 s, another command's run
named by its kind alone, and a flat folder whose one speaker is the folder's name."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from audiorepro.cli import main
from audiorepro.data.recordings import (
    RecordingsError,
    content_problem,
    find_wavs,
    read_lexicon,
    read_segments,
    speakers_of,
)
from audiorepro.features.audio import AudioError, AudioWarning, load_audio

pytestmark = pytest.mark.filterwarnings("ignore::audiorepro.metrics.checks.ScoreWarning")

HEADER = "path\tword\tspeaker\tstart\tend\n"
RATE = 8000


def speech_like(seconds=0.4, rate=RATE, seed=0):
    """Noise under a slow envelope: not silent, not one repeated frame."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * rng.standard_normal(t.size) * (0.6 + 0.4 * np.sin(7 * t))).astype(np.float32)


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def flat_folder(root, words=("yes", "no"), speakers=("al", "bo"), seed=0):
    """``<speaker>_<word>.wav`` files side by side, 8 kHz 16-bit, each its own recording."""
    root.mkdir(parents=True)
    for i, (s, w) in enumerate((s, w) for s in speakers for w in words):
        sf.write(root / f"{s}_{w}.wav", speech_like(seed=seed + i), RATE, subtype="PCM_16")
    return root


# ------------------------------------------------------- 5: float samples tens of times too loud


def test_a_float_file_far_over_full_scale_is_read_and_warned_of_once(tmp_path, capsys):
    """Float WAVs 10x-90x over full scale (+20 to +39 dB, a gain slip) were read without a
    word, and moved the units' ABX by up to 4 points; only 100x (integers as floats) was
    refused. Beyond 2x (+6 dB) the file is named with its peak, once however often it is read
    (whole and as an excerpt); a float file a few dB over is still read without a word."""
    audio = flat_folder(tmp_path / "audio")
    sf.write(audio / "cy_yes.wav", 10 * speech_like(seed=7), RATE, subtype="FLOAT")
    sf.write(audio / "cy_no.wav", 1.5 * speech_like(seed=8), RATE, subtype="FLOAT")
    peak = float(np.max(np.abs(sf.read(audio / "cy_yes.wav", dtype="float32")[0])))
    with pytest.warns(AudioWarning, match=r"cy_yes\.wav: samples reach .* read as they are"):
        load_audio(audio / "cy_yes.wav", None)

    rows = [f"audio/{p.name}\t{p.stem[3:]}\t{p.stem[:2]}\t\t\n" for p in sorted(audio.iterdir())]
    rows.append("audio/cy_yes.wav\tmaybe\tcy\t0.25\t0.35\n")  # the loud file read again
    table = tmp_path / "seg.tsv"
    table.write_text(HEADER + "".join(rows))
    code, _, err = run_cli(capsys, "awe", "dtw", "--segments", table)
    assert code == 0, err
    said = [line for line in err.splitlines() if "full scale" in line]
    assert len(said) == 1, err
    assert said[0].startswith(
        f"audiorepro: warning: {audio / 'cy_yes.wav'}: samples reach {peak:.3g}, "
        f"{20 * np.log10(peak):.0f} dB above full scale (more than 6 dB): they are read as they "
        "are"
    )
    assert "cy_no.wav" not in err


def test_the_warning_is_said_again_when_the_features_come_from_the_store(tmp_path):
    """``units encode`` of the same folder a second time read the cached features and said
    nothing: the warning is kept with them."""
    from audiorepro.data import speech_segments
    from audiorepro.storage import RunStore

    audio = flat_folder(tmp_path / "audio")
    sf.write(audio / "cy_yes.wav", 10 * speech_like(seed=7), RATE, subtype="FLOAT")
    wavs = find_wavs(audio)
    store = RunStore("03_zerospeech", tmp_path / "runs")
    for _ in range(2):  # computed, then read from the store
        speech_segments._loaded.clear()
        with pytest.warns(AudioWarning, match=r"cy_yes\.wav: samples reach") as said:
            feats = speech_segments.load_wav_features(wavs, "mfcc", store)
        assert len([w for w in said if issubclass(w.category, AudioWarning)]) == 1
        assert sorted(feats) == sorted(wavs)


# ------------------------------------------------------------ 7: awe ap of a file not an .npz


def test_awe_ap_of_a_table_or_a_model_file_says_what_the_file_is(tmp_path, capsys):
    """numpy reads any file that is not a zip as a pickle and said 'you can load it unsafely
    using allow_pickle': the first bytes tell a table or a safetensors file from an .npz."""
    from safetensors.numpy import save_file

    table = tmp_path / "seg.tsv"
    table.write_text(HEADER + "a.wav\tyes\tal\t\t\n")
    save_file({"w": np.zeros(3, np.float32)}, str(tmp_path / "model.safetensors"))
    expected = "; expected the .npz of `awe embed` (embeddings, labels)\n"
    code, out, err = run_cli(capsys, "awe", "ap", table)
    assert code == 1 and not out
    assert err == (
        f"audiorepro: error: {table}: not an .npz (a text file: a segments table){expected}"
    )
    code, out, err = run_cli(capsys, "awe", "ap", tmp_path / "model.safetensors")
    assert code == 1 and not out
    assert err == (
        f"audiorepro: error: {tmp_path / 'model.safetensors'}: not an .npz (a safetensors model "
        f"file, as a run folder of `awe train` or `units train` holds){expected}"
    )
    assert "pickle" not in err


# --------------------------------------------------------------- 8: a file of one sample


def test_a_one_sample_file_is_too_short_not_a_constant_offset(tmp_path):
    """A 1-sample WAV (a truncated write) was 'silent: a constant offset (DC 0.3) and no
    signal'; a 3-sample one 'too short: 1 frames of 10 ms'. The length is judged first."""
    sf.write(tmp_path / "one.wav", np.array([0.3]), 16000)
    sf.write(tmp_path / "three.wav", np.array([0.3, -0.2, 0.1]), 16000)
    assert content_problem(tmp_path / "one.wav") == (
        "too short: 1 sample (0.06 ms), less than one 10 ms frame"
    )
    assert content_problem(tmp_path / "three.wav") == (
        "too short: 3 samples (0.19 ms), less than one 10 ms frame"
    )
    with pytest.raises(AudioError) as err:
        load_audio(tmp_path / "one.wav", 16000)
    assert str(err.value) == (
        f"{tmp_path / 'one.wav'}: too short: 1 sample (0.06 ms), less than one 10 ms frame (a "
        "write cut short?), so it holds no word; leave it out (units train leaves such files "
        "out and names them)"
    )
    sf.write(tmp_path / "zeros.wav", np.zeros(800), 16000)  # 50 ms of silence: silent
    with pytest.raises(AudioError, match=r"zeros\.wav: silent: every sample is 0"):
        load_audio(tmp_path / "zeros.wav", 16000)


# ------------------------------------------------------------ 9.1: a map's trailing tab


def test_a_map_line_with_a_spreadsheets_trailing_tab_is_read(tmp_path):
    """``file<TAB>speaker<TAB>`` (a spreadsheet's empty column) was refused with 'expected
    file<TAB>speaker, got ...' showing that very format; a third column that holds something
    is refused, saying how many fields the line has."""
    audio = flat_folder(tmp_path / "audio")
    wavs = find_wavs(audio)
    table = tmp_path / "map.tsv"
    table.write_text("".join(f"{name}\t{name[:2].upper()}\t\r\n" for name in wavs))
    assert speakers_of(wavs, str(table), audio) == {n: n[:2].upper() for n in wavs}
    table.write_text("".join(f"{name}\tX\tnote\n" for name in wavs))
    with pytest.raises(RecordingsError) as err:
        speakers_of(wavs, str(table), audio)
    assert str(err.value) == (
        f"{table}:1: expected 'file<TAB>speaker', got 3 tab-separated fields: 'al_no\\tX\\tnote'"
    )


# ------------------------------------------------------------------ 9.2: a UTF-16 lexicon


@pytest.mark.parametrize(
    ("encoding", "why"),
    [
        ("utf-16", "it is UTF-16 text (it starts with a UTF-16 byte-order mark)"),
        ("utf-16-le", "it holds NUL bytes, as UTF-16 text does between its letters"),
    ],
)
def test_a_utf16_lexicon_names_its_encoding(tmp_path, encoding, why):
    """A UTF-16 lexicon was read as Latin-1, a NUL between the letters, and failed at line 7
    on '\\x00' without naming the encoding."""
    path = tmp_path / "lex.txt"
    path.write_text("YES Y EH S\nNO N OW\n", encoding=encoding)
    with pytest.raises(RecordingsError) as err:
        read_lexicon(path)
    assert str(err.value).startswith(f"{path}: cannot read the file as UTF-8: {why}")
    assert "save it as UTF-8" in str(err.value)


# ------------------------------------------------------- 9.4, 9.5: times a table should not hold


def one_file_table(tmp_path, start, end):
    sf.write(tmp_path / "a.wav", speech_like(), RATE)  # 0.4 s
    table = tmp_path / "seg.tsv"
    table.write_text(HEADER + f"a.wav\tyes\tal\t{start}\t{end}\n")
    return table


def test_an_end_far_past_the_file_is_not_written_as_300_digits(tmp_path):
    """An end of 1e300 s printed a 300-digit number of milliseconds; an end in milliseconds
    (300 for 0.3 s) is said to look like one."""
    table = one_file_table(tmp_path, 0, "1e300")
    with pytest.raises(RecordingsError) as err:
        read_segments(table)
    assert str(err.value).endswith(
        "(0.400000 s: 3200 samples at 8000 Hz), by 1e+300 s (far past: times in another unit?)"
    )
    table = one_file_table(tmp_path, 100, 300)
    with pytest.raises(RecordingsError) as err:
        read_segments(table)
    assert str(err.value).endswith("by 299.6 s (times in milliseconds? a table holds seconds)")


@pytest.mark.parametrize(
    ("start", "end", "column", "bad"),
    [
        ("0", "0_3", "end", "0_3"),
        ("0_1", "0.3", "start", "0_1"),
        ("0", "\u0660.\u0663", "end", ""),
    ],
)
def test_a_time_float_reads_but_a_table_should_not_hold_is_refused(
    tmp_path, start, end, column, bad
):
    """Python's float() reads '0_3' as 3 (digit groups) and Arabic-Indic digits as digits: a
    start 0_1 / end 0_3 of a long file was read as 1-3 s without a word."""
    table = one_file_table(tmp_path, start, end)
    with pytest.raises(RecordingsError) as err:
        read_segments(table, check_audio=False)
    text = str(err.value)
    assert text.startswith(
        f"{table}:2: {column}: expected seconds written with the digits 0-9 and a point "
        f"(0.5, 1.25, 2e-1), got "
    )
    if bad:
        assert text.endswith(
            f"got {bad!r} (an underscore is not a decimal point: Python reads {bad!r} as "
            f"{float(bad):g})"
        )
    for refused in ("inf", "nan"):  # refused already, as before
        with pytest.raises(RecordingsError, match=r"end: expected seconds >= 0"):
            read_segments(one_file_table(tmp_path, 0, refused), check_audio=False)


# ------------------------------------------------------------ 9.6: another command's run


def test_a_run_of_another_command_is_named_by_the_command(tmp_path, capsys):
    """``units encode`` of an ``awe train`` run said only "run.json: kind 'awe', expected
    'units'"."""
    audio = flat_folder(tmp_path / "audio")
    for kind in ("awe", "units"):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / "run.json").write_text(json.dumps({"kind": kind}))
    code, _, err = run_cli(
        capsys, "units", "encode", tmp_path / "awe", "--audio", audio, "--out", tmp_path / "o"
    )
    assert code == 1
    assert err == (
        f"audiorepro: error: {tmp_path / 'awe'}: a run of `awe train` (its run.json says kind "
        "'awe'); this command needs a units run, made by `units train`\n"
    )
    table = tmp_path / "seg.tsv"
    table.write_text(HEADER + f"{audio / 'al_yes.wav'}\tyes\tal\t\t\n")
    code, _, err = run_cli(
        capsys, "awe", "embed", tmp_path / "units", "--segments", table, "--out", tmp_path / "e"
    )
    assert code == 1
    assert err == (
        f"audiorepro: error: {tmp_path / 'units'}: a run of `units train` (its run.json says "
        "kind 'units'); this command needs an AWE run, made by `awe train`\n"
    )


# ----------------------------------------------- 10.3: one speaker from --speaker-of parent


def test_segments_warns_when_parent_gives_a_flat_folder_one_speaker(tmp_path, capsys):
    """``--speaker-of parent`` on a flat folder gave every file the folder's own name as
    speaker without a word (the --word-of parent analogue warns); the across-speaker ABX
    failed later. Speakers' folders (al/, bo/) are not warned of."""
    audio = flat_folder(tmp_path / "audio")
    code, _, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", "field:2", "--speaker-of", "parent",
        "--out", tmp_path / "seg.tsv",
    )  # fmt: skip
    assert code == 0, err
    said = [line for line in err.splitlines() if "warning" in line]
    assert said == [
        "audiorepro: warning: all 4 files have one speaker, 'audio': with --speaker-of parent "
        f"the speaker is the name of each file's folder, and these lie directly in {audio}; if "
        "they are several speakers' recordings, put each speaker's files in a folder named by "
        "the speaker, or give --speaker-of prefix, field:N or a MAP.tsv: a table of one "
        "speaker has no across-speaker ABX triplet and no speaker to hold out"
    ]
    nested = tmp_path / "nested"
    for k, name in enumerate(("al", "bo")):
        flat_folder(nested / name, speakers=(name,), seed=10 * k)
    code, _, err = run_cli(
        capsys, "segments", "--audio", nested, "--word-of", "field:2", "--speaker-of", "parent",
        "--out", tmp_path / "seg2.tsv",
    )  # fmt: skip
    assert code == 0 and "warning" not in err, err


def test_an_item_time_with_an_underscore_is_refused(tmp_path):
    """An ABX item file's onset/offset go through float() too: '0_1 0_3' was 1-3 s."""
    from audiorepro.data.recipes.zerospeech import ZeroSpeechFormatError, read_item_file

    path = tmp_path / "w.item"
    path.write_text(
        "#file onset offset #phone prev-phone next-phone speaker\n"
        "al_yes 0.1 0.3 yes - - al\nal_no 0_1 0_3 no - - al\n"
    )
    with pytest.raises(ZeroSpeechFormatError) as err:
        read_item_file(path)
    assert str(err.value) == (
        f"{path}:3: onset: expected seconds written with the digits 0-9 and a point (0.5, "
        "1.25, 2e-1), got '0_1' (an underscore is not a decimal point: Python reads '0_1' as 1)"
    )


def test_segments_refuses_a_folder_holding_a_copy_of_one_recording(tmp_path, capsys):
    """``segments`` wrote, exit 0, a table that every command reading it then refused (a
    byte-identical copy under another speaker's name, sweep 5, F10.1); it now refuses the
    folder itself, naming both files, and writes nothing; a FLAC export of a file is a copy too."""
    import shutil

    audio = flat_folder(tmp_path / "dup")
    shutil.copy(audio / "al_yes.wav", audio / "bo_yes_again.wav")
    code, out, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", "field:2", "--out", tmp_path / "t.tsv"
    )
    assert code == 1, out
    assert "the same recording as" in err and "al_yes.wav" in err and "bo_yes_again" in err
    assert "the two files are byte for byte the same" in err, err
    assert not (tmp_path / "t.tsv").exists()
    (audio / "bo_yes_again.wav").unlink()
    samples, rate = sf.read(audio / "al_yes.wav", dtype="int16")
    sf.write(audio / "cy_yes.flac", samples, rate)
    code, _, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", "field:2", "--out", tmp_path / "t.tsv"
    )
    assert code == 1 and "(one a FLAC or re-saved copy of the other)" in err, err
    (audio / "cy_yes.flac").unlink()
    code, _, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", "field:2", "--out", tmp_path / "t.tsv"
    )
    assert code == 0, err
