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
