"""The common audio-encoder interface of the registry the dual encoders are built from:
(B, 1, F, T) -> (logits, features), num_features; every encoder works with snippet embedding."""

from __future__ import annotations

import pytest
import torch

from audiorepro.config import ConfigError
from audiorepro.models import embed_snippets
from audiorepro.models.audio_encoders import (
    AUDIO_ENCODERS,
    AudioEncoderConfig,
    MelBinPool,
    build_audio_encoder,
)

SMALL = {
    "passt": dict(passt_variant="tiny", snippet_s=2.0, s_patchout_t=4),
    "cnn14": dict(cnn_base_channels=2),
    "cnn10": dict(cnn_base_channels=2, cnn_mel_bins=128),
    "atst": dict(atst_variant="tiny", snippet_s=2.0),
    "mobilenet": dict(mobilenet_variant="mn01"),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_common_interface(name):
    torch.manual_seed(0)
    cfg = AudioEncoderConfig(audio_encoder=name, **SMALL[name])
    model, dim, snippet_frames = build_audio_encoder(cfg)
    model.eval()
    bands = 64 if cfg.front_end == "atst" else 128
    feats = torch.randn(3, 1, bands, 150)
    with torch.no_grad():
        logits, features = model(feats)
        assert logits.shape[0] == 3
        assert features.shape == (3, model.num_features) and dim == model.num_features
        emb = embed_snippets(lambda x: model(x)[1], feats, torch.tensor([150, 90, 40]), 64)
    assert emb.shape == (3, model.num_features) and torch.isfinite(emb).all()
    assert (snippet_frames is None) == (name in ("cnn14", "cnn10", "mobilenet"))
    # the CNNs see 64 bands (PANNs) through MelBinPool unless told 128
    assert isinstance(model, MelBinPool) == (name == "cnn14")


def test_registry_names_and_unknown_name():
    assert set(AUDIO_ENCODERS) == {"passt", "cnn14", "cnn10", "atst", "mobilenet"}
    with pytest.raises(ConfigError, match="audio_encoder"):
        AudioEncoderConfig(audio_encoder="vggish")
    with pytest.raises(ValueError, match="must divide 128"):
        MelBinPool(torch.nn.Identity(), 3)
