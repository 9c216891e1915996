"""Feature extraction throughput: seconds of audio processed per second of wall time (RTF^-1).

Compares the library's front ends with straightforward references computed in the same process
on the same inputs, and checks that they agree:

- PaSST log-mel (32 kHz, 10 s clips): ``PasstMel`` on the batch (torch; batched STFT and mel
  matmul, in chunks of two 10 s clips on CPU) vs the same module with one STFT over the whole
  batch, vs the module called clip by clip, vs a per-frame numpy loop (window, ``rfft``, power,
  mel vector product, one frame at a time).
- MFCC-39 (16 kHz utterances): ``audiorepro.features.mfcc`` (cached mel and DCT matrices) vs plain
  ``librosa.feature.mfcc`` + ``librosa.feature.delta`` calls, vs a per-frame numpy loop.

Run: ``python bench/bench_features.py`` (about 15 s on 2 CPU cores). Each timing is the best of
``--repeats`` rounds after one warm-up call; within a round the implementations take turns.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import librosa
import numpy as np
import scipy.fft
import torch

from audiorepro.features import PasstMel, mfcc, passt_mel_basis


def best_times(
    fns: dict[str, Callable[[], object]], repeats: int
) -> tuple[dict[str, float], dict[str, object]]:
    """Best wall time per function over ``repeats`` rounds, after one warm-up call each.

    The functions take turns within each round, so that load from other processes on a shared
    machine hits all of them alike. Returns (best seconds, last result) keyed like ``fns``.
    """
    results = {name: fn() for name, fn in fns.items()}
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}, results


def test_signals(n: int, seconds: float, sr: int, seed: int = 0) -> np.ndarray:
    """(n, S) float32: a few random partials with a slow amplitude envelope, plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    out = np.empty((n, t.size), dtype=np.float32)
    for i in range(n):
        freqs = rng.uniform(80, 0.4 * sr, size=4)
        wav = sum(np.sin(2 * np.pi * f * t + rng.uniform(0, 6.3)) for f in freqs)
        envelope = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(0.2, 2.0) * t)
        out[i] = 0.05 * wav * envelope + 0.01 * rng.standard_normal(t.size)
    return out


# ---------------------------------------------------------------------------------------------
# references


def passt_framewise(x: np.ndarray) -> np.ndarray:
    """PaSST log-mel of one clip (S,), one STFT frame at a time, float32 numpy → (128, T)."""
    n_fft, win_length, hop = 1024, 800, 320
    y = x[1:] - np.float32(0.97) * x[:-1]
    padded = np.pad(y, n_fft // 2, mode="reflect")
    window = np.zeros(n_fft, dtype=np.float32)
    left = (n_fft - win_length) // 2
    window[left : left + win_length] = np.hanning(win_length)  # symmetric, = periodic=False
    basis = passt_mel_basis().numpy()
    num_frames = 1 + (len(padded) - n_fft) // hop
    mel = np.empty((basis.shape[0], num_frames), dtype=np.float32)
    for t in range(num_frames):
        spec = np.fft.rfft(padded[t * hop : t * hop + n_fft] * window)
        mel[:, t] = basis @ (spec.real**2 + spec.imag**2).astype(np.float32)
    return (np.log(mel + 1e-5) + 4.5) / 5.0


def mfcc_librosa(wav: np.ndarray, sr: int) -> np.ndarray:
    """MFCC-39 with plain librosa calls (filter bank and DCT rebuilt on every call)."""
    static = librosa.feature.mfcc(
        y=wav, sr=sr, n_mfcc=13, n_fft=512, hop_length=160, win_length=400, n_mels=40
    )
    d1 = librosa.feature.delta(static, width=9, order=1, mode="nearest")
    d2 = librosa.feature.delta(static, width=9, order=2, mode="nearest")
    return np.concatenate([static, d1, d2]).T


def mfcc_framewise(wav: np.ndarray, sr: int) -> np.ndarray:
    """MFCC-39, one frame at a time: window, rfft, mel, dB, DCT; deltas over the whole matrix."""
    n_fft, win, hop = 512, 400, 160
    window = np.zeros(n_fft, dtype=np.float32)
    window[(n_fft - win) // 2 : (n_fft - win) // 2 + win] = np.hanning(win + 1)[:-1]  # periodic
    basis = librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=40)
    padded = np.pad(wav, n_fft // 2)
    frames = []
    for t in range(1 + len(wav) // hop):
        spec = np.fft.rfft(padded[t * hop : t * hop + n_fft] * window)
        frames.append(10.0 * np.log10(np.maximum(basis @ (spec.real**2 + spec.imag**2), 1e-10)))
    mel_db = np.array(frames)  # (T, 40)
    mel_db = np.maximum(mel_db, mel_db.max() - 80.0)
    static = scipy.fft.dct(mel_db, type=2, norm="ortho", axis=1)[:, :13]
    d1 = librosa.feature.delta(static, width=9, order=1, axis=0, mode="nearest")
    d2 = librosa.feature.delta(static, width=9, order=2, axis=0, mode="nearest")
    return np.concatenate([static, d1, d2], axis=1)


def diff(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> float:
    """Largest absolute difference between two feature arrays."""
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=16, help="10 s clips at 32 kHz (PaSST)")
    parser.add_argument("--utterances", type=int, default=40, help="3 s utterances at 16 kHz")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs; the best counts")
    args = parser.parse_args()

    rows = []  # (front end, implementation, audio seconds, wall seconds, max |diff| vs ours)

    # MFCC first: torch's worker threads keep spinning for a moment after each call and would
    # slow down numpy code timed right after them.
    utts = test_signals(args.utterances, 3.0, 16000, seed=1)
    audio_s = args.utterances * 3.0
    names = ["audiorepro mfcc (ours)", "plain librosa calls", "per-frame numpy loop"]
    best, out = best_times(
        {
            names[0]: lambda: [mfcc(u, 16000) for u in utts],
            names[1]: lambda: [mfcc_librosa(u, 16000) for u in utts],
            names[2]: lambda: [mfcc_framewise(u, 16000) for u in utts],
        },
        args.repeats,
    )
    for name in names:
        gap = max(diff(a, b) for a, b in zip(out[name], out[names[0]], strict=True))
        rows.append(("MFCC-39", name, audio_s, best[name], gap))

    clips = test_signals(args.clips, 10.0, 32000)
    audio_s = args.clips * 10.0
    wav = torch.from_numpy(clips)
    module = PasstMel().eval()
    whole = PasstMel().eval()
    whole.cpu_chunk_samples = wav.numel()
    names = [
        "PasstMel on the batch (ours)",
        "one STFT over the whole batch",
        "PasstMel clip by clip",
        "per-frame numpy loop",
    ]
    with torch.inference_mode():
        best, out = best_times(
            {
                names[0]: lambda: module(wav),
                names[1]: lambda: whole(wav),
                names[2]: lambda: torch.cat([module(wav[i : i + 1]) for i in range(len(wav))]),
                names[3]: lambda: np.stack([passt_framewise(c) for c in clips]),
            },
            args.repeats,
        )
    for name in names:
        rows.append(("PaSST log-mel", name, audio_s, best[name], diff(out[name], out[names[0]])))

    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} threads; librosa {librosa.__version__}")
    print(f"PaSST: {args.clips} x 10 s at 32 kHz; MFCC: {args.utterances} x 3 s at 16 kHz")
    header = (
        f"{'front end':<14} {'implementation':<30} {'audio s':>8} {'wall s':>8} {'RTF^-1':>9} "
        f"{'ours is':>8} {'max|diff|':>10}"
    )
    print(header)
    print("-" * len(header))
    ours_time = {}
    for front, impl, audio, wall, gap in rows:
        ours_time.setdefault(front, wall)
        speedup = wall / ours_time[front]
        print(
            f"{front:<14} {impl:<30} {audio:>8.0f} {wall:>8.3f} {audio / wall:>9.0f} "
            f"{speedup:>7.1f}x {gap:>10.2e}"
        )
    print("'ours is': how many times faster the library's implementation is than that row.")


if __name__ == "__main__":
    main()
