"""Linear magnitude spectrogram and its Griffin-Lim inversion (the ZeroSpeech codebook inverter).

The inverter of Tjandra et al. 2020 (§4) predicts a linear magnitude spectrogram from the
discrete codes and reconstructs the waveform with Griffin-Lim (Griffin & Lim 1984). The framing
defaults to the speech front end's (25 ms Hann window, 10 ms hop, ``n_fft`` the next power of
two: 400 / 160 / 512 at 16 kHz, so 257 bins), which keeps spectrogram frames aligned with the
code frames. :func:`griffin_lim` is ``librosa.griffinlim`` (fast Griffin-Lim with momentum 0.99)
with the same STFT parameters and a seeded random initial phase.
"""

from __future__ import annotations

import inspect

import librosa
import numpy as np

from audiorepro.features.speech import frame_params, stft

__all__ = ["griffin_lim", "linear_spectrogram", "spectral_convergence"]


# librosa 1.0 renamed griffinlim's ``random_state`` to ``rng`` (and warns on the old name); the
# same Generator gives the same phases either way.
_GRIFFINLIM_RNG = (
    "rng" if "rng" in inspect.signature(librosa.griffinlim).parameters else "random_state"
)


def _framing(sr: int, n_fft: int | None, hop: int | None, win: int | None) -> tuple[int, int, int]:
    d_fft, d_win, d_hop = frame_params(sr)
    win = d_win if win is None else int(win)
    n_fft = max(d_fft, 1 << (win - 1).bit_length()) if n_fft is None else int(n_fft)
    hop = d_hop if hop is None else int(hop)
    if not (1 <= hop and 1 <= win <= n_fft):
        raise ValueError(
            f"need hop >= 1 and 1 <= win <= n_fft, got hop={hop}, win={win}, n_fft={n_fft}"
        )
    return n_fft, hop, win


def linear_spectrogram(
    wav: np.ndarray,
    sr: int = 16000,
    n_fft: int | None = None,
    hop: int | None = None,
    win: int | None = None,
) -> np.ndarray:
    """Magnitude STFT |X| of a waveform: wav (S,) → mag (T, n_fft // 2 + 1).

    Hann window of ``win`` samples, centred frames (zero padding), ``T = 1 + S // hop``.
    ``None`` takes the 25 ms / 10 ms defaults for ``sr`` (:func:`frame_params`).

    Returns:
        float32 array (T, n_fft // 2 + 1).
    """
    wav = np.asarray(wav)
    if wav.ndim != 1 or wav.size == 0:
        raise ValueError(f"wav must be a non-empty 1-D array (S,), got shape {wav.shape}")
    if not np.isfinite(wav).all():
        raise ValueError("wav contains NaN or inf samples")
    n_fft, hop, win = _framing(sr, n_fft, hop, win)
    spec = stft(wav.astype(np.float32), n_fft, hop, win)
    return np.abs(spec).T.astype(np.float32)


def griffin_lim(
    mag: np.ndarray,
    n_iter: int = 32,
    *,
    sr: int = 16000,
    hop: int | None = None,
    win: int | None = None,
    length: int | None = None,
    momentum: float = 0.99,
    seed: int = 0,
) -> np.ndarray:
    """Waveform whose STFT magnitude approximates ``mag``: mag (T, F) → wav (S,).

    ``librosa.griffinlim`` with the STFT parameters of :func:`linear_spectrogram` (``n_fft =
    2 (F - 1)``; ``hop``/``win`` as there, defaults from ``sr``), ``momentum`` (fast Griffin-Lim)
    and a random initial phase drawn from ``seed``, so the result is deterministic.

    Args:
        mag: non-negative magnitudes (T, F), as returned by :func:`linear_spectrogram` (or
            predicted by the inverter).
        n_iter: Griffin-Lim iterations.
        length: output length in samples (default ``hop * (T - 1)``, librosa's).

    Returns:
        float32 array (S,).
    """
    mag = np.asarray(mag, dtype=np.float32)
    if mag.ndim != 2 or mag.shape[0] == 0 or mag.shape[1] < 2:
        raise ValueError(f"mag must have shape (T, F) with T >= 1 and F >= 2, got {mag.shape}")
    if not np.isfinite(mag).all() or (mag < 0).any():
        raise ValueError("mag must hold finite non-negative magnitudes")
    if n_iter < 1:
        raise ValueError(f"n_iter must be >= 1, got {n_iter}")
    n_fft = 2 * (mag.shape[1] - 1)
    _, hop, win = _framing(sr, n_fft, hop, win)
    wav = librosa.griffinlim(
        mag.T,
        n_iter=n_iter,
        hop_length=hop,
        win_length=win,
        n_fft=n_fft,
        window="hann",
        center=True,
        length=length,
        momentum=momentum,
        init="random",
        **{_GRIFFINLIM_RNG: np.random.default_rng(seed)},
    )
    return wav.astype(np.float32)


def spectral_convergence(ref_mag: np.ndarray, est_mag: np.ndarray) -> float:
    """Spectral convergence ``||ref - est||_F / ||ref||_F`` of two magnitude spectrograms.

    0 for identical magnitudes; the usual Griffin-Lim / vocoder consistency measure (e.g. Arik et
    al. 2019). Both arrays must have the same shape, e.g. (T, F).
    """
    ref = np.asarray(ref_mag, dtype=np.float64)
    est = np.asarray(est_mag, dtype=np.float64)
    if ref.shape != est.shape:
        raise ValueError(
            f"ref_mag and est_mag must have the same shape, got {ref.shape} and {est.shape}"
        )
    denom = np.linalg.norm(ref)
    if denom == 0:
        raise ValueError("ref_mag is all zeros; spectral convergence is undefined")
    return float(np.linalg.norm(ref - est) / denom)
