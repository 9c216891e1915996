"""Several processes, one record: under ``accelerate launch`` only the main process writes ledger
rows and publishes run-store entries; the others wait for it and read the published run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audiorepro import storage
from audiorepro.reporting import read_ledger
from audiorepro.storage import RunStore
from conftest import subprocess_timeout

# An experiments-level script: chapter 04's smallest training run under preset smoke, its two
# seeds trained, evaluated and recorded, as a page does.
SCRIPT = """
import hashlib, json, os
from audiorepro.config import replace
from audiorepro.experiments import awe
from audiorepro.reporting import record_result

config = awe.load_config("smoke")
data = awe.load_data(config)
for seed in (0, 1):
    cfg = replace(config, seed=seed)
    run = awe.train(cfg, data)
    metrics = awe.evaluate(run.model, data["dev"])
    record_result("04_awe", "mp_test", metrics, preset="smoke", seed=seed)
    digest = hashlib.sha256((run.path / "model.safetensors").read_bytes()).hexdigest()
    rank = int(os.environ["RANK"])
    # One file per rank and seed: two processes printing to one pipe can interleave their lines.
    with open(os.path.join(os.environ["RESULTS_OUT"], f"{rank}-{seed}.json"), "w") as out:
        json.dump({"rank": rank, "seed": seed, "run": run.path.name, "weights": digest,
                   **metrics}, out)
"""


def _launcher() -> Path:
    return Path(sys.executable).parent / "accelerate"


@pytest.mark.processes
@pytest.mark.slow
def test_two_processes_write_one_ledger_row_and_one_run_each(tmp_path, session_data_dir):
    """``accelerate launch --multi_gpu --num_processes 2`` on a CPU machine: two gloo ranks."""
    from audiorepro.experiments import awe

    awe.load_data(awe.load_config("smoke"))  # the smoke corpus, generated once beforehand
    script = tmp_path / "train_two_seeds.py"
    script.write_text(SCRIPT)
    results = tmp_path / "results_by_rank"
    results.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(storage.__file__).resolve().parents[1]),
        "AUDIOREPRO_RUNS": str(tmp_path / "runs"),
        "OMP_NUM_THREADS": "1",
        "RESULTS_OUT": str(results),
    }
    proc = subprocess.run(
        [str(_launcher()), "launch", "--multi_gpu", "--num_processes", "2",
         "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
         "--main_process_port", "29517", str(script)],
        capture_output=True, text=True, env=env, timeout=subprocess_timeout(300),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [json.loads(path.read_text()) for path in sorted(results.glob("*.json"))]
    assert sorted((r["rank"], r["seed"]) for r in lines) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for seed in (0, 1):
        ranks = [r for r in lines if r["seed"] == seed]
        # every rank reads the one published run: same folder, same weights, same metrics
        assert len({(r["run"], r["weights"], r["crossview_ap"]) for r in ranks}) == 1

    ledger = read_ledger(tmp_path / "results" / "ledger.jsonl")
    assert sorted(r["seed"] for r in ledger) == [0, 1]  # each result exactly once
    runs = RunStore("04_awe", tmp_path / "runs").runs("model")
    assert sorted(r.key for r in runs) == sorted({r["run"] for r in lines})
    assert len(runs) == 2
    leftovers = [p.name for p in (tmp_path / "runs" / "04_awe" / "model").iterdir()]
    assert sorted(leftovers) == sorted(r.key for r in runs)  # no temporary folder left


def _two_processes(monkeypatch, rank: int, calls: list[str]) -> None:
    """This process as rank ``rank`` of two, with the collectives recorded instead of run."""

    class Group:
        def barrier(self):
            calls.append("barrier")

        def broadcast_object_list(self, box, src):
            calls.append(f"broadcast from {src}")
            box[0] = False  # the main process has no complete run

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setattr(storage, "_process_group", lambda: Group())


def test_only_the_main_process_publishes(monkeypatch, tmp_path):
    built = []

    def build(folder: Path):
        built.append(folder)
        (folder / "weights.bin").write_bytes(b"w")
        return {"steps": 3}

    calls: list[str] = []
    store = RunStore("ch", tmp_path)
    run = store.run("model", {"a": 1})
    _two_processes(monkeypatch, 1, calls)
    store.publish(run, build)
    assert len(built) == 1  # the other rank builds too: training under DDP is collective
    assert not run.path.exists() and calls == ["barrier"]  # ... but does not publish
    assert [p.name for p in run.path.parent.iterdir()] == []  # and leaves nothing behind

    _two_processes(monkeypatch, 0, calls)
    store.publish(run, build)
    assert run.complete and run.record()["steps"] == 3 and calls == ["barrier", "barrier"]


def test_every_process_decides_as_the_main_one(monkeypatch, tmp_path):
    """A rank that sees the run already complete still builds it when the main process does
    not (else the main process would wait for it in the training's collectives)."""
    store = RunStore("ch", tmp_path)
    run = store.publish(store.run("model", {"a": 1}), lambda folder: None)
    calls: list[str] = []
    _two_processes(monkeypatch, 1, calls)
    built = []
    store.cached("model", {"a": 1}, lambda folder: built.append(folder), lambda r: r)
    assert calls == ["broadcast from 0", "barrier"] and len(built) == 1
    assert run.complete


def test_one_process_needs_no_process_group(monkeypatch, tmp_path):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)

    def no_group():
        raise AssertionError("a single process must not start a process group")

    monkeypatch.setattr(storage, "_process_group", no_group)
    store = RunStore("ch", tmp_path)
    got = store.cached("model", {"a": 1}, lambda folder: {"x": 1}, lambda r: r.record()["x"])
    assert got == 1 and storage.main_process_value(5) == 5
