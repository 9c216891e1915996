"""PaSST: official names and shapes, checkpoint loading, forward against a functional reference,
patchout, positional-encoding cut, input errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from audiorepro.models.passt import (
    PaSST,
    count_parameters,
    load_passt_checkpoint,
    passt,
    passt_n,
    passt_s,
    passt_tiny,
)
from audiorepro.training import CheckpointError


def official_passt_n_shapes() -> dict[str, tuple[int, ...]]:
    """Key → shape of ``passt-s-f128-p16-s16-ap.468.pt`` (kkoutini/PaSST v0.0.2-audioset),
    written out from the reference module definitions: ViT-B, 12 blocks, 8 x 62 patch grid."""
    d, classes = 768, 527
    shapes = {
        "cls_token": (1, 1, d),
        "dist_token": (1, 1, d),
        "new_pos_embed": (1, 2, d),
        "freq_new_pos_embed": (1, d, 8, 1),
        "time_new_pos_embed": (1, d, 1, 62),
        "patch_embed.proj.weight": (d, 1, 16, 16),
        "patch_embed.proj.bias": (d,),
        "norm.weight": (d,),
        "norm.bias": (d,),
        "head.0.weight": (d,),
        "head.0.bias": (d,),
        "head.1.weight": (classes, d),
        "head.1.bias": (classes,),
        "head_dist.weight": (classes, d),
        "head_dist.bias": (classes,),
    }
    for i in range(12):
        b = f"blocks.{i}."
        shapes |= {
            b + "norm1.weight": (d,),
            b + "norm1.bias": (d,),
            b + "attn.qkv.weight": (3 * d, d),
            b + "attn.qkv.bias": (3 * d,),
            b + "attn.proj.weight": (d, d),
            b + "attn.proj.bias": (d,),
            b + "norm2.weight": (d,),
            b + "norm2.bias": (d,),
            b + "mlp.fc1.weight": (4 * d, d),
            b + "mlp.fc1.bias": (4 * d,),
            b + "mlp.fc2.weight": (d, 4 * d),
            b + "mlp.fc2.bias": (d,),
        }
    return shapes


def test_paper_size_n_has_the_official_names_and_shapes_and_loads_strictly():
    with torch.device("meta"):
        model = passt_n()
        official = {k: torch.empty(s) for k, s in official_passt_n_shapes().items()}
    got = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert got == official_passt_n_shapes()
    model.load_state_dict(official, strict=True, assign=True)
    # Table 2: 86.2M parameters.
    assert count_parameters(model) == pytest.approx(86.2e6, rel=2e-3)


def test_paper_size_s_grid_matches_the_reference_formula():
    with torch.device("meta"):
        s = passt_s()
        s20 = passt("s20")
    # img_size // stride, as the reference: 998 // 10 = 99 and 2000 // 10 = 200 positions.
    assert tuple(s.time_new_pos_embed.shape) == (1, 768, 1, 99)
    assert tuple(s.freq_new_pos_embed.shape) == (1, 768, 12, 1)
    assert tuple(s20.time_new_pos_embed.shape) == (1, 768, 1, 200)
    assert (s.s_patchout_f, s.s_patchout_t, s20.s_patchout_t) == (4, 50, 80)


@pytest.mark.parametrize(
    ("factory", "frames", "train_tokens", "eval_tokens"),
    [(passt_n, 1000, 6 * 47, 8 * 62), (passt_s, 998, 8 * 49, 12 * 99)],
)
def test_paper_size_sequence_lengths_with_patchout(factory, frames, train_tokens, eval_tokens):
    # Shapes only, on the meta device: PaSST-N 8 x 62 patches, 6 x 47 after patchout (2; 15);
    # PaSST-S 12 x 99, 8 x 49 after patchout (4; 50) (reference notes §3, paper (a) Table 2).
    with torch.device("meta"):
        model = factory()
        x = torch.empty(2, 1, 128, frames)
        assert sequence_length(model.train(), x) == 2 + train_tokens
        assert sequence_length(model.eval(), x) == 2 + eval_tokens
        logits, features = model(x)
    assert tuple(logits.shape) == (2, 527) and tuple(features.shape) == (2, 768)


def small_model(**kw) -> PaSST:
    torch.manual_seed(0)
    cfg = dict(
        img_size=(32, 100),
        stride=10,
        embed_dim=24,
        depth=2,
        num_heads=3,
        num_classes=5,
        distilled=True,
    )
    return PaSST(**(cfg | kw))


def reference_forward(state: dict, x: torch.Tensor, num_heads: int):
    """The PaSST forward written out from the state dict alone (eval mode, no patchout)."""
    x = F.conv2d(x, state["patch_embed.proj.weight"], state["patch_embed.proj.bias"], stride=10)
    t = x.shape[-1]
    x = x + state["time_new_pos_embed"][..., :t] + state["freq_new_pos_embed"]
    batch, d = x.shape[0], x.shape[1]
    x = x.flatten(2).transpose(1, 2)
    cls = state["cls_token"] + state["new_pos_embed"][:, :1]
    dist = state["dist_token"] + state["new_pos_embed"][:, 1:]
    x = torch.cat([cls.expand(batch, -1, -1), dist.expand(batch, -1, -1), x], dim=1)
    depth = 1 + max(int(k.split(".")[1]) for k in state if k.startswith("blocks."))

    def ln(y, name):
        return F.layer_norm(y, (d,), state[name + ".weight"], state[name + ".bias"], eps=1e-6)

    for i in range(depth):
        p = f"blocks.{i}."
        h = ln(x, p + "norm1")
        qkv = h @ state[p + "attn.qkv.weight"].T + state[p + "attn.qkv.bias"]
        q, k, v = qkv.chunk(3, dim=-1)
        heads = []
        hd = d // num_heads
        for j in range(num_heads):
            sl = slice(j * hd, (j + 1) * hd)
            att = torch.softmax(q[..., sl] @ k[..., sl].transpose(1, 2) / math.sqrt(hd), dim=-1)
            heads.append(att @ v[..., sl])
        h = (
            torch.cat(heads, dim=-1) @ state[p + "attn.proj.weight"].T
            + state[p + "attn.proj.bias"]
        )
        x = x + h
        h = ln(x, p + "norm2")
        h = F.gelu(h @ state[p + "mlp.fc1.weight"].T + state[p + "mlp.fc1.bias"])
        x = x + h @ state[p + "mlp.fc2.weight"].T + state[p + "mlp.fc2.bias"]
    x = ln(x, "norm")
    features = (x[:, 0] + x[:, 1]) / 2
    logits = ln(features, "head.0") @ state["head.1.weight"].T + state["head.1.bias"]
    return logits, features


@pytest.mark.parametrize("frames", [100, 57, 16])
def test_forward_matches_functional_reference(frames):
    model = small_model().eval()
    x = torch.randn(3, 1, 32, frames)
    logits, features = model(x)
    ref_logits, ref_features = reference_forward(model.state_dict(), x, num_heads=3)
    assert features.shape == (3, 24) and logits.shape == (3, 5)
    torch.testing.assert_close(features, ref_features, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=1e-5)


def test_time_encoding_is_cut_from_the_start():
    model = small_model().eval()
    x = torch.randn(2, 1, 32, 60)
    _, full = model(x)
    with torch.no_grad():  # shifting the unused tail of the encoding changes nothing
        grid_t = (60 - 16) // 10 + 1
        model.time_new_pos_embed[..., grid_t:] += torch.randn(1, 24, 1, 10 - grid_t)
    torch.testing.assert_close(model(x)[1], full)
    with torch.no_grad():
        model.time_new_pos_embed[..., :1] += torch.randn(1, 24, 1, 1)
    assert not torch.allclose(model(x)[1], full)


def sequence_length(model: PaSST, x: torch.Tensor) -> int:
    seen = []
    handle = model.blocks[0].register_forward_hook(lambda m, i, o: seen.append(i[0].shape[1]))
    model(x)
    handle.remove()
    return seen[0]


def test_structured_patchout_only_in_training():
    model = small_model(s_patchout_t=3, s_patchout_f=1)
    x = torch.randn(2, 1, 32, 100)  # grid 2 x 9
    model.eval()
    assert sequence_length(model, x) == 2 + 2 * 9
    torch.testing.assert_close(model(x)[1], model(x)[1])
    model.train()
    assert sequence_length(model, x) == 2 + (2 - 1) * (9 - 3)
    torch.manual_seed(1)
    a = model(x)[1]
    torch.manual_seed(2)
    b = model(x)[1]
    assert not torch.allclose(a, b)  # a different random subset of patches


def test_unstructured_patchout_and_non_distilled_variant():
    model = small_model(u_patchout=5, distilled=False, representation_size=7)
    x = torch.randn(2, 1, 32, 100)
    model.train()
    assert sequence_length(model, x) == 1 + 18 - 5
    model.eval()
    logits, features = model(x)
    assert features.shape == (2, 7) and logits.shape == (2, 5)
    assert "pre_logits.fc.weight" in model.state_dict() and model.head_dist is None


def test_tiny_config_runs_a_batch_of_ten_second_clips():
    model = passt_tiny(num_classes=0).eval()
    with torch.no_grad():
        logits, features = model(torch.randn(8, 1, 128, 1000))
    assert features.shape == (8, model.num_features) == (8, 64)
    assert model.max_frames >= 1000 and model.min_frames == 16


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((2, 1, 32, 15), "shorter than one patch: 15 frames < 16"),
        ((2, 1, 32, 200), "longer than the time positional encoding"),
        ((2, 1, 64, 100), "32 mel bands"),
        ((2, 32, 100), r"\.unsqueeze\(1\)"),
    ],
)
def test_bad_input_shapes(shape, message):
    with pytest.raises(ValueError, match=message):
        small_model()(torch.randn(*shape))


def test_bad_configuration():
    with pytest.raises(ValueError, match="must leave patches"):
        small_model(s_patchout_f=2)
    with pytest.raises(ValueError, match="exceeds the patch size"):
        small_model(stride=20)
    with pytest.raises(ValueError, match="unknown PaSST variant 'xl'"):
        passt("xl")


# --------------------------------------------------------------------------------------------
# checkpoint files


def test_load_checkpoint_formats(tmp_path):
    source = small_model()
    state = {k: v.clone() for k, v in source.state_dict().items()}
    x = torch.randn(2, 1, 32, 100)
    expected = source.eval()(x)[1]
    files = {
        "plain.pt": state,
        # The PaSST framework's Lightning module: the encoder under "net.", the front end
        # under "mel." (ignored: outside the detected prefix).
        "lightning.ckpt": {
            "state_dict": {"net." + k: v for k, v in state.items()}
            | {"mel.window": torch.ones(3)},
            "epoch": 3,
        },
        "ddp.pth": {"module." + k: v for k, v in state.items()},
    }
    for name, obj in files.items():
        torch.save(obj, tmp_path / name)
    save_file(state, str(tmp_path / "weights.safetensors"))
    for name in [*files, "weights.safetensors"]:
        torch.manual_seed(99)
        target = small_model()
        with torch.no_grad():
            target.cls_token.zero_()
        load_passt_checkpoint(target, tmp_path / name)
        torch.testing.assert_close(target.eval()(x)[1], expected, msg=name)


def test_mismatched_checkpoint_lists_every_difference(tmp_path):
    state = dict(small_model().state_dict())
    del state["dist_token"]
    del state["blocks.1.mlp.fc2.bias"]
    state["head.2.weight"] = torch.zeros(3)
    state["time_new_pos_embed"] = torch.zeros(1, 24, 1, 4)
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError) as info:
        load_passt_checkpoint(small_model(), tmp_path / "bad.pt")
    message = str(info.value)
    assert "bad.pt does not fit the model" in message
    assert "2 missing key(s)" in message
    assert "\n    blocks.1.mlp.fc2.bias\n    dist_token" in message
    assert "1 unexpected key(s)" in message and "\n    head.2.weight" in message
    assert "time_new_pos_embed: checkpoint (1, 24, 1, 4) vs model (1, 24, 1, 10)" in message


def test_checkpoint_file_errors(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_passt_checkpoint(small_model(), tmp_path / "nope.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="junk.pt: not a readable torch checkpoint"):
        load_passt_checkpoint(small_model(), tmp_path / "junk.pt")
    torch.save({"epoch": 1}, tmp_path / "empty.pt")
    with pytest.raises(CheckpointError, match="no tensors found"):
        load_passt_checkpoint(small_model(), tmp_path / "empty.pt")


def test_cut_time_encoding_on_load_equals_the_full_model_on_short_inputs(tmp_path):
    full = small_model().eval()  # 100 frames, 10 time positions
    torch.save(full.state_dict(), tmp_path / "full.pt")
    short = small_model(img_size=(32, 60))  # 6 time positions
    with pytest.raises(CheckpointError, match="time_new_pos_embed: checkpoint"):
        load_passt_checkpoint(short, tmp_path / "full.pt")
    load_passt_checkpoint(short, tmp_path / "full.pt", cut_time_pos_embed=True)
    x = torch.randn(2, 1, 32, 60)
    torch.testing.assert_close(short.eval()(x), full(x))
    longer = small_model(img_size=(32, 150))  # cannot grow an encoding
    with pytest.raises(CheckpointError, match="time_new_pos_embed"):
        load_passt_checkpoint(longer, tmp_path / "full.pt", cut_time_pos_embed=True)


def test_scaled_time_patchout_keeps_the_variants_share_of_dropped_time_patches():
    from audiorepro.models.passt import scaled_time_patchout

    assert scaled_time_patchout("s20", 2000) == 80  # its own 20 s input: Table 2's 80
    assert scaled_time_patchout("s20", 1000) == 40
    assert scaled_time_patchout("s20", 500) == 20
    assert scaled_time_patchout("s20", 200) == 8
    assert scaled_time_patchout("n", 1000) == 15  # PaSST-N at 10 s: Table 2's 15
    with pytest.raises(ValueError, match="unknown PaSST variant"):
        scaled_time_patchout("xl", 1000)


def test_every_paper_snippet_length_gets_a_patchout_that_leaves_time_patches():
    """Paper (a) Figure 1 runs PaSST-S20 on 2-15 s snippets; its own patchout (80 time
    patches) would leave none of a 2 s snippet's 20 and stop the ablation."""
    from audiorepro.experiments.retrieval.config import load_config
    from audiorepro.experiments.retrieval.stages import ablation_config
    from audiorepro.models.passt import PASST_CONFIGS, PatchEmbed

    cfg = load_config("paper")
    with pytest.raises(ValueError, match="must leave patches"):
        passt("s20", img_size=(128, 200), s_patchout_t=80)
    for seconds in cfg.snippet_lengths_s:
        model = ablation_config(cfg, "snippet_s", str(seconds)).model
        assert model.passt_variant == "s20" and model.snippet_s == seconds
        variant = PASST_CONFIGS["s20"]
        grid = PatchEmbed((128, model.snippet_frames), 16, variant["stride"], 1, 8).grid_size
        assert 0 < model.s_patchout_t < grid[1]
        assert model.s_patchout_t == round(80 * seconds / 20)
    # the main model, PaSST-N at 10 s, keeps the variant's own (Table 2's 15)
    assert cfg.model.s_patchout_t is None and cfg.model.passt_variant == "n"
