"""Multi-view AWE encoders (masking, pooling, positional encoding) and the eq. (4) loss."""

from __future__ import annotations

import math

import pytest
import torch

from audiorepro.config import ConfigError
from audiorepro.losses.multiview import MultiViewContrastiveLoss, pairwise_distance
from audiorepro.models.awe import (
    AWEModelConfig,
    MultiViewAWE,
    masked_mean,
    sinusoidal_encoding,
)

SMALL = dict(
    feature_dim=6,
    num_phones=9,
    d_model=16,
    acoustic_layers=2,
    acoustic_heads=2,
    acoustic_ff=32,
    phone_layers=1,
    phone_heads=4,
    phone_ff=32,
    dropout=0.0,
    max_len=64,
)


def test_positional_encoding_is_eq5():
    pe = sinusoidal_encoding(50, 8, base=5000.0)
    for t in (0, 3, 49):
        for i in range(4):
            angle = t / 5000.0 ** (2 * i / 8)
            assert pe[t, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[t, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_masked_mean_ignores_padding():
    h = torch.arange(12, dtype=torch.float32).reshape(2, 3, 2)
    out = masked_mean(h, torch.tensor([1, 3]))
    assert torch.allclose(out[0], h[0, 0])
    assert torch.allclose(out[1], h[1].mean(0))


@pytest.mark.parametrize("pooling,stack", [("avg", 1), ("rep", 1), ("avg", 3)])
def test_padding_does_not_change_embeddings(pooling, stack):
    torch.manual_seed(0)
    cfg = AWEModelConfig(**SMALL, phone_pooling=pooling, frame_stack=stack)
    model = MultiViewAWE(cfg).eval()
    feats = torch.randn(1, 7, 6)
    phones = torch.tensor([[3, 1, 4, 1]])
    emb_x, emb_c = model(feats, torch.tensor([7]), phones, torch.tensor([4]))
    # Same sequences inside a padded batch with garbage in the padding.
    feats_p = torch.cat([feats, 100 * torch.randn(1, 5, 6)], dim=1)
    feats_p = torch.cat([feats_p, torch.randn(1, 12, 6)])
    phones_p = torch.tensor([[3, 1, 4, 1, 7, 7], [2, 2, 0, 0, 0, 0]])
    emb_xp, emb_cp = model(feats_p, torch.tensor([7, 12]), phones_p, torch.tensor([4, 2]))
    assert torch.allclose(emb_x[0], emb_xp[0], atol=1e-5)
    assert torch.allclose(emb_c[0], emb_cp[0], atol=1e-5)


def test_rep_is_first_position_and_differs_from_avg():
    torch.manual_seed(0)
    cfg = AWEModelConfig(**SMALL, phone_pooling="rep")
    model = MultiViewAWE(cfg).eval()
    phones = torch.tensor([[3, 1, 4]])
    h = model.phones.body.encode(model.phones.embedding(phones), torch.tensor([3]))
    emb = model.phones(phones, torch.tensor([3]))
    assert torch.allclose(emb[0], h[0, 0])
    assert not torch.allclose(emb[0], h[0].mean(0))


def test_paper_sizes_and_bad_config():
    cfg = AWEModelConfig()
    assert (cfg.d_model, cfg.acoustic_layers, cfg.acoustic_heads, cfg.acoustic_ff) == (
        256,
        6,
        4,
        1024,
    )
    assert cfg.pe_base == 5000.0 and cfg.dropout == 0.1
    model = MultiViewAWE(AWEModelConfig(phone_layers=8, phone_heads=32))
    assert len(model.phones.body.encoder.layers) == 8
    assert model.phones.body.encoder.layers[0].self_attn.num_heads == 32
    with pytest.raises(ConfigError, match="phone_heads"):
        AWEModelConfig(phone_heads=3)
    with pytest.raises(ConfigError, match="phone_pooling"):
        AWEModelConfig(phone_pooling="cls")


def brute_force_loss(emb_x, emb_c, inverse, margin, k, distance):
    """Eq. (4) with top-k negatives, one segment and one negative at a time."""

    def dist(a, b):
        cos = float(torch.dot(a, b) / (a.norm() * b.norm()))
        return 1 - cos**2 if distance == "cos2" else 1 - cos

    def term(pos, negatives):
        if not negatives:
            return 0.0
        chosen = sorted(negatives)[:k]
        return sum(max(0.0, margin + pos - d) for d in chosen) / len(chosen)

    total = 0.0
    n, m = emb_x.shape[0], emb_c.shape[0]
    for i in range(n):
        wi = int(inverse[i])
        pos = dist(emb_x[i], emb_c[wi])
        obj0 = term(pos, [dist(emb_x[i], emb_c[w]) for w in range(m) if w != wi])
        obj1 = term(pos, [dist(emb_c[wi], emb_c[w]) for w in range(m) if w != wi])
        obj2 = term(pos, [dist(emb_c[wi], emb_x[j]) for j in range(n) if int(inverse[j]) != wi])
        total += obj0 + obj1 + obj2
    return total / n


@pytest.mark.parametrize("distance", ["cos2", "cos"])
@pytest.mark.parametrize("k", [1, 3, 20])
def test_loss_matches_brute_force(distance, k):
    gen = torch.Generator().manual_seed(k)
    emb_x = torch.randn(11, 5, generator=gen, dtype=torch.float64)
    emb_c = torch.randn(4, 5, generator=gen, dtype=torch.float64)
    inverse = torch.tensor([0, 1, 2, 3, 0, 0, 1, 2, 2, 3, 1])
    loss = MultiViewContrastiveLoss(margin=0.4, k=k, distance=distance)
    expected = brute_force_loss(emb_x, emb_c, inverse, 0.4, k, distance)
    assert loss(emb_x, emb_c, inverse).item() == pytest.approx(expected, abs=1e-10)
    total = MultiViewContrastiveLoss(margin=0.4, k=k, distance=distance, reduction="sum")
    assert total(emb_x, emb_c, inverse).item() == pytest.approx(11 * expected, abs=1e-9)


def test_own_word_is_never_a_negative():
    # Segment embeddings equal to their own word's embedding and orthogonal to the others:
    # with the intended pairing every hinge is [m + 0 - 1]_+ = 0 for m < 1. The published
    # mis-pairing would put the own word (distance 0) among negatives and give m > 0.
    emb_c = torch.eye(4, dtype=torch.float64)
    inverse = torch.tensor([0, 1, 2, 3, 1, 2])
    emb_x = emb_c[inverse]
    for distance in ("cos", "cos2"):
        loss = MultiViewContrastiveLoss(margin=0.5, k=3, distance=distance)
        assert loss(emb_x, emb_c, inverse).item() == pytest.approx(0.0, abs=1e-12)


def test_hand_computed_single_term():
    # Two words, one segment each, 1-D-like embeddings in 2-D, distance 1 - cos.
    emb_c = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    emb_x = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    inverse = torch.tensor([0, 1])
    t = MultiViewContrastiveLoss(margin=1.0, k=1, distance="cos").terms(emb_x, emb_c, inverse)
    c = 1 / math.sqrt(2)
    # Segment 0: d+ = 1 - c; obj0 negative d(x0, c1) = 1 - c -> hinge 1.
    assert t["obj0"][0].item() == pytest.approx(1.0)
    # obj1: d(c0, c1) = 1 -> hinge 1 + (1 - c) - 1 = 1 - c.
    assert t["obj1"][0].item() == pytest.approx(1 - c)
    # obj2: d(c0, x1) = 1 -> the same; segment 1 (d+ = 0): obj0 = [1 + 0 - 1]_+ = 0.
    assert t["obj2"][0].item() == pytest.approx(1 - c)
    assert t["obj0"][1].item() == pytest.approx(0.0)
    assert pairwise_distance(emb_x, emb_c, "cos2")[0, 0].item() == pytest.approx(0.5)


def test_loss_gradients_flow_and_bad_inverse():
    emb_x = torch.randn(5, 3, requires_grad=True)
    emb_c = torch.randn(2, 3, requires_grad=True)
    loss = MultiViewContrastiveLoss(k=2)(emb_x, emb_c, torch.tensor([0, 1, 0, 1, 1]))
    loss.backward()
    assert emb_x.grad is not None and emb_c.grad is not None
    with pytest.raises(ValueError, match="inverse"):
        MultiViewContrastiveLoss()(emb_x, emb_c, torch.tensor([0, 1, 2, 0, 0]))


def test_frame_stack_concatenates_consecutive_frames():
    torch.manual_seed(0)
    model = MultiViewAWE(AWEModelConfig(**SMALL, frame_stack=2)).eval()
    feats = torch.randn(1, 5, 6)
    # Equivalent input: 3 steps of 2 concatenated frames, the last half zero.
    stacked = torch.cat([feats, torch.zeros(1, 1, 6)], dim=1).reshape(1, 3, 12)
    h = model.acoustic.body.encode(model.acoustic.projection(stacked), torch.tensor([3]))
    assert torch.allclose(model.acoustic(feats, torch.tensor([5])), h.mean(1), atol=1e-6)
