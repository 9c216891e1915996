"""Several models of one table (``awe train --models N``,
:mod:`audiorepro.experiments.awe.ensemble`): each model is the single run of its seed, ``awe
embed`` sets their unit embeddings side by side, the same command reuses the folder, and an
interrupted ensemble trains only the models it had not finished. On the real Italian number
words the book ships."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from audiorepro.cli import main
from audiorepro.experiments.awe import ensemble
from audiorepro.experiments.awe import recordings as awe
from audiorepro.experiments.awe.real_speech import number_word_tables

pytestmark = pytest.mark.filterwarnings("ignore::audiorepro.data.recordings.InputWarning")

OPTIONS = {
    "lexicon": "characters",
    "preset": "smoke",
    "overrides": {"train.max_steps": 3},
    "speeds": (1,),
    "warps": (1,),
}
"""Three steps of the smoke preset, no copies: a few seconds a model."""


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    return number_word_tables(tmp_path_factory.mktemp("tables"))


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_each_model_is_the_single_run_of_its_seed_and_embed_sets_them_side_by_side(
    tables, tmp_path
):
    run = ensemble.train_ensemble(
        tables["train"], tmp_path / "two", models=2, workers=1, dev=tables["dev"], **OPTIONS
    )
    assert run.ensemble.startswith("models: 2, from seeds 0, 1 (awe embed concatenates")
    folders = awe.run_members(tmp_path / "two")
    assert [f.name for f in folders] == ["two", "member-2"]
    info = json.loads((tmp_path / "two" / "run.json").read_text())
    assert info["members"] == ["member-2"] and info["member_seeds"] == [0, 1]
    second = json.loads((tmp_path / "two" / "member-2" / "run.json").read_text())
    assert second["config"]["seed"] == 1
    # each model equals the run of one model of its seed, trained on its own
    alone = awe.train_on_segments(
        tables["train"], tmp_path / "seed1", dev=tables["dev"],
        **{**OPTIONS, "overrides": {**OPTIONS["overrides"], "seed": 1}},
    )  # fmt: skip
    weights = (tmp_path / "two" / "member-2" / "model.safetensors").read_bytes()
    assert weights == (alone.path / "model.safetensors").read_bytes()
    # awe embed: each model's embeddings at unit length, side by side, over sqrt(2)
    both = awe.embed_table(tmp_path / "two", tables["test"])
    parts = [awe.embed_table(f, tables["test"])["embeddings"] for f in (tmp_path / "seed1",)]
    first = awe.embed_table(tmp_path / "two", tables["test"], speeds=())  # no copies trained
    assert both["embeddings"].shape[1] == 2 * parts[0].shape[1]
    assert np.allclose(both["embeddings"], first["embeddings"])
    unit = parts[0] / np.linalg.norm(parts[0], axis=1, keepdims=True)
    assert np.allclose(both["embeddings"][:, parts[0].shape[1] :], unit / np.sqrt(2), atol=1e-6)
    assert np.allclose(np.linalg.norm(both["embeddings"], axis=1), 1.0, atol=1e-5)
    # one model: the run of one seed, as before
    one = ensemble.train_ensemble(
        tables["train"], tmp_path / "one", models=1, dev=tables["dev"], **OPTIONS
    )
    assert awe.run_members(one.path) == [one.path]
    # a run folder missing a model it lists is named, not embedded short
    import shutil

    shutil.rmtree(tmp_path / "two" / "member-2")
    with pytest.raises(FileNotFoundError, match="lists the model member-2, but .* is missing"):
        awe.embed_table(tmp_path / "two", tables["test"])


def test_an_interrupted_ensemble_trains_only_the_models_it_had_not_finished(
    tables, tmp_path, monkeypatch
):
    real = ensemble._member
    calls = []

    def stopped(shared, k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ensemble, "_member", stopped)
    with pytest.raises(KeyboardInterrupt):
        ensemble.train_ensemble(
            tables["train"], tmp_path / "run", models=3, workers=1, dev=tables["dev"], **OPTIONS
        )
    assert not (tmp_path / "run").exists()  # --out is written whole or not at all
    trained = awe.train_on_segments

    def counted(segments, out, **options):
        calls.append(out.name)
        return trained(segments, out, **options)

    monkeypatch.setattr(ensemble, "_member", real)
    monkeypatch.setattr(ensemble, "train_on_segments", counted)
    run = ensemble.train_ensemble(
        tables["train"], tmp_path / "run", models=3, workers=1, dev=tables["dev"], **OPTIONS
    )
    assert calls == ["member-2", "member-3"]  # the first model was done: not trained again
    assert [f.name for f in awe.run_members(run.path)] == ["run", "member-2", "member-3"]


def test_awe_train_models_prints_them_records_them_and_reuses_the_folder(tables, tmp_path, capsys):
    argv = [
        "awe", "train", "--segments", tables["train"], "--dev", tables["dev"], "--lexicon",
        "characters", "--preset", "smoke", "--set", "train.max_steps=2", "--speeds", "1",
        "--warps", "1", "--models", "3", "--out", tmp_path / "run",
    ]  # fmt: skip
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    # models 2 and 3 side by side, in two processes where there are two cores
    assert "models: 3, from seeds 0, 1, 2 (awe embed concatenates their embeddings" in out
    assert re.search(r"training models 2, 3 of 3 \(seeds 1, 2\), [12] at once, without", err)
    record = json.loads((tmp_path / "run" / "command.json").read_text())
    assert {"member-2/run.json", "member-3/model.safetensors"} <= set(record["outputs"])
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "models: 3, from seeds 0, 1, 2" in out and "reus" in out + err
    code, out, err = run_cli(
        capsys, "awe", "embed", tmp_path / "run", "--segments", tables["test"],
        "--out", tmp_path / "e.npz",
    )  # fmt: skip
    assert code == 0, err
    with np.load(tmp_path / "e.npz") as arrays:
        assert arrays["embeddings"].shape[1] == 3 * 16
    # one model trained over the folder of three: their folders go, a user's file stays
    (tmp_path / "run" / "notes.txt").write_text("mine")
    code, out, err = run_cli(capsys, *argv[:-4], "--models", "1", "--force", "--out", argv[-1])
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "run").glob("member-*")) == []
    assert err.count("audiorepro: removed ") == 2 and "member-3: the earlier run wrote" in err
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine"
    assert "members" not in json.loads((tmp_path / "run" / "run.json").read_text())
    for bad in ("0", "17", "two"):
        with pytest.raises(SystemExit) as usage:
            main([str(a) for a in [*argv[:-4], "--models", bad, "--out", tmp_path / "x"]])
        assert usage.value.code == 2
        assert (
            "--models: expected a whole number of models from 1 to 16" in capsys.readouterr().err
        )
