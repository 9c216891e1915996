"""Options the official code bases add beyond the papers: SpecAugment and text dropout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audiorepro.config import load_preset
from audiorepro.data.retrieval import CaptionDataset, CaptionItem, RetrievalDataError, spec_augment
from audiorepro.models.text import TextEncoder, TextEncoderError


def test_spec_augment_masks_one_band_and_one_frame_run_to_zero():
    feats = torch.full((50, 20), 3.0)
    for seed in range(30):
        out = spec_augment(feats, 8, 12, np.random.default_rng(seed))
        zero = out == 0
        bands = zero.all(dim=0).nonzero().flatten().tolist()
        frames = zero.all(dim=1).nonzero().flatten().tolist()
        # one contiguous band run narrower than 8, one frame run shorter than 12
        for run, bound in ((bands, 8), (frames, 12)):
            assert len(run) < bound
            assert run == list(range(run[0], run[0] + len(run))) if run else True
        # everything zero lies in the masked band or the masked frames
        expected = torch.zeros_like(zero)
        expected[:, bands] = True
        expected[frames] = True
        assert torch.equal(zero, expected)
        assert torch.equal(feats, torch.full((50, 20), 3.0))  # the input is not touched
    widths = {
        int((spec_augment(feats, 8, 0, np.random.default_rng(s)) == 0).all(0).sum())
        for s in range(200)
    }
    assert widths == set(range(8))  # uniform in [0, freqm)
    assert torch.equal(spec_augment(feats, 0, 0, np.random.default_rng(0)), feats)


def _items(n=6):
    return [
        CaptionItem("clotho", f"clip{i}", f"/x/clip{i}.wav", f"caption {i}", (f"other {i}",))
        for i in range(n)
    ]


def test_spec_augment_in_the_dataset_leaves_crops_and_swaps_alone():
    gen = torch.Generator().manual_seed(0)
    features = {f"clotho/clip{i}": torch.randn(40, 16, generator=gen) + 5 for i in range(6)}
    kw = dict(max_frames=10, paraphrase_prob=0.5, seed=3)
    plain = CaptionDataset(_items(), features, **kw)
    masked = CaptionDataset(_items(), features, freqm=6, timem=5, **kw)
    again = CaptionDataset(_items(), features, freqm=6, timem=5, **kw)
    changed = 0
    for i in range(6):
        a, b, c = plain[i], masked[i], again[i]
        assert a["caption"] == b["caption"] and torch.equal(b["feats"], c["feats"])
        keep = b["feats"] != 0  # the crop is the same wherever no mask fell
        assert torch.equal(a["feats"][keep], b["feats"][keep])
        changed += int((b["feats"] == 0).any())
    assert changed > 0
    with pytest.raises(RetrievalDataError, match="freqm and timem"):
        CaptionDataset(_items(), features, freqm=-1)


def test_text_dropout_sets_the_transformer_rates_and_only_acts_in_training():
    base = TextEncoder(trainable_layers=None)
    enc = TextEncoder(trainable_layers=None, dropout=0.3)
    cfg = enc.model.config
    assert (cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob) == (0.3, 0.3)
    assert base.model.config.hidden_dropout_prob != 0.3
    for (name, p), q in zip(base.state_dict().items(), enc.state_dict().values(), strict=True):
        assert torch.equal(p, q), name  # the same pretrained weights
    captions = ["a dog barks", "rain falls on a roof"]
    enc.eval()
    with torch.no_grad():
        assert torch.equal(enc(captions), enc(captions))
        enc.train()
        assert not torch.equal(enc(captions), enc(captions))
    with pytest.raises(TextEncoderError, match="dropout"):
        TextEncoder(dropout=1.5)


def test_the_options_are_off_in_every_preset_the_papers_do_not_state_them():
    from audiorepro.experiments.distillation import config as distillation
    from audiorepro.experiments.retrieval import config as retrieval

    for preset in ("smoke", "embedded", "paper"):
        for cfg in (
            load_preset(retrieval.Config, retrieval.PRESETS, preset),
            distillation.load_config(preset).retrieval,
        ):
            assert (cfg.train.freqm, cfg.train.timem, cfg.model.text_dropout) == (0, 0, None)
