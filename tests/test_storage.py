"""The storage layer: atomic files and the run store every chapter keeps its runs in."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from audiorepro.paths import runs_dir
from audiorepro.storage import (
    ArrayFileError,
    CheckpointError,
    RunStore,
    atomic_write,
    config_hash,
    load_model_weights,
    load_npz,
    read_json,
    save_model_weights,
)


def test_config_hash_ignores_key_order_and_tuple_vs_list_but_not_values():
    a = config_hash({"lr": 1e-3, "widths": (1, 2), "model": {"d": 4, "k": 8}})
    assert a == config_hash({"model": {"k": 8, "d": 4}, "widths": [1, 2], "lr": 1e-3})
    assert a != config_hash({"lr": 1e-3, "widths": (1, 2), "model": {"d": 4, "k": 9}})
    assert a != config_hash({"lr": 1e-3, "widths": (2, 1), "model": {"d": 4, "k": 8}})
    with pytest.raises(TypeError, match="object"):
        config_hash({"x": object()})


def test_run_store_builds_once_then_loads(tmp_path):
    store = RunStore("01_test", root=tmp_path)
    calls = []

    def build(folder):
        calls.append(folder)
        (folder / "weights.txt").write_text("w")
        return {"steps": 3}

    def load(run):
        return run.file("weights.txt").read_text(), run.record()["steps"]

    cfg = {"lr": 0.1, "seed": 0}
    assert store.cached("model", cfg, build, load) == ("w", 3)
    assert store.cached("model", dict(cfg), build, load) == ("w", 3)
    assert len(calls) == 1 and not calls[0].exists()  # built in a temporary folder
    run = store.run("model", cfg)
    assert run.complete and run.path.parent == tmp_path / "01_test" / "model"
    assert run.record()["config"] == cfg and run.record()["chapter"] == "01_test"
    # another configuration is another run
    store.cached("model", {"lr": 0.2, "seed": 0}, build, load)
    assert len(calls) == 2 and len(store.runs("model")) == 2
    with pytest.raises(CheckpointError, match="missing from run model/"):
        run.file("other.bin")


def test_a_failed_build_publishes_nothing_and_a_half_run_is_replaced(tmp_path):
    store = RunStore("c", root=tmp_path)

    def broken(folder):
        (folder / "part").write_text("x")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        store.cached("m", {"a": 1}, broken, lambda run: run)
    run = store.run("m", {"a": 1})
    assert not run.complete and not run.path.exists()
    assert os.listdir(tmp_path / "c" / "m") == []  # no temporary folder left behind
    # a folder without run.json (a run killed before it was published) is rebuilt
    run.path.mkdir(parents=True)
    (run.path / "stale").write_text("old")
    store.cached("m", {"a": 1}, lambda f: (f / "new").write_text("n") and None, lambda r: r)
    assert run.complete and not (run.path / "stale").exists() and (run.path / "new").exists()


def test_runs_root_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIOREPRO_RUNS", str(tmp_path / "elsewhere"))
    assert runs_dir() == tmp_path / "elsewhere"
    assert RunStore("x").root == tmp_path / "elsewhere"
    monkeypatch.delenv("AUDIOREPRO_RUNS")
    monkeypatch.setenv("AUDIOREPRO_DATA", str(tmp_path / "data"))
    assert runs_dir() == tmp_path / "data" / "runs"


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "a.json"
    atomic_write(target, lambda tmp: tmp.write_text(json.dumps({"v": 1})))
    assert read_json(target) == {"v": 1}

    def fail(tmp):
        tmp.write_text("partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail)
    assert read_json(target) == {"v": 1} and sorted(os.listdir(tmp_path)) == ["a.json"]


def test_model_weights_round_trip_through_storage(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))
    save_model_weights(model, tmp_path / "m.safetensors")
    fresh = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))
    load_model_weights(fresh, tmp_path / "m.safetensors")
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(CheckpointError, match=r"2 unexpected key\(s\)"):
        load_model_weights(torch.nn.Sequential(torch.nn.Linear(3, 2)), tmp_path / "m.safetensors")


def _npz(path, compressed=False):
    arrays = {"a": np.arange(4000, dtype=np.float32).reshape(100, 40), "b": np.ones(3)}
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return arrays


def test_load_npz_reads_every_array(tmp_path):
    arrays = _npz(tmp_path / "x.npz")
    out = load_npz(tmp_path / "x.npz")
    assert sorted(out) == ["a", "b"] and all(np.array_equal(out[k], arrays[k]) for k in arrays)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("truncate", "truncated or corrupt"),  # the central directory is gone: BadZipFile
        ("corrupt", "truncated or corrupt"),  # a damaged array, found only when it is read
        ("npy", "a single .npy array"),
        ("missing", "file not found"),
    ],
)
def test_load_npz_errors_name_the_file_and_what_was_expected(tmp_path, damage, reason):
    path = tmp_path / "feats.npz"
    if damage == "npy":
        np.save(tmp_path / "x.npy", np.zeros(3))
        (tmp_path / "x.npy").rename(path)
    elif damage != "missing":
        _npz(path, compressed=damage == "corrupt")
        data = path.read_bytes()
        if damage == "truncate":
            path.write_bytes(data[: len(data) // 2])
        else:  # flip bytes inside the compressed data of the first member
            mid = 200
            path.write_bytes(
                data[:mid] + bytes(255 - b for b in data[mid : mid + 64]) + data[mid + 64 :]
            )
    with pytest.raises(ArrayFileError) as err:
        load_npz(path, expected="MFCC features of the test set")
    text = str(err.value)
    assert text.startswith(f"{path}: ") and reason in text, text
    assert text.endswith("expected MFCC features of the test set")
    assert err.value.path == path


def test_a_run_is_built_under_its_lock_and_the_lock_file_goes_with_it(tmp_path):
    """The lock a second process would wait on (flock is per open file, so a second open in
    this process conflicts too); the file is removed when the build ends, failed or not."""
    import fcntl

    store = RunStore("c", root=tmp_path)
    run = store.run("m", {"a": 1})
    lock_file = run.path.parent / f".lock-{run.key}"
    seen = []

    def build(folder):
        with open(lock_file, "a+b") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        seen.append(lock_file.exists())
        (folder / "w").write_text("w")

    store.cached("m", {"a": 1}, build, lambda r: r)
    assert seen == [True] and run.complete and not lock_file.exists()

    def broken(folder):
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        store.cached("m", {"a": 2}, broken, str)
    assert sorted(os.listdir(run.path.parent)) == [run.key]


def test_checkpoints_of_a_command_are_kept_on_an_error_and_shared_with_no_second_process(
    tmp_path, capsys
):
    """``resumable``: the staging folder goes once the block ends well and stays when it
    raises (the same command continues from it); while another process trains the same run,
    a second gets no folder (it trains without checkpoints, saying so) and leaves the first
    one's alone."""
    import fcntl

    store = RunStore("c", root=tmp_path)
    run = store.run("train", {"a": 1})
    with store.resumable(run) as staging:
        (staging / "checkpoint").write_text("1")
    assert not staging.exists()
    with pytest.raises(KeyboardInterrupt), store.resumable(run) as staging:
        (staging / "checkpoint").write_text("2")
        raise KeyboardInterrupt
    assert (staging / "checkpoint").read_text() == "2"
    lock_file = run.path.parent / f".lock-{run.key}"
    assert not lock_file.exists()
    with store.resumable(run) as first:
        assert (first / "checkpoint").read_text() == "2"  # found again
        with open(lock_file, "a+b") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # held
        with store.resumable(run) as second:  # flock is per open file: as another process
            assert second is None
        assert "another process is training the same run now" in capsys.readouterr().err
        assert (first / "checkpoint").is_file()
    assert not first.exists() and not lock_file.exists()
    with pytest.raises(ValueError), store.resumable(run) as staging:  # failed before a
        raise ValueError("a --set out of range")  # checkpoint: nothing left to resume from
    assert not staging.exists()


def test_an_error_in_a_temporary_output_names_the_output_given(tmp_path):
    """A refused write inside ``output_folder``'s or ``atomic_write``'s temporary folder or
    file (``.run.tmp-3703-fce211dc``, a name the user never gave) names the output instead."""
    import errno

    from audiorepro.storage import atomic_write, output_folder

    out = tmp_path / "run"
    with pytest.raises(PermissionError) as caught:
        with output_folder(out) as folder:
            raise PermissionError(errno.EACCES, "Permission denied", str(folder / "w.json"))
    assert caught.value.filename == str(out / "w.json")
    assert caught.value.errno == errno.EACCES and not out.exists()

    def refused(tmp):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp))

    with pytest.raises(PermissionError) as caught:
        atomic_write(tmp_path / "x.tsv", refused)
    assert caught.value.filename == str(tmp_path / "x.tsv")

    def elsewhere(tmp):
        raise OSError(errno.EIO, "other", "/elsewhere")

    with pytest.raises(OSError, match="other") as caught:  # another path: as it was
        atomic_write(tmp_path / "x.tsv", elsewhere)
    assert caught.value.filename == "/elsewhere"
    assert sorted(os.listdir(tmp_path)) == []


def test_the_same_tensors_make_the_same_bytes_whatever_order_safetensors_writes_metadata(
    tmp_path,
):
    """safetensors writes ``__metadata__`` from a hash map, in an order that changes from call
    to call (6 orders in 12 calls of three keys): the same weights gave files of other
    checksums. save_tensors sorts it, and the file reads back the same."""
    import hashlib

    from safetensors import safe_open
    from safetensors.torch import load_file

    from audiorepro.storage import save_tensors

    tensors = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(4)}
    metadata = {"format": "pt", "zeta": "1", "alpha": '{"x": "é"}'}
    digests = set()
    for k in range(12):
        save_tensors(tensors, tmp_path / f"{k}.safetensors", metadata=metadata)
        digests.add(hashlib.sha256((tmp_path / f"{k}.safetensors").read_bytes()).hexdigest())
    assert len(digests) == 1
    back = load_file(str(tmp_path / "0.safetensors"))
    assert all(torch.equal(back[k], v) for k, v in tensors.items())
    with safe_open(str(tmp_path / "0.safetensors"), "pt") as fh:
        assert fh.metadata() == metadata
