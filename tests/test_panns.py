"""PANNs CNN14 / CNN10: reference names and shapes, forward against a functional reference,
checkpoint loading in the PANNs file layout, input errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from audiorepro.models.panns import CNN, cnn10, cnn14, load_panns_checkpoint
from audiorepro.training import CheckpointError


def official_shapes(channels: list[int], mel_bins: int = 64, classes: int = 527) -> dict:
    """Key -> shape of PANNs' ``Cnn14`` / ``Cnn10`` state dict (without the front end)."""
    shapes = {}

    def bn(name, n):
        shapes.update(
            {
                f"{name}.weight": (n,),
                f"{name}.bias": (n,),
                f"{name}.running_mean": (n,),
                f"{name}.running_var": (n,),
                f"{name}.num_batches_tracked": (),
            }
        )

    bn("bn0", mel_bins)
    prev = 1
    for i, c in enumerate(channels, start=1):
        shapes[f"conv_block{i}.conv1.weight"] = (c, prev, 3, 3)
        shapes[f"conv_block{i}.conv2.weight"] = (c, c, 3, 3)
        bn(f"conv_block{i}.bn1", c)
        bn(f"conv_block{i}.bn2", c)
        prev = c
    shapes |= {
        "fc1.weight": (prev, prev),
        "fc1.bias": (prev,),
        "fc_audioset.weight": (classes, prev),
        "fc_audioset.bias": (classes,),
    }
    return shapes


@pytest.mark.parametrize(
    ("factory", "channels", "dim"),
    [(cnn14, [64, 128, 256, 512, 1024, 2048], 2048), (cnn10, [64, 128, 256, 512], 512)],
)
def test_paper_size_names_and_shapes(factory, channels, dim):
    with torch.device("meta"):
        model = factory()
    got = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert got == official_shapes(channels)
    assert model.num_features == model.embed_dim == dim and model.max_frames is None


def reference_forward(state, x, num_blocks, last_pool):
    """PANNs' forward written out from the state dict (eval mode)."""

    def bn(y, name):
        return F.batch_norm(
            y,
            state[name + ".running_mean"],
            state[name + ".running_var"],
            state[name + ".weight"],
            state[name + ".bias"],
            eps=1e-5,
        )

    x = x.transpose(2, 3)  # (B, 1, T, F)
    x = bn(x.transpose(1, 3), "bn0").transpose(1, 3)
    for i in range(1, num_blocks + 1):
        p = f"conv_block{i}."
        x = F.relu(bn(F.conv2d(x, state[p + "conv1.weight"], padding=1), p + "bn1"))
        x = F.relu(bn(F.conv2d(x, state[p + "conv2.weight"], padding=1), p + "bn2"))
        pool = last_pool if i == num_blocks else (2, 2)
        x = F.avg_pool2d(x, pool)
    x = x.mean(3)
    x = x.max(2).values + x.mean(2)
    emb = F.relu(x @ state["fc1.weight"].T + state["fc1.bias"])
    return emb @ state["fc_audioset.weight"].T + state["fc_audioset.bias"], emb


@pytest.mark.parametrize(("factory", "blocks", "pool"), [(cnn14, 6, (1, 1)), (cnn10, 4, (2, 2))])
@pytest.mark.parametrize("frames", [333, 64])
def test_forward_matches_functional_reference(factory, blocks, pool, frames):
    torch.manual_seed(0)
    model = factory(mel_bins=32, classes_num=7, base_channels=4)
    with torch.no_grad():  # non-trivial batch-norm statistics
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
                m.weight.normal_()
                m.bias.normal_()
    model.eval()
    x = torch.randn(3, 1, 32, frames)
    logits, features = model(x)
    ref_logits, ref_features = reference_forward(model.state_dict(), x, blocks, pool)
    assert features.shape == (3, model.num_features)
    torch.testing.assert_close(features, ref_features, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits, ref_logits, atol=1e-4, rtol=1e-4)


def test_training_mode_uses_dropout_and_batch_statistics():
    torch.manual_seed(0)
    model = cnn10(mel_bins=16, base_channels=4).train()
    x = torch.randn(4, 1, 16, 50)
    torch.manual_seed(1)
    a = model(x)[1]
    torch.manual_seed(2)
    b = model(x)[1]
    assert not torch.allclose(a, b)
    model.eval()
    torch.testing.assert_close(model(x)[1], model(x)[1])


def test_loads_a_panns_layout_checkpoint(tmp_path):
    torch.manual_seed(0)
    source = cnn14(mel_bins=32, base_channels=2, classes_num=5)
    state = dict(source.state_dict())
    # The released files hold {"model": ...} with the torchlibrosa front end's tensors.
    state["spectrogram_extractor.stft.conv_real.weight"] = torch.zeros(513, 1, 1024)
    state["logmel_extractor.melW"] = torch.zeros(513, 64)
    torch.save({"model": state, "iteration": 10}, tmp_path / "Cnn14_mAP=0.431.pth")
    target = cnn14(mel_bins=32, base_channels=2, classes_num=5)
    load_panns_checkpoint(target, tmp_path / "Cnn14_mAP=0.431.pth")
    x = torch.randn(2, 1, 32, 100)
    torch.testing.assert_close(target.eval()(x), source.eval()(x))
    with pytest.raises(
        CheckpointError, match=r"24 unexpected key\(s\)(.|\n)*fc1.weight: checkpoint"
    ):
        load_panns_checkpoint(
            cnn10(mel_bins=32, base_channels=2, classes_num=5), tmp_path / "Cnn14_mAP=0.431.pth"
        )


def test_bad_input():
    model = cnn14(mel_bins=64, base_channels=2).eval()
    with pytest.raises(ValueError, match=r"expects a \(B, 1, 64, T\)"):
        model(torch.randn(2, 1, 128, 100))
    with pytest.raises(ValueError, match="shorter than the 32 frames"):
        model(torch.randn(2, 1, 64, 31))
    with pytest.raises(ValueError, match="need mel_bins >= 32"):
        CNN(num_blocks=6, mel_bins=16)
