"""The common audio-encoder interface: (B, 1, F, T) -> (logits, features), num_features,
max_frames; every encoder works with snippet embedding."""

from __future__ import annotations

import pytest
import torch

from audiorepro.models import AUDIO_ENCODERS, audio_encoder, embed_snippets

SMALL = {
    "passt_tiny": dict(img_size=(128, 200), num_classes=3, s_patchout_t=4),
    "passt_small": dict(img_size=(128, 200), num_classes=3, depth=1, s_patchout_t=4),
    "cnn14": dict(mel_bins=128, classes_num=3, base_channels=2),
    "cnn10": dict(mel_bins=128, classes_num=3, base_channels=2),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_common_interface(name):
    torch.manual_seed(0)
    model = audio_encoder(name, **SMALL[name]).eval()
    feats = torch.randn(3, 1, 128, 150)
    with torch.no_grad():
        logits, features = model(feats)
        assert logits.shape == (3, 3)
        assert features.shape == (3, model.num_features) and model.embed_dim == model.num_features
        emb = embed_snippets(lambda x: model(x)[1], feats, torch.tensor([150, 90, 40]), 64)
    assert emb.shape == (3, model.num_features) and torch.isfinite(emb).all()
    if model.max_frames is not None:
        assert model.max_frames >= 200


def test_registry_names_and_unknown_name():
    assert set(AUDIO_ENCODERS) == {
        "passt_n",
        "passt_s",
        "passt_l",
        "passt_s20",
        "passt_tiny",
        "passt_small",
        "cnn14",
        "cnn10",
    }
    with pytest.raises(ValueError, match="unknown audio encoder 'vggish'"):
        audio_encoder("vggish")
