"""ATST-Frame: official names and shapes, checkpoint renaming and strict loading, frame tokens
against a brute-force reference, frequency warping, snippets, input errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audiorepro.features import AtstMel
from audiorepro.models.atst import (
    ATST_SILENCE,
    atst_frame_base,
    atst_frame_tiny,
    atst_state_dict_from_checkpoint,
    frequency_warp,
    load_atst_checkpoint,
)
from audiorepro.models.passt import count_parameters, passt_tiny
from audiorepro.models.snippets import embed_snippets
from audiorepro.models.vit import Block
from audiorepro.training import CheckpointError


def official_frame_ast_shapes(d: int = 768, depth: int = 12) -> dict[str, tuple[int, ...]]:
    """Key → shape of audiossl's ``FrameAST`` (ATST-SED ``FrameASTModel``): 64 x 4 frame tokens,
    1001-frame encoding (250 positions + the pretraining cls position), qkv without bias."""
    shapes = {
        "mask_embed": (1, 1, d),
        "pos_embed": (1, 251, d),
        "patch_embed.patch_embed.weight": (d, 256),
        "patch_embed.patch_embed.bias": (d,),
        "norm_frame.weight": (d,),
        "norm_frame.bias": (d,),
    }
    for i in range(depth):
        b = f"blocks.{i}."
        shapes |= {
            b + "norm1.weight": (d,),
            b + "norm1.bias": (d,),
            b + "attn.qkv.weight": (3 * d, d),
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


def test_base_has_the_official_names_and_shapes_and_loads_strictly():
    with torch.device("meta"):
        model = atst_frame_base()
        official = {k: torch.empty(s) for k, s in official_frame_ast_shapes().items()}
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == (
        official_frame_ast_shapes()
    )
    model.load_state_dict(official, strict=True, assign=True)
    assert count_parameters(model) == pytest.approx(85.4e6, rel=1e-3)  # paper (b) §4.2.2
    assert model.num_features == 768 and model.snippet_frames == 1000


def _released_ssl_checkpoint(model) -> dict[str, torch.Tensor]:
    """A self-supervised ATST-Frame checkpoint's layout: teacher encoder with ``norm`` and a
    cls token, plus student/optimiser-side keys the loader must ignore."""
    state = {}
    for key, value in model.state_dict().items():
        key = key.replace("norm_frame", "norm")
        state[f"model.teacher.encoder.{key}"] = torch.randn_like(value)
        state[f"model.student.encoder.{key}"] = torch.randn_like(value)
    state["model.teacher.encoder.cls_token"] = torch.randn(1, 1, model.embed_dim)
    return state


def test_atst_and_passt_share_one_block_implementation():
    torch.manual_seed(0)
    atst_block = atst_frame_tiny(qkv_bias=True).blocks[0]
    passt_block = passt_tiny().blocks[0]
    assert type(atst_block) is type(passt_block) is Block
    passt_block.load_state_dict(atst_block.state_dict(), strict=True)
    atst_block.eval()
    passt_block.eval()
    x = torch.randn(2, 7, 64)
    torch.testing.assert_close(atst_block(x), passt_block(x), rtol=0, atol=0)


def test_ssl_and_finetuned_checkpoints_load_with_the_reference_renaming(tmp_path):
    model = atst_frame_tiny()
    ssl = _released_ssl_checkpoint(model)
    torch.save({"state_dict": ssl, "epoch": 3}, tmp_path / "atstframe_base.ckpt")
    load_atst_checkpoint(model, tmp_path / "atstframe_base.ckpt")
    torch.testing.assert_close(
        model.norm_frame.weight, ssl["model.teacher.encoder.norm.weight"], rtol=0, atol=0
    )
    torch.testing.assert_close(
        model.pos_embed, ssl["model.teacher.encoder.pos_embed"], rtol=0, atol=0
    )

    finetuned = {
        f"encoder.encoder.{k}": torch.randn_like(v) for k, v in model.state_dict().items()
    }
    finetuned["head.linear.weight"] = torch.randn(527, model.embed_dim)
    torch.save({"state_dict": finetuned}, tmp_path / "atst_as2M.ckpt")
    load_atst_checkpoint(model, tmp_path / "atst_as2M.ckpt")
    torch.testing.assert_close(
        model.blocks[1].attn.qkv.weight,
        finetuned["encoder.encoder.blocks.1.attn.qkv.weight"],
        rtol=0,
        atol=0,
    )
    renamed = atst_state_dict_from_checkpoint(finetuned)
    assert set(renamed) == set(model.state_dict())


def test_checkpoint_with_a_missing_block_lists_the_keys(tmp_path):
    model = atst_frame_tiny()
    state = {f"encoder.encoder.{k}": v for k, v in model.state_dict().items()}
    del state["encoder.encoder.blocks.1.mlp.fc2.weight"]
    state["encoder.encoder.pos_embed"] = torch.zeros(1, 100, model.embed_dim)
    torch.save({"state_dict": state}, tmp_path / "bad.ckpt")
    with pytest.raises(CheckpointError) as err:
        load_atst_checkpoint(model, tmp_path / "bad.ckpt")
    assert "blocks.1.mlp.fc2.weight" in str(err.value)
    assert "pos_embed: checkpoint (1, 100, 64) vs model (1, 251, 64)" in str(err.value)
    torch.save({"state_dict": {"other.weight": torch.zeros(2)}}, tmp_path / "none.ckpt")
    with pytest.raises(CheckpointError, match="no ATST-Frame encoder keys"):
        load_atst_checkpoint(model, tmp_path / "none.ckpt")


def test_frame_tokens_match_a_brute_force_reference():
    torch.manual_seed(0)
    model = atst_frame_tiny().eval()
    x = torch.randn(2, 1, 64, 39)  # 9 tokens, 3 trailing frames dropped
    tokens = model.patch_embed(x)
    w, b = model.patch_embed.patch_embed.weight, model.patch_embed.patch_embed.bias
    for i in range(2):
        for t in range(9):
            # b c (h p1) (w p2) -> b (w h) (p1 p2 c): band-major, then the 4 frames.
            flat = torch.stack([x[i, 0, f, 4 * t + p] for f in range(64) for p in range(4)])
            torch.testing.assert_close(tokens[i, t], w @ flat + b, rtol=1e-5, atol=1e-5)

    h = tokens + model.pos_embed[:, 1:10]
    for block in model.blocks:
        q, k, v = block.attn.qkv(block.norm1(h)).chunk(3, dim=-1)
        q, k, v = (z.reshape(2, 9, block.attn.num_heads, -1).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
        out = (att.softmax(-1) @ v).transpose(1, 2).reshape(2, 9, -1)
        h = h + block.attn.proj(out)
        h = h + block.mlp(block.norm2(h))
    expected = model.norm_frame(h).mean(1)
    logits, features = model(x)
    torch.testing.assert_close(features, expected, rtol=1e-5, atol=1e-5)
    assert logits.shape == (2, 0)
    assert atst_frame_tiny(num_classes=5)(x)[0].shape == (2, 5)


def test_frequency_warp_matches_a_per_clip_interpolation_loop():
    x = torch.randn(3, 1, 64, 7)
    out = frequency_warp(x, 0.1, generator=torch.Generator().manual_seed(5))
    u = 1.0 - 0.1 * torch.rand(3, generator=torch.Generator().manual_seed(5))
    for b in range(3):
        kept = int(np.floor(float(u[b]) * 64))
        assert 57 <= kept <= 64  # at most 10 % of the 64 bins dropped: floor(0.9 * 64) = 57
        source = np.arange(64) * (kept - 1) / 63
        for t in range(7):
            expected = np.interp(source, np.arange(64), x[b, 0, :, t].numpy())
            np.testing.assert_allclose(out[b, 0, :, t].numpy(), expected, rtol=1e-5, atol=1e-5)
        # The lowest bin stays, the top bin becomes the highest kept one.
        assert out[b, 0, 0].equal(x[b, 0, 0])
        torch.testing.assert_close(out[b, 0, -1], x[b, 0, kept - 1])


def test_frequency_warp_hand_case_and_identity():
    # 11 bins holding their index; dropping the top bin (h = 10) maps bin k to k * 9 / 10.
    x = torch.arange(11.0).reshape(1, 1, 11, 1)
    out = frequency_warp(x, 0.1, generator=torch.Generator().manual_seed(0))
    u = 1.0 - 0.1 * torch.rand(1, generator=torch.Generator().manual_seed(0))
    kept = int(np.floor(float(u[0]) * 11))
    torch.testing.assert_close(out.flatten(), torch.arange(11.0) * (kept - 1) / 10)
    assert frequency_warp(x, 0.0) is x
    with pytest.raises(ValueError, match="max_drop"):
        frequency_warp(x, 1.0)


def test_warping_only_in_training():
    torch.manual_seed(1)
    model = atst_frame_tiny()
    x = torch.randn(2, 1, 64, 40)
    model.eval()
    first, second = model(x)[1], model(x)[1]
    assert first.equal(second)
    model.train()
    torch.manual_seed(2)
    warped = model(x)[1]
    assert not torch.allclose(warped, first)
    model.freq_warp = 0.0
    assert torch.allclose(model(x)[1], first, atol=1e-6)


def test_long_audio_averages_real_snippets_and_short_audio_fits():
    torch.manual_seed(3)
    model = atst_frame_tiny().eval()
    feats = torch.randn(2, 1, 64, 2500)
    lengths = torch.tensor([2500, 1200])
    emb = model.embed(feats, lengths)
    padded = torch.nn.functional.pad(feats, (0, 500), value=ATST_SILENCE)
    snippets = [model(padded[..., s * 1000 : (s + 1) * 1000])[1] for s in range(3)]
    torch.testing.assert_close(emb[0], (snippets[0][0] + snippets[1][0] + snippets[2][0]) / 3)
    torch.testing.assert_close(emb[1], (snippets[0][1] + snippets[1][1]) / 2)
    same = embed_snippets(lambda s: model(s)[1], feats, lengths, 1000, pad_value=ATST_SILENCE)
    torch.testing.assert_close(emb, same)
    assert model(torch.randn(1, 1, 64, 4))[1].shape == (1, 64)
    # A 10 s clip from AtstMel has 1001 frames: one snippet (its last frame fills no token),
    # and 3001 frames (30 s) are three snippets, not three and a 1-frame one.
    ten = torch.randn(2, 1, 64, 1001)
    torch.testing.assert_close(model.embed(ten), model(ten)[1])
    thirty = torch.randn(1, 1, 64, 3001)
    parts = [model(thirty[..., s * 1000 : (s + 1) * 1000])[1] for s in range(3)]
    torch.testing.assert_close(model.embed(thirty), sum(parts) / 3)
    torch.testing.assert_close(model.embed(thirty, torch.tensor([1003])), parts[0])
    with pytest.raises(ValueError, match="lengths"):
        model.embed(ten, torch.tensor([0, 5]))


def test_input_errors_say_what_was_expected():
    model = atst_frame_tiny()
    with pytest.raises(ValueError, match=r"\(B, 1, 64, T\)"):
        model(torch.randn(2, 1, 128, 100))
    with pytest.raises(ValueError, match="shorter than one token"):
        model(torch.randn(2, 1, 64, 3))
    with pytest.raises(ValueError, match="longer than the positional encoding"):
        model(torch.randn(2, 1, 64, 1004))
    with pytest.raises(ValueError, match="patch_h"):
        atst_frame_tiny(patch_h=16)


def test_front_end_shapes_and_silence():
    mel = AtstMel()
    feats = mel(0.1 * torch.randn(2, 16000))
    assert feats.shape == (2, 1, 64, 101)
    assert float(feats.min()) >= ATST_SILENCE - 1e-6 and float(feats.max()) <= 1.0
    assert torch.allclose(mel(torch.zeros(1, 1600)), torch.tensor(ATST_SILENCE))
    # Per clip: a clip's features do not change with its batch neighbours.
    loud = torch.cat([0.1 * torch.randn(1, 16000), 0.9 * torch.randn(1, 16000)])
    torch.testing.assert_close(mel(loud)[:1], mel(loud[:1]))
