"""EfficientAT MobileNetV3 ("MN"): a CNN audio tagger of any input length (Schmid et al., ICASSP 2023).

The third audio encoder of paper (b) §4.2.3, written here in plain PyTorch (no torchvision).
Module and parameter names and shapes mirror fschmid56/EfficientAT ``models/mn/model.py``
(class ``MN``; the copy vendored in salsa ``models/audio/external/MobileNetV3.py`` is the same),
so the released AudioSet checkpoints, e.g. ``mn40_as_ext_mAP_487.pt`` (the paper's
``mn40_as_ext``), load with ``load_state_dict(strict=True)`` (:func:`load_mobilenet_checkpoint`):

``features.0`` (3×3 stride-2 conv, BN, Hardswish), ``features.1``–``features.15`` (inverted
residual blocks ``block.{i}``: optional 1×1 expansion, depthwise conv, optional channel
squeeze-excitation ``conc_se_layers.0.{fc1, fc2}`` (Linear), 1×1 projection), ``features.16``
(1×1 conv to 6× channels), ``classifier.{2, 5}`` (the "mlp" head: pool, flatten, Linear,
Hardswish, dropout, Linear). Each conv block is ``{0: Conv2d without bias, 1: BatchNorm2d
(eps 1e-3, momentum 0.01)}`` as torchvision's ``Conv2dNormActivation``.

Channel counts are MobileNetV3-Large's times the width multiplier ``width_mult``, rounded to
multiples of 8 (``make_divisible``); ``mn40`` is width 4.0. ``features`` (the retrieval
embedding, 3840-d for mn40) is the global average of the last feature map, so the network takes
log-mel inputs of any length ≥ 1 frame: no positional encoding, no snippets (paper (b) §4.2.3).
Input: the PaSST front end, 128 mel bands at 32 kHz (:class:`audiorepro.features.PasstMel`).

Only the released configuration's options are implemented: the "mlp" head and squeeze-excitation
over channels (``se_dims="c"``, one SE layer, so the reference's max aggregation is the identity).
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike

import torch
import torch.nn.functional as F
from torch import nn

from audiorepro.models.pretrained import load_pretrained

__all__ = [
    "MN",
    "MOBILENET_CONFIGS",
    "BlockConfig",
    "ConcurrentSEBlock",
    "ConvNormActivation",
    "InvertedResidual",
    "SqueezeExcitation",
    "load_mobilenet_checkpoint",
    "make_divisible",
    "mobilenet",
    "mobilenet_block_configs",
    "mn40_as_ext",
]


def make_divisible(value: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round ``value`` to the nearest multiple of ``divisor`` (at least ``min_value``), never more
    than 10 % below ``value`` (the TensorFlow MobileNet rule the reference uses)."""
    min_value = divisor if min_value is None else min_value
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


@dataclass(frozen=True)
class BlockConfig:
    """One inverted residual block (MobileNetV3 paper Table 1), channels already width-scaled."""

    input_channels: int
    kernel: int
    expanded_channels: int
    out_channels: int
    use_se: bool
    use_hs: bool
    stride: int


# MobileNetV3-Large: (in, kernel, expanded, out, SE, activation, stride), before the width multiplier.
_LARGE = (
    (16, 3, 16, 16, False, "RE", 1),
    (16, 3, 64, 24, False, "RE", 2),
    (24, 3, 72, 24, False, "RE", 1),
    (24, 5, 72, 40, True, "RE", 2),
    (40, 5, 120, 40, True, "RE", 1),
    (40, 5, 120, 40, True, "RE", 1),
    (40, 3, 240, 80, False, "HS", 2),
    (80, 3, 200, 80, False, "HS", 1),
    (80, 3, 184, 80, False, "HS", 1),
    (80, 3, 184, 80, False, "HS", 1),
    (80, 3, 480, 112, True, "HS", 1),
    (112, 3, 672, 112, True, "HS", 1),
    (112, 5, 672, 160, True, "HS", 2),
    (160, 5, 960, 160, True, "HS", 1),
    (160, 5, 960, 160, True, "HS", 1),
)


def mobilenet_block_configs(width_mult: float) -> tuple[list[BlockConfig], int]:
    """The 15 block configurations and the head's hidden width (1280 · width) for ``width_mult``."""
    blocks = [
        BlockConfig(
            make_divisible(cin * width_mult),
            kernel,
            make_divisible(cexp * width_mult),
            make_divisible(cout * width_mult),
            se,
            act == "HS",
            stride,
        )
        for cin, kernel, cexp, cout, se, act, stride in _LARGE
    ]
    return blocks, make_divisible(1280 * width_mult)


def _batch_norm(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=0.001, momentum=0.01)


class ConvNormActivation(nn.Sequential):
    """``0``: Conv2d (no bias, "same" padding), ``1``: BatchNorm2d, ``2``: activation (optional)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 1,
        groups: int = 1,
        activation: type[nn.Module] | None = nn.ReLU,
    ) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(
                in_channels,
                out_channels,
                kernel_size,
                stride,
                padding=(kernel_size - 1) // 2,
                groups=groups,
                bias=False,
            ),
            _batch_norm(out_channels),
        ]
        if activation is not None:
            layers.append(activation())
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """Channel squeeze-excitation: mean over (F, T), Linear → ReLU → Linear → sigmoid, rescale."""

    def __init__(self, input_dim: int, squeeze_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(input_dim, squeeze_dim)
        self.fc2 = nn.Linear(squeeze_dim, input_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.mean(dim=(2, 3))  # (B, C)
        scale = torch.sigmoid(self.fc2(F.relu(self.fc1(scale))))
        return x * scale[:, :, None, None]  # (B, C, F, T)


class ConcurrentSEBlock(nn.Module):
    """The reference's wrapper around its SE layers (``conc_se_layers``); one channel SE here."""

    def __init__(self, channels: int, se_r: int = 4) -> None:
        super().__init__()
        self.conc_se_layers = nn.ModuleList(
            [SqueezeExcitation(channels, make_divisible(channels // se_r, 8))]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conc_se_layers[0](x)


class InvertedResidual(nn.Module):
    """Expand (1×1) → depthwise (k×k, stride) → SE → project (1×1), residual when shapes allow."""

    def __init__(self, cnf: BlockConfig, se_r: int = 4) -> None:
        super().__init__()
        activation = nn.Hardswish if cnf.use_hs else nn.ReLU
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        layers: list[nn.Module] = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(
                ConvNormActivation(
                    cnf.input_channels, cnf.expanded_channels, 1, activation=activation
                )
            )
        layers.append(
            ConvNormActivation(
                cnf.expanded_channels,
                cnf.expanded_channels,
                cnf.kernel,
                cnf.stride,
                groups=cnf.expanded_channels,
                activation=activation,
            )
        )
        if cnf.use_se:
            layers.append(ConcurrentSEBlock(cnf.expanded_channels, se_r))
        layers.append(
            ConvNormActivation(cnf.expanded_channels, cnf.out_channels, 1, activation=None)
        )
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return out + x if self.use_res_connect else out


class MN(nn.Module):
    """EfficientAT MobileNetV3: (B, 1, F, T) log-mel → (logits (B, num_classes), features (B, D)).

    Args:
        width_mult: channel width multiplier (4.0 for ``mn40``; the released family spans
            0.1 … 4.0).
        num_classes: classifier outputs (527 AudioSet classes).
        in_channels: input channels (1).
        dropout: dropout in the mlp head (0.2).
        se_r: squeeze-excitation reduction (4).

    Attributes:
        num_features: dimension of ``features``, 6 × the last block's channels (3840 for mn40);
            also ``embed_dim``.
        max_frames: None: any length works (global average pooling), no snippets needed.
        min_frames: 1.
    """

    def __init__(
        self,
        width_mult: float = 1.0,
        num_classes: int = 527,
        in_channels: int = 1,
        dropout: float = 0.2,
        se_r: int = 4,
    ) -> None:
        super().__init__()
        self.width_mult = width_mult
        self.in_channels = in_channels
        self.min_frames = 1
        # Set by use_channels_last(): NHWC activations, about 1.6x faster on CPU (oneDNN).
        self.channels_last = False
        blocks, last_channel = mobilenet_block_configs(width_mult)
        layers: list[nn.Module] = [
            ConvNormActivation(
                in_channels, blocks[0].input_channels, 3, 2, activation=nn.Hardswish
            )
        ]
        layers += [InvertedResidual(cnf, se_r) for cnf in blocks]
        self.num_features = self.embed_dim = 6 * blocks[-1].out_channels
        self.max_frames = None
        layers.append(
            ConvNormActivation(
                blocks[-1].out_channels, self.num_features, 1, activation=nn.Hardswish
            )
        )
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(start_dim=1),
            nn.Linear(self.num_features, last_channel),
            nn.Hardswish(),
            nn.Dropout(p=dropout),
            nn.Linear(last_channel, num_classes),
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The reference initialisation: Kaiming-normal (fan_out) convolutions, unit BatchNorms,
        N(0, 0.01) Linear weights, zero biases."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0, 0.01)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-mel (B, 1, F, T), any T ≥ 1 → ``(logits, features)``; features = global mean of
        the last feature map (the reference returns the same pair, un-squeezed for B = 1)."""
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"MobileNet expects a (B, {self.in_channels}, F, T) log-mel batch, got "
                f"{tuple(x.shape)}"
            )
        if x.shape[3] < 1 or x.shape[2] < 1:
            raise ValueError(f"empty input {tuple(x.shape)}")
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        x = self.features(x)  # (B, C, F / 32, T / 32)
        features = x.mean(dim=(2, 3))  # (B, C)
        return self.classifier(x), features

    def use_channels_last(self) -> MN:
        """Keep weights and activations channels-last (NHWC): the same network and state dict
        keys, faster depthwise convolutions and batch norm on CPU (a training step of ``mn01``
        on 64 clips of 4 s: 0.7 s instead of 1.1-1.3 s on 2 cores). Returns ``self``."""
        self.to(memory_format=torch.channels_last)
        self.channels_last = True
        return self

    def embed(self, feats: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """Clip embeddings (B, D). The whole clip in one pass (no snippets); with ``lengths``,
        each clip is run on its own real frames, so batch padding does not enter the average."""
        if lengths is None:
            return self(feats)[1]
        lengths = torch.as_tensor(lengths)
        if bool((lengths < 1).any()) or bool((lengths > feats.shape[-1]).any()):
            raise ValueError(f"lengths must lie in [1, {feats.shape[-1]}], got {lengths.tolist()}")
        if bool((lengths == feats.shape[-1]).all()):
            return self(feats)[1]
        return torch.cat([self(feats[i : i + 1, ..., : int(n)])[1] for i, n in enumerate(lengths)])


MOBILENET_CONFIGS: dict[str, dict] = {
    # Released EfficientAT models by name prefix (helpers/utils.py NAME_TO_WIDTH).
    "mn04": dict(width_mult=0.4),
    "mn10": dict(width_mult=1.0),
    "mn20": dict(width_mult=2.0),
    "mn30": dict(width_mult=3.0),
    "mn40": dict(width_mult=4.0),
    # CPU configuration for the embedded corpora (the smallest released width).
    "mn01": dict(width_mult=0.1),
}


def mobilenet(name: str, **overrides) -> MN:
    """MobileNet ``name`` (``mn01`` … ``mn40``; a checkpoint id like ``mn40_as_ext`` picks its
    width from the prefix, as EfficientAT's ``NAME_TO_WIDTH``) with constructor overrides."""
    key = name[:4]
    if key not in MOBILENET_CONFIGS:
        raise ValueError(f"unknown MobileNet {name!r}; known widths: {sorted(MOBILENET_CONFIGS)}")
    return MN(**(MOBILENET_CONFIGS[key] | overrides))


def mn40_as_ext(**overrides) -> MN:
    """``mn40_as_ext`` (paper (b) §4.2.3): width 4.0, 527 AudioSet classes, 68.4M parameters,
    3840-d features; checkpoint ``mn40_as_ext_mAP_487.pt`` from the EfficientAT v0.0.1 release."""
    return mobilenet("mn40", **overrides)


def load_mobilenet_checkpoint(
    model: MN,
    path: str | PathLike,
    prefix: str | None = None,
    drop_classifier: bool = False,
    drop_head: bool = False,
) -> MN:
    """Load a released EfficientAT checkpoint (a plain state dict, e.g. ``mn40_as_ext_mAP_487.pt``)
    or one of ours from a local file, strictly.

    Args:
        drop_classifier: ignore the file's ``classifier.*`` keys (and keep the model's), for a
            model built with a different number of classes.
        drop_head: ignore only the final class projection ``classifier.5.*`` of any size and
            keep the model's own; the hidden layer ``classifier.2`` still loads (``features``
            use neither: they are the mean of the last feature map).

    Raises:
        CheckpointError: unreadable file, or missing / unexpected / mismatched keys (all listed).
    """
    if not drop_classifier:
        keep = ("classifier.5.",) if drop_head else ()
        return load_pretrained(model, path, prefix=prefix, keep_own=keep)
    # The body shares model.features, so loading it fills the model in place.
    load_pretrained(_Body(model.features), path, prefix=prefix, ignore_prefixes=("classifier.",))
    return model


class _Body(nn.Module):
    """The convolutional body alone (``features.*``), for loading without the classifier."""

    def __init__(self, features: nn.Module) -> None:
        super().__init__()
        self.features = features
