"""The PaSST log-mel front end (``AugmentMelSTFT`` of kkoutini/PaSST ``models/preprocess.py``).

Waveform at 32 kHz → pre-emphasis → power STFT (25 ms Hann window, 10 ms hop) → 128 Kaldi-style
mel bands (0-15 kHz at eval, randomly jittered band edges in training) → ``log(x + 1e-5)`` →
optional SpecAugment masking (training only) → ``(x + 4.5) / 5``.

Paper (a) §2.5 ("centered and whitened with the approximate global mean and standard
deviation"); the exact recipe, including the parameters salsa uses, is in
``shared/reference/retrieval.md`` §3. torchaudio is not a dependency, so the Kaldi mel bank
(``torchaudio.compliance.kaldi.get_mel_banks``) is reimplemented in :func:`kaldi_mel_banks`.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import nn

__all__ = ["PasstMel", "kaldi_mel_banks", "kaldi_mel_scale", "passt_mel_basis"]


def kaldi_mel_scale(freq: np.ndarray | float) -> np.ndarray | float:
    """Kaldi's mel scale, ``1127 ln(1 + f / 700)`` (natural log; HTK's formula)."""
    return 1127.0 * np.log1p(np.asarray(freq, dtype=np.float64) / 700.0)


def kaldi_mel_banks(
    num_bins: int, window_length_padded: int, sample_freq: float, low_freq: float, high_freq: float
) -> np.ndarray:
    """Kaldi triangular mel filters without VTLN, as ``torchaudio.compliance.kaldi.get_mel_banks``.

    Triangles are equally spaced on the Kaldi mel scale: ``num_bins + 1`` equal steps between
    ``mel(low_freq)`` and ``mel(high_freq)``; band ``m`` rises from ``left = mel_low + m * delta``
    to 1 at ``centre = left + delta`` and falls to 0 at ``right = left + 2 delta``, evaluated in
    the mel domain at the FFT bin centres ``i * sample_freq / window_length_padded`` for
    ``i = 0 .. window_length_padded / 2 - 1`` (the Nyquist bin is not included).
    ``high_freq <= 0`` counts from Nyquist, as in Kaldi. Computed in float64 (torchaudio uses
    float32; the difference is float32 rounding, below 1e-6).

    Args:
        num_bins: number of mel bands.
        window_length_padded: FFT size (even).
        sample_freq: sample rate in Hz.
        low_freq, high_freq: band edges in Hz (``0 <= low < high <= sample_freq / 2``).

    Returns:
        float64 array of shape (num_bins, window_length_padded // 2).
    """
    if num_bins < 3:
        raise ValueError(f"num_bins must be at least 3, got {num_bins}")
    if window_length_padded % 2:
        raise ValueError(f"window_length_padded must be even, got {window_length_padded}")
    nyquist = 0.5 * sample_freq
    if high_freq <= 0.0:
        high_freq += nyquist
    if not (0.0 <= low_freq < nyquist and 0.0 < high_freq <= nyquist and low_freq < high_freq):
        raise ValueError(
            f"need 0 <= low_freq < high_freq <= Nyquist ({nyquist} Hz), "
            f"got low_freq={low_freq}, high_freq={high_freq}"
        )
    mel_low = kaldi_mel_scale(low_freq)
    mel_delta = (kaldi_mel_scale(high_freq) - mel_low) / (num_bins + 1)
    left = mel_low + np.arange(num_bins)[:, None] * mel_delta  # (M, 1)
    centre = left + mel_delta
    right = left + 2.0 * mel_delta
    fft_bin_width = sample_freq / window_length_padded
    mel = kaldi_mel_scale(fft_bin_width * np.arange(window_length_padded // 2))[None, :]  # (1, K)
    up = (mel - left) / (centre - left)
    down = (right - mel) / (right - centre)
    return np.maximum(0.0, np.minimum(up, down))


@functools.lru_cache(maxsize=16)
def _cached_basis(
    n_mels: int, n_fft: int, sr: int, fmin: float, fmax: float, device: str
) -> torch.Tensor:
    bank = kaldi_mel_banks(n_mels, n_fft, sr, fmin, fmax)
    # PaSST appends one zero column so that the bank covers all n_fft // 2 + 1 STFT bins.
    bank = np.pad(bank, ((0, 0), (0, 1)))
    return torch.from_numpy(bank.astype(np.float32)).to(device)


def passt_mel_basis(
    n_mels: int = 128,
    n_fft: int = 1024,
    sr: int = 32000,
    fmin: float = 0.0,
    fmax: float = 15000.0,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """The PaSST mel matrix: :func:`kaldi_mel_banks` plus one zero column, (n_mels, n_fft//2 + 1).

    float32 on ``device``. The last 16 are cached, so the eval band costs nothing after the first
    batch; jittered training bands (10 x 2000 possible) are mostly recomputed, about 1 ms each.
    Treat the result as read-only.
    """
    return _cached_basis(int(n_mels), int(n_fft), int(sr), float(fmin), float(fmax), str(device))


class PasstMel(nn.Module):
    """PaSST's ``AugmentMelSTFT``: 32 kHz waveform (B, S) → normalised log-mel (B, n_mels, T).

    ``T = (S - 1) // hopsize + 1`` (pre-emphasis drops one sample; the STFT is centred), so a
    10 s clip at 32 kHz gives 1000 frames. Steps, as in kkoutini/PaSST ``models/preprocess.py``:

    1. pre-emphasis ``y[n] = x[n + 1] - 0.97 x[n]`` (the original's conv1d with kernel
       [-0.97, 1], written as a difference);
    2. ``torch.stft`` (``n_fft``, ``hopsize``, a symmetric ``torch.hann_window(win_length,
       periodic=False)`` centred in ``n_fft``, ``center=True``, reflect padding), power
       ``re^2 + im^2``;
    3. mel bank :func:`passt_mel_basis` with edges ``fmin``, ``fmax``; in training mode only, the
       edges are jittered per call to ``fmin + randint(fmin_aug_range)`` and
       ``fmax + fmax_aug_range // 2 - randint(fmax_aug_range)`` (torch's global RNG);
    4. ``log(mel + 1e-5)``, computed in fp32 with autocast disabled;
    5. training only: SpecAugment frequency then time masking (widths up to ``freqm`` /
       ``timem``, masked values set to 0, one mask per example; 0 disables);
    6. "fast normalisation" ``(x + 4.5) / 5``.

    Differences from the official module: the eval path does not draw (unused) jitter values from
    the RNG; the mel bank is computed in float64 before the cast to float32 (differences below
    1e-6); SpecAugment masks are drawn per example (torchaudio >= 2.0's ``iid_masks`` behaviour;
    torchaudio 0.x applied one mask to the whole (B, F, T) batch); on CPU the batch goes through
    the STFT in chunks of about ``cpu_chunk_samples`` samples (same values, faster).

    Args:
        n_mels: mel bands (128).
        sr: sample rate in Hz the input must have (32000).
        win_length: window length in samples (800 = 25 ms).
        hopsize: hop in samples (320 = 10 ms).
        n_fft: FFT size (1024).
        freqm, timem: maximal SpecAugment mask widths in bands / frames (0: off, salsa's
            setting; dcase2023_task6b uses 48 / 192).
        htk, norm: accepted for signature compatibility with ``AugmentMelSTFT``, which ignores
            them too (its bank is always Kaldi's, unnormalised).
        fmin: lower band edge in Hz.
        fmax: upper band edge in Hz; ``None`` → ``sr // 2 - fmax_aug_range // 2`` (15000 Hz).
        fmin_aug_range: training jitter of ``fmin`` is ``randint(fmin_aug_range)`` Hz (>= 1).
        fmax_aug_range: training jitter of ``fmax`` spans ``fmax_aug_range`` Hz (>= 1).
    """

    def __init__(
        self,
        n_mels: int = 128,
        sr: int = 32000,
        win_length: int = 800,
        hopsize: int = 320,
        n_fft: int = 1024,
        freqm: int = 0,
        timem: int = 0,
        htk: bool = False,
        fmin: float = 0.0,
        fmax: float | None = None,
        norm: int = 1,
        fmin_aug_range: int = 10,
        fmax_aug_range: int = 2000,
    ) -> None:
        super().__init__()
        if win_length > n_fft:
            raise ValueError(f"win_length ({win_length}) must not exceed n_fft ({n_fft})")
        if fmin_aug_range < 1 or fmax_aug_range < 1:
            raise ValueError(
                f"fmin_aug_range and fmax_aug_range must be >= 1 (torch.randint(n) needs n >= 1), "
                f"got {fmin_aug_range} and {fmax_aug_range}"
            )
        if freqm < 0 or timem < 0:
            raise ValueError(f"freqm and timem must be >= 0, got {freqm} and {timem}")
        if fmax is None:
            fmax = sr // 2 - fmax_aug_range // 2
        self.n_mels = n_mels
        self.sr = sr
        self.win_length = win_length
        self.hopsize = hopsize
        self.n_fft = n_fft
        self.freqm = freqm
        self.timem = timem
        self.htk = htk
        self.norm = norm
        self.fmin = float(fmin)
        self.fmax = float(fmax)
        self.fmin_aug_range = fmin_aug_range
        self.fmax_aug_range = fmax_aug_range
        # Samples per STFT call on CPU: a speed setting, the outputs do not depend on it.
        self.cpu_chunk_samples = 640_000
        passt_mel_basis(n_mels, n_fft, sr, self.fmin, self.fmax)  # fail early on bad edges
        self.register_buffer(
            "window", torch.hann_window(win_length, periodic=False), persistent=False
        )

    def extra_repr(self) -> str:
        return (
            f"n_mels={self.n_mels}, sr={self.sr}, win_length={self.win_length}, "
            f"hopsize={self.hopsize}, n_fft={self.n_fft}, fmin={self.fmin}, fmax={self.fmax}, "
            f"freqm={self.freqm}, timem={self.timem}"
        )

    def num_frames(self, num_samples: int) -> int:
        """Frames produced for ``num_samples`` input samples: ``(S - 1) // hopsize + 1``."""
        return (num_samples - 1) // self.hopsize + 1

    def sample_band(self) -> tuple[float, float]:
        """The mel band edges (fmin, fmax) in Hz for one forward call.

        Eval mode: exactly ``(fmin, fmax)``. Training mode: ``fmin + randint(fmin_aug_range)`` and
        ``fmax + fmax_aug_range // 2 - randint(fmax_aug_range)`` from torch's global RNG
        (0..9 Hz and 14001..16000 Hz with the defaults).
        """
        if not self.training:
            return self.fmin, self.fmax
        fmin = self.fmin + torch.randint(self.fmin_aug_range, (1,)).item()
        fmax = (
            self.fmax + self.fmax_aug_range // 2 - torch.randint(self.fmax_aug_range, (1,)).item()
        )
        return fmin, fmax

    def power_spectrogram(self, wav: torch.Tensor) -> torch.Tensor:
        """Pre-emphasis and power STFT in fp32: (B, S) → (B, n_fft // 2 + 1, T)."""
        # The official conv1d with kernel [-0.97, 1], written as a difference: same values, and
        # conv1d with a 2-tap kernel is over 50x slower on CPU for a (8, 320000) batch.
        wav = wav.float()
        x = wav[:, 1:] - 0.97 * wav[:, :-1]  # (B, S - 1)
        spec = torch.stft(
            x,
            self.n_fft,
            hop_length=self.hopsize,
            win_length=self.win_length,
            window=self.window,
            center=True,
            normalized=False,
            return_complex=True,
        )  # (B, K, T)
        return spec.real.square() + spec.imag.square()

    def _mask(self, x: torch.Tensor, max_width: int, axis: int) -> torch.Tensor:
        # One mask per example: width ~ U[0, max_width), start ~ U[0, size - width).
        size = x.shape[axis]
        batch = x.shape[0]
        width = torch.rand(batch, device=x.device) * max_width
        start = torch.rand(batch, device=x.device) * (size - width)
        start_i = start.long()
        end_i = start_i + width.long()
        idx = torch.arange(size, device=x.device)
        mask = (idx[None, :] >= start_i[:, None]) & (idx[None, :] < end_i[:, None])  # (B, size)
        mask = mask[:, :, None] if axis == 1 else mask[:, None, :]
        return x.masked_fill(mask, 0.0)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        """Normalised log-mel spectrogram.

        Args:
            wav: (B, S) mono waveforms at ``sr`` Hz, values in [-1, 1], ``S > n_fft // 2 + 1``
                (reflect padding needs more samples than the pad).

        Returns:
            float32 (B, n_mels, T) with ``T = (S - 1) // hopsize + 1``.
        """
        if wav.ndim != 2:
            raise ValueError(f"PasstMel expects wav of shape (B, S), got {tuple(wav.shape)}")
        if wav.shape[1] - 1 <= self.n_fft // 2:
            raise ValueError(
                f"PasstMel needs more than {self.n_fft // 2 + 1} samples per clip "
                f"(reflect padding of the centred STFT), got {wav.shape[1]}"
            )
        fmin, fmax = self.sample_band()  # one band for the whole batch, as in the original
        # fp32 throughout: log of small mel energies in half precision underflows.
        with torch.autocast(device_type=wav.device.type, enabled=False):
            basis = passt_mel_basis(self.n_mels, self.n_fft, self.sr, fmin, fmax, wav.device)
            # On CPU the complex STFT of a large batch falls out of cache: chunks of two 10 s
            # clips ran 3x faster than one call for 48 clips on 2 cores (bench/bench_features.py
            # compares them). GPUs take the batch at once.
            if wav.device.type == "cpu":
                chunk = max(1, self.cpu_chunk_samples // wav.shape[1])
            else:
                chunk = wav.shape[0]
            mel = torch.cat(
                [
                    torch.log(torch.matmul(basis, self.power_spectrogram(part)) + 1e-5)
                    for part in wav.split(chunk)
                ]
            )  # (B, M, T)
            if self.training and self.freqm > 0:
                mel = self._mask(mel, self.freqm, axis=1)
            if self.training and self.timem > 0:
                mel = self._mask(mel, self.timem, axis=2)
            return (mel + 4.5) / 5.0
