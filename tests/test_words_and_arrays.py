"""Words as the user saved them: an ``.npz`` of object, bytes or integer labels, words in either
Unicode normal form, file names of one field (sweep 3: 10, 11, 12)."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from audiorepro.cli import main

HEADER = "path\tword\tspeaker\tstart\tend\n"


def speech_like(seconds=0.4, rate=16000, seed=0):
    """Noise under a slow envelope: not silent, not one repeated frame."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * rng.standard_normal(t.size) * (0.6 + 0.4 * np.sin(7 * t))).astype(np.float32)


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


EMB = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]], dtype=np.float32)


@pytest.mark.parametrize("name", ["labels", "speakers"])
def test_an_object_array_is_named_as_pickled_objects_not_as_a_corrupt_file(tmp_path, capsys, name):
    """labels (or speakers) from a pandas column (``df.word.values``): an object array, which
    numpy reads only by unpickling; it was called "not a readable .npz, truncated or corrupt"."""
    arrays = {
        "embeddings": EMB,
        "labels": np.array(["yes", "yes", "no", "no"]),
        "speakers": np.array(["al", "bo", "al", "bo"]),
    }
    arrays[name] = arrays[name].astype(object)
    np.savez(tmp_path / "e.npz", **arrays)
    code, out, err = run_cli(capsys, "awe", "ap", tmp_path / "e.npz")
    values = "words" if name == "labels" else "speakers"
    assert code == 1 and not out
    assert err == (
        f"audiorepro: error: {tmp_path / 'e.npz'}: array {name!r} holds pickled Python objects "
        "(an object array, as a pandas column's .values or a list of mixed types makes), which "
        "are not read, for safety (unpickling runs code); save it as strings: "
        f"np.savez(..., {name}=np.asarray({values}, dtype=str)); expected the .npz of "
        "`awe embed` (embeddings, labels)\n"
    )
    assert "corrupt" not in err


def test_load_npz_never_unpickles_and_still_calls_a_damaged_file_corrupt(tmp_path):
    from audiorepro.storage import ArrayFileError, load_npz

    np.savez(tmp_path / "o.npz", a=np.arange(3), b=np.array([1, "x"], dtype=object))
    with pytest.raises(ArrayFileError, match=r"array 'b' holds pickled Python objects"):
        load_npz(tmp_path / "o.npz")
    data = (tmp_path / "o.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ArrayFileError, match=r"truncated or corrupt"):
        load_npz(tmp_path / "cut.npz")


def digit_table(tmp_path):
    """A table of 4 rows of the words 7 and 3 (words that are digits) and its files."""
    audio = tmp_path / "audio"
    audio.mkdir()
    rows = []
    for i, (word, speaker) in enumerate([("7", "al"), ("7", "bo"), ("3", "al"), ("3", "bo")]):
        sf.write(audio / f"{word}_{speaker}.wav", speech_like(seed=i), 16000)
        rows.append(f"audio/{word}_{speaker}.wav\t{word}\t{speaker}\t\t\n")
    table = tmp_path / "seg.tsv"
    table.write_text(HEADER + "".join(rows))
    return table


@pytest.mark.filterwarnings("ignore")  # a 4-row AP is a weak estimate, and says so
@pytest.mark.parametrize("kind", ["U", "S", "int64", "uint8"])
def test_labels_saved_as_bytes_or_integers_are_the_words_of_the_table(tmp_path, kind):
    """Labels ``.astype('S')`` or ``.astype(int)``: the same words as the table's, compared as
    words are (str of each, bytes decoded as UTF-8); they gave "no baseline: ... its rows and
    labels do not match the lines of seg.tsv"."""
    from audiorepro.experiments.awe.embeddings_file import embedded_rows, embeddings_ap
    from audiorepro.storage import known_file_sha256

    table = digit_table(tmp_path)
    np.savez(
        tmp_path / "e.npz",
        embeddings=EMB,
        labels=np.array(["7", "7", "3", "3"]).astype(kind),
        segments=np.asarray(str(table.resolve())),
        segments_sha256=np.asarray(known_file_sha256(table)),
        rows=np.array([2, 3, 4, 5]),
    )
    rows, why = embedded_rows(tmp_path / "e.npz")
    assert why == ""
    assert [r.word for r in rows] == ["7", "7", "3", "3"]
    assert embeddings_ap(tmp_path / "e.npz") == 1.0


def test_labels_of_bytes_not_utf8_are_named(tmp_path):
    from audiorepro.experiments.awe.embeddings_file import embeddings_ap

    np.savez(tmp_path / "e.npz", embeddings=EMB, labels=np.array([b"a", b"a", b"\xe9", b"b"]))
    with pytest.raises(ValueError, match=r"e.npz: labels: row 3 is bytes that are not UTF-8"):
        embeddings_ap(tmp_path / "e.npz")


def nfd(text: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFD", text)


def test_the_word_rule_composes_accents_as_typed(tmp_path):
    """``café`` of a macOS file name (NFD: e and a combining accent) and ``café`` typed (NFC)
    were two words: a table mixing them dropped their pairs from every score silently."""
    from audiorepro.data.recordings import WORD_RULE, read_lexicon, read_segments, word_label

    assert nfd("café") != "café" and word_label(nfd(" Café ")) == "café"
    assert WORD_RULE == (
        "words are compared lower-cased, surrounding spaces stripped and in one Unicode form "
        "(NFC): Yes = yes, and café typed = café of a macOS file name"
    )
    for i in range(2):
        sf.write(tmp_path / f"{i}.wav", speech_like(seed=i), 16000)
    table = tmp_path / "seg.tsv"
    table.write_text(
        HEADER + f"0.wav\t{nfd('Café')}\t{nfd('josé')}\t\t\n1.wav\tcafé\tjosé\t\t\n",
        encoding="utf-8",
    )
    rows = read_segments(table)
    assert [r.word for r in rows] == ["café", "café"]
    assert [r.speaker for r in rows] == ["josé", "josé"]  # speakers compared in NFC too
    lexicon = tmp_path / "lex.txt"
    lexicon.write_text(f"{nfd('CAFÉ')} K AE F EY\n", encoding="utf-8")
    assert read_lexicon(lexicon) == {"café": ("K", "AE", "F", "EY")}


def test_a_table_typed_in_nfc_finds_files_of_nfd_names(tmp_path):
    """A table typed in an editor (NFC ``café/josé_1.wav``) of a folder copied from macOS (the
    folder and file NFD): "no such audio file" before, now the file on disk, in either form of
    each part; a path in neither form is still refused, naming it."""
    from audiorepro.data.recordings import RecordingsError, as_on_disk, read_segments

    folder = tmp_path / nfd("café")
    folder.mkdir()
    sf.write(folder / nfd("josé_1.wav"), speech_like(seed=1), 16000)
    sf.write(folder / "plain.wav", speech_like(seed=2), 16000)
    table = tmp_path / "seg.tsv"
    table.write_text(
        HEADER + "café/josé_1.wav\tun\tjosé\t\t\ncafé/plain.wav\tdeux\tjosé\t\t\n",
        encoding="utf-8",
    )
    rows = read_segments(table)
    assert [r.path for r in rows] == [folder / nfd("josé_1.wav"), folder / "plain.wav"]
    assert as_on_disk(tmp_path / "café" / "josé_1.wav") == folder / nfd("josé_1.wav")
    assert as_on_disk(tmp_path / "missing.wav") == tmp_path / "missing.wav"
    table.write_text(HEADER + "café/josé_2.wav\tun\tjosé\t\t\n", encoding="utf-8")
    with pytest.raises(RecordingsError, match=r"seg.tsv:2: path: no such audio file"):
        read_segments(table)


def test_a_word_map_typed_in_nfc_names_files_of_nfd_names(tmp_path, capsys):
    """A folder copied from macOS (NFD names) and a map typed in an editor (NFC): every line
    named no file ("12 lines name no file", then "no file under ... has a word in this
    map"); now the names are compared in NFC, and the words of the table are NFC."""
    audio = tmp_path / "uni"
    audio.mkdir()
    lines, speakers = [], []
    for i, word in enumerate(("café", "naïve", "señor")):
        for k, speaker in enumerate(("al", "zoë")):
            sf.write(audio / nfd(f"{speaker}_{word}.wav"), speech_like(seed=2 * i + k), 16000)
            lines.append(f"{speaker}_{word}.wav\t{word}\n")
            speakers.append(f"{speaker}_{word}\t{speaker}\n")
    (tmp_path / "words.tsv").write_text("".join(lines), encoding="utf-8")
    (tmp_path / "speakers.tsv").write_text("".join(speakers), encoding="utf-8")
    code, out, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", tmp_path / "words.tsv",
        "--speaker-of", tmp_path / "speakers.tsv", "--out", tmp_path / "seg.tsv",
    )  # fmt: skip
    assert code == 0, err
    assert "warning" not in err
    assert f"wrote 6 whole-file rows to {tmp_path / 'seg.tsv'}" in out
    rows = (tmp_path / "seg.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert sorted(r.split("\t")[1] for r in rows) == sorted(["café", "naïve", "señor"] * 2)
    assert sorted({r.split("\t")[2] for r in rows}) == ["al", "zoë"]
    # words from the NFD names themselves are the same words as typed
    code, out, err = run_cli(
        capsys, "segments", "--audio", audio, "--word-of", "field:2",
        "--out", tmp_path / "seg2.tsv",
    )  # fmt: skip
    assert code == 0, err
    from audiorepro.data.recordings import read_segments

    words = [r.word for r in read_segments(tmp_path / "seg2.tsv")]
    assert sorted(words) == sorted(["café", "naïve", "señor"] * 2)


def test_field_1_reads_the_word_of_a_speaker_word_layout(tmp_path, capsys):
    """``al/0.wav, al/1.wav, bo/0.wav, ...``: the word is the whole name, which no rule read
    (field:1 wanted "at least 2 fields separated by '_'"); field:1 now reads whole names where
    none holds the separator and some repeat; prefix still requires it and names field:1,
    field:2 still wants 2 fields."""
    from audiorepro.data.recordings import RecordingsError, find_wavs, labels_of

    audio = tmp_path / "nest"
    for k, speaker in enumerate(("al", "bo")):
        (audio / speaker).mkdir(parents=True)
        for j, word in enumerate(("0", "1")):
            sf.write(audio / speaker / f"{word}.wav", speech_like(seed=2 * k + j), 16000)
    code, out, err = run_cli(
        capsys, "segments", "--audio", audio, "--speaker-of", "parent", "--word-of", "field:1",
        "--out", tmp_path / "nest.tsv",
    )  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "nest.tsv").read_text().splitlines() == [
        HEADER.strip("\n"),
        *(f"nest/{s}/{w}.wav\t{w}\t{s}\t\t" for s in ("al", "bo") for w in ("0", "1")),
    ]
    code, out, err = run_cli(
        capsys, "segments", "--audio", audio, "--speaker-of", "parent", "--word-of", "prefix",
        "--out", tmp_path / "nest2.tsv",
    )  # fmt: skip
    assert code == 1 and err == (
        f"audiorepro: error: {audio / 'al' / '0.wav'}: --word-of prefix: expected a file name "
        "<word>_<rest>.wav; use prefix:SEP for another separator, --word-of field:1 for the "
        "whole name (0.wav gives '0'), --word-of parent or a MAP.tsv for other names\n"
    )
    wavs = find_wavs(audio)
    with pytest.raises(RecordingsError, match=r"field:2: expected a file name of at least 2 "):
        labels_of(wavs, "field:2", what="word")
    # one speaker's folder: read whole, every file would be its own word, as would every
    # name under a separator none holds (field:1:- of 0_carlo_0)
    with pytest.raises(RecordingsError) as refused:
        labels_of(find_wavs(audio / "al"), "field:1", what="word")
    assert str(refused.value) == (
        f"{audio / 'al' / '0.wav'}: --word-of field:1: expected a file name of at least 2 "
        "fields separated by '_', field 1 not empty (no name holds '_', and read whole each of "
        "the 2 names would be its own word: field:1 reads whole names when some repeat, as "
        "0.wav in each speaker's folder)"
    )
    (tmp_path / "odd").mkdir()
    sf.write(tmp_path / "odd" / "_x.wav", speech_like(), 16000)  # an empty first field
    with pytest.raises(RecordingsError, match=r"field:1: expected a file name of at least 2 "):
        labels_of(find_wavs(tmp_path / "odd"), "field:1", what="word")
