"""Full-precision regions inside mixed-precision training (bf16 or fp16 autocast).

Under ``torch.autocast`` matrix products and convolutions run in half precision. Some parts of
the objectives must not: nearest-code search and codebook statistics (a bf16 distance has three
significant digits, so near codes tie and EMA sums drift), softmax normalisers and logsumexps of
contrastive and distillation losses (fp16 overflows at exp(11.1)), and distances that hinge
losses compare. Those parts run inside :func:`full_precision`, which switches autocast off for
the tensors' device, on inputs upcast with :func:`float32`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["float32", "full_precision"]


def float32(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in float32 when it is a half-precision float (bf16, fp16); float32, float64 and
    integer tensors are returned unchanged."""
    if tensor.dtype in (torch.float16, torch.bfloat16):
        return tensor.float()
    return tensor


@contextlib.contextmanager
def full_precision(device: torch.device | str) -> Iterator[None]:
    """A region where autocast is off on ``device``'s type (``cuda``, ``cpu``, ``mps``), so
    that operations keep their inputs' dtype; upcast the inputs with :func:`float32`."""
    device_type = torch.device(device).type
    with torch.autocast(device_type=device_type, enabled=False):
        yield
