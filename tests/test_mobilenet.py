"""EfficientAT MobileNetV3: official names and shapes (mn40_as_ext), strict checkpoint loading,
any input length, per-clip lengths, errors."""

from __future__ import annotations

import pytest
import torch

from audiorepro.models.mobilenet import (
    load_mobilenet_checkpoint,
    make_divisible,
    mn40_as_ext,
    mobilenet,
)
from audiorepro.models.passt import count_parameters
from audiorepro.training import CheckpointError

# MobileNetV3-Large (in, kernel, expanded, out, SE) as in EfficientAT models/mn/model.py.
LARGE = [
    (16, 3, 16, 16, False), (16, 3, 64, 24, False), (24, 3, 72, 24, False),
    (24, 5, 72, 40, True), (40, 5, 120, 40, True), (40, 5, 120, 40, True),
    (40, 3, 240, 80, False), (80, 3, 200, 80, False), (80, 3, 184, 80, False),
    (80, 3, 184, 80, False), (80, 3, 480, 112, True), (112, 3, 672, 112, True),
    (112, 5, 672, 160, True), (160, 5, 960, 160, True), (160, 5, 960, 160, True),
]  # fmt: skip


def _conv_bn(prefix: str, cin: int, cout: int, k: int, groups: int = 1) -> dict:
    # torchvision ConvNormActivation: 0 = Conv2d(bias=False), 1 = BatchNorm2d.
    return {
        f"{prefix}.0.weight": (cout, cin // groups, k, k),
        f"{prefix}.1.weight": (cout,),
        f"{prefix}.1.bias": (cout,),
        f"{prefix}.1.running_mean": (cout,),
        f"{prefix}.1.running_var": (cout,),
        f"{prefix}.1.num_batches_tracked": (),
    }


def official_mn_shapes(width: float, classes: int = 527) -> dict[str, tuple[int, ...]]:
    """Key → shape of EfficientAT's ``MN`` (head "mlp", se_dims "c", se_r 4)."""
    ch = lambda c: make_divisible(c * width, 8)  # noqa: E731
    shapes = _conv_bn("features.0", 1, ch(16), 3)
    for i, (cin, k, cexp, cout, se) in enumerate(LARGE, start=1):
        cin, cexp, cout = ch(cin), ch(cexp), ch(cout)
        j = 0
        if cexp != cin:
            shapes |= _conv_bn(f"features.{i}.block.{j}", cin, cexp, 1)
            j += 1
        shapes |= _conv_bn(f"features.{i}.block.{j}", cexp, cexp, k, groups=cexp)
        j += 1
        if se:
            sq = make_divisible(cexp // 4, 8)
            p = f"features.{i}.block.{j}.conc_se_layers.0."
            shapes |= {
                p + "fc1.weight": (sq, cexp),
                p + "fc1.bias": (sq,),
                p + "fc2.weight": (cexp, sq),
                p + "fc2.bias": (cexp,),
            }
            j += 1
        shapes |= _conv_bn(f"features.{i}.block.{j}", cexp, cout, 1)
    last = ch(160)
    shapes |= _conv_bn("features.16", last, 6 * last, 1)
    hidden = ch(1280)
    shapes |= {
        "classifier.2.weight": (hidden, 6 * last),
        "classifier.2.bias": (hidden,),
        "classifier.5.weight": (classes, hidden),
        "classifier.5.bias": (classes,),
    }
    return shapes


def test_make_divisible_hand_cases():
    assert make_divisible(16 * 4.0) == 64
    assert make_divisible(16 * 0.1) == 8  # at least the divisor
    assert make_divisible(72 * 0.4) == 32  # 28.8 -> 32 (nearest multiple of 8)
    assert make_divisible(100) == 104  # 100 + 4 = 104 -> 104
    assert make_divisible(91) == 88  # 88 >= 0.9 * 91


def test_mn40_as_ext_has_the_official_names_and_shapes_and_loads_strictly():
    with torch.device("meta"):
        model = mn40_as_ext()
        official = {k: torch.empty(s) for k, s in official_mn_shapes(4.0).items()}
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == official_mn_shapes(4.0)
    model.load_state_dict(official, strict=True, assign=True)
    assert count_parameters(model) == pytest.approx(68.4e6, rel=1e-3)  # paper (b) §4.2.3
    assert model.num_features == 3840  # the embedding salsa projects
    assert official["features.0.0.weight"].shape == (64, 1, 3, 3)
    assert official["classifier.2.weight"].shape == (5120, 3840)


def test_released_file_loads_and_reproduces_outputs(tmp_path):
    torch.manual_seed(0)
    source = mobilenet("mn01").eval()
    for module in source.modules():  # non-trivial running statistics
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_()
            module.running_var.uniform_(0.5, 2.0)
    assert set(source.state_dict()) == set(official_mn_shapes(0.1))
    torch.save(source.state_dict(), tmp_path / "mn01_as_mAP_298.pt")
    model = load_mobilenet_checkpoint(mobilenet("mn01"), tmp_path / "mn01_as_mAP_298.pt").eval()
    x = torch.randn(2, 1, 128, 300)
    for ours, theirs in zip(model(x), source(x), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)

    ten = mobilenet("mn01", num_classes=10)
    with pytest.raises(CheckpointError, match=r"classifier.5.weight: checkpoint \(527, 128\)"):
        load_mobilenet_checkpoint(ten, tmp_path / "mn01_as_mAP_298.pt")
    head = ten.classifier[5].weight.clone()
    load_mobilenet_checkpoint(ten, tmp_path / "mn01_as_mAP_298.pt", drop_classifier=True)
    assert ten.classifier[5].weight.equal(head)
    assert ten.features[3].block[0][0].weight.equal(source.features[3].block[0][0].weight)


def test_any_length_and_per_clip_lengths():
    torch.manual_seed(1)
    model = mobilenet("mn01").eval()
    for frames in (1, 7, 400):
        logits, features = model(torch.randn(1, 1, 128, frames))
        assert logits.shape == (1, 527) and features.shape == (1, model.num_features)
    feats = torch.randn(3, 1, 128, 200)
    lengths = torch.tensor([200, 64, 5])
    emb = model.embed(feats, lengths)
    for i, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(emb[i], model(feats[i : i + 1, ..., :n])[1][0])
    torch.testing.assert_close(model.embed(feats), model(feats)[1])
    with pytest.raises(ValueError, match="lengths"):
        model.embed(feats, torch.tensor([0, 1, 1]))


def test_features_are_the_mean_of_the_last_feature_map_and_errors():
    model = mobilenet("mn01").eval()
    x = torch.randn(2, 1, 128, 90)
    fmap = model.features(x)
    torch.testing.assert_close(model(x)[1], fmap.mean(dim=(2, 3)))
    with pytest.raises(ValueError, match=r"\(B, 1, F, T\)"):
        model(torch.randn(2, 128, 90))
    with pytest.raises(ValueError, match="unknown MobileNet"):
        mobilenet("mn99")


def test_channels_last_is_the_same_network():
    torch.manual_seed(0)
    plain = mobilenet("mn01").eval()
    fast = mobilenet("mn01")
    fast.load_state_dict(plain.state_dict())
    fast = fast.use_channels_last().eval()
    assert fast.state_dict().keys() == plain.state_dict().keys()
    x = torch.randn(2, 1, 128, 50)
    torch.testing.assert_close(fast(x)[1], plain(x)[1], rtol=1e-4, atol=1e-5)
    assert fast.embed(x).shape == (2, fast.num_features)
