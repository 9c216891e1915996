"""bench/paper_dry_run.py: the paper presets load, train, evaluate and record on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from audiorepro.storage import RunStore
from conftest import REPO, subprocess_timeout


@pytest.mark.slow
@pytest.mark.dry_run
def test_paper_presets_of_chapters_03_and_04_run_end_to_end(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib"), "OMP_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench/paper_dry_run.py"), "--out", str(tmp_path),
         "--chapters", "03_zerospeech,04_awe", "--keep-runs"],
        capture_output=True, text=True, env=env, timeout=subprocess_timeout(600),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "03_zerospeech: ok" in proc.stdout and "04_awe: ok" in proc.stdout
    ledger = [json.loads(line) for line in (tmp_path / "results/ledger.jsonl").open()]
    assert {r["preset"] for r in ledger} == {"paper"}

    rows = [r for r in ledger if r["chapter"] == "03_zerospeech"]
    assert {r["page"] for r in rows} == {"03_abx_bitrate", "04_inverter"}
    base = [r for r in rows if r["tags"].get("row") == "base"]
    assert {r["tags"]["language"] for r in base} == {"english", "surprise"}
    assert {r["config"]["d_model"] for r in base} == {256}  # the paper preset's VQ-VAE
    assert all("abx_across" in r["metrics"] for r in base)
    assert RunStore("03_zerospeech", tmp_path / "runs").runs("inverter")
    release = tmp_path / "data" / "zerospeech2019" / "2019"
    assert (release / "english" / "bitrate_filelist.txt").is_file()
    assert (release / "surprise" / "test").is_dir()

    rows = [r for r in ledger if r["chapter"] == "04_awe"]
    assert rows and {r["preset"] for r in rows} == {"paper"}
    pages = {r["page"] for r in rows}
    assert pages == {"02_train", "03_evaluate"}
    # the paper's model (book/04_awe/presets/paper.yaml), trained and stored in the run store
    assert {r["config"]["model"]["d_model"] for r in rows} == {256}
    assert {r["config"]["model"]["acoustic_layers"] for r in rows} == {6}
    runs = RunStore("04_awe", tmp_path / "runs").runs("model")
    assert runs and all(r.complete for r in runs)
    # the corpus sits where the paper preset looks for it, in the Switchboard word layout
    words = tmp_path / "data" / "swbd_words"
    assert {"train.list", "dev.list", "test.list", "vocab.json"} <= {
        p.name for p in words.iterdir()
    }


def test_unknown_chapter_is_an_error():
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench/paper_dry_run.py"), "--chapters", "07_nothing"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "lib")},
    )  # fmt: skip
    assert proc.returncode == 2 and "07_nothing" in proc.stderr


def test_the_paper_text_model_loads_offline_from_the_hub_cache_layout(tmp_path):
    """``write_text_model`` leaves roberta-large where a download would be: the chapter's
    ``TextEncoder("roberta-large")`` finds it with the hub offline (small sizes here)."""
    script = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(REPO / "bench")!r})
import paper_dry_run as dry
dry.use_folder(Path({str(tmp_path)!r}))
sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
snapshot = dry.write_text_model("roberta-large", ["a dog barks", "rain on a roof"] * 20, sizes)
from audiorepro.models.text import TextEncoder
text = TextEncoder("roberta-large", pretrained=True)
print(snapshot.parent.parent.name, text.dim, tuple(text(["A dog barks!", "rain"]).shape),
      text.tokenizer.convert_ids_to_tokens(text.tokenizer("a dog").input_ids)[0],
      text.model.config.vocab_size)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["models--roberta-large", "32", "(2,", "32)", "<s>", "50265"]
    hub = tmp_path / "huggingface/hub/models--roberta-large"
    assert (hub / "refs/main").read_text() == "0" * 40
    files = {p.name for p in (hub / "snapshots" / ("0" * 40)).iterdir()}
    assert {"config.json", "vocab.json", "merges.txt", "model.safetensors"} <= files


@pytest.mark.slow
def test_released_layouts_of_the_paper_encoders_load_into_the_paper_configs(tmp_path, monkeypatch):
    """Every released AudioSet file chapters 01-02's paper presets name, written by the dry
    run from a paper-size encoder, loads (strictly) through ``audio_pretrained: audioset``."""
    sys.path.insert(0, str(REPO / "bench"))
    import paper_dry_run as dry

    from audiorepro.experiments.distillation import config as distillation
    from audiorepro.experiments.retrieval import stages as retrieval
    from audiorepro.models.audio_encoders import build_audio_encoder

    monkeypatch.setenv("AUDIOREPRO_CHECKPOINTS", str(tmp_path))
    cfg = distillation.load_config("paper")
    models = [distillation.teacher_config(cfg, t).model for t in cfg.teachers] + [
        retrieval.ablation_config(cfg.retrieval, kind, setting).model
        for kind in ("audio_encoder", "snippet_s")
        for setting in retrieval.ablation_settings(cfg.retrieval)[kind]
    ]
    written = dry.write_released_checkpoints(models)
    assert sorted(p.name for p in written) == sorted([
        "passt-s-f128-p16-s16-ap.468.pt", "passt-s-f128-20sec-p16-s10-ap.474-swa.pt",
        "Cnn14_mAP=0.431.pth", "atst_as2M.ckpt", "mn40_as_ext_mAP_487.pt",
    ])  # fmt: skip
    for model in models:  # PaSST-S20 at 2-15 s snippets: the 20 s time encoding is cut
        build_audio_encoder(model)


def _dry_run_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("paper_dry_run", REPO / "bench/paper_dry_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("passes", [True, False])
def test_its_own_temporary_folder_is_removed_only_when_every_chapter_passed(
    tmp_path, monkeypatch, capsys, passes
):
    from audiorepro import reporting

    dry = _dry_run_module()
    for name in ("AUDIOREPRO_DATA", "AUDIOREPRO_RUNS", "AUDIOREPRO_RESULTS",
                 "AUDIOREPRO_CHECKPOINTS", "HF_HOME", "HF_HUB_OFFLINE"):  # fmt: skip
        monkeypatch.setenv(name, str(tmp_path / "unused"))  # restored after the test
    out = tmp_path / "made-by-the-script"
    monkeypatch.setattr(dry.tempfile, "mkdtemp", lambda prefix: str(out.mkdir() or out))

    def chapter(folder):
        (folder / "data" / "corpus.bin").write_bytes(b"x")
        if passes:
            reporting.record_result("fake", "p", {"m": 1.0}, preset="paper", seed=0)
        return "done"

    monkeypatch.setattr(dry, "CHAPTERS", {"fake": chapter})
    assert dry.main(["--chapters", "fake"]) == (0 if passes else 1)
    assert out.exists() is not passes
    assert ("removed" in capsys.readouterr().out) is passes
