"""Memory and time of the ensemble's correspondences over a whole training set.

``top_matches`` (blockwise, :mod:`audiorepro.distillation.analysis`) against the straightforward
reference ``top_matches_dense`` (the full Ĉ matrix, then a sort per row), each run in its own
subprocess so that its peak resident memory (``getrusage(RUSAGE_SELF).ru_maxrss``, everything
the process touched: Python, torch, the loaded embeddings and the computation) is measured alone:

1. a size where the full matrix fits (default 4,000 audios × 20,000 captions): both methods,
   results compared (same indices, scores within 1e-4), peak memory and time side by side;
2. the target size (default 20,000 audios × 100,000 captions, M = 3 teachers, D = 1024, stored
   and fused in float16): blockwise only (the full float32 matrix alone would need 8 GB); the
   target is a peak of at most 1.5 GB.

Usage: ``python bench/bench_distillation.py [--audios N --captions N --dim D --teachers M]``.
Exit status 1 when the blockwise results differ from the reference or the target is missed.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_GB = 1.5


def write_teachers(root: str, audios: int, captions: int, dim: int, teachers: int, dtype: str):
    import torch

    from audiorepro.distillation import TeacherEmbeddings

    torch_dtype = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(0)
    shared = torch.randn(audios, dim, generator=gen)  # teachers agree partly, as real ones do
    for m in range(teachers):
        audio = (shared + torch.randn(audios, dim, generator=gen)).to(torch_dtype)
        # Captions: 5 per audio, each near its clip, plus noise.
        caption = torch.empty(captions, dim, dtype=torch_dtype)
        for start in range(0, captions, 10_000):
            n = min(10_000, captions - start)
            near = shared[(torch.arange(start, start + n) // 5) % audios]
            caption[start : start + n] = (near + 1.5 * torch.randn(n, dim, generator=gen)).to(
                torch_dtype
            )
        TeacherEmbeddings(
            [f"clip{i:06d}.wav" for i in range(audios)],
            [f"caption {j}" for j in range(captions)],
            audio,
            caption,
            {"teacher": f"teacher{m}", "caption_preprocessing": "lower,strip_punctuation"},
        ).save(Path(root) / f"teacher{m}", dtype=torch_dtype)
        del audio, caption


def run_method(method: str, root: str, teachers: int, k: int, block: int, dtype: str, out: str):
    import torch

    from audiorepro.distillation import TeacherEmbeddings, TeacherEnsemble
    from audiorepro.distillation.analysis import top_matches, top_matches_dense

    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    paths = [Path(root) / f"teacher{m}" for m in range(teachers)]
    start = time.perf_counter()
    if method == "blockwise":
        ensemble = TeacherEnsemble.load(paths, dtype=getattr(torch, dtype))
        result = top_matches(ensemble, k=k, block_size=block)
    else:
        stores = [TeacherEmbeddings.load(p) for p in paths]
        result = top_matches_dense([s.audio for s in stores], [s.caption for s in stores], k=k)
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.save({"indices": result.indices, "scores": result.scores}, out)
    print(json.dumps({"seconds": seconds, "peak_mb": peak_kb / 1024, "base_mb": base_kb / 1024}))


def child(args: list[str]) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"child {args[:2]} failed:\n{proc.stderr}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--audios", type=int, default=20_000)
    parser.add_argument("--captions", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--teachers", type=int, default=3)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--block", type=int, default=2048)
    parser.add_argument("--ref-audios", type=int, default=4_000)
    parser.add_argument("--ref-captions", type=int, default=20_000)
    parser.add_argument("--skip-target", action="store_true", help="only the reference size")
    args = parser.parse_args()

    import torch

    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-distillation-") as tmp:
        ref_root = Path(tmp) / "reference"
        ref_root.mkdir()
        shape = [str(args.ref_audios), str(args.ref_captions), str(args.dim), str(args.teachers)]
        child(["write", str(ref_root), *shape, "float32"])
        common = [str(args.teachers), str(args.k), str(args.block), "float32"]
        dense = child(["run", "dense", str(ref_root), *common, str(Path(tmp) / "dense.pt")])
        block = child(["run", "blockwise", str(ref_root), *common, str(Path(tmp) / "block.pt")])
        a = torch.load(Path(tmp) / "dense.pt", weights_only=True)
        b = torch.load(Path(tmp) / "block.pt", weights_only=True)
        same = bool(a["indices"].equal(b["indices"])) and bool(
            torch.allclose(a["scores"], b["scores"], atol=1e-4)
        )
        ok &= same
        print(
            f"reference size: {args.ref_audios:,} audios x {args.ref_captions:,} captions, "
            f"M={args.teachers}, D={args.dim}, k={args.k}, block={args.block} (float32)"
        )
        print(f"  results identical: {same}")
        print("  method            peak RSS     time   (process after imports: "
              f"{dense['base_mb']:.0f} MiB)")  # fmt: skip
        for name, r in (("full matrix", dense), ("blockwise", block)):
            print(f"  {name:<16} {r['peak_mb']:7.0f} MiB {r['seconds']:6.1f} s")
        print(
            f"  blockwise / full matrix: memory {block['peak_mb'] / dense['peak_mb']:.2f}x, "
            f"time {block['seconds'] / dense['seconds']:.2f}x"
        )
        if not args.skip_target:
            big = Path(tmp) / "target"
            big.mkdir()
            shape = [str(args.audios), str(args.captions), str(args.dim), str(args.teachers)]
            child(["write", str(big), *shape, "float16"])
            common = [str(args.teachers), str(args.k), str(args.block), "float16"]
            r = child(["run", "blockwise", str(big), *common, str(Path(tmp) / "big.pt")])
            full_gb = args.audios * args.captions * 4 / 1e9
            peak_gb = r["peak_mb"] * 2**20 / 1e9  # ru_maxrss is in KiB; the target in GB
            met = peak_gb <= TARGET_GB
            ok &= met
            print(
                f"target size: {args.audios:,} audios x {args.captions:,} captions, "
                f"M={args.teachers}, D={args.dim}, k={args.k}, block={args.block}, "
                "embeddings float16"
            )
            print(
                f"  blockwise: peak RSS {r['peak_mb']:.0f} MiB ({peak_gb:.2f} GB), "
                f"{r['seconds']:.0f} s; the full float32 matrix alone would be {full_gb:.1f} GB"
            )
            print(f"  target <= {TARGET_GB} GB: {'met' if met else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "write":
        root, a, c, d, m, dtype = sys.argv[2:8]
        write_teachers(root, int(a), int(c), int(d), int(m), dtype)
    elif len(sys.argv) > 1 and sys.argv[1] == "run":
        method, root, m, k, block, dtype, out = sys.argv[2:9]
        run_method(method, root, int(m), int(k), int(block), dtype, out)
    else:
        sys.exit(main())
