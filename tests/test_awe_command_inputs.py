"""Inputs the ``audiorepro awe`` commands refuse or read whole: an ``awe ap`` .npz whose rows
repeat, its errors with the file's name, a ``--dev`` table that shares rows with the training
table, rows longer than the positional encoding table, speeds far from 1, the epochs
``awe train`` reports, and rows too short to embed, which ``awe embed`` and ``awe dtw`` leave
out as ``awe train`` does. On the real Italian number words the book ships."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import soundfile as sf
import torch

from audiorepro.cli import main
from audiorepro.data.recordings import SEGMENT_COLUMNS, RecordingsError, read_segments
from audiorepro.experiments.awe import recordings as awe
from audiorepro.experiments.awe.real_speech import number_word_tables
from audiorepro.experiments.awe.train import (
    EPOCHS_FROM,
    epochs_trained,
    numbered_from_one,
    reported_epochs,
)
from audiorepro.experiments.awe.views import length_batches
from audiorepro.metrics.checks import ScoreError, check_no_repeats
from audiorepro.models.awe import AWEModelConfig, MultiViewAWE, padding_mask
from audiorepro.training.result import TrainResult

pytestmark = pytest.mark.filterwarnings("ignore::audiorepro.metrics.checks.ScoreWarning")
"""The hand-made .npz of 6 rows rests on few pairs: the warning is expected, not the test."""

TRAIN = {"train.max_steps": 6}
"""Six steps of the smoke preset on the 118 training words (4 steps an epoch, speeds 1): the
run ends two steps into its second epoch."""


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    return number_word_tables(tmp_path_factory.mktemp("tables"))


@pytest.fixture(scope="module")
def run(tables, tmp_path_factory):
    """A run cut short by ``max_steps`` in its second epoch."""
    out = tmp_path_factory.mktemp("runs") / "run"
    return awe.train_on_segments(
        tables["train"],
        out,
        dev=tables["dev"],
        lexicon="characters",
        preset="smoke",
        overrides=TRAIN,
        speeds=(1,),
        warps=(1,),
    )


def write_table(path, rows):
    lines = ["\t".join(SEGMENT_COLUMNS)]
    lines += [
        f"{r.path.resolve()}\t{r.word}\t{r.speaker}\t"
        f"{'' if r.start is None else r.start}\t{'' if r.end is None else r.end}"
        for r in rows
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def npz(path, **arrays):
    np.savez(path, **arrays)
    return path


@pytest.fixture
def embedded(tables, tmp_path):
    """An ``awe embed``-like .npz of 6 test rows (3 words, 2 speakers), made by hand."""
    rows = read_segments(tables["test"])
    rows = [r for r in rows if r.word in sorted({r.word for r in rows})[:3]]
    assert len(rows) == 6
    return {
        "embeddings": np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32),
        "labels": np.asarray([r.word for r in rows]),
        "speakers": np.asarray([r.speaker for r in rows]),
        "segments": np.asarray(str(tables["test"].resolve())),
        "segments_sha256": np.asarray(awe.known_file_sha256(tables["test"])),
        "rows": np.asarray([r.line for r in rows], dtype=np.int64),
        "feature_norm": np.asarray("file"),
    }


# 1. an .npz whose rows repeat


def test_ap_refuses_an_npz_whose_rows_repeat(embedded, tmp_path, capsys):
    ap = awe.embeddings_ap(npz(tmp_path / "emb.npz", **embedded))
    dup = {
        k: np.concatenate([v, v]) if k in ("embeddings", "labels", "speakers", "rows") else v
        for k, v in embedded.items()
    }
    path = npz(tmp_path / "dup.npz", **dup)
    line = int(embedded["rows"][0])
    said = re.escape(f"{path}: rows (lines of {embedded['segments']}): entry 6 (line {line}) ")
    with pytest.raises(ScoreError, match=said + "repeats entry 0: a repeated row counts twice"):
        awe.embeddings_ap(path)
    with pytest.raises(ScoreError, match=said):
        awe.embedded_rows(path)  # the baseline's rows are refused too
    assert main(["awe", "ap", str(path)]) == 1
    captured = capsys.readouterr()
    assert "dup.npz: rows" in captured.err and "repeats entry 0" in captured.err
    assert f"{ap:.4f}" not in captured.out
    # one repeated row among others: the first repeat and its first occurrence are named
    one = dict(embedded, rows=embedded["rows"][[0, 1, 2, 3, 1, 5]])
    with pytest.raises(ScoreError, match=r"entry 4 \(line \d+\) repeats entry 1:"):
        awe.embeddings_ap(npz(tmp_path / "one.npz", **one))


def test_check_no_repeats_names_the_first_repeat_and_its_first_occurrence():
    check_no_repeats([3, 4, 5])
    check_no_repeats([])
    with pytest.raises(ScoreError, match=r"^rows: entry 3 \(row 4\) repeats entry 1:"):
        check_no_repeats([3, 4, 5, 4, 3])


# 2. the errors of awe ap name the .npz


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda a: a["embeddings"].__setitem__(0, np.nan), "embeddings: row 0 holds NaN or inf"),
        (lambda a: a["embeddings"].__setitem__(0, 0.0), "embeddings: row 0 is all zeros"),
        (lambda a: a.update(embeddings=a["embeddings"][:, 0]), "embeddings: expected a 2-D"),
        (lambda a: a.update(labels=a["labels"][:5]), "labels: expected 6 labels"),
        (lambda a: a.update(speakers=a["speakers"][:5]), "speakers: shape (5,) for 6 embeddings"),
        (lambda a: a.update(embeddings=a["embeddings"] + 1j), "embeddings: expected real"),
        (lambda a: a.update(embeddings=a["embeddings"][:, :0]), "embeddings: rows of no dim"),
        (lambda a: a["labels"].__setitem__(slice(1, 3), " "), "labels: row 2 is empty (2 of"),
    ],
)
def test_ap_errors_name_the_npz(embedded, change, said, tmp_path, capsys):
    arrays = {k: v.copy() for k, v in embedded.items()}
    change(arrays)
    path = npz(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=re.escape(f"{path}: {said}")):
        awe.embeddings_ap(path)
    assert main(["awe", "ap", str(path)]) == 1
    assert f"bad.npz: {said}" in capsys.readouterr().err


def test_ap_of_a_folder_says_it_is_one(tmp_path, capsys):
    assert main(["awe", "ap", str(tmp_path)]) == 1
    assert "a folder; give the .npz file `awe embed` wrote" in capsys.readouterr().err


# 3. development rows that are training rows


def test_train_refuses_development_rows_that_are_training_rows(tables, tmp_path):
    # the training table itself: its first row is named, in both tables
    train = tables["train"]
    first = read_segments(train)[0]
    with pytest.raises(RecordingsError) as caught:
        awe.train_on_segments(train, tmp_path / "a", dev=train, lexicon="characters")
    message = str(caught.value)
    assert message.startswith(f"{train}:2: {first.path}")
    assert f"also line 2 of the training table {train}" in message
    assert "118 of the 118 development rows are training rows" in message
    # a development table sharing one row (written with another path to the same file)
    dev_rows = read_segments(tables["dev"])
    shared = read_segments(train)[5]
    (tmp_path / "audio").symlink_to(shared.path.parent)
    mixed = write_table(tmp_path / "dev.tsv", dev_rows)
    with open(mixed, "a") as fh:
        fh.write(f"audio/{shared.path.name}\t{shared.word}\t{shared.speaker}\t\t\n")
    with pytest.raises(RecordingsError) as caught:
        awe.train_on_segments(train, tmp_path / "b", dev=mixed, lexicon="characters")
    message = str(caught.value)
    assert message.startswith(f"{mixed}:{len(dev_rows) + 2}: ")
    assert f"also line {shared.line} of the training table {train}" in message
    assert f"1 of the {len(dev_rows) + 1} development rows" in message
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # a copy of a training file in another folder (a held-out set made by copying files)
    (tmp_path / "copies").mkdir()
    shutil.copy(shared.path, tmp_path / "copies" / "held.wav")
    copied = write_table(tmp_path / "copied.tsv", dev_rows)
    with open(copied, "a") as fh:
        fh.write(f"copies/held.wav\t{shared.word}\t{shared.speaker}\t\t\n")
    with pytest.raises(RecordingsError) as caught:
        awe.refuse_shared_rows(read_segments(train), read_segments(copied))
    message = str(caught.value)
    assert message.startswith(f"{copied}:{len(dev_rows) + 2}: ")
    assert f"a copy of {shared.path}, line {shared.line} of the training table" in message
    # the same token cut again (another alignment's boundaries) is the training row
    cut = write_table(tmp_path / "cut.tsv", dev_rows)
    with open(cut, "a") as fh:
        fh.write(f"{shared.path.resolve()}\t{shared.word}\t{shared.speaker}\t0.01\t0.2\n")
    with pytest.raises(RecordingsError) as caught:
        awe.refuse_shared_rows(read_segments(train), read_segments(cut))
    assert f"0.01-0.2 s: 100 % of the token (the whole file) of line {shared.line}" in str(
        caught.value
    )


# 4a. rows longer than the positional encoding table


def small_model(max_len: int) -> MultiViewAWE:
    torch.manual_seed(0)
    config = AWEModelConfig(
        feature_dim=3, num_phones=5, d_model=8, acoustic_layers=1, acoustic_heads=2,
        acoustic_ff=16, phone_layers=1, phone_heads=2, phone_ff=16, dropout=0.0,
        max_len=max_len,
    )  # fmt: skip
    return MultiViewAWE(config).eval()


def test_sequences_longer_than_the_table_are_encoded_as_a_longer_table_would():
    short, long = small_model(8), small_model(64)
    long.load_state_dict(short.state_dict())  # the table is a buffer, not a weight
    feats = torch.randn(2, 20, 3)
    lengths = torch.tensor([20, 6])
    with torch.no_grad():
        a, b = short.acoustic(feats, lengths), long.acoustic(feats, lengths)
        assert torch.allclose(a, b, atol=1e-6)
        phones = torch.randint(1, 6, (1, 12))
        assert torch.allclose(
            short.phones(phones, torch.tensor([12])), long.phones(phones, torch.tensor([12])),
            atol=1e-6,
        )  # fmt: skip
    body = short.acoustic.body
    assert torch.equal(body.positions(8), body.pe) and body.pe.shape[0] == 8  # not grown
    assert torch.equal(body.positions(20)[:8], body.pe)
    assert torch.allclose(body.positions(20), long.acoustic.body.pe[:20], atol=1e-6)


def test_sequences_within_the_table_give_the_numbers_they_always_gave():
    """Eq. (5)'s table rows added as before the table could be exceeded: bit for bit."""
    model = small_model(8)
    feats, lengths = torch.randn(3, 8, 3), torch.tensor([8, 5, 2])
    with torch.no_grad():
        body = model.acoustic.body
        h = model.acoustic.projection(feats) * body.scale + body.pe[:8]
        h = body.encoder(h, src_key_padding_mask=padding_mask(lengths, 8))
        valid = (~padding_mask(lengths, 8)).float()[..., None]
        before = (h * valid).sum(1) / lengths[:, None].float()
        assert torch.equal(model.acoustic(feats, lengths), before)


def test_length_batches_cut_only_batches_past_the_table():
    frames = np.asarray([5, 3, 9, 1, 7, 2, 8])
    order = np.argsort(frames, kind="stable")
    within = length_batches(frames, 3, max_len=9)
    assert [b.tolist() for b in within] == [order[i : i + 3].tolist() for i in (0, 3, 6)]
    # 4 frames a step: rows of 3 steps past a table of 2 hold at most 3 x 2² / 3² = 1 row
    past = length_batches(frames * 4, 3, max_len=2, frame_stack=4)
    assert sorted(np.concatenate(past).tolist()) == list(range(7))
    for batch in past:
        steps = int(frames[batch].max())
        assert len(batch) == 1 or len(batch) * steps**2 <= 3 * 2**2


def test_embed_table_embeds_a_row_longer_than_the_table(run, tables, tmp_path):
    rows = read_segments(tables["test"])[:4]
    words = [sf.read(r.path, dtype="float32") for r in rows]
    rate = words[0][1]
    steps = run.model_config.max_len * run.model_config.frame_stack  # frames of 10 ms
    long = np.concatenate([w for w, _ in words] * (steps // 100 // 2 + 1))
    while len(long) < rate * (steps + 200) / 100:
        long = np.concatenate([long, long])
    sf.write(tmp_path / "long.wav", long, rate)
    assert sf.info(tmp_path / "long.wav").duration * 100 > steps + 100  # past the table
    table = write_table(tmp_path / "long.tsv", rows)
    with open(table, "a") as fh:
        fh.write(f"{tmp_path / 'long.wav'}\t{rows[0].word}\t{rows[0].speaker}\t\t\n")
    arrays = awe.embed_table(run.path, table)
    assert arrays["embeddings"].shape == (5, run.model_config.d_model)
    assert np.isfinite(arrays["embeddings"]).all()


def test_embed_averages_each_row_over_the_speeds_the_run_trained_at(run, tables, tmp_path):
    """``awe embed``: each row's embedding is the mean of the unit embeddings of the row and of
    its copies at the run's training speeds (here given, as the fixture trained none), each
    copy normalised by its own statistics as in training; ``speeds=()`` the row alone; a copy
    too short for the run is left out of its row's mean; the .npz records the speeds."""
    from audiorepro.experiments.awe.frames import segment_features
    from audiorepro.experiments.awe.views import embed_segments

    rows = read_segments(tables["test"])[:6]
    table = write_table(tmp_path / "six.tsv", rows)
    model, config = awe.load_run(run.path)
    norm = awe.run_feature_norm(run.path)
    dim = config.model.feature_dim

    def by_hand(speed):
        feats = segment_features(rows, dim, speed, norm)
        view = awe.WordSegments(
            split="x", keys=[r.where for r in rows], words=[r.word for r in rows],
            speakers=[r.speaker for r in rows], feats=feats, phones=[], word_phones={},
            num_phones=0, dropped={},
        )  # fmt: skip
        emb = embed_segments(model, view, 8).astype(np.float64)
        return emb / np.linalg.norm(emb, axis=1, keepdims=True), feats

    plain = awe.embed_table(run.path, table, speeds=())
    alone, _ = by_hand(1.0)
    assert np.allclose(plain["embeddings"], alone, atol=1e-6)  # unit length, as the mean is
    assert str(plain["speeds"]) == ""
    averaged = awe.embed_table(run.path, table, speeds=(0.9, 1.1))
    expected = (alone + by_hand(0.9)[0] + by_hand(1.1)[0]) / 3
    assert np.allclose(averaged["embeddings"], expected, atol=1e-6)
    assert str(averaged["speeds"]) == "0.9,1.1"
    assert not np.allclose(averaged["embeddings"], plain["embeddings"], atol=1e-3)
    assert awe.run_speeds(run.path) == []  # the fixture trained without copies
    assert str(awe.embed_table(run.path, table)["speeds"]) == ""  # so it averages none
    # a copy left out (None: shorter than min_frames) leaves its row's mean to the others
    from audiorepro.experiments.awe.views import embed_with_copies

    slow, feats = by_hand(0.9)
    view = awe.WordSegments(
        split="x", keys=[r.where for r in rows], words=[r.word for r in rows],
        speakers=[r.speaker for r in rows], feats=segment_features(rows, dim, 1.0, norm),
        phones=[], word_phones={}, num_phones=0, dropped={},
    )  # fmt: skip
    mixed = embed_with_copies(model, view, [[None, *feats[1:]]], 8)
    assert np.allclose(mixed[0], alone[0], atol=1e-6)
    assert np.allclose(mixed[1:], (alone[1:] + slow[1:]) / 2, atol=1e-6)


# 4b. speeds far from 1


@pytest.mark.parametrize("speed", [1e9, 0.001, 0.49, 2.01])
def test_speeds_outside_half_to_twice_are_refused(speed, tables, tmp_path, capsys):
    said = f"--speeds: {speed:g} is outside 0.5 to 2"
    with pytest.raises(ValueError, match=re.escape(said)):
        awe.train_on_segments(tables["train"], tmp_path / "a", speeds=(0.9, speed))
    argv = ["awe", "train", "--segments", str(tables["train"]), "--dev", str(tables["dev"]),
            "--lexicon", "characters", "--speeds", f"{speed:g}", "--out", str(tmp_path / "b")]  # fmt: skip
    with pytest.raises(SystemExit) as stop:  # a usage error: the range is known at parsing
        main(argv)
    assert stop.value.code == 2
    assert f"argument --speeds: {speed:g} is outside 0.5 to 2" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert awe.check_speeds((0.5, 1, 2.0, 0.9)) == [0.5, 0.9, 2.0]


# 5. the epochs awe train reports


def test_an_epoch_cut_short_counts_as_the_epoch_it_was_in():
    steps = [1, 2, 3, 4, 5, 6]
    loop = TrainResult(steps=steps, epochs=[0, 0, 0, 0, 1, 1], final_epoch=1)
    assert epochs_trained(loop) == 2
    assert awe.kept_epoch(loop, [(4, "best"), (6, "best")], "best") == 2
    assert awe.kept_epoch(loop, [(4, "best")], "best") == 1
    assert awe.kept_epoch(loop, [(4, "best")], "final") == 2
    shown = numbered_from_one(loop)
    assert shown.epochs == [1, 1, 1, 1, 2, 2] and shown.final_epoch == 2
    assert loop.epochs == [0, 0, 0, 0, 1, 1]  # the loop's history is left as it is
    whole = TrainResult(steps=steps, epochs=[0, 0, 0, 1, 1, 1], final_epoch=2)
    assert epochs_trained(whole) == 2 and numbered_from_one(whole).final_epoch == 2
    assert epochs_trained(TrainResult()) == 0


def test_train_reports_epochs_from_one(run, tables, tmp_path, capsys):
    info = json.loads((run.path / "run.json").read_text())
    assert run.history.steps == [1, 2, 3, 4, 5, 6]
    assert run.history.epochs == [1, 1, 1, 1, 2, 2] == info["history"]["epochs"]
    assert run.history.final_epoch == 2 == info["history"]["final_epoch"]
    assert run.kept_epoch == info["kept_epoch"]
    best = [step for step, event in run.schedule_events if event == "best"]
    assert run.kept_epoch == run.history.epochs[run.history.steps.index(best[-1])]
    # the command says the same, trained and reused
    argv = ["awe", "train", "--segments", str(tables["train"]), "--dev", str(tables["dev"]),
            "--lexicon", "characters", "--preset", "smoke", "--speeds", "1", "--warps", "1",
            "--set", "train.max_steps=6", "--set", "select=final", "--out", str(tmp_path / "r")]  # fmt: skip
    for _ in range(2):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "trained 2 epochs -> " in out
        assert "kept the weights of epoch 2 (select: final)" in out


def old_record(info):
    """``info`` (a run.json) as ``awe train`` wrote it before epochs were numbered from 1: the
    loop's history (epochs from 0, ``final_epoch`` the whole epochs done) and, of
    ``select: final``, that count as the kept epoch; no ``epochs_from``."""
    steps_per_epoch = 4  # TRAIN: 4 steps an epoch
    history = dict(info["history"], epochs=[e - 1 for e in info["history"]["epochs"]])
    history["final_epoch"] = len(history["steps"]) // steps_per_epoch
    kept = history["final_epoch"] if info["config"]["select"] == "final" else info["kept_epoch"]
    old = {k: v for k, v in info.items() if k != EPOCHS_FROM}
    return {**old, "history": history, "kept_epoch": kept}


def test_a_reused_run_from_before_epochs_from_one_reports_them_from_one(
    run, tables, tmp_path, capsys
):
    info = json.loads((run.path / "run.json").read_text())
    assert info[EPOCHS_FROM] == 1
    old = old_record(info)
    assert old["history"]["epochs"] == [0, 0, 0, 0, 1, 1] and old["history"]["final_epoch"] == 1
    history, kept = reported_epochs(old)
    assert history == TrainResult.from_dict(info["history"]) and kept == info["kept_epoch"]
    assert reported_epochs(info) == (TrainResult.from_dict(info["history"]), info["kept_epoch"])
    # the command, reusing a folder whose run.json is of the old kind, says what a new run says
    argv = ["awe", "train", "--segments", str(tables["train"]), "--dev", str(tables["dev"]),
            "--lexicon", "characters", "--preset", "smoke", "--speeds", "1", "--warps", "1",
            "--set", "train.max_steps=6", "--set", "select=final", "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(argv) == 0
    new = capsys.readouterr().out
    record = tmp_path / "r" / "run.json"
    record.write_text(json.dumps(old_record(json.loads(record.read_text()))))
    assert main(argv) == 0
    reused = capsys.readouterr().out
    assert "reusing it" in reused
    for said in ("trained 2 epochs -> ", "kept the weights of epoch 2 (select: final)"):
        assert said in new and said in reused


# 6. rows too short to embed: awe embed and awe dtw leave them out as awe train does


def test_embed_and_dtw_leave_out_rows_too_short_as_train_does(run, tables, tmp_path, capsys):
    rows = read_segments(tables["test"])
    table = write_table(tmp_path / "short.tsv", rows)
    with open(table, "a") as fh:  # 10 ms of a file: one frame, as awe train drops it (another
        # word: as the same word it would be one token listed twice, which read_segments refuses)
        fh.write(f"{rows[0].path}\tshort\t{rows[0].speaker}\t0.100\t0.110\n")
    line = len(rows) + 2  # after the header and the rows
    said = (
        f"left out 1 of {len(rows) + 1} rows shorter than 2 frames of 10 ms, as awe train "
        f"does (first: {table}:{line}, 1 frame)"
    )
    assert main(["awe", "embed", str(run.path), "--segments", str(table),
                 "--out", str(tmp_path / "e.npz")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert f"wrote {len(rows)} embeddings" in out and said in out
    with np.load(tmp_path / "e.npz") as arrays:
        assert arrays["rows"].tolist() == [r.line for r in rows]  # the short line is not there
        assert str(arrays["left_out"]) == said
    # awe ap scores the embeddings and MFCC + DTW on the rows embedded: the same pairs
    assert main(["awe", "ap", str(tmp_path / "e.npz")]) == 0
    pairs = len(rows) * (len(rows) - 1) // 2
    assert f"same-different AP over {pairs} pairs:" in capsys.readouterr().out
    norm = json.loads((run.path / "run.json").read_text())["feature_norm"]
    assert main(["awe", "dtw", "--segments", str(table), "--norm", norm]) == 0
    out = capsys.readouterr().out
    assert said in out and f"{len(rows)} segments, {pairs} pairs" in out
    base = awe.dtw_table_ap(table, norm=norm)
    assert base["left_out"] == said and base["tokens"] == len(rows)
    same = awe.rows_dtw_ap(rows, [r.word for r in rows], norm=norm)
    assert base["ap"] == pytest.approx(same["ap"])  # awe ap's baseline: the same number
    # a table without such rows says nothing of them; one of short rows only is refused
    assert awe.dtw_table_ap(tables["test"], norm=norm)["left_out"] == ""
    only = write_table(tmp_path / "only.tsv", [])
    with open(only, "a") as fh:
        fh.write(f"{rows[0].path}\t{rows[0].word}\t{rows[0].speaker}\t0.100\t0.110\n")
    with pytest.raises(ValueError, match=r"left out 1 of 1 rows .*: no row to embed"):
        awe.embed_table(run.path, only)
