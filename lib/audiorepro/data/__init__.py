"""Corpora as manifests: lhotse-compatible recordings and supervisions, and corpus sources.

- :mod:`audiorepro.data.manifests`: :class:`Recording`, :class:`Supervision`, JSONL(.gz)
  reading and atomic writing, :func:`validate`, and :func:`check_manifest_dir` (every check on
  a directory of manifests and its audio).
- :mod:`audiorepro.data.problems`: :class:`Problem`, one finding of a check (``path:line:
  field: message``).
- :mod:`audiorepro.data.sources`: a real corpus's ``sources.yaml`` (:class:`CorpusSources`),
  :func:`checksum` and :func:`verify_downloads`.

``python -m audiorepro.data check <manifest dir> --root <audio dir>`` runs the checks from the
command line (see ``data_manifests/README.md``).
"""

from audiorepro.data.manifests import (
    AlignmentItem,
    AudioSource,
    ManifestError,
    Recording,
    Supervision,
    check_audio,
    check_manifest_dir,
    find_manifests,
    read_manifest,
    read_recordings,
    read_supervisions,
    validate,
    write_manifest,
)
from audiorepro.data.problems import Problem
from audiorepro.data.sources import (
    CorpusSources,
    SourceFile,
    SourcesError,
    SplitCounts,
    checksum,
    corpus_sources,
    load_sources,
    verify_downloads,
)

__all__ = [
    "AlignmentItem",
    "AudioSource",
    "CorpusSources",
    "ManifestError",
    "Problem",
    "Recording",
    "SourceFile",
    "SourcesError",
    "SplitCounts",
    "Supervision",
    "check_audio",
    "check_manifest_dir",
    "checksum",
    "corpus_sources",
    "find_manifests",
    "load_sources",
    "read_manifest",
    "read_recordings",
    "read_supervisions",
    "validate",
    "verify_downloads",
    "write_manifest",
]
