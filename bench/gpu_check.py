"""Time a few training steps of every chapter's paper-size model on one CUDA GPU (``make gpu-check``).

For each model of the ``paper`` presets (``book/<chapter>/presets/paper.yaml``), at the paper's
batch size, on synthetic inputs of the paper's shapes (no corpus needed): 3 warm-up steps and 5
timed optimizer steps (Adam, bf16 autocast on CUDA, fp32 weights, as the training loop's
``mixed_precision: auto`` does), then per model the mean step time, the peak memory
(``torch.cuda.max_memory_allocated``) and whether the paper's batch fits on this GPU; on
out-of-memory the batch is halved until one fits, and the largest that fits is reported. A model
that fails for another reason is reported with its error and the others still run; the exit
status is 1 when a model failed, 0 otherwise. Without CUDA (and without ``--device cpu``) it says
so and exits 0.

The inputs are the worst case of a paper batch: every clip as long as ``max_audio_s`` (30 s), every
caption 32 tokens (the paper's truncation), every VQ-VAE segment ``segment_frames`` long, AWE word
segments up to 2 s. The text encoder of chapters 01-02 (``roberta-large``) is built from its
architecture (``transformers.AutoModel.from_config``, random weights) and fed random token ids:
the machine needs no tokenizer files and no internet. Everything else is the library's models.

Needs torch, numpy, pyyaml, safetensors and the repository's ``lib`` on ``PYTHONPATH``;
``transformers`` for the chapter 01-02 models (without it those are reported as failed and the
others run)::

    PYTHONPATH=lib python3 bench/gpu_check.py                 # every model, on CUDA
    PYTHONPATH=lib python3 bench/gpu_check.py --models 03-vqvae,04-awe --json out.json
    PYTHONPATH=lib python3 bench/gpu_check.py --device cpu --batch-size 2 --steps 1 --warmup 0
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from audiorepro.config import from_dict, load_yaml
from audiorepro.losses.inverter import inverter_loss
from audiorepro.losses.multiview import MultiViewContrastiveLoss
from audiorepro.models.audio_encoders import FRAMES_PER_SECOND, build_audio_encoder
from audiorepro.models.awe import AWEModelConfig, MultiViewAWE
from audiorepro.models.dual_encoder import SILENCE_LOG_MEL, DualEncoder, DualEncoderConfig
from audiorepro.models.inverter import CodebookInverter, InverterConfig
from audiorepro.models.vqvae import VQVAE, VQVAEConfig

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"

CAPTION_TOKENS = 32
"""Tokens per caption: the paper's truncation (``MAX_TOKENS``), the longest a caption takes."""
ZEROSPEECH_SPEAKERS = 102
"""Speakers of the English ZeroSpeech 2019 training set (100 unit-discovery + 2 voices): the size
of the VQ-VAE decoder's speaker table."""
LINEAR_BINS = 257
"""Bins of the inverter's linear magnitude spectrogram (512-point FFT)."""
AWE_FRAMES = (50, 200)
"""Shortest and longest synthetic word segment of chapter 04, in 10 ms frames (0.5-2 s)."""
AWE_PHONES = (3, 12)
"""Shortest and longest synthetic phone sequence of chapter 04."""

_ROBERTA = dict(
    model_type="roberta",
    vocab_size=50265,
    max_position_embeddings=514,
    type_vocab_size=1,
    layer_norm_eps=1e-5,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
)
_BERT = dict(
    model_type="bert", vocab_size=30522, max_position_embeddings=512, type_vocab_size=2,
    pad_token_id=0,
)  # fmt: skip


def _size(width: int, depth: int, heads: int) -> dict[str, int]:
    return dict(
        hidden_size=width,
        num_hidden_layers=depth,
        num_attention_heads=heads,
        intermediate_size=4 * width,
    )


#: Architectures of the Hugging Face text encoders the presets name, for a machine without the
#: hub: the published ``config.json`` values (vocabulary, width, depth, heads, positions).
TEXT_ARCHITECTURES: dict[str, dict[str, Any]] = {
    "roberta-large": _ROBERTA | _size(1024, 24, 16),
    "roberta-base": _ROBERTA | _size(768, 12, 12),
    "bert-base-uncased": _BERT | _size(768, 12, 12),
}


class CheckError(RuntimeError):
    """A preset this check cannot read, or a model it cannot build."""


# ------------------------------------------------------------------------------ the models


@dataclasses.dataclass
class ModelSpec:
    """One model to time.

    Attributes:
        name: short id (``--models``).
        what: one line saying what is built, for the report.
        batch_size: the paper preset's batch size.
        build: makes the model (CPU, fp32).
        make_batch: ``(batch_size, device, generator) -> batch`` synthetic inputs.
        loss_fn: ``(model, batch) -> scalar loss``, the training objective.
        lr: the preset's learning rate (Adam).
    """

    name: str
    what: str
    batch_size: int
    build: Callable[[], nn.Module]
    make_batch: Callable[[int, torch.device, torch.Generator], Any]
    loss_fn: Callable[[nn.Module, Any], torch.Tensor]
    lr: float = 1e-4


class TokenIdText(nn.Module):
    """A Hugging Face encoder of a given architecture fed random token ids instead of captions.

    Stands in for :class:`audiorepro.models.text.TextEncoder` where no tokenizer files exist: the
    same transformer (random weights), the first token's last hidden state, ``tokens`` ids per
    caption (begin token, random ids, end token).
    """

    def __init__(self, architecture: dict[str, Any], tokens: int = CAPTION_TOKENS) -> None:
        super().__init__()
        from transformers import AutoConfig, AutoModel

        values = dict(architecture)
        config = AutoConfig.for_model(values.pop("model_type"), **values)
        self.model = AutoModel.from_config(config, add_pooling_layer=False)
        self.dim = int(config.hidden_size)
        self.vocab_size = int(config.vocab_size)
        self.tokens = tokens
        self.begin = getattr(config, "bos_token_id", None) or 0
        self.end = getattr(config, "eos_token_id", None) or 0

    def forward(self, captions: Sequence[str]) -> torch.Tensor:
        """B captions → (B, dim); the ids are random (fixed seed), the shapes those of 32 tokens."""
        device = next(self.model.parameters()).device
        gen = torch.Generator().manual_seed(len(captions))
        ids = torch.randint(3, self.vocab_size, (len(captions), self.tokens), generator=gen)
        ids[:, 0], ids[:, -1] = self.begin, self.end
        ids = ids.to(device)
        hidden = self.model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
        return hidden[:, 0]


def text_architecture(name: str) -> dict[str, Any]:
    """The architecture of text model ``name``: a local folder's ``config.json``, else the
    published values in :data:`TEXT_ARCHITECTURES`."""
    folder = Path(name)
    if (folder / "config.json").is_file():
        values = json.loads((folder / "config.json").read_text())
        keep = set(TEXT_ARCHITECTURES["bert-base-uncased"]) | set(
            TEXT_ARCHITECTURES["roberta-large"]
        )
        return {k: v for k, v in values.items() if k in keep}
    if name not in TEXT_ARCHITECTURES:
        raise CheckError(
            f"text model {name!r}: not a folder with config.json and not one of "
            f"{', '.join(TEXT_ARCHITECTURES)}"
        )
    return TEXT_ARCHITECTURES[name]


def dual_encoder_spec(
    name: str,
    cfg: DualEncoderConfig,
    *,
    batch_size: int,
    frames: int,
    lr: float,
    text: dict[str, Any],
) -> ModelSpec:
    """A chapter 01/02 dual encoder (audio encoder of ``cfg`` + text architecture ``text``)
    trained with NT-Xent on ``frames``-frame clips."""
    cfg = dataclasses.replace(cfg, audio_pretrained=None)

    def build() -> nn.Module:
        torch.manual_seed(0)
        audio, audio_dim, snippet_frames = build_audio_encoder(cfg)
        text_encoder = TokenIdText(text)
        if cfg.trainable_layers is not None:
            raise CheckError(f"{name}: trainable_layers {cfg.trainable_layers}; the paper: None")
        pad_value = SILENCE_LOG_MEL
        if cfg.front_end == "atst":
            from audiorepro.features.atst_mel import ATST_SILENCE

            pad_value = ATST_SILENCE
        return DualEncoder(
            audio,
            text_encoder,
            audio_dim=audio_dim,
            text_dim=text_encoder.dim,
            embed_dim=cfg.embed_dim,
            snippet_frames=snippet_frames,
            tau=cfg.tau,
            learnable_tau=cfg.learnable_tau,
            pad_value=pad_value,
        )

    bins = 64 if cfg.front_end == "atst" else 128

    def make_batch(b: int, device: torch.device, gen: torch.Generator) -> dict[str, Any]:
        return {
            "feats": torch.randn(b, frames, bins, generator=gen).to(device),
            "lengths": torch.full((b,), frames, device=device),
            "captions": [f"caption {i}" for i in range(b)],
            "audio_ids": torch.arange(b, device=device),
        }

    def loss_fn(model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        return model(batch["feats"], batch["lengths"], batch["captions"], batch["audio_ids"])

    variant = {
        "passt": f"PaSST-{cfg.passt_variant.upper()}",
        "atst": f"ATST-Frame {cfg.atst_variant}",
        "mobilenet": f"MobileNetV3 {cfg.mobilenet_variant}",
    }.get(cfg.audio_encoder, cfg.audio_encoder)
    what = f"{variant} + {cfg.text_model} text, {frames / FRAMES_PER_SECOND:g} s clips"
    return ModelSpec(name, what, batch_size, build, make_batch, loss_fn, lr)


def vqvae_spec(cfg: VQVAEConfig, *, batch_size: int, segment_frames: int, lr: float) -> ModelSpec:
    """Chapter 03's Transformer VQ-VAE on ``segment_frames``-frame segments."""

    def build() -> nn.Module:
        torch.manual_seed(0)
        return VQVAE(cfg, n_speakers=ZEROSPEECH_SPEAKERS)

    def make_batch(b: int, device: torch.device, gen: torch.Generator) -> tuple:
        feats = torch.randn(b, segment_frames, cfg.input_dim, generator=gen)
        speakers = torch.randint(0, ZEROSPEECH_SPEAKERS, (b,), generator=gen)
        lengths = torch.full((b,), segment_frames)
        return feats.to(device), lengths.to(device), speakers.to(device)

    def loss_fn(model: nn.Module, batch: tuple) -> torch.Tensor:
        return model(*batch).loss

    what = f"d_model {cfg.d_model}, K {cfg.codebook_size}, {segment_frames}-frame segments"
    return ModelSpec("03-vqvae", what, batch_size, build, make_batch, loss_fn, lr)


def inverter_spec(
    cfg: InverterConfig, *, batch_size: int, segment_codes: int, lr: float
) -> ModelSpec:
    """Chapter 03's codebook inverter on ``segment_codes``-code segments."""

    def build() -> nn.Module:
        torch.manual_seed(0)
        return CodebookInverter(cfg)

    def make_batch(b: int, device: torch.device, gen: torch.Generator) -> tuple:
        frames = segment_codes * cfg.repeat
        vectors = torch.randn(b, segment_codes, cfg.code_dim, generator=gen)
        mags = torch.rand(b, frames, cfg.n_bins, generator=gen)
        return (
            vectors.to(device),
            torch.full((b,), segment_codes, device=device),
            mags.to(device),
            torch.full((b,), frames, device=device),
        )

    def loss_fn(model: nn.Module, batch: tuple) -> torch.Tensor:
        vectors, code_lengths, mags, lengths = batch
        return inverter_loss(model(vectors, code_lengths), mags, lengths, model.mag_scale)

    what = f"d_model {cfg.d_model}, {segment_codes}-code segments, {cfg.n_bins} bins"
    return ModelSpec("03-inverter", what, batch_size, build, make_batch, loss_fn, lr)


def awe_spec(
    cfg: AWEModelConfig,
    *,
    batch_size: int,
    lr: float,
    margin: float,
    k: int,
    distance: str,
) -> ModelSpec:
    """Chapter 04's multi-view AWE: each word twice in a batch, segments of 0.5-2 s."""
    loss = MultiViewContrastiveLoss(margin, k, distance)

    def build() -> nn.Module:
        torch.manual_seed(0)
        return MultiViewAWE(cfg)

    def make_batch(b: int, device: torch.device, gen: torch.Generator) -> dict[str, Any]:
        lengths = torch.randint(AWE_FRAMES[0], AWE_FRAMES[1] + 1, (b,), generator=gen)
        lengths[0] = AWE_FRAMES[1]
        words = -(-b // 2)
        phone_lengths = torch.randint(AWE_PHONES[0], AWE_PHONES[1] + 1, (words,), generator=gen)
        phone_lengths[0] = AWE_PHONES[1]
        phones = torch.randint(1, cfg.num_phones + 1, (words, AWE_PHONES[1]), generator=gen)
        phones[torch.arange(AWE_PHONES[1])[None] >= phone_lengths[:, None]] = 0
        feats = torch.randn(b, AWE_FRAMES[1], cfg.feature_dim, generator=gen)
        return {
            "feats": feats.to(device),
            "lengths": lengths.to(device),
            "phones": phones.to(device),
            "phone_lengths": phone_lengths.to(device),
            "inverse": (torch.arange(b) // 2).to(device),
        }

    def loss_fn(model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        emb_x, emb_c = model(
            batch["feats"], batch["lengths"], batch["phones"], batch["phone_lengths"]
        )
        terms = loss.terms(emb_x, emb_c, batch["inverse"])
        return (terms["obj0"] + terms["obj1"] + terms["obj2"]).mean()

    what = (
        f"acoustic {cfg.acoustic_layers}x{cfg.d_model}, phones {cfg.phone_layers} layers "
        f"{cfg.phone_heads} heads, segments {AWE_FRAMES[0]}-{AWE_FRAMES[1]} frames"
    )
    return ModelSpec("04-awe", what, batch_size, build, make_batch, loss_fn, lr)


def _section(values: dict[str, Any], key: str, where: Path) -> Any:
    if key not in values:
        raise CheckError(f"{where}: no {key!r}; the paper preset must give it")
    return values[key]


def paper_specs(book: Path = BOOK, preset: str = "paper") -> list[ModelSpec]:
    """Every model of the chapters' ``preset`` (default: paper) presets, at their batch sizes."""
    specs = []
    path = book / "01_retrieval" / "presets" / f"{preset}.yaml"
    p01 = load_yaml(path)
    specs += _retrieval_specs(p01, path, None)
    path = book / "02_distillation" / "presets" / f"{preset}.yaml"
    p02 = load_yaml(path)
    specs += _retrieval_specs(_section(p02, "retrieval", path), path, p02)

    path = book / "03_zerospeech" / "presets" / f"{preset}.yaml"
    p03 = load_yaml(path)
    vq = from_dict(VQVAEConfig, _section(p03, "model", path), source=f"{path}: model")
    train = _section(p03, "train", path)
    specs.append(
        vqvae_spec(
            vq,
            batch_size=int(_section(train, "batch_size", path)),
            segment_frames=int(_section(train, "segment_frames", path)),
            lr=float(train.get("lr", 1e-4)),
        )
    )
    inv_values = dict(_section(p03, "inverter", path))
    inv_values.update(code_dim=vq.code_dim, repeat=vq.stride, n_bins=LINEAR_BINS)
    inv = from_dict(InverterConfig, inv_values, source=f"{path}: inverter")
    inv_train = _section(p03, "inverter_train", path)
    specs.append(
        inverter_spec(
            inv,
            batch_size=int(_section(inv_train, "batch_size", path)),
            segment_codes=int(_section(inv_train, "segment_frames", path)),
            lr=float(inv_train.get("lr", 1e-4)),
        )
    )

    path = book / "04_awe" / "presets" / f"{preset}.yaml"
    p04 = load_yaml(path)
    awe = from_dict(AWEModelConfig, _section(p04, "model", path), source=f"{path}: model")
    train = _section(p04, "train", path)
    specs.append(
        awe_spec(
            awe,
            batch_size=int(_section(train, "batch_size", path)),
            lr=float(train.get("lr", 5e-4)),
            margin=float(p04.get("margin", 0.5)),
            k=int(p04.get("loss_k", 8)),
            distance=str(p04.get("distance", "cos2")),
        )
    )
    return specs


def _retrieval_specs(
    values: dict[str, Any], path: Path, distillation: dict[str, Any] | None
) -> list[ModelSpec]:
    """Chapter 01's dual encoder from its config mapping, or chapter 02's teachers."""
    model = from_dict(DualEncoderConfig, _section(values, "model", path), source=f"{path}: model")
    train = _section(values, "train", path)
    batch = int(_section(train, "batch_size", path))
    lr = float(train.get("lr", 2e-5))
    max_audio_s = float(_section(values, "max_audio_s", path))
    crop = values.get("train_crop_s")
    text = text_architecture(model.text_model)
    if distillation is None:
        frames = round(min(crop or max_audio_s, max_audio_s) * FRAMES_PER_SECOND)
        return [
            dual_encoder_spec("01-passt", model, batch_size=batch, frames=frames, lr=lr, text=text)
        ]
    specs = []
    stage1 = distillation.get("stage1_max_audio_s") or crop or max_audio_s
    frames = round(min(stage1, max_audio_s) * FRAMES_PER_SECOND)
    for teacher in _section(distillation, "teachers", path):
        if teacher == "passt":
            continue  # chapter 01's model
        changes: dict[str, Any] = {"audio_encoder": teacher}
        b = batch
        if teacher == "atst":
            changes["atst_variant"] = distillation.get("atst_variant", model.atst_variant)
        elif teacher == "mobilenet":
            changes["mobilenet_variant"] = distillation.get(
                "mobilenet_variant", model.mobilenet_variant
            )
            b = int(distillation.get("mobilenet_batch_size") or batch)
        cfg = dataclasses.replace(model, **changes)
        specs.append(
            dual_encoder_spec(f"02-{teacher}", cfg, batch_size=b, frames=frames, lr=lr, text=text)
        )
    return specs


# ------------------------------------------------------------------------------ timing


@dataclasses.dataclass
class Result:
    """What one model measured (``None`` where it did not get that far)."""

    name: str
    what: str
    paper_batch: int
    asked_batch: int
    batch: int | None = None
    fits: bool | None = None
    parameters_m: float | None = None
    step_s: float | None = None
    items_per_s: float | None = None
    peak_gib: float | None = None
    loss: float | None = None
    error: str | None = None


def _is_oom(err: BaseException) -> bool:
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(err, oom)) or "out of memory" in str(err).lower()


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def time_steps(
    spec: ModelSpec,
    batch_size: int,
    device: torch.device,
    *,
    steps: int,
    warmup: int,
    precision: str,
) -> dict[str, float]:
    """``warmup`` then ``steps`` optimizer steps of ``spec`` at ``batch_size`` on ``device``.

    Returns ``step_s`` (mean over the timed steps), ``peak_gib`` (CUDA only, else NaN),
    ``parameters_m`` and the last ``loss``. Raises what the model raises (OOM included).
    """
    if steps < 1 or warmup < 0:
        raise CheckError(f"steps must be >= 1 and warmup >= 0, got {steps}, {warmup}")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model = spec.build().to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=spec.lr)
    batch = spec.make_batch(batch_size, device, torch.Generator().manual_seed(0))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = spec.loss_fn(model, batch)
        if not torch.isfinite(loss):
            raise CheckError(f"{spec.name}: loss is {loss.item()}")
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return float(loss.detach())

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    sync()
    step_s = (time.perf_counter() - start) / steps
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else math.nan
    params = sum(p.numel() for p in model.parameters()) / 1e6
    return {"step_s": step_s, "peak_gib": peak, "parameters_m": params, "loss": loss}


def check_model(
    spec: ModelSpec,
    device: torch.device,
    *,
    steps: int,
    warmup: int,
    precision: str,
    batch_size: int | None = None,
) -> Result:
    """Time ``spec`` at ``batch_size`` (default: the paper's), halving the batch on
    out-of-memory until one fits; any other error is recorded in the result, not raised.
    ``fits`` says whether the asked batch fitted, ``batch`` is the one that ran."""
    batch = batch_size or spec.batch_size
    result = Result(spec.name, spec.what, spec.batch_size, batch)
    while True:
        try:
            measured = time_steps(
                spec, batch, device, steps=steps, warmup=warmup, precision=precision
            )
        except Exception as err:  # noqa: BLE001 - every failure is reported per model
            _free(device)
            if _is_oom(err) and batch > 1:
                result.fits = False
                batch //= 2
                continue
            result.error = f"{type(err).__name__}: {err}".strip()
            if _is_oom(err):
                result.fits = False
            return result
        _free(device)
        result.batch = batch
        if result.fits is None:
            result.fits = True
        result.step_s = measured["step_s"]
        result.items_per_s = batch / measured["step_s"]
        result.peak_gib = None if math.isnan(measured["peak_gib"]) else measured["peak_gib"]
        result.parameters_m = measured["parameters_m"]
        result.loss = measured["loss"]
        return result


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def report(results: Sequence[Result], device: torch.device, precision: str) -> str:
    """The results as a text table, one line per model, errors after it."""
    lines = [
        f"device {device} ({_device_name(device)}), precision {precision}",
        f"{'model':<13} {'params':>8} {'paper batch':>11} {'asked':>5} {'fits':>4} {'ran':>5} "
        f"{'step s':>8} {'items/s':>8} {'peak GiB':>8}  what",
    ]
    for r in results:
        fits = "-" if r.fits is None else ("yes" if r.fits else "no")
        lines.append(
            f"{r.name:<13} {_fmt(r.parameters_m, '7.1f') + 'M':>8} {r.paper_batch:>11} "
            f"{r.asked_batch:>5} {fits:>4} {_fmt(r.batch, 'd'):>5} {_fmt(r.step_s, '.3f'):>8} "
            f"{_fmt(r.items_per_s, '.1f'):>8} {_fmt(r.peak_gib, '.2f'):>8}  {r.what}"
        )
    for r in results:
        if r.error:
            lines.append(f"FAILED {r.name}: {r.error}")
    return "\n".join(lines)


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI; returns the exit status (1 when a model failed)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA or skip) | cuda | cpu")
    parser.add_argument("--models", default=None, help="comma-separated names (default: all)")
    parser.add_argument("--batch-size", type=int, default=None, help="instead of the paper's")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    parser.add_argument(
        "--precision", default="auto", help="auto (bf16 on CUDA, fp32 on CPU) | bf16 | fp16 | fp32"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.device not in ("auto", "cuda", "cpu"):
        parser.error(f"--device: expected auto | cuda | cpu, got {args.device!r}")
    if args.precision not in ("auto", "bf16", "fp16", "fp32"):
        parser.error(f"--precision: expected auto | bf16 | fp16 | fp32, got {args.precision!r}")
    if args.batch_size is not None and args.batch_size < 1:
        parser.error(f"--batch-size: expected >= 1, got {args.batch_size}")

    print(f"python {platform.python_version()}, torch {torch.__version__}, ", end="")
    print(f"CUDA available: {torch.cuda.is_available()}")
    if args.device == "auto" and not torch.cuda.is_available():
        print("gpu-check skipped: no CUDA device (use --device cpu to run on the CPU)")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu-check: --device cuda but no CUDA device", file=sys.stderr)
        return 1
    device = torch.device("cpu" if args.device == "cpu" else "cuda")
    precision = args.precision
    if precision == "auto":
        precision = "fp32" if device.type == "cpu" else "bf16"
        if device.type == "cuda" and not torch.cuda.is_bf16_supported():
            precision = "fp16"

    try:
        specs = paper_specs()
    except Exception as err:  # noqa: BLE001 - a preset that cannot be read is reported
        print(f"gpu-check: cannot read the paper presets: {err}", file=sys.stderr)
        return 1
    if args.models:
        wanted = [m.strip() for m in args.models.split(",") if m.strip()]
        known = {s.name: s for s in specs}
        unknown = [m for m in wanted if m not in known]
        if unknown:
            parser.error(f"--models: unknown {unknown}; known: {', '.join(known)}")
        specs = [known[m] for m in wanted]

    results = []
    for spec in specs:
        print(f"== {spec.name}: {spec.what}, paper batch {spec.batch_size}", flush=True)
        r = check_model(
            spec,
            device,
            steps=args.steps,
            warmup=args.warmup,
            precision=precision,
            batch_size=args.batch_size,
        )
        results.append(r)
        print(f"   {r.error or f'{r.step_s:.3f} s/step at batch {r.batch}'}", flush=True)
    print(report(results, device, precision))
    if args.json is not None:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
