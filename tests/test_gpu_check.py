"""bench/gpu_check.py: the paper-size models' training steps, checked on the CPU at tiny sizes."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys

import pytest
import torch

from audiorepro.models.awe import AWEModelConfig
from audiorepro.models.dual_encoder import DualEncoderConfig
from audiorepro.models.inverter import InverterConfig
from audiorepro.models.vqvae import VQVAEConfig
from conftest import REPO

_spec = importlib.util.spec_from_file_location("gpu_check", REPO / "bench/gpu_check.py")
gpu_check = importlib.util.module_from_spec(_spec)
sys.modules["gpu_check"] = gpu_check  # its dataclasses look their module up
_spec.loader.exec_module(gpu_check)

CPU = torch.device("cpu")
TINY_TEXT = dict(
    model_type="bert",
    vocab_size=100,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=40,
)


def test_paper_specs_read_the_paper_presets():
    specs = {s.name: s for s in gpu_check.paper_specs()}
    assert list(specs) == [
        "01-passt",
        "02-atst",
        "02-mobilenet",
        "03-vqvae",
        "03-inverter",
        "04-awe",
    ]
    # the batch sizes of book/<chapter>/presets/paper.yaml
    assert [s.batch_size for s in specs.values()] == [64, 64, 32, 32, 8, 256]
    assert "PaSST-N + roberta-large text, 30 s clips" == specs["01-passt"].what
    assert "mn40_as_ext" in specs["02-mobilenet"].what
    batch = specs["01-passt"].make_batch(3, CPU, torch.Generator().manual_seed(0))
    assert batch["feats"].shape == (3, 3000, 128)
    batch = specs["02-atst"].make_batch(2, CPU, torch.Generator().manual_seed(0))
    assert batch["feats"].shape == (2, 3000, 64)
    feats, lengths, speakers = specs["03-vqvae"].make_batch(4, CPU, torch.Generator())
    assert feats.shape == (4, 128, 39) and lengths.tolist() == [128] * 4


def test_roberta_large_architecture_is_the_published_one():
    arch = gpu_check.text_architecture("roberta-large")
    assert (arch["hidden_size"], arch["num_hidden_layers"], arch["num_attention_heads"]) == (
        1024,
        24,
        16,
    )
    with pytest.raises(gpu_check.CheckError, match="not-a-model"):
        gpu_check.text_architecture("not-a-model")


def test_text_architecture_reads_a_local_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**TINY_TEXT, "architectures": ["x"]}))
    assert gpu_check.text_architecture(str(tmp_path)) == TINY_TEXT


@pytest.mark.parametrize("encoder", ["passt", "atst", "mobilenet"])
def test_dual_encoder_step_on_cpu(encoder):
    cfg = DualEncoderConfig(
        audio_encoder=encoder,
        passt_variant="tiny",
        atst_variant="tiny",
        mobilenet_variant="mn01",
        snippet_s=4.0,
        embed_dim=16,
    )
    spec = gpu_check.dual_encoder_spec(
        f"t-{encoder}", cfg, batch_size=64, frames=500, lr=1e-3, text=TINY_TEXT
    )
    result = gpu_check.check_model(spec, CPU, steps=1, warmup=1, precision="fp32", batch_size=2)
    assert result.error is None and result.fits and result.batch == 2
    assert result.step_s > 0 and result.peak_gib is None and math_finite(result.loss)
    assert result.parameters_m > 0


def math_finite(value):
    return value is not None and torch.isfinite(torch.tensor(value)).item()


def test_speech_steps_on_cpu():
    vq = VQVAEConfig(d_model=32, n_heads=2, ffn_dim=64, code_dim=8, codebook_size=16,
                     speaker_dim=8, decoder_channels=32)  # fmt: skip
    inv = InverterConfig(code_dim=8, n_bins=33, repeat=4, d_model=16, n_heads=2, ffn_dim=32)
    awe = AWEModelConfig(d_model=16, acoustic_layers=1, acoustic_heads=2, acoustic_ff=32,
                         phone_layers=1, phone_heads=2, phone_ff=32)  # fmt: skip
    specs = [
        gpu_check.vqvae_spec(vq, batch_size=4, segment_frames=32, lr=1e-3),
        gpu_check.inverter_spec(inv, batch_size=4, segment_codes=8, lr=1e-3),
        gpu_check.awe_spec(awe, batch_size=4, lr=1e-3, margin=0.5, k=8, distance="cos"),
    ]
    for spec in specs:
        result = gpu_check.check_model(spec, CPU, steps=2, warmup=0, precision="fp32")
        assert result.error is None, result.error
        assert result.batch == 4 and result.fits and math_finite(result.loss)


def _spec_that(fails_above: int | None = None, error: Exception | None = None):
    """A tiny linear model that runs out of memory above a batch size, or raises ``error``."""

    def build():
        return torch.nn.Linear(3, 1)

    def make_batch(b, device, gen):
        if fails_above is not None and b > fails_above:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if error is not None:
            raise error
        return torch.randn(b, 3, generator=gen)

    return gpu_check.ModelSpec(
        "toy", "a linear layer", 16, build, make_batch, lambda m, x: m(x).pow(2).mean()
    )


def test_out_of_memory_halves_the_batch_until_one_fits():
    result = gpu_check.check_model(
        _spec_that(fails_above=5), CPU, steps=1, warmup=0, precision="fp32"
    )
    assert result.error is None
    assert result.fits is False and result.batch == 4 and result.paper_batch == 16
    text = gpu_check.report([result], CPU, "fp32")
    assert "toy" in text and " no " in text


def test_other_errors_are_reported_not_raised():
    result = gpu_check.check_model(
        _spec_that(error=RuntimeError("index_add_(): self (Float) and source (BFloat16)")),
        CPU,
        steps=1,
        warmup=0,
        precision="fp32",
    )
    assert result.batch is None and "index_add_" in result.error
    assert "FAILED toy: RuntimeError: index_add_" in gpu_check.report([result], CPU, "fp32")


def test_a_failing_model_makes_the_cli_exit_1(monkeypatch, capsys):
    good = _spec_that()
    bad = dataclasses.replace(_spec_that(error=ValueError("broken")), name="bad")
    monkeypatch.setattr(gpu_check, "paper_specs", lambda: [good, bad])
    assert gpu_check.main(["--device", "cpu", "--steps", "1", "--warmup", "0"]) == 1
    out = capsys.readouterr().out
    assert "FAILED bad: ValueError: broken" in out and "toy" in out
    monkeypatch.setattr(gpu_check, "paper_specs", lambda: [good])
    assert gpu_check.main(["--device", "cpu", "--steps", "1", "--warmup", "0"]) == 0


def test_cli_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit) as err:
        gpu_check.main(["--device", "tpu"])
    assert err.value.code == 2 and "--device" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpu_check.main(["--device", "cpu", "--models", "05-nothing"])
    assert "05-nothing" in capsys.readouterr().err


def test_without_cuda_the_check_is_skipped(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main([]) == 0
    assert "skipped: no CUDA device" in capsys.readouterr().out
    assert gpu_check.main(["--device", "cuda"]) == 1


def test_cli_runs_paper_size_speech_models_on_cpu(tmp_path):
    """The script as the Makefile runs it, paper-size chapter 03/04 models, one step of 2."""
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench/gpu_check.py"), "--device", "cpu", "--batch-size",
         "2", "--steps", "1", "--warmup", "0", "--models", "03-inverter,04-awe",
         "--json", str(out)],
        capture_output=True, text=True, env={"PYTHONPATH": str(REPO / "lib"), "PATH": ""},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert [r["name"] for r in results] == ["03-inverter", "04-awe"]
    assert [r["paper_batch"] for r in results] == [8, 256]
    assert all(r["batch"] == 2 and r["error"] is None for r in results)


def test_models_import_without_the_audio_io_packages():
    """The models need torch, numpy and pyyaml only: librosa, scipy, soundfile and safetensors
    are imported where features are computed or files written, not by the model modules."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('librosa', 'scipy', 'soundfile', 'safetensors'):\n"
        "            raise ImportError(f'blocked {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import audiorepro.models.dual_encoder, audiorepro.models.vqvae\n"
        "import audiorepro.models.inverter, audiorepro.models.awe, audiorepro.models.atst\n"
        "import audiorepro.models.mobilenet, audiorepro.losses.multiview\n"
        "import audiorepro.losses.inverter\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "lib"), "PATH": ""},
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
