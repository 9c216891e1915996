"""ATST-Frame: a frame-based audio spectrogram transformer (Li, Shao & Li, IEEE/ACM TASLP 2024).

The second audio encoder of paper (b) §4.2.2, written here in plain PyTorch. Module and parameter
names and shapes mirror ``FrameAST`` of Audio-WestlakeU/audiossl (``methods/atstframe``; the same
class is vendored in ATST-SED ``desed_task/nnet/atst/audio_transformer.py`` and salsa
``models/audio/external/atst``), so the released checkpoints load strictly after the key renaming
their own loaders do (:func:`atst_state_dict_from_checkpoint`):

``patch_embed.patch_embed`` (Linear, 64·4 → D), ``mask_embed`` (1, 1, D), ``pos_embed``
(1, 251, D), ``blocks.N.{norm1, attn.qkv (no bias), attn.proj, norm2, mlp.fc1, mlp.fc2}``,
``norm_frame``.

Forward, as the reference ``get_intermediate_layers(..., n=1, scene=False)`` that salsa calls:

1. input (B, 1, 64, T): 64 mel bands at 16 kHz, 10 ms hop, min-max scaled to about [-1, 1]
   (:class:`audiorepro.features.AtstMel`);
2. *frames, not patches*: each token is one block of 4 frames spanning all 64 bands (no patching
   over frequency), flattened band-major (``b c (h p1) (w p2) -> b (w h) (p1 p2 c)``) and
   projected by ``patch_embed.patch_embed``; trailing frames that do not fill a token are dropped;
3. the first ``T // 4`` positions of ``pos_embed[:, 1:]`` added (position 0 belonged to the
   pretraining cls token, unused here), so the encoding covers 250 tokens = 1000 frames = 10 s;
4. pre-norm ViT blocks (12 × 768, 12 heads at paper size), final ``norm_frame``: frame
   representations (B, T // 4, D);
5. ``features`` = the mean over the frame tokens (the reference's clip-level "scene" pooling);
   ``logits`` = an optional linear ``head`` (not part of the released encoder; ``num_classes=0``
   gives an empty (B, 0) tensor).

Audio longer than 10 s: as PaSST (paper (b) §4.2.2), cut into non-overlapping 10 s snippets and
average the snippets that contain audio, :meth:`ATSTFrame.embed` with
:func:`audiorepro.models.snippets.embed_snippets`. salsa instead concatenates the frame tokens of
all snippets and averages the first ``ceil(fraction · tokens)`` of them; the two agree for clips
that fill whole snippets and differ in how a partly filled last snippet is weighted.

Frequency warping (paper (b) §4.2.2, "at most 10 % of the higher frequency bins were dropped"),
in training only, see :func:`frequency_warp`. salsa's published ``ATSTMel`` calls its warping
module but discards the result (``shared/reference/retrieval.md`` §3), so the published code
trains without it; this implementation applies it, as the paper describes.

Differences from the reference: attention through ``F.scaled_dot_product_attention`` (same maths;
the reference computes but never applies a length mask either); no prompt tokens or masked-token
pretraining path; inputs longer than the positional encoding raise an error instead of failing
inside a broadcast.
"""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike

import torch
from torch import nn

from audiorepro.features.atst_mel import ATST_SILENCE
from audiorepro.models.pretrained import load_state_dict_file
from audiorepro.models.snippets import embed_snippets
from audiorepro.models.vit import Block
from audiorepro.storage import CheckpointError, check_state_dict

__all__ = [
    "ATST_CONFIGS",
    "ATST_SILENCE",
    "ATSTFrame",
    "FramePatchEmbed",
    "atst",
    "atst_frame_base",
    "atst_frame_small",
    "atst_frame_tiny",
    "atst_state_dict_from_checkpoint",
    "frequency_warp",
    "load_atst_checkpoint",
]


def frequency_warp(
    feats: torch.Tensor, max_drop: float = 0.1, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Frequency warping: drop up to ``max_drop`` of the highest mel bins, stretch the rest back.

    For each clip b independently: draw ``u ~ U(1 - max_drop, 1)``, keep the lowest
    ``h = max(2, floor(u · F))`` bins (rows 0 … h-1 of the F bands), and resample them onto F bins
    by linear interpolation along frequency with aligned corners: output bin k takes the value at
    source position ``k · (h - 1) / (F - 1)``. Bin 0 stays bin 0, the top output bin takes the
    highest kept bin, time is untouched. With ``u = 1`` (h = F) this is the identity. This is the
    frequency-only case of the random-resize-crop of ATST-Frame / ATST-SED
    (``RandomResizeCrop(freq_scale=(0.9, 1.0))`` with the crop anchored at the lowest band;
    linear instead of bicubic interpolation).

    Args:
        feats: (B, C, F, T) log-mel.
        max_drop: largest fraction of the top bins dropped (0.1 in paper (b)); 0 disables.
        generator: torch RNG for the draws (None: the global one).

    Returns:
        (B, C, F, T) warped log-mel.
    """
    if not 0.0 <= max_drop < 1.0:
        raise ValueError(f"max_drop must lie in [0, 1), got {max_drop}")
    batch, _, bands, _ = feats.shape
    if max_drop == 0.0 or bands < 2:
        return feats
    u = 1.0 - max_drop * torch.rand(batch, generator=generator, device="cpu")
    kept = (u * bands).floor().long().clamp(2, bands).to(feats.device)  # (B,)
    k = torch.arange(bands, device=feats.device, dtype=feats.dtype)
    pos = k[None, :] * (kept[:, None] - 1).to(feats.dtype) / (bands - 1)  # (B, F)
    lo = pos.floor().long().clamp(max=bands - 1)
    hi = (lo + 1).clamp(max=bands - 1)
    frac = (pos - lo.to(feats.dtype))[:, None, :, None]  # (B, 1, F, 1)
    index_lo = lo[:, None, :, None].expand(-1, feats.shape[1], -1, feats.shape[3])
    index_hi = hi[:, None, :, None].expand(-1, feats.shape[1], -1, feats.shape[3])
    below = feats.gather(2, index_lo)  # (B, C, F, T)
    above = feats.gather(2, index_hi)
    return below + frac * (above - below)


class FramePatchEmbed(nn.Module):
    """Frame tokens: (B, C, F, T) → (B, T // w, D), each token ``F × w`` values band-major.

    Reference name ``PatchEmbed_v2`` with its Linear called ``patch_embed``; ``patch_height`` is
    the number of mel bands (64: one token spans all of them), ``patch_width`` the frames per token.
    """

    def __init__(
        self,
        patch_height: int = 64,
        patch_width: int = 4,
        embed_dim: int = 768,
        input_dim: int = 1,
    ) -> None:
        super().__init__()
        self.patch_height = patch_height
        self.patch_width = patch_width
        self.patch_embed = nn.Linear(patch_height * patch_width * input_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, bands, frames = x.shape
        tokens = frames // self.patch_width
        x = x[:, :, : self.patch_height, : tokens * self.patch_width]
        x = x.reshape(batch, channels, self.patch_height, tokens, self.patch_width)
        # b c (h p1) (w p2) -> b w (p1 p2 c) with one band block (h = 1).
        x = x.permute(0, 3, 2, 4, 1).reshape(batch, tokens, -1)  # (B, T', F·w·C)
        return self.patch_embed(x)  # (B, T', D)


class ATSTFrame(nn.Module):
    """ATST-Frame audio encoder: (B, 1, F, T) scaled log-mel → (logits, features (B, D)).

    Args:
        spec_h: mel bands (64).
        spec_w: frames of the positional encoding (1001: 10 s; ``spec_w // patch_w`` positions).
        patch_h: bands per token (= spec_h: frames, not patches).
        patch_w: frames per token (4).
        embed_dim: token dimension D (768).
        depth: transformer blocks (12).
        num_heads: attention heads (12).
        mlp_ratio: feed-forward width / D (4).
        qkv_bias: bias in the qkv projection (False, as released).
        drop_rate: dropout in the MLPs, projections and after the positional encoding (salsa's
            ``atst_dropout``, 0 by default).
        attn_drop_rate: attention dropout.
        drop_path_rate: stochastic depth, linearly increasing to this value over the blocks.
        num_classes: outputs of an optional linear head on ``features`` (0: none).
        freq_warp: largest fraction of the highest bins :func:`frequency_warp` drops in training
            (0.1 in paper (b); 0 disables).

    Attributes:
        num_features: dimension of ``features`` (= embed_dim).
        max_frames: longest input whose tokens fit the positional encoding (1003 at paper size:
            250 tokens × 4 frames + 3 dropped frames); cut longer inputs with :meth:`embed`.
        snippet_frames: the snippet length :meth:`embed` uses (tokens × patch_w = 1000 = 10 s).
        min_frames: the shortest input, one token (4 frames).
    """

    def __init__(
        self,
        spec_h: int = 64,
        spec_w: int = 1001,
        patch_h: int = 64,
        patch_w: int = 4,
        in_chans: int = 1,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = False,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        num_classes: int = 0,
        freq_warp: float = 0.1,
    ) -> None:
        super().__init__()
        if patch_h != spec_h:
            raise ValueError(
                f"ATST-Frame tokens span all bands: patch_h ({patch_h}) must equal spec_h "
                f"({spec_h})"
            )
        self.spec_h, self.spec_w, self.patch_h, self.patch_w = spec_h, spec_w, patch_h, patch_w
        self.in_chans = in_chans
        self.num_features = self.embed_dim = embed_dim
        self.num_classes = num_classes
        self.freq_warp = freq_warp
        self.num_patches = (spec_h // patch_h) * (spec_w // patch_w)
        self.snippet_frames = self.num_patches * patch_w
        self.max_frames = self.snippet_frames + patch_w - 1
        self.min_frames = patch_w

        self.patch_embed = FramePatchEmbed(patch_h, patch_w, embed_dim, in_chans)
        self.mask_embed = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_patches + 1, embed_dim))
        self.pos_drop = nn.Dropout(drop_rate)
        rates = [drop_path_rate * i / max(1, depth - 1) for i in range(depth)]
        self.blocks = nn.ModuleList(
            [
                Block(embed_dim, num_heads, mlp_ratio, qkv_bias, drop_rate, attn_drop_rate, r)
                for r in rates
            ]
        )
        self.norm_frame = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The reference initialisation: truncated normal (std 0.02) for the positional encoding,
        the mask token and Linear weights; zero biases; unit LayerNorms."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.mask_embed, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def check_input(self, x: torch.Tensor) -> None:
        """Raise ``ValueError`` unless x is (B, in_chans, spec_h, T), min_frames ≤ T ≤ max_frames."""
        if x.ndim != 4 or x.shape[1] != self.in_chans or x.shape[2] != self.spec_h:
            raise ValueError(
                f"ATST-Frame expects a (B, {self.in_chans}, {self.spec_h}, T) log-mel batch, got "
                f"{tuple(x.shape)}"
            )
        frames = x.shape[3]
        if frames < self.min_frames:
            raise ValueError(
                f"input of {frames} frames is shorter than one token ({self.patch_w})"
            )
        if frames > self.max_frames:
            raise ValueError(
                f"input of {frames} frames is longer than the positional encoding "
                f"({self.max_frames} frames): cut it into snippets with ATSTFrame.embed"
            )

    def forward_frames(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 1, F, T) → frame representations (B, T // patch_w, D) after ``norm_frame``."""
        self.check_input(x)
        if self.training and self.freq_warp > 0:
            x = frequency_warp(x, self.freq_warp)
        x = self.patch_embed(x)  # (B, T', D)
        x = x + self.pos_embed[:, 1 : x.shape[1] + 1]
        x = self.pos_drop(x)
        for block in self.blocks:
            x = block(x)  # (B, T', D)
        return self.norm_frame(x)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-mel (B, 1, F, T) → ``(logits (B, num_classes), features (B, D))``; features are
        the mean frame representation."""
        features = self.forward_frames(x).mean(dim=1)  # (B, D)
        if self.head is None:
            return features.new_zeros(features.shape[0], 0), features
        return self.head(features), features

    def embed(
        self,
        feats: torch.Tensor,
        lengths: torch.Tensor | None = None,
        max_batch: int | None = None,
    ) -> torch.Tensor:
        """Clip embeddings (B, D) of audio of any length: mean over the non-overlapping 10 s
        snippets that contain audio (paper (b) §4.2.2), padding with :data:`ATST_SILENCE`.

        Trailing frames that do not fill a 4-frame token are dropped first (the model would drop
        them anyway), so the 1001 frames :class:`~audiorepro.features.AtstMel` gives a 10 s clip are one snippet, not
        a full one plus a 1-frame one; lengths are rounded down likewise (at least one token).

        Args:
            feats: (B, 1, F, T) log-mel, T any length ≥ min_frames.
            lengths: (B,) real frames per clip (None: all T).
            max_batch: most snippets per forward call.
        """
        frames = feats.shape[-1]
        usable = max(self.patch_w, frames - frames % self.patch_w)
        if lengths is not None:
            lengths = torch.as_tensor(lengths, device=feats.device)
            if bool((lengths < 1).any()) or bool((lengths > frames).any()):
                raise ValueError(
                    f"lengths must lie in [1, {frames}] frames, got {lengths.tolist()}"
                )
            lengths = (lengths - lengths % self.patch_w).clamp(self.patch_w, usable)
        return embed_snippets(
            lambda snippet: self(snippet)[1],
            feats[..., :usable],
            lengths,
            self.snippet_frames,
            pad_value=ATST_SILENCE,
            max_batch=max_batch,
        )


def _config(**kwargs) -> dict:
    base = dict(spec_h=64, spec_w=1001, patch_h=64, patch_w=4, embed_dim=768, depth=12)
    return base | dict(num_heads=12, mlp_ratio=4.0, qkv_bias=False) | kwargs


ATST_CONFIGS: dict[str, dict] = {
    # The released ATST-Frame base (atstframe_base.ckpt, atst_as2M.ckpt): 85.4M parameters.
    "base": _config(),
    # CPU configurations for the embedded corpora (not from the paper).
    "tiny": _config(embed_dim=64, depth=2, num_heads=4),
    "small": _config(embed_dim=192, depth=4, num_heads=3),
}


def atst(name: str, **overrides) -> ATSTFrame:
    """ATST-Frame configuration ``name`` (a key of :data:`ATST_CONFIGS`) with overrides."""
    if name not in ATST_CONFIGS:
        raise ValueError(
            f"unknown ATST-Frame configuration {name!r}; known: {sorted(ATST_CONFIGS)}"
        )
    return ATSTFrame(**(ATST_CONFIGS[name] | overrides))


def atst_frame_base(**overrides) -> ATSTFrame:
    """ATST-Frame base: 12 blocks × 768, 12 heads, 64 bands × 4-frame tokens, 10 s encoding
    (paper (b) §4.2.2: about 85.4M parameters)."""
    return atst("base", **overrides)


def atst_frame_tiny(**overrides) -> ATSTFrame:
    """CPU configuration: the base's tokens and encoding length, D=64, 2 blocks, 4 heads."""
    return atst("tiny", **overrides)


def atst_frame_small(**overrides) -> ATSTFrame:
    """CPU configuration: the base's tokens and encoding length, D=192, 4 blocks, 3 heads."""
    return atst("small", **overrides)


def atst_state_dict_from_checkpoint(
    state: Mapping[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """Rename the keys of a released ATST-Frame checkpoint to :class:`ATSTFrame` names.

    The same mapping as the reference loaders (ATST-SED ``atst_model.py`` ``load_atst``, salsa
    ``models/audio/atst.py``): keys of a self-supervised checkpoint ``model.teacher.encoder.X``
    become ``X`` (its ``encoder.norm`` becomes ``norm_frame``, its ``cls_token`` is dropped);
    keys of a fine-tuned one (``atst_as2M.ckpt``) ``encoder.encoder.X`` become ``X``, the
    coarse-to-fine ``encoder.encoder.frame_encoder.X`` become ``X`` and
    ``encoder.encoder.teacher_module.*`` are dropped. A state dict already in our names is
    returned as is. Keys matching none of these are dropped (heads, optimiser-side tensors).
    """
    if any(k.startswith("patch_embed.") for k in state):
        return dict(state)
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if "model.teacher.encoder." in key:
            if "encoder.norm." in key:
                out[key.replace("model.teacher.encoder.norm", "norm_frame")] = value
            elif "cls_token" not in key:
                out[key.replace("model.teacher.encoder.", "")] = value
        elif "encoder.encoder.frame_encoder." in key:
            out[key.replace("encoder.encoder.frame_encoder.", "")] = value
        elif "encoder.encoder.teacher_module." in key:
            continue
        elif "encoder.encoder." in key:
            out[key.replace("encoder.encoder.", "")] = value
    return out


def load_atst_checkpoint(
    model: ATSTFrame,
    path: str | PathLike,
    drop_head: bool = False,
    cut_pos_embed: bool = False,
) -> ATSTFrame:
    """Load a released ATST-Frame checkpoint (Lightning ``.ckpt`` with a ``state_dict``) or one
    of ours (``.safetensors`` / ``.pt``) from a local file, strictly (the optional ``head`` must
    be in the file when the model has one).

    Args:
        drop_head: ignore the file's ``head.*`` and keep the model's own (none by default).
        cut_pos_embed: for a model with a shorter positional encoding than the file (snippets
            under 10 s), keep the file's first positions: the forward pass uses only the first
            ones for short inputs, so the result is the same.

    Raises:
        CheckpointError: unreadable file, or missing / unexpected / mismatched keys (all listed).
    """
    state = atst_state_dict_from_checkpoint(load_state_dict_file(path))
    if not state:
        raise CheckpointError(
            f"{path}: no ATST-Frame encoder keys found (expected 'model.teacher.encoder.*', "
            "'encoder.encoder.*' or 'patch_embed.*')"
        )
    own = model.state_dict()
    if drop_head:
        state = {k: v for k, v in state.items() if not k.startswith("head.")}
        state |= {k: v for k, v in own.items() if k.startswith("head.")}
    pos = state.get("pos_embed")
    positions = own["pos_embed"].shape[1]
    if cut_pos_embed and pos is not None and pos.ndim == 3 and pos.shape[1] > positions:
        state["pos_embed"] = pos[:, :positions].contiguous()
    check_state_dict(own, state, source=str(path))
    model.load_state_dict(state, strict=True)
    return model
