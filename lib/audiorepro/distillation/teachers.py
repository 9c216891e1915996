"""Teacher embeddings: each stage-1 model embeds every training audio and caption once.

Paper (b) §3 estimates the correspondence of every training audio a_i and caption c_j as the
ensemble's mean cosine similarity Ĉ_ij = (1/M) Σ_m C^m_ij. Like salsa (``cmd_generate_embeddings``,
``shared/reference/retrieval.md`` §4), we never store the N × N matrix: each teacher m stores its
projected embeddings, one row per audio id and one per distinct caption text, O(N·D) memory, and
any block of Ĉ is a matrix product of rows (:mod:`audiorepro.distillation.targets`,
:mod:`audiorepro.distillation.analysis`).

File format (one teacher): ``<path>.safetensors`` with ``audio`` (N_a, D) and ``caption``
(N_c, D), and ``<path>.json`` with the audio ids and caption texts in row order and the metadata
(teacher name, projection size D, caption preprocessing, dtype). Both are written to temporary
files, fsync-ed and renamed into place, the JSON last (it is what :meth:`TeacherEmbeddings.load`
opens first), so a reader never sees a half-written store. Captions are keyed by their raw text
as the dataset holds it, as salsa; the text preprocessing the teacher's text encoder applied is
recorded so that a student run with a different one is refused (:meth:`TeacherEnsemble.check`).
Duplicate caption texts (ClothoV2 development has 17) embed identically and are stored once.

:class:`TeacherEnsemble` joins M teacher files into one lookup: each teacher's rows are
L2-normalised and scaled by 1/√M and the M blocks concatenated, so that for fused rows
``A`` (N_a, M·D) and ``T`` (N_c, M·D), ``A @ T.T`` is exactly Ĉ.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors import safe_open

from audiorepro.storage import atomic_write, save_tensors, write_json

__all__ = [
    "FORMAT_VERSION",
    "TeacherEmbeddings",
    "TeacherEmbeddingsError",
    "TeacherEnsemble",
    "compute_teacher_embeddings",
]

FORMAT_VERSION = 1
_MAX_LISTED = 10


class TeacherEmbeddingsError(ValueError):
    """Teacher embeddings that do not fit the training run (missing items, wrong size, different
    caption preprocessing) or a store file that is missing or corrupt."""


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(repr(item) for item in items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return shown + (f", ... and {more} more" if more > 0 else "")


def _paths(path: str | PathLike) -> tuple[Path, Path]:
    """``(x.safetensors, x.json)`` for ``x``, ``x.safetensors`` or ``x.json``."""
    path = Path(path)
    if path.suffix in (".safetensors", ".json"):
        path = path.with_suffix("")
    return path.with_name(path.name + ".safetensors"), path.with_name(path.name + ".json")


@dataclass
class TeacherEmbeddings:
    """One stage-1 model's embeddings of the training set, keyed by audio id and caption text.

    Attributes:
        audio_ids: N_a distinct audio ids (e.g. Clotho file names), row order of ``audio``.
        captions: N_c distinct caption texts (raw, as the dataset holds them), row order of
            ``caption``.
        audio: (N_a, D) projected audio embeddings (not normalised; cosine similarity
            normalises).
        caption: (N_c, D) projected caption embeddings.
        metadata: ``teacher`` (name), ``caption_preprocessing`` (e.g. ``"lower,strip_punct"``),
            and anything else JSON-serialisable (checkpoint, seed, corpus).
    """

    audio_ids: list[str]
    captions: list[str]
    audio: torch.Tensor
    caption: torch.Tensor
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.audio_ids = [str(a) for a in self.audio_ids]
        self.captions = [str(c) for c in self.captions]
        if self.audio.ndim != 2 or self.caption.ndim != 2:
            raise TeacherEmbeddingsError(
                f"embeddings must be 2-D (N, D): audio {tuple(self.audio.shape)}, caption "
                f"{tuple(self.caption.shape)}"
            )
        if self.audio.shape[1] != self.caption.shape[1]:
            raise TeacherEmbeddingsError(
                f"teacher {self.name!r}: audio projection size {self.audio.shape[1]} differs from "
                f"caption projection size {self.caption.shape[1]}"
            )
        for what, keys, rows in (
            ("audio ids", self.audio_ids, self.audio),
            ("captions", self.captions, self.caption),
        ):
            if len(keys) != rows.shape[0]:
                raise TeacherEmbeddingsError(
                    f"teacher {self.name!r}: {len(keys)} {what} for {rows.shape[0]} embedding rows"
                )
            if len(set(keys)) != len(keys):
                seen: set[str] = set()
                dupes = [k for k in keys if k in seen or seen.add(k)]
                raise TeacherEmbeddingsError(
                    f"teacher {self.name!r}: duplicate {what}: {_listed(dupes)}"
                )
            bad = _nonfinite_keys(rows, keys)
            if bad:
                raise TeacherEmbeddingsError(
                    f"teacher {self.name!r}: NaN or infinite embedding rows for {what} "
                    f"{_listed(bad)}; a store with them would poison every target"
                )
        self.metadata = dict(self.metadata)
        self.metadata.setdefault("caption_preprocessing", "none")

    @property
    def name(self) -> str:
        """The teacher's name from the metadata (``"?"`` when not given)."""
        return str(self.metadata.get("teacher", "?")) if hasattr(self, "metadata") else "?"

    @property
    def dim(self) -> int:
        """Projection size D."""
        return int(self.audio.shape[1])

    def save(self, path: str | PathLike, dtype: torch.dtype = torch.float32) -> Path:
        """Write ``<path>.safetensors`` and ``<path>.json`` atomically (see the module docstring).

        Args:
            dtype: storage precision, float32 or float16 (half the size; cosine similarities
                change by about 1e-3).

        Returns:
            The JSON path.
        """
        if dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TeacherEmbeddingsError(f"unsupported storage dtype {dtype}")
        tensors_path, json_path = _paths(path)
        tensors = {
            "audio": self.audio.detach().to("cpu", dtype).contiguous(),
            "caption": self.caption.detach().to("cpu", dtype).contiguous(),
        }
        header = {
            "format_version": FORMAT_VERSION,
            "dim": self.dim,
            "dtype": str(dtype).removeprefix("torch."),
            "num_audios": len(self.audio_ids),
            "num_captions": len(self.captions),
            "metadata": self.metadata,
            "audio_ids": self.audio_ids,
            "captions": self.captions,
        }
        atomic_write(tensors_path, lambda tmp: save_tensors(tensors, tmp))
        atomic_write(json_path, lambda tmp: write_json(tmp, header))
        return json_path

    @classmethod
    def load(cls, path: str | PathLike, dtype: torch.dtype | None = None) -> TeacherEmbeddings:
        """Read a store written by :meth:`save` (no pickle).

        Args:
            dtype: convert the embeddings to this dtype (None: as stored).

        Raises:
            TeacherEmbeddingsError: missing files, corrupt JSON, or JSON and tensors that
                disagree (row counts, D), naming the file.
        """
        source = _Source.from_file(path)
        audio, caption = source.tensors()
        if dtype is not None:
            audio, caption = audio.to(dtype), caption.to(dtype)
        return cls(source.audio_ids, source.captions, audio, caption, source.metadata)


@dataclass
class _Source:
    """A teacher's keys and metadata, with its tensors read only when :meth:`tensors` is called
    (so that an ensemble of large stores holds one teacher's tensors at a time)."""

    audio_ids: list[str]
    captions: list[str]
    dim: int
    metadata: dict[str, Any]
    tensors: Callable[[], tuple[torch.Tensor, torch.Tensor]]

    @property
    def name(self) -> str:
        return str(self.metadata.get("teacher", "?"))

    @classmethod
    def from_teacher(cls, teacher: TeacherEmbeddings) -> _Source:
        return cls(
            teacher.audio_ids,
            teacher.captions,
            teacher.dim,
            teacher.metadata,
            lambda: (teacher.audio, teacher.caption),
        )

    @classmethod
    def from_file(cls, path: str | PathLike) -> _Source:
        tensors_path, json_path = _paths(path)
        if not json_path.is_file():
            raise TeacherEmbeddingsError(f"teacher embeddings {json_path} do not exist")
        try:
            header = json.loads(json_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise TeacherEmbeddingsError(f"{json_path}: not valid JSON ({err})") from err
        required = ("format_version", "dim", "metadata", "audio_ids", "captions")
        missing = [k for k in required if k not in header]
        if missing:
            raise TeacherEmbeddingsError(f"{json_path}: missing field(s) {missing}")
        if header["format_version"] != FORMAT_VERSION:
            raise TeacherEmbeddingsError(
                f"{json_path}: format version {header['format_version']}, expected "
                f"{FORMAT_VERSION}"
            )
        if not tensors_path.is_file():
            raise TeacherEmbeddingsError(
                f"{tensors_path} is missing (its JSON {json_path} exists)"
            )
        metadata = dict(header["metadata"])
        metadata["source"] = str(json_path)
        metadata.setdefault("caption_preprocessing", "none")

        def read() -> tuple[torch.Tensor, torch.Tensor]:
            try:
                with safe_open(str(tensors_path), framework="pt", device="cpu") as handle:
                    audio, caption = handle.get_tensor("audio"), handle.get_tensor("caption")
            except Exception as err:
                raise TeacherEmbeddingsError(f"{tensors_path}: not readable ({err})") from err
            for what, rows, count in (
                ("audio", audio, len(header["audio_ids"])),
                ("caption", caption, len(header["captions"])),
            ):
                if rows.ndim != 2 or rows.shape[0] != count or rows.shape[1] != header["dim"]:
                    raise TeacherEmbeddingsError(
                        f"{tensors_path}: '{what}' has shape {tuple(rows.shape)}, the JSON says "
                        f"({count}, {header['dim']})"
                    )
            for what, rows, keys in (
                ("audio ids", audio, header["audio_ids"]),
                ("captions", caption, header["captions"]),
            ):
                bad = _nonfinite_keys(rows, keys)
                if bad:
                    raise TeacherEmbeddingsError(
                        f"{tensors_path}: NaN or infinite embedding rows for {what} {_listed(bad)}"
                    )
            return audio, caption

        ids = [str(a) for a in header["audio_ids"]]
        return cls(ids, [str(c) for c in header["captions"]], int(header["dim"]), metadata, read)


@torch.no_grad()
def compute_teacher_embeddings(
    embed_audio: Callable[[list[str]], torch.Tensor],
    embed_captions: Callable[[list[str]], torch.Tensor],
    audio_ids: Iterable[str],
    captions: Iterable[str],
    batch_size: int = 64,
    metadata: Mapping[str, Any] | None = None,
) -> TeacherEmbeddings:
    """Embed every distinct training audio and caption once with one stage-1 model.

    Args:
        embed_audio: audio ids → (n, D) projected embeddings (the model in eval mode, its own
            front end and snippet averaging inside).
        embed_captions: caption texts (raw; the callable applies the text preprocessing) →
            (n, D) projected embeddings.
        audio_ids: training audio ids (repeats allowed: one per training pair).
        captions: training caption texts (repeats allowed).
        batch_size: items per call.
        metadata: ``teacher`` and ``caption_preprocessing`` at least (stored with the file).

    Returns:
        The store, rows in first-seen order, float32 on the CPU.
    """
    unique_audio = list(dict.fromkeys(str(a) for a in audio_ids))
    unique_captions = list(dict.fromkeys(str(c) for c in captions))

    def run(fn: Callable[[list[str]], torch.Tensor], keys: list[str], what: str) -> torch.Tensor:
        parts = []
        for start in range(0, len(keys), batch_size):
            chunk = keys[start : start + batch_size]
            emb = torch.as_tensor(fn(chunk))
            if emb.ndim != 2 or emb.shape[0] != len(chunk):
                raise TeacherEmbeddingsError(
                    f"{what} embedding function returned shape {tuple(emb.shape)} for "
                    f"{len(chunk)} items; expected ({len(chunk)}, D)"
                )
            parts.append(emb.detach().float().cpu())
        return torch.cat(parts) if parts else torch.zeros(0, 0)

    audio = run(embed_audio, unique_audio, "audio")
    caption = run(embed_captions, unique_captions, "caption")
    return TeacherEmbeddings(unique_audio, unique_captions, audio, caption, dict(metadata or {}))


class TeacherEnsemble:
    """M teachers joined into one lookup whose fused rows give Ĉ by a single matrix product.

    Row ``i`` of :attr:`audio` is ``[â^1_i, …, â^M_i] / √M`` with â^m the L2-normalised
    embedding of teacher m, and likewise for :attr:`caption`, so
    ``audio[i] @ caption[j] = (1/M) Σ_m cos(a^m_i, c^m_j) = Ĉ_ij`` (paper (b) §3). Memory:
    (N_a + N_c) · M · D numbers (``dtype``), never N_a × N_c.

    Args:
        teachers: the M stores; they must share the projection size and the caption
            preprocessing, and cover the same audio ids and captions (their rows may come in
            any order).
        dtype: dtype of the fused rows (float32; float16 halves the memory of a large analysis).

    Raises:
        TeacherEmbeddingsError: no teachers, different projection sizes, different caption
            preprocessing, or items one teacher has and another lacks — naming the files.
    """

    def __init__(
        self,
        teachers: Sequence[TeacherEmbeddings | str | PathLike],
        dtype: torch.dtype = torch.float32,
    ):
        if not teachers:
            raise TeacherEmbeddingsError("an ensemble needs at least one teacher")
        teachers = [
            _Source.from_teacher(t) if isinstance(t, TeacherEmbeddings) else _Source.from_file(t)
            for t in teachers
        ]
        first = teachers[0]
        for other in teachers[1:]:
            if other.dim != first.dim:
                raise TeacherEmbeddingsError(
                    f"teacher {_where(other)} has projection size {other.dim}, teacher "
                    f"{_where(first)} has {first.dim}: all teachers must share one size"
                )
            _check_preprocessing(other, first.metadata["caption_preprocessing"], _where(first))
            for what, mine, theirs in (
                ("audio ids", other.audio_ids, first.audio_ids),
                ("captions", other.captions, first.captions),
            ):
                if mine != theirs and set(mine) != set(theirs):
                    lacking = [k for k in theirs if k not in set(mine)]
                    extra = [k for k in mine if k not in set(theirs)]
                    raise TeacherEmbeddingsError(
                        f"teachers {_where(first)} and {_where(other)} cover different {what}: "
                        f"{len(lacking)} missing from the second ({_listed(lacking)}), "
                        f"{len(extra)} only in the second ({_listed(extra)})"
                    )
        # Only the metadata is kept: the fused rows replace the teachers' own tensors.
        self.metadata = [dict(t.metadata) for t in teachers]
        self.names = [t.name for t in teachers]
        self.dim = first.dim
        self.caption_preprocessing = str(first.metadata["caption_preprocessing"])
        self.audio_ids = list(first.audio_ids)
        self.captions = list(first.captions)
        self.audio_index = {key: i for i, key in enumerate(self.audio_ids)}
        self.caption_index = {key: i for i, key in enumerate(self.captions)}
        scale = 1.0 / math.sqrt(len(teachers))
        width = self.dim * len(teachers)
        self.audio = torch.empty(len(self.audio_ids), width, dtype=dtype)  # (N_a, M·D)
        self.caption = torch.empty(len(self.captions), width, dtype=dtype)  # (N_c, M·D)
        for m, teacher in enumerate(teachers):
            audio, caption = teacher.tensors()  # one teacher's tensors in memory at a time
            columns = slice(m * self.dim, (m + 1) * self.dim)
            self._fill(self.audio, columns, audio, teacher.audio_ids, self.audio_ids, scale)
            self._fill(self.caption, columns, caption, teacher.captions, self.captions, scale)
            del audio, caption

    @staticmethod
    def _fill(
        fused: torch.Tensor,
        columns: slice,
        rows: torch.Tensor,
        keys: list[str],
        order: list[str],
        scale: float,
    ) -> None:
        if keys != order:
            position = {k: i for i, k in enumerate(keys)}
            rows = rows[torch.tensor([position[k] for k in order], dtype=torch.long)]
        # In chunks, so that a float16 store is never converted to float32 all at once.
        for start in range(0, len(order), 8192):
            chunk = F.normalize(rows[start : start + 8192].float(), dim=1)
            fused[start : start + 8192, columns] = chunk * scale

    @classmethod
    def load(
        cls, paths: Sequence[str | PathLike], dtype: torch.dtype = torch.float32
    ) -> TeacherEnsemble:
        """Join the teacher files at ``paths``, reading one teacher's tensors at a time (see
        :meth:`TeacherEmbeddings.load` for the format)."""
        return cls(list(paths), dtype=dtype)

    @property
    def num_teachers(self) -> int:
        """M."""
        return len(self.metadata)

    def check(
        self,
        audio_ids: Iterable[str] | None = None,
        captions: Iterable[str] | None = None,
        caption_preprocessing: str | None = None,
        dim: int | None = None,
    ) -> None:
        """Refuse a training run the teachers do not fit.

        Args:
            audio_ids: the training audio ids; every one must have teacher embeddings.
            captions: the training caption texts; likewise.
            caption_preprocessing: the student's caption preprocessing; must equal the
                teachers'.
            dim: the expected projection size.

        Raises:
            TeacherEmbeddingsError: naming the teacher file and what differs (for missing items,
                their count and the first few).
        """
        where = _where_meta(self.metadata[0])
        if dim is not None and dim != self.dim:
            raise TeacherEmbeddingsError(
                f"teacher embeddings {where} have projection size {self.dim}, expected {dim}"
            )
        if caption_preprocessing is not None:
            for meta in self.metadata:
                _check_preprocessing_meta(meta, caption_preprocessing, "this training run")
        for what, keys, index in (
            ("audio ids", audio_ids, self.audio_index),
            ("captions", captions, self.caption_index),
        ):
            if keys is None:
                continue
            missing = list(dict.fromkeys(k for k in map(str, keys) if k not in index))
            if missing:
                raise TeacherEmbeddingsError(
                    f"teacher embeddings {where} lack {len(missing)} training {what}: "
                    f"{_listed(missing)}"
                )

    def audio_rows(self, audio_ids: Sequence[str]) -> torch.Tensor:
        """(B,) row indices of ``audio_ids``; a missing id raises, listing all missing ones."""
        return self._rows(audio_ids, self.audio_index, "audio ids")

    def caption_rows(self, captions: Sequence[str]) -> torch.Tensor:
        """(B,) row indices of ``captions``; a missing caption raises, listing all missing ones."""
        return self._rows(captions, self.caption_index, "captions")

    def _rows(self, keys: Sequence[str], index: Mapping[str, int], what: str) -> torch.Tensor:
        try:
            return torch.tensor([index[str(k)] for k in keys], dtype=torch.long)
        except KeyError:
            missing = list(dict.fromkeys(str(k) for k in keys if str(k) not in index))
            raise TeacherEmbeddingsError(
                f"teacher embeddings {_where_meta(self.metadata[0])} lack {len(missing)} of the "
                f"batch's {what}: {_listed(missing)}"
            ) from None

    def similarity(self, audio_rows: torch.Tensor, caption_rows: torch.Tensor) -> torch.Tensor:
        """Ĉ for the given rows: (len(audio_rows), len(caption_rows)) float32 mean cosine.

        Each distinct row is multiplied once and the result indexed, so a repeated audio (five
        captions of one clip in a batch) gets bitwise-equal rows whatever the BLAS kernel's
        blocking does with the rows of a product."""
        audio, audio_inverse = torch.unique(audio_rows, return_inverse=True)
        caption, caption_inverse = torch.unique(caption_rows, return_inverse=True)
        block = self.audio[audio].float() @ self.caption[caption].float().T
        return block[audio_inverse][:, caption_inverse]

    def similarity_of(self, audio_ids: Sequence[str], captions: Sequence[str]) -> torch.Tensor:
        """Ĉ (len(audio_ids), len(captions)) for audio ids and caption texts, e.g. a heatmap of
        a few clips against all their captions (:func:`audiorepro.plotting.similarity_heatmap`)."""
        return self.similarity(self.audio_rows(audio_ids), self.caption_rows(captions))


def _where_meta(metadata: Mapping[str, Any]) -> str:
    name, source = str(metadata.get("teacher", "?")), metadata.get("source")
    return f"{name!r} ({source})" if source else repr(name)


def _nonfinite_keys(rows: torch.Tensor, keys: Sequence[str]) -> list[str]:
    """The keys of the rows of ``rows`` (N, D) that hold a NaN or an infinity."""
    bad = (~torch.isfinite(rows.float())).any(dim=1)
    return [str(keys[i]) for i in bad.nonzero().flatten().tolist()]


def _where(teacher: TeacherEmbeddings | _Source) -> str:
    return _where_meta(teacher.metadata)


def _check_preprocessing_meta(metadata: Mapping[str, Any], expected: str, against: str) -> None:
    mine = str(metadata.get("caption_preprocessing"))
    if mine != str(expected):
        raise TeacherEmbeddingsError(
            f"teacher {_where_meta(metadata)} embedded captions with preprocessing {mine!r}, "
            f"but {against} uses {str(expected)!r}: the teachers embedded other text than the student sees"
        )


def _check_preprocessing(
    teacher: TeacherEmbeddings | _Source, expected: str, against: str
) -> None:
    _check_preprocessing_meta(teacher.metadata, expected, against)
