"""Text-to-audio search over a folder of audio files with a trained dual encoder.

:class:`AudioIndex` embeds every audio file of a folder once (PaSST log-mel, the dual
encoder's audio tower, the first ``max_frames`` of each file as in evaluation), saves the
embeddings to a ``.pt`` file, and answers free-text queries with the top-k files and their
cosine similarities::

    index = AudioIndex.build(model, "my_sounds/", max_frames=3000)
    index.save("my_sounds.index.pt")
    index = AudioIndex.load("my_sounds.index.pt", model)
    index.search("a dog barks in the distance", k=5)   # [(path, score), ...]
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from audiorepro.features.audio import load_audio
from audiorepro.features.passt_mel import PasstMel
from audiorepro.models.dual_encoder import SILENCE_LOG_MEL, DualEncoder

AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg")
SAMPLE_RATE = 32_000


class SearchIndexError(ValueError):
    """An index that cannot be built or used (empty folder, too-short audio, wrong file)."""


@dataclass
class AudioIndex:
    """Embeddings of a fixed set of audio files, searchable by caption.

    Attributes:
        model: the trained dual encoder (its text tower embeds queries).
        paths: the indexed files, in index order.
        emb: (N, D) L2-normalised audio embeddings.
    """

    model: DualEncoder
    paths: list[str]
    emb: torch.Tensor

    @classmethod
    @torch.no_grad()
    def build(
        cls,
        model: DualEncoder,
        folder: str | os.PathLike[str],
        *,
        max_frames: int | None = None,
        batch_size: int = 16,
    ) -> AudioIndex:
        """Embed every audio file under ``folder`` (recursively, sorted by path).

        Raises:
            SearchIndexError: no audio files, or a file shorter than one 16-frame patch.
        """
        folder = Path(folder)
        paths = sorted(str(p) for p in folder.rglob("*") if p.suffix.lower() in AUDIO_EXTENSIONS)
        if not paths:
            raise SearchIndexError(f"{folder}: no audio files ({', '.join(AUDIO_EXTENSIONS)})")
        mel = PasstMel().eval()
        model.eval()
        device = next(model.parameters()).device
        chunks = []
        for start in range(0, len(paths), batch_size):
            clips = []
            for path in paths[start : start + batch_size]:
                wav, _ = load_audio(path, sr=SAMPLE_RATE)
                if wav.size <= mel.n_fft // 2 + 16 * 320:
                    raise SearchIndexError(f"{path}: {wav.size} samples is shorter than one patch")
                x = mel(torch.from_numpy(np.ascontiguousarray(wav, np.float32))[None])[0].T
                clips.append(x[:max_frames])  # (T, F)
            lengths = torch.tensor([c.shape[0] for c in clips])
            feats = torch.full((len(clips), int(lengths.max()), 128), SILENCE_LOG_MEL)
            for j, c in enumerate(clips):
                feats[j, : c.shape[0]] = c
            chunks.append(model.encode_audio(feats.to(device), lengths.to(device)).cpu())
        emb = torch.nn.functional.normalize(torch.cat(chunks).float(), dim=-1)
        return cls(model, paths, emb)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the file list and embeddings (not the model) to ``path``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"paths": self.paths, "emb": self.emb}, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], model: DualEncoder) -> AudioIndex:
        """An index saved with :meth:`save`, searched with ``model``.

        Raises:
            SearchIndexError: the file is not an index or its size does not fit the model.
        """
        data = torch.load(path)
        if not isinstance(data, dict) or set(data) != {"paths", "emb"}:
            raise SearchIndexError(f"{path}: not an AudioIndex file (keys paths, emb)")
        dim = model.text_projection.out_features
        if data["emb"].shape[-1] != dim:
            raise SearchIndexError(
                f"{path}: embeddings of size {data['emb'].shape[-1]}, the model gives {dim}"
            )
        return cls(model, list(data["paths"]), data["emb"])

    @torch.no_grad()
    def search(self, query: str, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` files most similar to ``query``: ``[(path, cosine similarity), ...]``."""
        self.model.eval()
        text = torch.nn.functional.normalize(self.model.encode_text([query]).float().cpu(), dim=-1)
        scores = (self.emb @ text[0]).numpy()  # (N,)
        # stable sort: on equal scores the lower index comes first
        order = np.argsort(-scores, kind="stable")[:k]
        return [(self.paths[i], float(scores[i])) for i in order]
