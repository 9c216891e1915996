"""Snippet embedding of long audio: non-overlapping cuts, only snippets with real audio averaged."""

from __future__ import annotations

import pytest
import torch

from audiorepro.models.passt import PaSST
from audiorepro.models.snippets import embed_snippets, snippet_mask


def mean_encoder(calls: list | None = None):
    """Embedding = (mean value, first value, number of frames) of each snippet, logs batches."""

    def fn(x):  # (N, C, F, L)
        if calls is not None:
            calls.append(tuple(x.shape))
        return torch.stack(
            [x.mean(dim=(1, 2, 3)), x[:, 0, 0, 0], torch.full((x.shape[0],), float(x.shape[3]))],
            dim=1,
        )

    return fn


def brute_force(feats, lengths, snippet_frames, pad_value):
    """Loop over clips and snippet start frames; average the snippets starting before the end."""
    out = []
    frames = feats.shape[-1]
    for b in range(feats.shape[0]):
        embs = []
        for start in range(0, frames, snippet_frames):
            if start >= lengths[b]:
                break
            piece = feats[b : b + 1, :, :, start : start + snippet_frames]
            if piece.shape[-1] < snippet_frames:
                fill = torch.full((*piece.shape[:3], snippet_frames - piece.shape[-1]), pad_value)
                piece = torch.cat([piece, fill], dim=-1)
            embs.append(mean_encoder()(piece)[0])
        out.append(torch.stack(embs).mean(0))
    return torch.stack(out)


def test_hand_computed_mean_over_real_snippets():
    # Clip 0: 25 frames -> snippets [0,10), [10,20), [20,30) (last one padded); clip 1: 12 frames
    # -> two snippets; the third of clip 1 is pure padding and must be ignored.
    feats = torch.zeros(2, 1, 1, 25)
    feats[0, 0, 0] = torch.arange(25.0)
    feats[1, 0, 0, :12] = 1.0
    emb = embed_snippets(mean_encoder(), feats, torch.tensor([25, 12]), 10, pad_value=-1.0)
    first0 = (0.0 + 10.0 + 20.0) / 3
    mean0 = (4.5 + 14.5 + (sum(range(20, 25)) - 5) / 10) / 3
    assert emb[0, 0].item() == pytest.approx(mean0)
    assert emb[0, 1].item() == pytest.approx(first0)
    assert emb[1, 0].item() == pytest.approx((1.0 + 0.2) / 2)  # second snippet: 2 of 10 real
    assert emb[:, 2].tolist() == [10.0, 10.0]


@pytest.mark.parametrize("seed", range(3))
def test_matches_brute_force(seed):
    gen = torch.Generator().manual_seed(seed)
    frames = int(torch.randint(21, 60, (1,), generator=gen))
    feats = torch.randn(5, 2, 3, frames, generator=gen)
    lengths = torch.randint(1, frames + 1, (5,), generator=gen)
    lengths[0] = frames
    calls = []
    emb = embed_snippets(mean_encoder(calls), feats, lengths, 7, pad_value=0.5, max_batch=4)
    torch.testing.assert_close(emb, brute_force(feats, lengths, 7, 0.5))
    real = int(snippet_mask(lengths, 7, -(-frames // 7)).sum())
    assert sum(c[0] for c in calls) == real  # pure-padding snippets are never computed
    assert max(c[0] for c in calls) <= 4


def test_short_batch_is_embedded_unsplit():
    calls = []
    feats = torch.randn(3, 128, 40)  # (B, F, T) is taken as one channel
    embed_snippets(mean_encoder(calls), feats, torch.tensor([40, 20, 5]), 100)
    assert calls == [(3, 1, 128, 40)]


def test_with_passt_equals_manual_average():
    torch.manual_seed(0)
    model = PaSST(img_size=(32, 50), stride=16, embed_dim=16, depth=1, num_heads=2, distilled=True)
    model.eval()
    feats = torch.randn(2, 1, 32, 120)
    with torch.no_grad():
        emb = embed_snippets(lambda x: model(x)[1], feats, torch.tensor([120, 45]), 50)
        clip0 = [model(feats[:1, :, :, s : s + 50])[1] for s in (0, 50)]
        last = torch.cat([feats[:1, :, :, 100:], torch.zeros(1, 1, 32, 30)], dim=-1)
        clip0.append(model(last)[1])
        clip1 = model(feats[1:, :, :, :50])[1]
    torch.testing.assert_close(emb[0], torch.cat(clip0).mean(0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(emb[1], clip1[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("lengths", "snippet", "message"),
    [
        (torch.tensor([10, 0]), 5, r"lengths must lie in \[1, 10\]"),
        (torch.tensor([10, 11]), 5, r"lengths must lie in \[1, 10\]"),
        (torch.tensor([10]), 5, r"lengths must have shape \(2,\)"),
        (torch.tensor([10, 10]), 0, "snippet_frames must be >= 1"),
    ],
)
def test_bad_input(lengths, snippet, message):
    with pytest.raises(ValueError, match=message):
        embed_snippets(mean_encoder(), torch.zeros(2, 1, 4, 10), lengths, snippet)
