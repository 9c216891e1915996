"""Where a real corpus comes from and what it must contain: ``<corpus>/sources.yaml``.

One YAML file per corpus names its licence and citation, the files to download with their
checksums, and the number of recordings and supervisions each split must have, so that corpus
preparation can assert it got the whole corpus (the practice of d2l's ``DATA_HUB`` and of lhotse
recipes). Every key is required except a file's ``size_bytes``; unknown keys are an error::

    name: example_corpus
    description: Audio clips with five captions each.
    homepage: https://example.org/corpus
    licence: "Audio: CC-BY 4.0; captions: CC0"
    citation: |
      @misc{example2024, title = {An Example Corpus}, year = {2024}}
    sampling_rate: 44100            # Hz; null when the corpus mixes sampling rates
    files:
      - url: https://example.org/corpus/audio_development.zip
        filename: audio_development.zip        # relative to the download root
        md5: d41d8cd98f00b204e9800998ecf8427e  # or sha256 (or both)
        size_bytes: 0                          # optional
    expected_counts:
      development: {recordings: 3839, supervisions: 19195}

:func:`load_sources` reads and checks it, :func:`checksum` hashes a file in chunks, and
:func:`verify_downloads` checks the downloaded files.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from audiorepro.config import ConfigError
from audiorepro.data.problems import Problem
from audiorepro.paths import repo_root

CHECKSUM_ALGOS = ("md5", "sha256")
_HEX_LENGTH = {"md5": 32, "sha256": 64}


class SourcesError(ConfigError):
    """A malformed ``sources.yaml``: the file, the 1-based line (when known), the key and why."""

    def __init__(self, path: str, line: int | None, key: str, message: str) -> None:
        super().__init__(path, line, key, message)
        self.path = path
        self.line = line
        self.key = key
        self.message = message

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


@dataclasses.dataclass(frozen=True)
class SourceFile:
    """One file to download.

    Attributes:
        url: where to download it from.
        filename: where it lands, relative to the download root (POSIX path, no ``..``).
        md5: expected MD5 hex digest, or ``None``.
        sha256: expected SHA-256 hex digest, or ``None``; at least one digest is given.
        size_bytes: expected size, or ``None``.
    """

    url: str
    filename: str
    md5: str | None = None
    sha256: str | None = None
    size_bytes: int | None = None

    @property
    def digests(self) -> dict[str, str]:
        """``{algorithm: expected hex digest}`` for the digests given."""
        return {a: getattr(self, a) for a in CHECKSUM_ALGOS if getattr(self, a) is not None}


@dataclasses.dataclass(frozen=True)
class SplitCounts:
    """How many recordings and supervisions a split's manifests must have."""

    recordings: int
    supervisions: int


@dataclasses.dataclass(frozen=True)
class CorpusSources:
    """A corpus's ``sources.yaml``: provenance, downloads and expected counts.

    Attributes:
        name: corpus name (the ``data_manifests/`` folder name).
        description: one or two sentences on what the corpus is.
        homepage: URL of the corpus page.
        licence: the licence terms of audio and annotations.
        citation: BibTeX entry (or entries) to cite.
        files: the files to download, with checksums.
        expected_counts: ``{split: SplitCounts}``; splits are named as the manifest files are
            (``<split>_recordings.jsonl.gz``).
        sampling_rate: the corpus sampling rate in Hz, or ``None`` when it varies per file.
        path: the file this was loaded from (not compared).
        key_lines: ``{dotted key: 1-based line}``, e.g. ``"files[0].md5"``, for messages.
    """

    name: str
    description: str
    homepage: str
    licence: str
    citation: str
    files: tuple[SourceFile, ...]
    expected_counts: dict[str, SplitCounts]
    sampling_rate: int | None
    path: str | None = dataclasses.field(default=None, compare=False)
    key_lines: dict[str, int] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def where(self, key: str) -> tuple[str, int | None]:
        """``(path, line)`` of a dotted key, falling back to its nearest parent key's line."""
        return self.path or "<sources>", _line_of(self.key_lines, key)


def _line_of(lines: Mapping[str, int], key: str) -> int | None:
    """The line of ``key`` (``"files[0].md5"``), else of its nearest parent that has one."""
    while key:
        if key in lines:
            return lines[key]
        # Drop the last ".name" or "[i]" component: "files[0].md5" -> "files[0]" -> "files".
        parent = re.sub(r"(\.[^.\[]*|\[\d+\])$", "", key)
        key = parent if parent != key else ""
    return None


_TOP_KEYS = (
    "name",
    "description",
    "homepage",
    "licence",
    "citation",
    "sampling_rate",
    "files",
    "expected_counts",
)
_FILE_KEYS = ("url", "filename", "md5", "sha256", "size_bytes")
_COUNT_KEYS = ("recordings", "supervisions")


def _key_lines(node: yaml.Node, prefix: str, out: dict[str, int], path: str) -> None:
    """Record the line of every key under ``node``; duplicate mapping keys are an error."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            dotted = f"{prefix}.{key}" if prefix else key
            if key in seen:
                raise SourcesError(
                    path,
                    key_node.start_mark.line + 1,
                    dotted,
                    "key given twice (YAML keeps only "
                    "the last value, so the first would be silently lost)",
                )
            seen.add(key)
            out[dotted] = key_node.start_mark.line + 1
            _key_lines(value_node, dotted, out, path)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[f"{prefix}[{i}]"] = item.start_mark.line + 1
            _key_lines(item, f"{prefix}[{i}]", out, path)


class _Reader:
    """Checks values of a parsed ``sources.yaml``, raising :class:`SourcesError` with lines."""

    def __init__(self, path: str, lines: dict[str, int]) -> None:
        self.path = path
        self.lines = lines

    def error(self, key: str, message: str) -> SourcesError:
        return SourcesError(self.path, _line_of(self.lines, key), key, message)

    def keys(
        self, data: Any, key: str, allowed: Sequence[str] | None, required: Sequence[str]
    ) -> Mapping[str, Any]:
        """Check that ``data`` is a mapping with the required keys and (unless ``allowed`` is
        ``None``) no others."""
        if not isinstance(data, dict):
            raise self.error(key, f"expected a mapping, got {type(data).__name__} {data!r}")
        for name in data:
            if allowed is not None and name not in allowed:
                close = difflib.get_close_matches(str(name), allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise self.error(
                    f"{key}.{name}" if key else str(name),
                    f"unknown key{hint}; valid keys: {', '.join(allowed)}",
                )
        for name in required:
            if name not in data:
                raise self.error(key or name, f"missing required key {name!r}")
        return data

    def text(self, value: Any, key: str, pattern: str | None = None, what: str = "") -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"expected a non-empty string, got {value!r}")
        if pattern is not None and not re.match(pattern, value.strip()):
            raise self.error(key, f"expected {what}, got {value!r}")
        return value

    def count(self, value: Any, key: str, minimum: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.error(key, f"expected an integer >= {minimum}, got {value!r}")
        return value


def load_sources(path: str | os.PathLike[str]) -> CorpusSources:
    """Read and check a ``sources.yaml``; raises :class:`SourcesError` naming file:line and key."""
    path = Path(path)
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SourcesError(name, None, "", f"cannot read the sources file: {err}") from err
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise SourcesError(name, line, "", f"not valid YAML: {err}") from err
    lines: dict[str, int] = {}
    if node is not None:
        _key_lines(node, "", lines, name)
    r = _Reader(name, lines)
    data = r.keys(data, "", _TOP_KEYS, _TOP_KEYS)

    url = r"(https?|ftp)://\S+$"
    files = data["files"]
    if not isinstance(files, list):
        raise r.error("files", f"expected a list of files (may be empty), got {files!r}")
    parsed_files = []
    filenames: dict[str, str] = {}
    for i, entry in enumerate(files):
        key = f"files[{i}]"
        entry = r.keys(entry, key, _FILE_KEYS, ("url", "filename"))
        filename = r.text(entry["filename"], f"{key}.filename")
        posix = PurePosixPath(filename)
        if posix.is_absolute() or ".." in posix.parts or "\\" in filename:
            raise r.error(
                f"{key}.filename",
                f"expected a relative POSIX path inside the download root, got {filename!r}",
            )
        if filename in filenames:
            raise r.error(f"{key}.filename", f"{filename!r} is also {filenames[filename]}")
        filenames[filename] = key
        digests = {}
        for algo in CHECKSUM_ALGOS:
            if entry.get(algo) is not None:
                digests[algo] = r.text(
                    entry[algo],
                    f"{key}.{algo}",
                    rf"[0-9a-fA-F]{{{_HEX_LENGTH[algo]}}}$",
                    f"{_HEX_LENGTH[algo]} hex digits",
                ).lower()
        if not digests:
            raise r.error(key, "expected a checksum: md5 or sha256 (or both)")
        size = entry.get("size_bytes")
        parsed_files.append(
            SourceFile(
                url=r.text(entry["url"], f"{key}.url", url, "an http(s) or ftp URL"),
                filename=filename,
                size_bytes=None if size is None else r.count(size, f"{key}.size_bytes", 0),
                **digests,
            )
        )

    counts = r.keys(data["expected_counts"], "expected_counts", None, ())
    if not counts:
        raise r.error(
            "expected_counts",
            "expected at least one split: {split: {recordings: N, supervisions: M}}",
        )
    expected = {}
    for split, value in counts.items():
        key = f"expected_counts.{split}"
        value = r.keys(value, key, _COUNT_KEYS, _COUNT_KEYS)
        expected[str(split)] = SplitCounts(
            **{k: r.count(value[k], f"{key}.{k}", 0) for k in _COUNT_KEYS}
        )

    rate = data["sampling_rate"]
    return CorpusSources(
        name=r.text(data["name"], "name"),
        description=r.text(data["description"], "description"),
        homepage=r.text(data["homepage"], "homepage", url, "an http(s) or ftp URL"),
        licence=r.text(data["licence"], "licence"),
        citation=r.text(data["citation"], "citation", r"@\w+\s*\{", "a BibTeX entry (@type{...)"),
        files=tuple(parsed_files),
        expected_counts=expected,
        sampling_rate=None if rate is None else r.count(rate, "sampling_rate", 1),
        path=name,
        key_lines=lines,
    )


def corpus_sources(
    corpus: str, manifests_root: str | os.PathLike[str] | None = None
) -> CorpusSources:
    """Load ``<manifests_root>/<corpus>/sources.yaml``; the default root is the checkout's
    ``data_manifests/`` (:func:`audiorepro.paths.repo_root`)."""
    root = Path(manifests_root) if manifests_root is not None else repo_root() / "data_manifests"
    return load_sources(root / corpus / "sources.yaml")


def _digests(
    path: str | os.PathLike[str], algos: Sequence[str], chunk_size: int
) -> dict[str, str]:
    """Hex digests of a file for several algorithms, reading it once in chunks."""
    hashers = {}
    for algo in algos:
        try:
            hashers[algo] = hashlib.new(algo)
        except ValueError as err:
            raise ValueError(f"unknown checksum algorithm {algo!r}: {err}") from err
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            for hasher in hashers.values():
                hasher.update(chunk)
    return {algo: hasher.hexdigest() for algo, hasher in hashers.items()}


def checksum(
    path: str | os.PathLike[str], algo: str = "sha256", *, chunk_size: int = 1 << 20
) -> str:
    """Lowercase hex digest of a file, read in ``chunk_size`` chunks (constant memory).

    ``algo`` is any :mod:`hashlib` name; ``sources.yaml`` uses ``md5`` and ``sha256``.
    """
    return _digests(path, [algo], chunk_size)[algo]


def verify_downloads(
    sources: CorpusSources, root: str | os.PathLike[str], *, checksums: bool = True
) -> list[Problem]:
    """Check every file of ``sources.files`` under ``root``; every problem, none raised.

    Each file must exist and have the listed ``size_bytes`` (when given); with ``checksums``
    its digests (all that are given, computed in one pass) must match. Problems point at the
    file's entry in ``sources.yaml``.
    """
    problems = []
    for i, entry in enumerate(sources.files):
        key = f"files[{i}]"
        path, line = sources.where(key)
        target = Path(root) / entry.filename
        if not target.is_file():
            problems.append(
                Problem(
                    path,
                    line,
                    f"{key}.filename",
                    f"{target} not found (download it from {entry.url})",
                )
            )
            continue
        size = target.stat().st_size
        if entry.size_bytes is not None and size != entry.size_bytes:
            problems.append(
                Problem(
                    *sources.where(f"{key}.size_bytes"),
                    f"{key}.size_bytes",
                    f"expected {entry.size_bytes} bytes, {target} has {size}",
                )
            )
        if checksums:
            actual = _digests(target, list(entry.digests), 1 << 20)
            for algo, want in entry.digests.items():
                if actual[algo] != want:
                    problems.append(
                        Problem(
                            *sources.where(f"{key}.{algo}"),
                            f"{key}.{algo}",
                            f"expected {want}, {target} has {actual[algo]}",
                        )
                    )
    return problems


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (the BibTeX citation) as ``|`` literal blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def write_sources_yaml(path: Path, data: Mapping[str, Any]) -> None:
    """Write a ``sources.yaml`` mapping (keys in the given order, citation as a literal block)."""
    text = yaml.dump(
        dict(data), Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=99
    )
    path.write_text(text, encoding="utf-8")
