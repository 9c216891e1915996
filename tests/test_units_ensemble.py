"""Several models of one folder (``units train --models N``,
:mod:`audiorepro.experiments.zerospeech.ensemble`): each model is the single run of its seed,
``units encode`` sets their units side by side, ``abx score`` scores their k-means units side by
side as the baseline, and an interrupted run trains only the models it had not finished. On the
real Italian recordings the book ships."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.data.recipes.asterisk import italian_folder
from audiorepro.experiments.zerospeech import ensemble
from audiorepro.experiments.zerospeech import recordings as units
from audiorepro.experiments.zerospeech.baselines import read_back
from audiorepro.metrics.abx import abx

pytestmark = pytest.mark.filterwarnings(
    "ignore::audiorepro.data.recordings.InputWarning",
    "ignore::audiorepro.metrics.checks.ScoreWarning",
)

SMOKE = ("--preset", "smoke", "--set", "train.max_steps=6", "--set", "train.segment_frames=32")
"""Six steps of the smoke preset: a second or two a model."""


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture(scope="module")
def italian():
    return italian_folder()


def rows_of(folder, names):
    return {n: np.loadtxt(folder / f"{n}.txt", ndmin=2) for n in names}


def test_side_by_side_is_the_mean_of_the_models_cosines_and_codes_are_joint():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 4)) * 3.0, rng.normal(size=(5, 4)) * 0.2
    both = units.models_joined([a, b], "vectors")
    assert both.shape == (5, 8)
    cos = lambda x, y: x @ y / np.linalg.norm(x) / np.linalg.norm(y)  # noqa: E731
    for i, j in [(0, 1), (2, 4), (3, 3)]:
        assert np.isclose(cos(both[i], both[j]), (cos(a[i], a[j]) + cos(b[i], b[j])) / 2)
    assert np.allclose(np.linalg.norm(both, axis=1), 1.0)
    codes = units.models_joined(
        [np.eye(3, dtype=np.int64)[[0, 2]], np.eye(3, dtype=np.int64)[[1, 1]]], "codes"
    )
    assert codes.tolist() == [[1, 0, 0, 0, 1, 0], [0, 0, 1, 0, 1, 0]]
    with pytest.raises(ValueError, match=r"the models give \[4, 5\] lines"):
        units.models_joined([a, b[:4]], "vectors")


@pytest.mark.processes
def test_units_train_models_are_the_single_runs_and_score_beside_their_kmeans_side_by_side(
    italian, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    prompts, numbers = italian / "prompts", italian / "numbers"
    speakers = ("--speaker-of", "parent")
    code, out, err = run_cli(capsys, "units", "train", "--audio", prompts, *speakers, *SMOKE,
                             "--models", "2", "--out", tmp_path / "two")  # fmt: skip
    assert code == 0, err
    assert "models: 2, from seeds 0, 1 (units encode sets their units side by side" in out
    assert re.search(r"training model 2 of 2 \(seed 1\), 1 at once, without", err)
    info = json.loads((tmp_path / "two" / "run.json").read_text())
    assert info["members"] == ["member-2"] and info["member_seeds"] == [0, 1]
    record = json.loads((tmp_path / "two" / "command.json").read_text())
    assert {"member-2/run.json", "member-2/kmeans.npz"} <= set(record["outputs"])
    for seed in (0, 1):  # each model is the run of one model of its seed
        code, _, err = run_cli(capsys, "units", "train", "--audio", prompts, *speakers, *SMOKE,
                               "--set", f"seed={seed}", "--out", tmp_path / f"seed{seed}")  # fmt: skip
        assert code == 0, err
    for model, alone in (("two", "seed0"), ("two/member-2", "seed1")):
        for name in ("model.safetensors", "kmeans.npz"):
            assert (tmp_path / model / name).read_bytes() == (tmp_path / alone / name).read_bytes()

    # units encode: each model's codebook vectors at unit length, side by side, over sqrt(2)
    for run in ("two", "seed0", "seed1"):
        code, _, err = run_cli(capsys, "units", "encode", tmp_path / run, "--audio", numbers,
                               *speakers, "--out", tmp_path / f"u-{run}")  # fmt: skip
        assert code == 0, err
    names = [p.relative_to(tmp_path / "u-two").with_suffix("").as_posix()
             for p in sorted((tmp_path / "u-two").rglob("*.txt"))]  # fmt: skip
    both, one, other = (rows_of(tmp_path / f"u-{r}", names) for r in ("two", "seed0", "seed1"))
    for name in names:
        unit = [x / np.linalg.norm(x, axis=1, keepdims=True) for x in (one[name], other[name])]
        assert np.allclose(both[name], np.hstack(unit) / np.sqrt(2), atol=1e-6)
    code, _, err = run_cli(capsys, "units", "encode", tmp_path / "two", "--audio", numbers,
                           *speakers, "--what", "codes", "--out", tmp_path / "c-two")  # fmt: skip
    assert code == 0, err
    codes = np.loadtxt(tmp_path / "c-two" / f"{names[0]}.txt", ndmin=2)
    assert codes.shape[1] == 2 * 64 and (codes.sum(axis=1) == 2).all()  # one code a model

    # abx score: the baseline is the two models' k-means units side by side, as a user would
    # build them from each run's own --what kmeans folder
    item = tmp_path / "numbers.item"
    units.abx_items(italian / "numbers.tsv", item, audio=numbers)
    kmeans = [
        units.unit_rows(tmp_path / r, numbers, "kmeans", "parent") for r in ("seed0", "seed1")
    ]
    for name in names:
        target = tmp_path / "k-two" / f"{name}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        rows = units.models_joined([read_back(k[name]) for k in kmeans], "vectors")
        np.savetxt(target, rows, fmt="%.9g")
    expected = abx(tmp_path / "k-two", item, distance="angular", mode="across").error
    assert expected > 1.0  # errors to tell apart, not two zeros
    code, out, err = run_cli(capsys, "abx", "score", item, tmp_path / "u-two", "--mode", "across")
    assert code == 0, err
    shown = re.search(r"k-means units \(K = 64, 2 models side by side\) +([0-9.]+)", out)
    assert shown and float(shown.group(1)) == pytest.approx(expected, abs=6e-4), out
    units_row = re.search(
        r"units \(codebook vectors, 2 models side by side\) \(this folder\) +([0-9.]+)", out
    )
    assert units_row and float(units_row.group(1)) == pytest.approx(
        abx(tmp_path / "u-two", item, distance="angular", mode="across").error, abs=6e-4
    )

    # the book's pages assemble their seeds' runs into the same run of two models
    made = ensemble.assemble_runs([tmp_path / "seed0", tmp_path / "seed1"], tmp_path / "made")
    again = units.unit_rows(made, numbers, "vectors", "parent")
    assert all(np.allclose(again[n], both[n], atol=1e-6) for n in names)
    with pytest.raises(ValueError, match=r"seeds of their own, got seeds \[0, 0\]"):
        ensemble.assemble_runs([tmp_path / "seed0", tmp_path / "seed0"], tmp_path / "bad")

    # a voice reads one codebook: the first model's, and says so
    code, out, err = run_cli(capsys, "units", "voice", tmp_path / "two", "--audio",
                             numbers / "carlo", "--set", "inverter_train.max_steps=2",
                             "--out", tmp_path / "voice")  # fmt: skip
    assert code == 0, err
    assert "the voice speaks the units of the run's first model (seed 0), one of its 2" in out

    # the same command reuses the folder; a folder missing a model it lists is named
    code, out, err = run_cli(capsys, "units", "train", "--audio", prompts, *speakers, *SMOKE,
                             "--models", "2", "--out", tmp_path / "two")  # fmt: skip
    assert code == 0 and "models: 2, from seeds 0, 1" in out and "reus" in out + err
    code, out, err = run_cli(capsys, "units", "train", "--audio", prompts, *speakers, *SMOKE,
                             "--set", "seed=0", "--models", "1", "--out", tmp_path / "seed0")  # fmt: skip
    assert code == 0 and "reus" in out + err  # the preset's one model, said or not
    shutil.copytree(tmp_path / "two", tmp_path / "two-then-one")
    shutil.rmtree(tmp_path / "two" / "member-2")
    code, _, err = run_cli(capsys, "units", "encode", tmp_path / "two", "--audio", numbers,
                           *speakers, "--out", tmp_path / "u-again")  # fmt: skip
    assert code != 0 and "lists the model member-2, but" in err and "is missing" in err
    # one model trained over a folder of two: the second model's folder goes, a user's file stays
    (tmp_path / "two-then-one" / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "units", "train", "--audio", prompts, *speakers, *SMOKE,
                           "--models", "1", "--force", "--out", tmp_path / "two-then-one")  # fmt: skip
    assert code == 0, err
    assert not (tmp_path / "two-then-one" / "member-2").exists()
    assert f"removed {tmp_path / 'two-then-one' / 'member-2'}: the earlier run wrote" in err
    assert (tmp_path / "two-then-one" / "notes.txt").read_text() == "mine"
    info = json.loads((tmp_path / "two-then-one" / "run.json").read_text())
    assert "members" not in info


@pytest.mark.processes
def test_an_interrupted_units_ensemble_trains_only_the_models_it_had_not_finished(
    italian, tmp_path, monkeypatch
):
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "runs"))
    options = {"speaker_of": "parent", "preset": "smoke",
               "overrides": {"train.max_steps": 4, "train.segment_frames": 32}}  # fmt: skip
    real, calls = ensemble._member, []

    def stopped(shared, k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ensemble, "_member", stopped)
    with pytest.raises(KeyboardInterrupt):
        ensemble.train_units_ensemble(
            italian / "prompts", tmp_path / "run", 3, workers=1, **options
        )
    assert not (tmp_path / "run").exists()  # --out is written whole or not at all
    fit = units.fit_units

    def counted(data, out, seed=None, progress="none"):
        calls.append((out.name, seed))
        return fit(data, out, seed, progress)

    monkeypatch.setattr(ensemble, "_member", real)
    monkeypatch.setattr(ensemble, "fit_units", counted)
    run = ensemble.train_units_ensemble(
        italian / "prompts", tmp_path / "run", 3, workers=1, **options
    )
    assert calls == [("member-2", 1), ("member-3", 2)]  # the first model was kept: not again
    assert [m.name for m in run.members] == ["member-2", "member-3"]
    assert run.ensemble.startswith("models: 3, from seeds 0, 1, 2")
    # one model: the run of one seed, no members
    one = ensemble.train_units_ensemble(italian / "prompts", tmp_path / "one", 1, **options)
    assert one.members == () and not (tmp_path / "one" / "member-2").exists()
    with pytest.raises(ValueError, match="--models: expected a whole number >= 1, got 0"):
        ensemble.train_units_ensemble(italian / "prompts", tmp_path / "none", 0, **options)
