"""ATST-Frame's log-mel front end (salsa ``models/audio/atst.py`` ``ATSTMel``).

16 kHz waveform → power STFT (1024-sample window, 10 ms hop) → 64 HTK mel bands (60-7800 Hz) →
dB with an 80 dB range, clamped to [-50, 80] dB → min-max scaled to about [-1, 1] with the
AudioSet statistics the released checkpoints were trained on. The model itself is
:class:`audiorepro.models.atst.ATSTFrame`.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["ATST_SILENCE", "AtstMel"]

# AtstMel's min-max scaling: the dB range of the AudioSet statistics the checkpoints were trained on.
_DB_MIN, _DB_MAX = -79.6482, 50.6842
# The scaled value of the clamped floor (-50 dB): what zero-padded audio looks like to the model.
ATST_SILENCE = (-50.0 - _DB_MIN) / (_DB_MAX - _DB_MIN) * 2.0 - 1.0


class AtstMel(nn.Module):
    """ATST-Frame's front end (salsa ``models/audio/atst.py`` ``ATSTMel``): waveform → (B, 1, 64, T).

    16 kHz mono input (resample 32 kHz audio first, e.g. ``torchaudio.functional.resample``);
    STFT n_fft = window = 1024, hop 160 (10 ms), centred; 64 HTK mel bands 60–7800 Hz of the power
    spectrum; dB with an 80 dB dynamic range, clamped to [-50, 80] dB; min-max scaled with the
    reference's constants (-79.6482, 50.6842) to about [-1, 1]. A 10 s clip gives 1001 frames.

    Difference: the reference's ``AmplitudeToDB(top_db=80)`` measures the 80 dB range from the
    maximum of the whole *batch*; here it is per clip, so a clip's features do not depend on
    what it is batched with.
    """

    def __init__(self, sample_rate: int = 16000) -> None:
        super().__init__()
        import librosa

        self.sample_rate = sample_rate
        # torchaudio.transforms.MelSpectrogram's defaults: HTK mel scale, unnormalised triangles.
        basis = librosa.filters.mel(
            sr=sample_rate, n_fft=1024, n_mels=64, fmin=60.0, fmax=7800.0, htk=True, norm=None
        )
        self.register_buffer("mel_basis", torch.from_numpy(basis).float(), persistent=False)
        self.register_buffer("window", torch.hann_window(1024), persistent=False)

    @torch.no_grad()
    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        """wav (B, S) at 16 kHz → scaled log-mel (B, 1, 64, S // 160 + 1)."""
        stft = torch.stft(
            wav.float(),
            1024,
            hop_length=160,
            window=self.window,
            center=True,
            pad_mode="reflect",
            return_complex=True,
        )
        spec = self.mel_basis @ stft.abs().pow(2)  # (B, 64, T)
        db = 10.0 * torch.log10(spec.clamp(min=1e-10))
        db = torch.maximum(db, db.amax(dim=(1, 2), keepdim=True) - 80.0).clamp(-50.0, 80.0)
        return ((db - _DB_MIN) / (_DB_MAX - _DB_MIN) * 2.0 - 1.0).unsqueeze(1)
