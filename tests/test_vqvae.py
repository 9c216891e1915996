"""Transformer VQ-VAE, EMA codebook, losses, jitter and the codebook inverter."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from audiorepro.losses.inverter import inverter_loss
from audiorepro.losses.vq import (
    commitment_loss,
    reconstruction_loss,
    temporal_smoothing_loss,
)
from audiorepro.models.inverter import CodebookInverter, InverterConfig
from audiorepro.models.vqvae import (
    VQVAE,
    TransformerLayer,
    VectorQuantizerEMA,
    VQVAEConfig,
    input_statistics,
    temporal_jitter,
)

SMALL = dict(d_model=32, n_heads=4, ffn_dim=64, code_dim=8, decoder_channels=32, speaker_dim=8)


def test_losses_hand_values():
    feats = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]])
    recon = torch.tensor([[[1.0, 0.0], [3.0, 5.0], [0.0, 0.0]]])
    # frames 0 and 1 valid: ½·4 and ½·1 -> mean 1.25 (frame 2 masked)
    assert reconstruction_loss(feats, recon, torch.tensor([2])).item() == pytest.approx(1.25)
    z = torch.tensor([[[0.0, 0.0], [1.0, 1.0], [3.0, 1.0]]])
    # pairs (0,1): 2, (1,2): 4 -> mean 3; with length 2 only the first pair
    assert temporal_smoothing_loss(z, torch.tensor([3])).item() == pytest.approx(3.0)
    assert temporal_smoothing_loss(z, torch.tensor([2])).item() == pytest.approx(2.0)
    e = torch.zeros_like(z, requires_grad=True)
    loss = commitment_loss(z.requires_grad_(), e, torch.tensor([3]))
    assert loss.item() == pytest.approx((0 + 2 + 10) / 3)
    loss.backward()
    assert e.grad is None  # the codebook gets no gradient from the commitment term


def test_transformer_layer_follows_figure_1_and_ignores_padding():
    torch.manual_seed(0)
    layer = TransformerLayer(16, 4, 32).eval()
    x = torch.randn(1, 5, 16)
    h = layer.norm1(x)
    a, _ = layer.attn(h, h, h, need_weights=False)
    y = x + a
    want = y + layer.ffn(layer.norm2(y))
    torch.testing.assert_close(layer(x), want)
    padded = torch.cat([x, torch.randn(1, 3, 16)], dim=1)
    mask = torch.tensor([[False] * 5 + [True] * 3])
    torch.testing.assert_close(layer(padded, mask)[:, :5], layer(x), atol=1e-5, rtol=1e-5)


def test_ema_codebook_update_and_laplace_smoothing():
    vq = VectorQuantizerEMA(3, 2, decay=0.5, epsilon=0.0)
    vq.codebook.copy_(torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]]))
    vq.ema_sum.copy_(vq.codebook)
    vq.initialized.fill_(True)
    z = torch.tensor([[[1.0, 0.0], [9.0, 1.0], [11.0, -1.0]]])
    codes, e = vq(z, torch.ones(1, 3, dtype=torch.bool))
    assert codes.tolist() == [[0, 1, 1]]
    torch.testing.assert_close(e[0, 1], torch.tensor([10.0, 0.0]))  # the pre-update vector
    # counts: 0.5·1 + 0.5·[1, 2, 0] = [1, 1.5, .5]; sums: 0.5·E + 0.5·[[1,0],[20,0],[0,0]]
    torch.testing.assert_close(vq.ema_count, torch.tensor([1.0, 1.5, 0.5]))
    torch.testing.assert_close(vq.codebook[1], torch.tensor([15.0, 0.0]) / 1.5)
    torch.testing.assert_close(vq.codebook[2], torch.tensor([0.0, 5.0]) / 0.5)
    vq.eval()
    before = vq.codebook.clone()
    vq(z, torch.ones(1, 3, dtype=torch.bool))
    torch.testing.assert_close(vq.codebook, before)  # no update in eval mode


def test_dead_codes_are_restarted_on_batch_vectors():
    torch.manual_seed(0)
    vq = VectorQuantizerEMA(4, 2, decay=0.5, epsilon=1e-5, dead_code_threshold=0.5)
    z = torch.randn(2, 10, 2) + torch.tensor([5.0, 5.0])
    vq(z, torch.ones(2, 10, dtype=torch.bool))  # initialises from z
    vq.codebook[3] = torch.tensor([-100.0, -100.0])  # never chosen
    vq.ema_sum[3] = vq.codebook[3]
    for _ in range(3):
        vq(z, torch.ones(2, 10, dtype=torch.bool))
    flat = z.reshape(-1, 2)
    assert torch.cdist(vq.codebook[3:4], flat).min() < 1e-5  # moved onto an encoder output


def test_jitter_probabilities_and_boundaries():
    t, p = 50, 0.2
    x = torch.arange(t, dtype=torch.float32)[None, :, None].repeat(4000, 1, 1)
    lengths = torch.full((4000,), 40)
    out = temporal_jitter(x, lengths, p, torch.Generator().manual_seed(0))[..., 0]
    shift = out - x[..., 0]
    inner = shift[:, 1:39]
    assert set(shift.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert (inner == -1).float().mean().item() == pytest.approx(p, abs=0.01)
    assert (inner == 1).float().mean().item() == pytest.approx(p, abs=0.01)
    assert (shift[:, 0] >= 0).all() and (shift[:, 39] <= 0).all()  # no t-1 at 0, no t+1 at end
    assert temporal_jitter(x, lengths, 0.0) is x


@pytest.mark.parametrize("encoder", ["transformer", "conv"])
@pytest.mark.parametrize("stride", [4, 2])
def test_vqvae_shapes_straight_through_and_modes(encoder, stride):
    torch.manual_seed(0)
    cfg = VQVAEConfig(
        input_dim=6,
        encoder=encoder,
        stride=stride,
        codebook_size=16,
        jitter=0.1,
        smoothing=1e-2,
        **SMALL,
    )
    model = VQVAE(cfg, n_speakers=3)
    feats = torch.randn(2, 23, 6)
    lengths = torch.tensor([23, 17])
    out = model(feats, lengths, torch.tensor([0, 2]))
    assert out.recon.shape == (2, 23, 6)
    assert out.codes.shape == (2, math.ceil(23 / stride))
    assert out.code_lengths.tolist() == [math.ceil(23 / stride), math.ceil(17 / stride)]
    want = out.reconstruction + 0.25 * out.commitment + 1e-2 * out.smoothing
    torch.testing.assert_close(out.loss, want)
    out.loss.backward()
    # the straight-through estimator carries the reconstruction gradient into the encoder
    assert model.encoder.proj.weight.grad.abs().sum() > 0
    model.eval()
    c1, e1, _ = model.encode(feats, lengths)
    c2, e2, _ = model.encode(feats, lengths)
    assert torch.equal(c1, c2)  # no jitter, no codebook update at inference
    torch.testing.assert_close(e1, model.quantizer.codebook[c1])


@pytest.mark.parametrize("encoder", ["transformer", "conv"])
@pytest.mark.parametrize("stride", [4, 2])
def test_a_files_reconstruction_does_not_depend_on_the_files_batched_with_it(encoder, stride):
    """A short file padded in a batch is reconstructed as when it is alone (padding code frames
    hold codebook[0]; the decoder must see zeros there, as its convolutions' own padding)."""
    torch.manual_seed(0)
    cfg = VQVAEConfig(input_dim=6, encoder=encoder, stride=stride, codebook_size=16, **SMALL)
    model = VQVAE(cfg, n_speakers=3).eval()
    torch.nn.init.normal_(model.quantizer.codebook, std=3.0)  # codebook[0] far from zero
    long, short = torch.randn(31, 6), torch.randn(9, 6)
    batch = torch.zeros(2, 31, 6)
    batch[0], batch[1, :9] = long, short
    speakers = torch.tensor([0, 2])
    with torch.no_grad():
        together = model(batch, torch.tensor([31, 9]), speakers).recon
        alone = model(short[None], torch.tensor([9]), speakers[1:]).recon
    torch.testing.assert_close(together[1, :9], alone[0], rtol=1e-5, atol=1e-6)


def test_vqvae_config_rejects_bad_values():
    with pytest.raises(ValueError, match="stride must be 2 or 4"):
        VQVAEConfig(stride=3)
    with pytest.raises(ValueError, match="jitter"):
        VQVAEConfig(jitter=0.5)
    with pytest.raises(ValueError, match="encoder must be one of"):
        VQVAEConfig(encoder="lstm")
    with pytest.raises(ValueError, match="input_scale must be one of"):
        VQVAEConfig(input_scale="utterance")


def test_input_statistics_by_hand():
    frames = np.array([[0.0, 0.0], [2.0, 4.0]])  # means 1, 2; standard deviations 1, 2
    mean, std = input_statistics(frames, "dimension")
    np.testing.assert_allclose(mean, [1.0, 2.0])
    np.testing.assert_allclose(std, [1.0, 2.0])
    mean, std = input_statistics(frames, "global")
    np.testing.assert_allclose(mean, [1.0, 2.0])
    np.testing.assert_allclose(std, [math.sqrt(2.5)] * 2, rtol=1e-6)  # RMS of 1 and 2
    with pytest.raises(ValueError, match="input_scale must be one of"):
        input_statistics(frames, "utterance")
    with pytest.raises(ValueError, match=r"expected frames \(N, F\)"):
        input_statistics(np.zeros((0, 3)), "global")


def test_global_input_scale_keeps_the_frames_geometry():
    """One scale for every dimension: the normalised frames are the centred raw frames times
    one number, so their angles, hence a cosine ABX on them, are those of the centred frames;
    per-dimension scaling changes them."""
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(200, 3)) * np.array([50.0, 5.0, 0.5]) + np.array([-200.0, 10.0, 0.0])
    x = torch.from_numpy(raw).float()

    def normalised(scale):
        model = VQVAE(VQVAEConfig(input_dim=3, input_scale=scale, **SMALL), n_speakers=1)
        model.set_normalization(*input_statistics(raw, model.cfg.input_scale))
        return (x - model.feat_mean) / model.feat_std

    centred = x - x.mean(0)
    ratio = normalised("global") / centred
    np.testing.assert_allclose(ratio, ratio[0, 0].item(), rtol=1e-4)
    np.testing.assert_allclose(normalised("dimension").std(0, unbiased=False), 1.0, rtol=1e-4)


def test_inverter_repeats_codes_and_predicts_magnitudes():
    torch.manual_seed(0)
    cfg = InverterConfig(code_dim=8, n_bins=17, repeat=4, d_model=16, ffn_dim=32)
    inv = CodebookInverter(cfg)
    vectors = torch.randn(2, 5, 8)
    code_lengths = torch.tensor([5, 3])
    mag = inv(vectors, code_lengths)
    assert mag.shape == (2, 20, 17) and (mag >= 0).all()
    target = torch.rand(2, 19, 17)
    loss = inverter_loss(mag, target, torch.tensor([19, 11]), inv.mag_scale)
    diff = (mag[:, :19] - target).pow(2).sum(-1)
    want = (diff[0].sum() + diff[1, :11].sum()) / 30
    torch.testing.assert_close(loss, want)
    # positions distinguish the r copies of one vector: the output is not constant over them
    same = torch.randn(1, 1, 8).repeat(1, 3, 1)
    out = inv(same, torch.tensor([3]))[0]
    assert not torch.allclose(out[0], out[1])
    assert np.isfinite(mag.detach().numpy()).all()


def test_an_inverted_files_magnitudes_do_not_depend_on_the_files_batched_with_it():
    """A short file padded in a batch (padding vectors far from zero) is inverted as when it is
    alone: the convolutions must see zeros past its end, as their own padding."""
    torch.manual_seed(0)
    cfg = InverterConfig(code_dim=8, n_bins=17, repeat=4, d_model=16, ffn_dim=32)
    inv = CodebookInverter(cfg).eval()
    long, short = torch.randn(7, 8), torch.randn(3, 8)
    batch = torch.full((2, 7, 8), 5.0)
    batch[0], batch[1, :3] = long, short
    with torch.no_grad():
        together = inv(batch, torch.tensor([7, 3]))
        alone = inv(short[None], torch.tensor([3]))
    torch.testing.assert_close(together[1, :12], alone[0], rtol=1e-5, atol=1e-6)


def test_pre_quant_norm_fixes_the_scale_of_the_encoder_output():
    cfg = VQVAEConfig(
        input_dim=6,
        d_model=16,
        n_heads=2,
        ffn_dim=16,
        code_dim=8,
        codebook_size=4,
        pre_quant_norm="unit",
    )
    model = VQVAE(cfg, n_speakers=2)
    with torch.no_grad():
        model.encoder.out.weight.mul_(100.0)  # a large encoder output
    x, lengths = torch.randn(2, 12, 6), torch.tensor([12, 9])
    _, z, _, _, code_lengths = model.quantize(x, lengths)
    rms = z.pow(2).mean(-1).sqrt()  # (B, T')
    torch.testing.assert_close(rms, torch.ones_like(rms), atol=1e-3, rtol=0)
    plain = dataclasses.replace(cfg, pre_quant_norm="none")
    assert isinstance(VQVAE(plain, 2).pre_quant, torch.nn.Identity)
    with pytest.raises(ValueError, match="pre_quant_norm"):
        VQVAEConfig(pre_quant_norm="batch")
    with pytest.raises(ValueError, match="feature_norm"):
        VQVAEConfig(feature_norm="global")


def test_training_on_smoke_speech_keeps_the_loss_terms_bounded():
    """The chapter's recipe on the smoke corpus: with the encoder output normalised, the
    commitment loss cannot follow a growing scale, and the codebook stays in use."""
    from audiorepro.experiments.zerospeech.config import load_config
    from audiorepro.experiments.zerospeech.data import load_data
    from audiorepro.experiments.zerospeech.train import fit_vqvae

    cfg = load_config(
        "smoke",
        {"train.max_steps": 150, "model.pre_quant_norm": "unit", "model.commitment": 0.02},
    )
    data = load_data(cfg)
    _, h = fit_vqvae(cfg.train, cfg.model, data.feats, data.speakers, seed=0)
    com, rec = np.asarray(h["commitment"]), np.asarray(h["reconstruction"])
    assert len(com) == 150 and np.isfinite(com).all() and np.isfinite(rec).all()
    np.testing.assert_allclose(h["z_rms"], 1.0, atol=0.02)
    # ‖z − e‖² ≤ (‖z‖ + ‖e‖)² ≤ 4 D_e: z has RMS 1, e averages such vectors
    assert com.max() <= 4 * cfg.model.code_dim
    assert com[-25:].mean() < 0.5 * cfg.model.code_dim
    assert rec[-25:].mean() < rec[:25].mean()  # it learns
    assert np.mean(h["batch_codes"][-25:]) >= 8  # of K = 64: no collapse onto a few codes


@pytest.mark.parametrize("scale", ["global", "dimension"])
def test_fit_vqvae_standardises_its_input_per_input_scale(scale):
    from audiorepro.experiments.zerospeech.config import load_config
    from audiorepro.experiments.zerospeech.data import load_data
    from audiorepro.experiments.zerospeech.train import fit_vqvae

    cfg = load_config("smoke", {"train.max_steps": 2, "model.input_scale": scale})
    data = load_data(cfg)
    model, _ = fit_vqvae(cfg.train, cfg.model, data.feats, data.speakers, seed=0)
    stacked = np.concatenate(data.feats).astype(np.float64)
    np.testing.assert_allclose(model.feat_mean, stacked.mean(0), rtol=1e-4, atol=1e-4)
    expected = stacked.std(0) if scale == "dimension" else np.sqrt(stacked.var(0).mean())
    np.testing.assert_allclose(model.feat_std, np.broadcast_to(expected, (39,)), rtol=1e-4)
