"""Faults: a disk that refuses a write (full, over quota, failing) during a checkpoint, a
run-store publish or a command's output leaves the previous state intact and says so in one
message; two processes building the same run build it once and both load it.

The full disk is injected by making the writer raise ``OSError(ENOSPC)`` part-way, after some
files were written (or, for safetensors, with the ``SafetensorError`` it raises on a full disk).
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import time
from pathlib import Path

import pytest
import safetensors.torch
import torch
from safetensors import SafetensorError

from audiorepro import storage
from audiorepro.storage import RunStore, WriteError, output_folder
from audiorepro.training import checkpoint
from audiorepro.training.checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)

FULL = "No space left on device"


def full_disk_after(
    monkeypatch, module, name: str, good_calls: int, rust: bool = False, under: Path | None = None
) -> list:
    """Make ``module.name`` (a writer) work ``good_calls`` times, then fail as a full disk
    does, after writing part of its file; with ``under``, only for files under that folder
    (the disk that fills), others written as ever."""
    real = getattr(module, name)
    calls = []

    def writer(*args, **kwargs):
        target = next(a for a in args if isinstance(a, str | Path))
        if under is not None and not Path(target).is_relative_to(under):
            return real(*args, **kwargs)
        calls.append(args)
        if len(calls) <= good_calls:
            return real(*args, **kwargs)
        Path(target).write_bytes(b"\0" * 10)  # half a file, as a disk that filled up leaves
        if rust:
            raise SafetensorError(
                f"Error while serializing: I/O error: {FULL} (os error 28) at path {target!r}"
            )
        raise OSError(errno.ENOSPC, FULL)

    monkeypatch.setattr(module, name, writer)
    return calls


def tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))


def writes(text: str):
    """A run's build that writes one file, ``w.txt``."""
    return lambda folder: (folder / "w.txt").write_text(text) and None


def no_leftovers(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if ".tmp" in p.name], list(folder.iterdir())


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "module, writer, good, rust",
    [
        (safetensors.torch, "save_file", 0, True),  # the model weights, as safetensors fails
        (safetensors.torch, "save_file", 1, False),  # the optimizer, after the model's file
        (checkpoint, "write_json", 2, False),  # the manifest, after optimizer.json, pos.json
    ],
    ids=["model-weights", "optimizer", "manifest"],
)
def test_a_full_disk_during_a_checkpoint_keeps_the_previous_one_and_says_so(
    tmp_path, monkeypatch, module, writer, good, rust
):
    root = tmp_path / "checkpoints"
    model = tiny_model(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(2, 3)).sum().backward()
    optimizer.step()
    save_checkpoint(root, 1, model=model, optimizer=optimizer, components={"pos": {"step": 1}})
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer.step()  # the state the failing checkpoint would have kept

    full_disk_after(monkeypatch, module, writer, good, rust)
    with pytest.raises(WriteError) as caught:
        save_checkpoint(root, 2, model=model, optimizer=optimizer, components={"pos": {"step": 2}})
    message = str(caught.value)
    assert message.startswith(f"{root}: could not write: {FULL}")
    assert " free on that disk" in message and "step_00000002 was not saved" in message
    assert "newest: step_00000001, where a resumed run continues" in message
    assert "To go on, free some space" in message
    assert caught.value.errno == errno.ENOSPC

    monkeypatch.undo()
    assert list_checkpoints(root) == [root / "step_00000001"]
    assert (root / "latest").read_text().strip() == "step_00000001"
    no_leftovers(root)
    fresh = tiny_model(1)
    loaded = load_checkpoint(root / "step_00000001", model=fresh)
    assert loaded.step == 1 and loaded.components["pos"] == {"step": 1}
    assert all(torch.equal(fresh.state_dict()[k], saved[k]) for k in saved)


def test_a_full_disk_at_the_first_checkpoint_leaves_nothing_and_says_there_was_none(
    tmp_path, monkeypatch
):
    full_disk_after(monkeypatch, safetensors.torch, "save_file", 0)
    with pytest.raises(WriteError, match="was not saved and left nothing behind; there was no"):
        save_checkpoint(tmp_path / "ck", 5, model=tiny_model(0))
    assert latest_checkpoint(tmp_path / "ck") is None
    no_leftovers(tmp_path / "ck")


def test_other_errors_keep_their_own_type(tmp_path, monkeypatch):
    """A missing folder or a refused permission is not a full disk: it is not reworded."""

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(safetensors.torch, "save_file", denied)
    with pytest.raises(PermissionError):
        save_checkpoint(tmp_path / "ck", 1, model=tiny_model(0))


# --------------------------------------------------------------------------------------------
# The run store
# --------------------------------------------------------------------------------------------


def test_a_full_disk_during_a_publish_publishes_nothing_and_keeps_the_checkpoints(
    tmp_path, monkeypatch
):
    store = RunStore("01_test", root=tmp_path)
    load = lambda run: run.file("w.txt").read_text()  # noqa: E731
    assert store.cached("model", {"seed": 0}, writes("0"), load) == "0"
    run = store.run("model", {"seed": 1})

    def build(folder: Path) -> None:
        save_checkpoint(store.staging(run) / "checkpoints", 3, model=tiny_model(0))
        (folder / "w.txt").write_text("1")
        storage.save_tensors({"w": torch.ones(3)}, folder / "model.safetensors")

    full_disk_after(monkeypatch, safetensors.torch, "save_file", 1, rust=True)
    with pytest.raises(WriteError) as caught:
        store.cached("model", {"seed": 1}, build, load)
    message = str(caught.value)
    assert message.startswith(f"{run.path}: could not write: {FULL}")
    assert "Nothing was published: the run store holds what it held before" in message
    assert f"the checkpoints in {run.path.parent / ('.staging-' + run.key)} are kept" in message
    assert "AUDIOREPRO_RUNS" in message
    monkeypatch.undo()
    assert not run.complete and not run.path.exists()
    assert [r.config for r in store.runs("model")] == [{"seed": 0}]  # the earlier run, intact
    assert latest_checkpoint(store.staging(run) / "checkpoints").name == "step_00000003"
    no_leftovers(run.path.parent)


def test_a_full_disk_writing_run_json_publishes_nothing(tmp_path, monkeypatch):
    store = RunStore("01_test", root=tmp_path)
    full_disk_after(monkeypatch, storage, "write_json", 0)
    with pytest.raises(WriteError, match=r"Nothing was published: the run store holds what it"):
        store.cached("model", {"seed": 0}, writes("w"), str)
    monkeypatch.undo()
    assert store.runs("model") == []
    no_leftovers(tmp_path / "01_test" / "model")
    assert store.cached("model", {"seed": 0}, writes("w"), bool)


# --------------------------------------------------------------------------------------------
# A command's output
# --------------------------------------------------------------------------------------------


def test_output_folder_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    out = tmp_path / "new" / "deeper" / "run"
    full_disk_after(monkeypatch, storage, "write_json", 1)
    with pytest.raises(WriteError) as caught:
        with output_folder(out) as folder:
            storage.write_json(folder / "a.json", {"a": 1})
            storage.write_json(folder / "b.json", {"b": 2})
    assert str(caught.value).startswith(f"{out}: could not write: {FULL}")
    assert "the folder was not created" in str(caught.value)
    assert not (tmp_path / "new").exists()  # nor the parents made for it
    monkeypatch.undo()
    with output_folder(out) as folder:
        storage.write_json(folder / "a.json", {"a": 1})
    assert sorted(p.name for p in out.iterdir()) == ["a.json"]
    # an earlier run folder the command may reuse: its files stay until all new ones are written
    full_disk_after(monkeypatch, storage, "write_json", 1)
    with pytest.raises(WriteError, match="Its earlier files are as they were; none was replaced"):
        with output_folder(out) as folder:
            storage.write_json(folder / "a.json", {"a": 2})
            storage.write_json(folder / "b.json", {"b": 2})
    assert storage.read_json(out / "a.json") == {"a": 1} and not (out / "b.json").exists()
    no_leftovers(out.parent)


def test_a_run_written_over_one_of_more_models_drops_their_folders_and_nothing_else(
    tmp_path, monkeypatch, capsys
):
    from audiorepro.training.members import earlier_member

    out = tmp_path / "run"
    for name in ("member-2", "member-3"):  # an earlier run of three models
        (out / name).mkdir(parents=True)
        storage.write_json(out / name / "run.json", {"seed": 1})
    storage.write_json(out / "run.json", {"members": ["member-2", "member-3"]})
    (out / "member-notes").mkdir()  # made by the user: no run.json, or not member-<number>
    (out / "member-4").mkdir()
    (out / "notes.txt").write_text("mine")
    stale = earlier_member("run.json")
    full_disk_after(monkeypatch, storage, "write_json", 1)  # a failed write removes nothing
    with pytest.raises(WriteError):
        with output_folder(out, stale=stale) as folder:
            storage.write_json(folder / "run.json", {"members": ["member-2"]})
            storage.write_json(folder / "b.json", {})
    assert (out / "member-3" / "run.json").is_file()
    monkeypatch.undo()
    with output_folder(out, stale=stale) as folder:  # two models now
        storage.write_json(folder / "run.json", {"members": ["member-2"]})
        (folder / "member-2").mkdir()
        storage.write_json(folder / "member-2" / "run.json", {"seed": 2})
    assert sorted(p.name for p in out.iterdir()) == [
        "member-2", "member-4", "member-notes", "notes.txt", "run.json",
    ]  # fmt: skip
    assert storage.read_json(out / "member-2" / "run.json") == {"seed": 2}
    err = capsys.readouterr().err  # said, once
    assert err.count("audiorepro: removed ") == 1
    assert f"removed {out / 'member-3'}: the earlier run wrote it, and this run has none" in err
    with output_folder(out) as folder:  # without stale, every earlier entry stays
        storage.write_json(folder / "run.json", {})
    assert (out / "member-2").is_dir()


def test_a_file_a_command_writes_keeps_the_earlier_one_on_a_full_disk(tmp_path):
    """``awe embed --out EMB.npz`` writes through ``atomic_write(say_faults=True)``."""
    out = tmp_path / "emb.npz"

    def full(tmp: Path) -> None:
        tmp.write_bytes(b"PK half an archive")
        raise OSError(errno.ENOSPC, FULL)

    with pytest.raises(WriteError, match=rf"emb.npz: could not write: {FULL}; .* free on that"):
        storage.atomic_write(out, full, say_faults=True)
    assert list(tmp_path.iterdir()) == []  # not created, no temporary file
    out.write_bytes(b"earlier")
    with pytest.raises(WriteError, match="Its earlier content is as it was"):
        storage.atomic_write(out, full, say_faults=True)
    assert out.read_bytes() == b"earlier" and list(tmp_path.iterdir()) == [out]
    with pytest.raises(OSError) as caught:  # a library write keeps the disk's own error
        storage.atomic_write(out, full)
    assert type(caught.value) is OSError


def test_units_train_on_a_full_disk_leaves_no_folder_and_says_so(tmp_path, monkeypatch, capsys):
    from test_out_safety import noise_folder

    from audiorepro.cli import main

    audio = noise_folder(tmp_path, monkeypatch)  # the run store under tmp_path
    out = tmp_path / "results" / "u"  # its disk full; the run store's checkpoints elsewhere
    full_disk_after(monkeypatch, safetensors.torch, "save_file", 0, rust=True, under=out.parent)
    argv = ["units", "train", "--audio", str(audio), "--preset", "smoke", "--out", str(out)]
    code = main(argv + ["--set", "train.max_steps=2", "--set", "train.segment_frames=32"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err and "SafetensorError" not in err
    assert err.startswith(f"audiorepro: error: {out}: could not write: {FULL}")
    assert "free on that disk" in err and "the folder was not created" in err
    # the file the disk refused, named inside the --out given, not the temporary folder
    assert f"({out / 'model.safetensors'})" in err and ".tmp" not in err
    assert not out.exists() and not out.parent.exists()


# --------------------------------------------------------------------------------------------
# Two processes, one run
# --------------------------------------------------------------------------------------------


def _build_in_a_process(root: str, log: str, start: float, via: str) -> tuple[str, float]:
    """One process of the test below: ask the store for one run, as a page would: through
    ``RunStore.cached``, or checking ``run.complete`` then calling ``RunStore.publish``, as
    chapter 01's runs do."""
    time.sleep(max(0.0, start - time.time()))  # both ask at the same moment
    store = RunStore("01_test", root=root)

    def build(folder: Path) -> dict:
        with open(log, "a") as handle:  # one line per build
            handle.write(f"{os.getpid()}\n")
        staging = store.staging(store.run("model", {"seed": 0}))
        model = tiny_model(0)
        for step in (1, 2, 3):  # the checkpoints a build resumes from, in the shared staging
            time.sleep(0.3)
            save_checkpoint(staging / "checkpoints", step, model=model, keep=1)
        storage.save_model_weights(model, folder / "model.safetensors")
        return {"built_by": os.getpid()}

    def load(run) -> tuple[str, float]:
        model = tiny_model(1)
        storage.load_model_weights(model, run.file("model.safetensors"))
        return run.key, float(sum(p.detach().sum() for p in model.parameters()))

    if via == "cached":
        return store.cached("model", {"seed": 0}, build, load)
    run = store.run("model", {"seed": 0})
    if not run.complete:
        store.publish(run, build)
    return load(run)


@pytest.mark.parametrize("via", ["cached", "publish"])
def test_two_processes_building_one_run_build_it_once_and_both_load_it(tmp_path, via):
    log = tmp_path / "builds.log"
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        start = time.time() + 4.0  # after both have imported torch
        args = (str(tmp_path / "runs"), str(log), start, via)
        results = pool.starmap(_build_in_a_process, [args, args])
    assert results[0] == results[1]
    assert len(log.read_text().split()) == 1  # built once: the other process waited
    run = RunStore("01_test", root=tmp_path / "runs").run("model", {"seed": 0})
    assert run.complete and results[0][0] == run.key
    expected = float(sum(p.detach().sum() for p in tiny_model(0).parameters()))
    assert results[0][1] == pytest.approx(expected)
    assert not (run.path.parent / f".staging-{run.key}").exists()
    no_leftovers(run.path.parent)
