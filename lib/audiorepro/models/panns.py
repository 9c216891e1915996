"""CNN14 and CNN10 of PANNs (Kong et al., 2020), the CNN audio encoders of paper (a) §2.1 / §3.3.

Module and parameter names mirror qiuqiangkong/audioset_tagging_cnn ``pytorch/models.py``
(``bn0``, ``conv_block1.conv1``, ``conv_block1.bn1``, ..., ``fc1``, ``fc_audioset``), so the
released ``Cnn14_mAP=0.431.pth`` / ``Cnn10_mAP=0.380.pth`` load through
:func:`load_panns_checkpoint` (their built-in front end's ``spectrogram_extractor.*`` and
``logmel_extractor.*`` tensors are dropped).

Front end. These models take a log-mel spectrogram, not a waveform: (B, 1, F, T), mel bands by
frames, the layout PaSST takes. The released PANNs weights were trained on torchlibrosa's
64-band log-mel at 32 kHz (1024-point Hann STFT, hop 320, 50-14000 Hz, power in dB with
``10 log10(max(x, 1e-10))``); feed that with ``mel_bins=64`` to use them. In this book both
encoders see the same 128-band :class:`~audiorepro.features.PasstMel` features
(``mel_bins=128``), so the CNN-vs-PaSST comparison differs only in the encoder. ``bn0``
normalises each mel band over the batch, which absorbs the front ends' different scales.

Architecture (the reference's ``forward``): ``bn0`` over mel bands; conv blocks of two 3×3
convolutions (no bias) each followed by BatchNorm and ReLU, then 2×2 average pooling (the last
CNN14 block pools 1×1) and dropout 0.2; mean over frequency; max plus mean over time; dropout
0.5; ``fc1`` + ReLU gives the embedding; ``fc_audioset`` the AudioSet logits. SpecAugment and
mixup of the reference are training recipes, not part of the module, and are left out. CNNs take
inputs of any length ≥ 2^(pooling blocks) frames, so no snippets are needed (paper (a): up to
30 s, Table 2).
"""

from __future__ import annotations

from os import PathLike

import torch
import torch.nn.functional as F
from torch import nn

from audiorepro.models.pretrained import load_pretrained

__all__ = ["CNN", "PANNS_FRONT_END", "ConvBlock", "cnn10", "cnn14", "load_panns_checkpoint"]


class ConvBlock(nn.Module):
    """Two 3×3 convolutions (padding 1, no bias), each with BatchNorm and ReLU, then pooling."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor, pool_size: tuple[int, int] = (2, 2)) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))  # (B, C, T, F)
        x = F.relu(self.bn2(self.conv2(x)))
        return F.avg_pool2d(x, kernel_size=pool_size) if pool_size != (1, 1) else x


class CNN(nn.Module):
    """A PANNs CNN: (B, 1, F, T) log-mel → (logits (B, classes_num), features (B, D)).

    Args:
        num_blocks: conv blocks, 6 (CNN14) or 4 (CNN10).
        mel_bins: input mel bands F (64 for the released PANNs weights, 128 with PasstMel).
        classes_num: AudioSet classes (527; 0 for no head).
        base_channels: channels of the first block, doubled per block (64 as PANNs; smaller
            for CPU configurations, e.g. 8 gives CNN14 widths 8…256).
        last_pool: pooling of the last block, (1, 1) for CNN14 and (2, 2) for CNN10, as PANNs.

    Attributes:
        num_features: embedding size D (the last block's channels: 2048 for CNN14, 512 for
            CNN10 at full width).
        embed_dim: same as ``num_features`` (the PaSST attribute name).
        max_frames: ``None``: any length works (no positional encoding).
        min_frames: shortest input, one frame per 2×2 pooling step.
    """

    def __init__(
        self,
        num_blocks: int = 6,
        mel_bins: int = 64,
        classes_num: int = 527,
        base_channels: int = 64,
        last_pool: tuple[int, int] = (1, 1),
    ) -> None:
        super().__init__()
        if num_blocks < 1 or base_channels < 1:
            raise ValueError(
                f"need num_blocks >= 1 and base_channels >= 1, got {num_blocks}, {base_channels}"
            )
        self.mel_bins = mel_bins
        self.last_pool = tuple(last_pool)
        self.bn0 = nn.BatchNorm2d(mel_bins)
        channels = [1] + [base_channels * 2**i for i in range(num_blocks)]
        for i in range(num_blocks):
            self.add_module(f"conv_block{i + 1}", ConvBlock(channels[i], channels[i + 1]))
        self.num_blocks = num_blocks
        self.num_features = self.embed_dim = channels[-1]
        self.fc1 = nn.Linear(channels[-1], channels[-1])
        self.fc_audioset = (
            nn.Linear(channels[-1], classes_num) if classes_num > 0 else nn.Identity()
        )
        pools = num_blocks - 1 + (self.last_pool != (1, 1))
        self.min_frames = 2**pools
        self.max_frames = None
        # Set by use_channels_last(): NHWC activations, about 1.6x faster on CPU (oneDNN).
        self.channels_last = False
        if mel_bins < 2**pools:
            raise ValueError(
                f"{num_blocks} conv blocks pool the mel axis {pools} times: need mel_bins >= "
                f"{2**pools}, got {mel_bins}"
            )
        self.reset_parameters()

    def use_channels_last(self) -> CNN:
        """Keep weights and activations channels-last (NHWC): the same network and state dict
        keys, faster convolutions and batch norm on CPU (a training step of CNN14 at width 4
        on 64 clips of 4 s: 0.43 s instead of 0.68 s on 2 cores). Returns ``self``."""
        self.to(memory_format=torch.channels_last)
        self.channels_last = True
        return self

    def reset_parameters(self) -> None:
        """The reference initialisation: Xavier-uniform convolution and Linear weights, zero
        biases, unit BatchNorms."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d | nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-mel (B, 1, F, T) → ``(logits (B, classes_num), features (B, num_features))``.

        ``features`` is PANNs' ``embedding`` (ReLU of ``fc1``, after dropout in training);
        ``logits`` is ``fc_audioset`` before the sigmoid of the reference's ``clipwise_output``.
        """
        if x.ndim != 4 or x.shape[1] != 1 or x.shape[2] != self.mel_bins:
            raise ValueError(
                f"{type(self).__name__} expects a (B, 1, {self.mel_bins}, T) log-mel batch, got "
                f"{tuple(x.shape)}"
            )
        if x.shape[3] < self.min_frames:
            raise ValueError(
                f"input of {x.shape[3]} frames is shorter than the {self.min_frames} frames "
                f"that {self.num_blocks} pooling blocks need"
            )
        x = x.transpose(2, 3)  # (B, 1, T, F): PANNs' layout
        x = self.bn0(x.transpose(1, 3)).transpose(1, 3)  # normalise each mel band
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        for i in range(1, self.num_blocks + 1):
            last = i == self.num_blocks
            x = getattr(self, f"conv_block{i}")(x, self.last_pool if last else (2, 2))
            x = F.dropout(x, p=0.2, training=self.training)  # (B, C, T', F')
        x = x.mean(dim=3)  # (B, C, T')
        x = x.max(dim=2).values + x.mean(dim=2)  # (B, C)
        x = F.dropout(x, p=0.5, training=self.training)
        x = F.relu(self.fc1(x))  # (B, D)
        features = F.dropout(x, p=0.5, training=self.training)
        return self.fc_audioset(x), features


def cnn14(mel_bins: int = 64, classes_num: int = 527, base_channels: int = 64) -> CNN:
    """CNN14: six conv blocks (64…2048 channels), fc1 2048 → 2048 (paper (a) Table 2: 81.8M
    parameters; 80.8M here with the AudioSet head at 64 mel bands, without the front end)."""
    return CNN(6, mel_bins, classes_num, base_channels, last_pool=(1, 1))


def cnn10(mel_bins: int = 64, classes_num: int = 527, base_channels: int = 64) -> CNN:
    """CNN10: four conv blocks (64…512 channels), fc1 512 → 512 (paper (a) Table 2: 6.3M
    parameters; 5.2M here with the AudioSet head)."""
    return CNN(4, mel_bins, classes_num, base_channels, last_pool=(2, 2))


PANNS_FRONT_END = ("spectrogram_extractor.", "logmel_extractor.")
"""Key prefixes of the released files' built-in front end (torchlibrosa), not loaded here."""


def load_panns_checkpoint(
    model: CNN, path: str | PathLike, prefix: str | None = None, drop_head: bool = False
) -> CNN:
    """Load released PANNs weights (``{"model": state_dict}`` in ``Cnn14_mAP=0.431.pth``) or
    ours from a local file, strictly; the reference front end's tensors are dropped.

    Args:
        drop_head: ignore the file's ``fc_audioset.*`` of any size and keep the model's own
            (none for ``classes_num=0``).

    Raises:
        CheckpointError: unreadable file, or missing / unexpected / mismatched keys (all listed).
    """
    return load_pretrained(
        model,
        path,
        prefix=prefix,
        ignore_prefixes=PANNS_FRONT_END,
        keep_own=("fc_audioset.",) if drop_head else (),
    )
