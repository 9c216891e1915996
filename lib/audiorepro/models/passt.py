"""PaSST: the Patchout faSt Spectrogram Transformer (Koutini et al., Interspeech 2022).

The audio encoder of paper (a) §2.1 (Table 2 variants: PaSST-N, -S, -L, -S20), written here in
plain PyTorch without timm. Module and parameter names and shapes mirror kkoutini/PaSST
``models/passt.py`` (class ``PaSST``), so the released AudioSet checkpoints load with
``load_state_dict(strict=True)`` (see :func:`load_passt_checkpoint`):

``patch_embed.proj`` (Conv2d, 16×16 kernel), ``cls_token``, ``dist_token``, ``new_pos_embed``
(1, tokens, D), ``freq_new_pos_embed`` (1, D, F', 1), ``time_new_pos_embed`` (1, D, 1, T'),
``blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}`` (the ViT block shared with
ATST-Frame, :class:`audiorepro.models.vit.Block`), ``norm``, ``head`` (a
``Sequential(LayerNorm, Linear)``: ``head.0``, ``head.1``) and ``head_dist``.

Forward, as the reference (``shared/reference/retrieval.md`` §3):

1. 16×16 patches with stride 16 (PaSST-N) or 10 (S/L) from the (B, 1, 128, T) log-mel
   (:class:`audiorepro.features.PasstMel`), a (F', T') grid of D-dim patch embeddings;
2. separate frequency and time positional encodings added to the grid; for inputs shorter than
   the encoding, the time encoding is cut *from the start* (as salsa's vendored copy and
   hear21passt; the full PaSST repository cuts at a random offset in training);
3. structured patchout in training only: ``s_patchout_t`` random time columns and
   ``s_patchout_f`` random frequency rows are dropped, one draw for the whole batch (torch's
   global RNG); optional unstructured patchout ``u_patchout`` afterwards;
4. cls and dist tokens (each with its ``new_pos_embed``) prepended, ViT blocks, final LayerNorm;
5. ``features = (x_cls + x_dist) / 2`` (D-dim, the retrieval embedding of paper (a) §2.1), and
   ``logits = head(features)``.

Differences from the reference: attention uses ``F.scaled_dot_product_attention`` (same maths);
inputs longer than the time encoding raise an error instead of a warning and a silent cut (use
:func:`audiorepro.models.snippets.embed_snippets`); inputs shorter than one patch or with the
wrong number of mel bands raise an error; no debug printing.
"""

from __future__ import annotations

from os import PathLike

import torch
from torch import nn

from audiorepro.models.pretrained import load_pretrained
from audiorepro.models.vit import Block

__all__ = [
    "PASST_CONFIGS",
    "PASST_HEAD",
    "PaSST",
    "PatchEmbed",
    "count_parameters",
    "load_passt_checkpoint",
    "passt",
    "passt_l",
    "passt_n",
    "passt_s",
    "passt_s20",
    "passt_small",
    "passt_tiny",
]


def _pair(value: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise ValueError(f"expected an int or a pair of ints, got {value}")
    return value  # type: ignore[return-value]


class PatchEmbed(nn.Module):
    """Overlapping or non-overlapping patches: (B, C, F, T) → (B, D, F', T') via one Conv2d.

    ``grid_size`` is the size of the positional encodings: ``T' = img_size[1] // stride[1]`` as
    in the reference (which makes the released checkpoints' shapes, e.g. 99 time positions for
    PaSST-S at 998 frames and 200 for PaSST-S20 at 2000 frames), and the frequency size is the
    number of patches along the mel axis, ``(img_size[0] - patch) // stride + 1`` (equal to the
    reference's ``img_size[0] // stride[0]`` for 128 bands and strides 10 and 16).
    """

    def __init__(
        self,
        img_size: int | tuple[int, int] = 224,
        patch_size: int | tuple[int, int] = 16,
        stride: int | tuple[int, int] = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
    ) -> None:
        super().__init__()
        self.img_size = _pair(img_size)
        self.patch_size = _pair(patch_size)
        self.stride = _pair(stride)
        for axis, name in enumerate(("frequency", "time")):
            if self.stride[axis] > self.patch_size[axis]:
                raise ValueError(
                    f"{name} stride {self.stride[axis]} exceeds the patch size "
                    f"{self.patch_size[axis]}: patches would skip input"
                )
            if self.img_size[axis] < self.patch_size[axis]:
                raise ValueError(
                    f"img_size {self.img_size} is smaller than one patch {self.patch_size}"
                )
        self.grid_size = (
            (self.img_size[0] - self.patch_size[0]) // self.stride[0] + 1,
            self.img_size[1] // self.stride[1],
        )
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.embed_dim = embed_dim
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=self.patch_size, stride=self.stride)
        self.norm = nn.Identity()  # the reference's optional norm_layer, unused by PaSST

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, F, T) → (B, D, F', T'), ``T' = (T - patch) // stride + 1``."""
        return self.norm(self.proj(x))


class PaSST(nn.Module):
    """PaSST audio encoder: (B, 1, F, T) log-mel → (logits (B, num_classes), features (B, D)).

    Hyperparameter names are the reference constructor's (kkoutini/PaSST ``models/passt.py``),
    with its defaults; the paper's variants are :func:`passt_n`, :func:`passt_s`,
    :func:`passt_l`, :func:`passt_s20` (paper (a) Table 2) and small CPU configurations
    :func:`passt_tiny`, :func:`passt_small`.

    Args:
        u_patchout: unstructured patchout, patches dropped from the flattened sequence (training).
        s_patchout_t: structured patchout, time columns dropped from the patch grid (training).
        s_patchout_f: structured patchout, frequency rows dropped from the grid (training).
        img_size: (mel bands, frames) of the positional encodings: 128 × 998 (S, L), 128 × 1000
            (N), 128 × 2000 (S20).
        patch_size: patch size (16).
        stride: patch stride, 16 (N, non-overlapping) or 10 (S, L, S20).
        in_chans: input channels (1).
        num_classes: classifier outputs (527 AudioSet classes; 0 for no head).
        embed_dim: token dimension D (768).
        depth: transformer blocks (12; 7 for PaSST-L).
        num_heads: attention heads (12).
        mlp_ratio: feed-forward width / D (4).
        qkv_bias: bias in the qkv projection (True).
        representation_size: pre-logits layer size (only without distillation; None).
        distilled: cls *and* dist token (True for all released PaSST checkpoints).
        drop_rate: dropout after the positional encodings, in the MLPs and projections.
        attn_drop_rate: attention dropout.
        drop_path_rate: stochastic depth, linearly increasing to this value over the blocks.

    Attributes:
        num_features: dimension of ``features`` (= ``embed_dim`` unless representation_size).
        input_tdim: the frames the model was built for (``img_size[1]``).
        max_frames: the longest input (frames) whose patches fit the time encoding; longer
            inputs raise an error: cut them into snippets (paper (a) §3.4).
        min_frames: the shortest input, one patch (16 frames = 0.16 s at a 10 ms hop).
    """

    def __init__(
        self,
        u_patchout: int = 0,
        s_patchout_t: int = 0,
        s_patchout_f: int = 0,
        img_size: int | tuple[int, int] = (128, 998),
        patch_size: int | tuple[int, int] = 16,
        stride: int | tuple[int, int] = 16,
        in_chans: int = 1,
        num_classes: int = 527,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        representation_size: int | None = None,
        distilled: bool = False,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
    ) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.u_patchout = u_patchout
        self.s_patchout_t = s_patchout_t
        self.s_patchout_f = s_patchout_f
        self.num_features = self.embed_dim = embed_dim
        self.num_tokens = 2 if distilled else 1
        self.in_chans = in_chans

        self.patch_embed = PatchEmbed(img_size, patch_size, stride, in_chans, embed_dim)
        grid_f, grid_t = self.patch_embed.grid_size
        if s_patchout_f >= grid_f or s_patchout_t >= grid_t:
            raise ValueError(
                f"structured patchout (f={s_patchout_f}, t={s_patchout_t}) must leave patches "
                f"of the {grid_f} x {grid_t} grid"
            )
        self.input_tdim = self.patch_embed.img_size[1]
        patch_t, stride_t = self.patch_embed.patch_size[1], self.patch_embed.stride[1]
        self.min_frames = patch_t
        self.max_frames = (grid_t - 1) * stride_t + patch_t + stride_t - 1

        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.dist_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if distilled else None
        self.new_pos_embed = nn.Parameter(torch.zeros(1, self.num_tokens, embed_dim))
        self.freq_new_pos_embed = nn.Parameter(torch.zeros(1, embed_dim, grid_f, 1))
        self.time_new_pos_embed = nn.Parameter(torch.zeros(1, embed_dim, 1, grid_t))
        self.pos_drop = nn.Dropout(drop_rate)

        rates = [drop_path_rate * i / max(1, depth - 1) for i in range(depth)]
        self.blocks = nn.Sequential(
            *[
                Block(embed_dim, num_heads, mlp_ratio, qkv_bias, drop_rate, attn_drop_rate, r)
                for r in rates
            ]
        )
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)

        if representation_size and not distilled:
            self.num_features = representation_size
            self.pre_logits = nn.Sequential()
            self.pre_logits.add_module("fc", nn.Linear(embed_dim, representation_size))
            self.pre_logits.add_module("act", nn.Tanh())
        else:
            self.pre_logits = nn.Identity()
        self.head = nn.Sequential(
            nn.LayerNorm(self.num_features),
            nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity(),
        )
        self.head_dist = None
        if distilled:
            self.head_dist = (
                nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
            )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The reference initialisation: truncated normal (std 0.02) for tokens, positional
        encodings and Linear weights, zero biases, unit LayerNorms, PyTorch's default for the
        patch convolution. The ImageNet / AudioSet weights of the paper come from checkpoints."""
        for param in (self.new_pos_embed, self.freq_new_pos_embed, self.time_new_pos_embed):
            nn.init.trunc_normal_(param, std=0.02)
        if self.dist_token is not None:
            nn.init.trunc_normal_(self.dist_token, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def no_weight_decay(self) -> set[str]:
        """Parameter names the reference excludes from weight decay."""
        return {
            "new_pos_embed",
            "freq_new_pos_embed",
            "time_new_pos_embed",
            "cls_token",
            "dist_token",
        }

    def check_input(self, x: torch.Tensor) -> None:
        """Raise ``ValueError`` unless ``x`` is (B, in_chans, F, T) with the model's F and
        ``min_frames <= T <= max_frames``."""
        if x.ndim != 4:
            raise ValueError(
                f"PaSST expects a (B, {self.in_chans}, F, T) log-mel batch, got shape "
                f"{tuple(x.shape)} (a (B, F, T) batch needs .unsqueeze(1))"
            )
        bands = self.patch_embed.img_size[0]
        if x.shape[1] != self.in_chans or x.shape[2] != bands:
            raise ValueError(
                f"PaSST built for {self.in_chans} channel(s) x {bands} mel bands got input "
                f"{tuple(x.shape)}"
            )
        frames = x.shape[3]
        if frames < self.min_frames:
            raise ValueError(
                f"audio shorter than one patch: {frames} frames < {self.min_frames} "
                f"(0.16 s at a 10 ms hop for 16-frame patches)"
            )
        if frames > self.max_frames:
            raise ValueError(
                f"input of {frames} frames is longer than the time positional encoding "
                f"({self.max_frames} frames): cut it into snippets "
                "(audiorepro.models.snippets.embed_snippets)"
            )

    def forward_features(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(B, 1, F, T) → the final-norm cls token (and dist token when distilled), each (B, D)."""
        self.check_input(x)
        x = self.patch_embed(x)  # (B, D, F', T')
        batch, _, grid_f, grid_t = x.shape
        # Shorter inputs use the first T' time positions (cut from the start).
        x = x + self.time_new_pos_embed[:, :, :, :grid_t]  # (B, D, F', T')
        x = x + self.freq_new_pos_embed
        if self.training and self.s_patchout_t:
            keep = torch.randperm(grid_t)[: grid_t - self.s_patchout_t].sort().values
            x = x[:, :, :, keep.to(x.device)]  # (B, D, F', T' - t)
        if self.training and self.s_patchout_f:
            keep = torch.randperm(grid_f)[: grid_f - self.s_patchout_f].sort().values
            x = x[:, :, keep.to(x.device), :]  # (B, D, F' - f, T'')
        x = x.flatten(2).transpose(1, 2)  # (B, N, D)
        if self.training and self.u_patchout:
            length = x.shape[1]
            keep = torch.randperm(length)[: max(1, length - self.u_patchout)].sort().values
            x = x[:, keep.to(x.device), :]
        tokens = [self.cls_token.expand(batch, -1, -1) + self.new_pos_embed[:, :1, :]]
        if self.dist_token is not None:
            tokens.append(self.dist_token.expand(batch, -1, -1) + self.new_pos_embed[:, 1:, :])
        x = torch.cat([*tokens, x], dim=1)  # (B, tokens + N, D)
        x = self.blocks(self.pos_drop(x))
        x = self.norm(x)  # (B, tokens + N, D)
        if self.dist_token is None:
            return (self.pre_logits(x[:, 0]),)
        return x[:, 0], x[:, 1]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-mel (B, 1, F, T) → ``(logits (B, num_classes), features (B, num_features))``.

        ``features`` is the mean of the cls and dist tokens after the final LayerNorm (the cls
        token alone without distillation); ``logits = head(features)`` (pre-sigmoid).
        """
        tokens = self.forward_features(x)
        features = tokens[0] if len(tokens) == 1 else (tokens[0] + tokens[1]) / 2  # (B, D)
        return self.head(features), features


# ---------------------------------------------------------------------------------------------
# variants


def _variant(**kwargs) -> dict:
    return (
        dict(
            patch_size=16,
            in_chans=1,
            num_classes=527,
            embed_dim=768,
            depth=12,
            num_heads=12,
            mlp_ratio=4.0,
            qkv_bias=True,
            distilled=True,
        )
        | kwargs
    )


PASST_CONFIGS: dict[str, dict] = {
    # paper (a) Table 2; checkpoint names from kkoutini/PaSST default_cfgs.
    "n": _variant(img_size=(128, 1000), stride=16, s_patchout_t=15, s_patchout_f=2),
    "s": _variant(img_size=(128, 998), stride=10, s_patchout_t=50, s_patchout_f=4),
    "l": _variant(img_size=(128, 998), stride=10, s_patchout_t=50, s_patchout_f=4, depth=7),
    "s20": _variant(img_size=(128, 2000), stride=10, s_patchout_t=80, s_patchout_f=4),
    # CPU configurations for the embedded corpora (not from the paper).
    "tiny": _variant(
        img_size=(128, 1000),
        stride=16,
        s_patchout_t=15,
        s_patchout_f=2,
        embed_dim=64,
        depth=2,
        num_heads=4,
    ),
    "small": _variant(
        img_size=(128, 1000),
        stride=16,
        s_patchout_t=15,
        s_patchout_f=2,
        embed_dim=192,
        depth=4,
        num_heads=3,
    ),
}


def scaled_time_patchout(name: str, frames: int) -> int:
    """Variant ``name``'s structured time patchout for inputs of ``frames`` log-mel frames: the
    same share of the time patches dropped as on the variant's own input length, rounded.

    PaSST-S20 drops 80 of the time patches of its 20 s input; at 10 s that is 40, at 2 s 8
    (its 80 would leave none of a 2 s snippet's 20). Paper (a) runs PaSST-S20 on 2-15 s
    snippets (§3.4, Figure 1) without saying how its patchout changed; this rule is ours.
    """
    if name not in PASST_CONFIGS:
        raise ValueError(f"unknown PaSST variant {name!r}; known: {sorted(PASST_CONFIGS)}")
    cfg = PASST_CONFIGS[name]
    return int(round(cfg["s_patchout_t"] * frames / cfg["img_size"][1]))


def passt(name: str, **overrides) -> PaSST:
    """PaSST variant ``name`` (a key of :data:`PASST_CONFIGS`) with constructor overrides.

    Example: ``passt("tiny", img_size=(128, 400), num_classes=0)`` for 4 s snippets.
    """
    if name not in PASST_CONFIGS:
        raise ValueError(f"unknown PaSST variant {name!r}; known: {sorted(PASST_CONFIGS)}")
    return PaSST(**(PASST_CONFIGS[name] | overrides))


def passt_n(**overrides) -> PaSST:
    """PaSST-N: stride 16 (no overlap), 128 × 1000 frames (10 s), patchout f=2, t=15, 86.1M
    parameters (Table 2: 86.2M); the default audio encoder of paper (a) (Table 2, Table 3). Checkpoint
    ``passt_s_p16_s16_128_ap468`` (``passt-s-f128-p16-s16-ap.468.pt``)."""
    return passt("n", **overrides)


def passt_s(**overrides) -> PaSST:
    """PaSST-S: stride 10 (overlapping patches), 128 × 998 frames, patchout f=4, t=50, 86.2M
    parameters (paper (a) Table 2: 86.2M). Checkpoints ``passt_s_swa_p16_128_ap476``,
    ``passt_s_kd_p16_128_ap486``."""
    return passt("s", **overrides)


def passt_l(**overrides) -> PaSST:
    """PaSST-L: PaSST-S with 7 blocks (``passt_l_kd_p16_128_ap47``, "light, reduced depth=7" in
    hear21passt), stride 10, patchout f=4, t=50 (paper (a) Table 2 lists 41.8M parameters; the
    7-block ViT-B of the released checkpoint has about 50M)."""
    return passt("l", **overrides)


def passt_s20(**overrides) -> PaSST:
    """PaSST-S20: PaSST-S with a 20 s time encoding (128 × 2000 frames, 200 positions), patchout
    f=4, t=80 (paper (a) Table 2, §3.4 Figure 1). Checkpoint
    ``passt-s-f128-20sec-p16-s10-ap474-swa``."""
    return passt("s20", **overrides)


def passt_tiny(**overrides) -> PaSST:
    """CPU configuration: PaSST-N's patching and patchout, D=64, 2 blocks, 4 heads (0.19M
    parameters with the AudioSet head); a batch of 8 × 10 s takes a few tens of ms on one core."""
    return passt("tiny", **overrides)


def passt_small(**overrides) -> PaSST:
    """CPU configuration: PaSST-N's patching and patchout, D=192, 4 blocks, 3 heads (~2M)."""
    return passt("small", **overrides)


# ---------------------------------------------------------------------------------------------
# checkpoints and sizes


PASST_HEAD = ("head.1.", "head_dist.")
"""Key prefixes of PaSST's class projections (``head.0`` is a LayerNorm on the features)."""


def load_passt_checkpoint(
    model: PaSST,
    path: str | PathLike,
    prefix: str | None = None,
    cut_time_pos_embed: bool = False,
    drop_head: bool = False,
) -> PaSST:
    """Load a released PaSST checkpoint (e.g. ``passt-s-f128-p16-s16-ap.468.pt`` into
    :func:`passt_n`) or one of ours from a local ``.pt`` / ``.ckpt`` / ``.safetensors`` file,
    strictly. Wrapper prefixes (``net.``, ``module.``, ...) are stripped, see
    :func:`audiorepro.models.pretrained.load_pretrained`.

    Args:
        model: the PaSST to load into.
        path: checkpoint file.
        prefix: wrapper prefix to strip (``None``: detected).
        cut_time_pos_embed: for a model built with a shorter time encoding than the checkpoint
            (e.g. ``img_size=(128, 400)`` for 4 s snippets), keep the checkpoint's first time
            positions. The forward pass cuts the encoding from the start for short inputs
            anyway, so the loaded model computes exactly what the full one computes on inputs
            of its length.
        drop_head: ignore the file's class projections ``head.1.*`` and ``head_dist.*`` of any
            size and keep the model's own (none for ``num_classes=0``); ``head.0``, the
            LayerNorm the features pass through, still loads.

    Raises:
        CheckpointError: unreadable file, or missing / unexpected / mismatched keys (all listed).
    """
    grid_t = model.time_new_pos_embed.shape[-1]

    def cut(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        pos = state.get("time_new_pos_embed")
        if pos is not None and pos.ndim == 4 and pos.shape[-1] > grid_t:
            state = state | {"time_new_pos_embed": pos[..., :grid_t].contiguous()}
        return state

    return load_pretrained(
        model,
        path,
        prefix=prefix,
        transform=cut if cut_time_pos_embed else None,
        keep_own=PASST_HEAD if drop_head else (),
    )


def count_parameters(model: nn.Module) -> int:
    """Number of parameters (for Table 2's "number params")."""
    return sum(p.numel() for p in model.parameters())
