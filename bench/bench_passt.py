"""Audio embedding throughput on CPU: 10 s clips per second, waveform to embedding.

For each encoder, a batch of 10 s clips at 32 kHz goes through ``PasstMel`` and the encoder in
eval mode under ``torch.inference_mode`` (what ``AudioIndex`` does when it embeds a folder).
Encoders: the CPU configurations ``passt_tiny`` and ``passt_small``, the paper-size PaSST-N
(stride 16, 498 tokens per clip) and PaSST-S (stride 10, 1190 tokens), and CNN14 at 1/8 width.

Reference in the same run: the PaSST models with the attention written out as in the reference
implementation (``softmax(q kᵀ · scale) v`` with explicit matrices) instead of
``F.scaled_dot_product_attention``; the embeddings must agree to 1e-4.

Run: ``python bench/bench_passt.py`` (about a minute on 2 CPU cores; ``--skip-paper`` leaves out
the 86M-parameter models). Each timing is the best of ``--repeats`` rounds after a warm-up.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import contextmanager

import torch

from audiorepro.features import PasstMel
from audiorepro.models import cnn14, passt_n, passt_s, passt_small, passt_tiny
from audiorepro.models.vit import Attention


def explicit_attention(self: Attention, x: torch.Tensor) -> torch.Tensor:
    """The reference's attention: explicit (B, H, N, N) matrix, softmax, weighted sum."""
    batch, length, dim = x.shape
    qkv = self.qkv(x).reshape(batch, length, 3, self.num_heads, dim // self.num_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    attn = (q @ k.transpose(-2, -1)) * self.scale
    x = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, length, dim)
    return self.proj_drop(self.proj(x))


@contextmanager
def reference_attention():
    original = Attention.forward
    Attention.forward = explicit_attention
    try:
        yield
    finally:
        Attention.forward = original


def best_times(
    fns: dict[str, Callable[[], torch.Tensor]], repeats: int
) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """Best wall time per function over ``repeats`` rounds after one warm-up call each; the
    functions take turns within a round, so load from other processes hits them alike."""
    results = {name: fn() for name, fn in fns.items()}
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--skip-paper", action="store_true", help="only the CPU configurations")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    mel = PasstMel().eval()
    encoders = {
        "passt_tiny (D=64, 2 blocks)": (passt_tiny(), 16),
        "passt_small (D=192, 4 blocks)": (passt_small(), 8),
        "cnn14, 1/8 width (128 bands)": (cnn14(mel_bins=128, base_channels=8), 8),
    }
    if not args.skip_paper:
        encoders["PaSST-N (paper size, 86M)"] = (passt_n(), 2)
        encoders["PaSST-S (paper size, 86M)"] = (passt_s(), 1)
    print(f"10 s clips/s on CPU, waveform -> embedding, {args.threads} threads:")
    print(f"  {'encoder':32s} {'batch':>5s} {'ours':>9s} {'reference':>10s} {'ratio':>6s}")
    for name, (model, batch) in encoders.items():
        model.eval()
        wav = 0.1 * torch.randn(batch, 320_000)

        def embed(model=model, wav=wav):
            with torch.inference_mode():
                return model(mel(wav).unsqueeze(1))[1]

        def embed_reference(embed=embed):
            with reference_attention():
                return embed()

        fns = {"ours": embed}
        if hasattr(model, "blocks"):
            fns["reference"] = embed_reference
        times, results = best_times(fns, args.repeats)
        line = f"  {name:32s} {batch:5d} {batch / times['ours']:9.2f}"
        if "reference" in fns:
            if not torch.allclose(results["ours"], results["reference"], atol=1e-4, rtol=1e-4):
                raise SystemExit(f"{name}: embeddings differ from the reference attention")
            ratio = times["reference"] / times["ours"]
            line += f" {batch / times['reference']:10.2f} {ratio:5.2f}x"
        print(line)


if __name__ == "__main__":
    main()
