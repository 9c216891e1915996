"""Files that survive crashes and load without unpickling: the storage layer.

Everything the project writes to disk and reads back goes through these primitives, so that
``models/``, ``distillation/``, ``training/`` and the chapters share one way of doing it:

- :func:`write_json`, :func:`read_json`, :func:`save_tensors`, :func:`load_tensors`,
  :func:`fsync_file`, :func:`fsync_dir`, :func:`atomic_write`: single files, flushed to disk and
  published with one rename, so a reader sees the old file or the new one, never half of one.
- :class:`WriteError`, :func:`write_fault`, :func:`output_folder`: a write the disk refuses
  (full, over quota, read-only, failing) becomes one message naming the path, the space left
  and what was kept; a command's output folder appears whole or not at all, and an error about
  its temporary folder or file names the output instead (:func:`as_written_to`).
- :func:`take_lock`, :func:`release_lock`, :func:`lock_note`: an exclusive lock file
  (``flock``) that goes with its process, so one left by a killed process is taken over: a
  run's build (:meth:`RunStore.lock`) and a command's ``--out``
  (:func:`audiorepro.outputs.output_lock`) take it.
- :func:`load_npz`: every array of a NumPy ``.npz`` archive (feature caches, word features),
  read at once; a missing, truncated or corrupt archive is an :class:`ArrayFileError` naming the
  file and what was expected, never a bare ``zipfile``, ``zlib`` or ``EOFError``.
- :func:`save_model_weights`, :func:`load_model_weights`, :func:`check_state_dict`: model weights
  in safetensors (tied tensors stored once), validated key by key and shape by shape on load.
- :class:`RunStore`: one folder per finished run (a trained model, a feature cache, a teacher
  store), named by a hash of the run's resolved configuration. Every chapter keeps its runs
  there, under one root (:func:`audiorepro.paths.runs_dir`), in one layout::

      <runs root>/<chapter>/<kind>/<hash of the configuration>/
          run.json        the configuration and what the run recorded, written last
          ...             the run's files (model.safetensors, history.json, features.npz, ...)

  A run is complete when its ``run.json`` exists: it is built in a temporary sibling folder and
  published with one rename, so a run killed halfway leaves nothing a later page would trust.
  What lets an unfinished run resume (its training checkpoints) lives beside it in
  ``<kind>/.staging-<hash>/`` (:meth:`RunStore.staging`): kept when a build is killed, so the
  next call with the same configuration continues from the last checkpoint, and removed once
  the run is published. One process at a time builds a run: it holds an exclusive lock on
  ``<kind>/.lock-<hash>`` while it builds, and another process that wants the same run waits,
  then loads what the first one published (:meth:`RunStore.publish`).

This module sits below ``models/`` and ``training/`` and imports neither.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import shutil
import sys
import uuid
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from audiorepro.paths import free_space, runs_dir, runs_dir_origin

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: runs are built without a lock
    fcntl = None  # type: ignore[assignment]

ALIASES_KEY = "audiorepro_aliases"
_MAX_LISTED = 50
T = TypeVar("T")


class CheckpointError(RuntimeError):
    """A stored file is missing, unreadable, or does not fit what it is loaded into."""


# What a disk says when it cannot take a write: full, over quota, file too large, read-only,
# failing. A missing folder or a permission is the caller's error and keeps its own message.
WRITE_FAULTS = frozenset(
    code
    for code in (
        errno.ENOSPC,
        getattr(errno, "EDQUOT", None),
        errno.EFBIG,
        errno.EROFS,
        errno.EIO,
    )
    if code is not None
)


class WriteError(OSError):
    """A write the disk refused (:data:`WRITE_FAULTS`), said in one message: the path, why, the
    space left there, what was kept, and what to do. ``errno`` is the disk's."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def is_write_fault(err: BaseException) -> bool:
    """True for an ``OSError`` the disk raised (:data:`WRITE_FAULTS`), not yet explained."""
    return (
        isinstance(err, OSError) and not isinstance(err, WriteError) and err.errno in WRITE_FAULTS
    )


def write_fault(err: OSError, path: str | Path, kept: str, todo: str = "") -> WriteError:
    """The :class:`WriteError` for ``err`` raised while writing ``path``: ``kept`` says what is
    intact (a sentence), ``todo`` what to do besides freeing space."""
    reason = os.strerror(err.errno) if err.errno else str(err)
    where = f" ({err.filename})" if getattr(err, "filename", None) else ""
    todo = todo or "free some space there (or write somewhere else) and run again"
    return WriteError(
        err.errno or errno.EIO,
        f"{path}: could not write: {reason}{where}; {free_space(path)} on that disk. "
        f"{kept} To go on, {todo}.",
    )


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def fsync_file(path: Path) -> None:
    """Flush a written file's data to disk, so a later rename never publishes empty files."""
    with open(path, "r+b") as handle:
        os.fsync(handle.fileno())


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (POSIX); platforms without directory fds skip it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json(path: Path, obj: Any, *, indent: int | None = None) -> None:
    """Write ``obj`` as JSON (compact unless ``indent``; NaN/inf allowed) and fsync it."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(obj, handle, indent=indent, allow_nan=True)
        handle.flush()
        os.fsync(handle.fileno())


def read_run_info(folder: str | Path, name: str, kind: str, what: str, made_by: str) -> Any:
    """The JSON file ``name`` of a run folder that the command ``made_by`` wrote, checked to
    record ``"kind": kind``: a missing file says the folder is not ``what`` (``"a units run"``)
    and which command makes one; another kind is a ``ValueError`` naming the file."""
    folder = Path(folder)
    path = folder / name
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: not {what} (no {name}; see `{made_by}`)")
    info = read_json(path)
    found = info.get("kind") if isinstance(info, dict) else None
    if found != kind:
        wrote = RUN_KINDS.get(found) if isinstance(found, str) else None
        said = (
            f"a run of `{wrote}` (its {name} says kind {found!r})"
            if wrote is not None
            else f"not {what} (its {name} says kind {found!r})"
        )
        raise ValueError(f"{folder}: {said}; this command needs {what}, made by `{made_by}`")
    return info


RUN_KINDS = {"units": "units train", "awe": "awe train", "voice": "units voice"}
"""The command that writes a run folder of each ``kind`` (its ``run.json``), for the message
of :func:`read_run_info` given another kind of run."""


def read_json(path: Path) -> Any:
    """Read a JSON file; a missing or corrupt file is a ``CheckpointError`` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise CheckpointError(f"{path}: file missing from the checkpoint") from err
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}: not valid JSON ({err})") from err


def save_tensors(
    tensors: Mapping[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None
) -> None:
    """Write tensors to a safetensors file (CPU, contiguous, no shared memory) and fsync it."""
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for key, tensor in tensors.items():
        tensor = tensor.detach().to("cpu").contiguous()
        ptr = tensor.untyped_storage().data_ptr()
        # safetensors rejects tensors sharing memory; copies cost little next to a training run.
        if ptr in seen:
            tensor = tensor.clone()
        seen.add(tensor.untyped_storage().data_ptr())
        out[key] = tensor
    # imported here: the models need no safetensors
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    try:
        save_file(out, str(path), metadata=metadata)
    except SafetensorError as err:
        # The disk's error inside safetensors' message ("... (os error 28) ..."), as an OSError.
        found = re.search(r"os error (\d+)", str(err))
        if found is None:
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code), str(path)) from err
    _sort_metadata(path)
    fsync_file(path)


def _sort_metadata(path: Path) -> None:
    """Rewrite a safetensors header's ``__metadata__`` in key order, in place: safetensors
    writes it from a hash map, in an order that changes from call to call, so the same tensors
    made files of other bytes (same weights, other checksums)."""
    with open(path, "r+b") as fh:
        size = int.from_bytes(fh.read(8), "little")
        raw = fh.read(size)
        header = json.loads(raw)
        if len(header.get("__metadata__") or {}) < 2:
            return
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
        text += b" " * (size - len(text))  # the padding safetensors gives the header
        if len(text) != size or json.loads(text) != json.loads(raw):
            return  # written otherwise than expected: keep the file as it is
        fh.seek(8)
        fh.write(text)


def load_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Read every tensor of a safetensors file onto the CPU, with the file's metadata."""
    if not path.is_file():
        raise CheckpointError(f"{path}: file missing from the checkpoint")
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            metadata = dict(handle.metadata() or {})
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    except (OSError, ValueError, RuntimeError, SafetensorError) as err:
        raise CheckpointError(f"{path}: not a readable safetensors file ({err})") from err
    return tensors, metadata


class ArrayFileError(ValueError):
    """An ``.npz`` archive is missing, truncated, corrupt or not an ``.npz``.

    Attributes:
        path: the file.
        reason: what is wrong, without the path (for errors that name the file their own way).
    """

    def __init__(self, path: str | Path, reason: str, expected: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(f"{path}: {reason}; expected {expected}")


# What numpy, zipfile and zlib raise on a truncated or corrupt archive.
_NPZ_ERRORS = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error)


def _holds_objects(archive: np.lib.npyio.NpzFile, key: str) -> bool:
    """Whether the array ``key`` of ``archive`` is stored as pickled Python objects (an
    object dtype, as a pandas column's ``.values`` or a list of mixed types makes), read from
    its header alone; False when the header cannot be read (a damaged member)."""
    names = archive.zip.namelist()
    member = f"{key}.npy" if f"{key}.npy" in names else key
    try:
        with archive.zip.open(member) as handle:
            version = np.lib.format.read_magic(handle)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            return bool(read(handle)[2].hasobject)
    except (*_NPZ_ERRORS, TypeError):
        return False


def _pickled_reason(key: str) -> str:
    """Why an array of pickled objects is not read, and how to save it so it is."""
    values = "words" if key == "labels" else key
    return (
        f"array {key!r} holds pickled Python objects (an object array, as a pandas column's "
        ".values or a list of mixed types makes), which are not read, for safety (unpickling "
        f"runs code); save it as strings: np.savez(..., {key}=np.asarray({values}, dtype=str))"
    )


ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
"""The first bytes of a zip file, as an ``.npz`` is (the second: an empty one, ``np.savez``
of no array)."""

NPY_MAGIC = b"\x93NUMPY"
"""The first bytes of a single ``.npy`` array."""


def _what_file(head: bytes) -> str:
    """What a file that is not an ``.npz`` looks like from its first bytes ``head``: a
    safetensors model file, JSON, a text table, another zip format, a pickle, ..."""
    if len(head) >= 10 and head[8:10] == b'{"':
        size = int.from_bytes(head[:8], "little")
        if 0 < size < 1 << 30:
            return (
                "a safetensors model file, as a run folder of `awe train` or `units train` holds"
            )
    if head.startswith(b"PK"):
        return "a zip file of another kind (a spanned archive?)"
    if head.startswith(b"\x80") and len(head) > 1 and head[1] <= 5:
        return "a Python pickle, which is never read here (unpickling runs code)"
    if head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ")):
        return "a compressed file (gzip, bzip2 or xz): uncompress it first"
    if head.startswith((b"RIFF", b"fLaC", b"OggS")):
        return "an audio file"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "a UTF-16 text file"
    if not head:
        return "an empty file (0 bytes)"
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3:  # not only a character cut at the end of the bytes read
            return f"a binary file starting {head[:8]!r}"
        text = head[: err.start].decode("utf-8-sig")
    if "\x00" in text:
        return f"a binary file starting {head[:8]!r}"
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        return "a JSON text file, as a run folder's run.json is"
    first = stripped.splitlines()[0] if stripped else ""
    if first.split("\t")[:2] == ["path", "word"]:
        return "a text file: a segments table"
    if first.startswith("#file"):
        return "a text file: an ABX item file"
    if "\t" in first:
        return "a text file: a tab-separated table"
    return "a text file"


def load_npz(
    path: str | Path, *, expected: str = "a NumPy .npz archive of arrays"
) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive at ``path`` (no pickles), read at once.

    ``expected`` says what the file should hold (e.g. ``"word features written by the
    recipe"``), for the message. A missing file, an archive that is truncated or corrupt
    anywhere (which numpy would only notice when that array is read), a file that is not an
    ``.npz`` (told by its first bytes before numpy reads it as a pickle: the message says what
    it looks like, a text table or a safetensors model file), or an array of pickled Python objects (never unpickled: the message names the
    array and how to save it as strings) raises :class:`ArrayFileError` naming ``path``.
    """
    path = Path(path)
    if not path.is_file():
        raise ArrayFileError(path, "file not found", expected)
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError as err:
        raise ArrayFileError(path, f"cannot read the file ({err})", expected) from err
    if not head.startswith((*ZIP_MAGIC, NPY_MAGIC)):
        # numpy reads any other file as a pickle and advises loading it "unsafely"
        raise ArrayFileError(path, f"not an .npz ({_what_file(head)})", expected)
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ArrayFileError(path, "a single .npy array, not an .npz archive", expected)
        with archive:
            out = {}
            for key in archive.files:
                try:
                    out[key] = archive[key]
                except ValueError:
                    if _holds_objects(archive, key):
                        raise ArrayFileError(path, _pickled_reason(key), expected) from None
                    raise
            return out
    except _NPZ_ERRORS as err:
        if isinstance(err, ArrayFileError):
            raise
        raise ArrayFileError(
            path,
            f"not a readable .npz, truncated or corrupt ({type(err).__name__}: {err})",
            expected,
        ) from err


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


_SHA256_MEMO: dict[tuple, str] = {}


def known_file_sha256(path: str | Path) -> str:
    """:func:`file_sha256`, remembered for the process by the file's identity (device, inode,
    size, modification time): a released checkpoint that names many runs' starting weights is
    read once, not once per run key. A file rewritten in place gets a new modification time and
    is hashed again."""
    stat = os.stat(path)
    identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if identity not in _SHA256_MEMO:
        _SHA256_MEMO[identity] = file_sha256(path)
    return _SHA256_MEMO[identity]


def atomic_write(
    target: str | Path, write: Callable[[Path], None], *, say_faults: bool = False
) -> None:
    """Call ``write(tmp)`` on a temporary sibling of ``target``, then rename it into place.

    A crash inside ``write`` (a full disk included) leaves ``target`` as it was (the temporary
    file is removed). ``say_faults``: a disk that refuses the write (:data:`WRITE_FAULTS`) is a
    :class:`WriteError` saying so, for a file a command writes where the user asked.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    existed = target.exists()
    try:
        write(tmp)
        fsync_file(tmp)
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except OSError as err:
        named = as_written_to(err, tmp, target)
        if not (say_faults and is_write_fault(named)):
            if named is err:
                raise
            raise named from err
        kept = "Its earlier content is as it was." if existed else "It was not created."
        raise write_fault(named, target, kept) from err
    finally:
        if tmp.exists():
            tmp.unlink()


def as_written_to(err: OSError, tmp: Path, target: Path) -> OSError:
    """``err`` as if raised writing ``target``: an error the system raised about the temporary
    file or folder ``tmp`` (or a file inside it) that stands for ``target`` until it is
    published names ``target`` (or the file of that name inside it), a path the user gave,
    instead of ``.run.tmp-3703-fce211dc``. Any other error is returned as it is."""
    name = getattr(err, "filename", None)
    if name is None or type(err).__module__ != "builtins":
        return err
    try:
        inside = Path(os.fsdecode(name)).relative_to(tmp)
    except (TypeError, ValueError):
        return err
    renamed = type(err)(err.errno, err.strerror, str(target / inside))
    renamed.__traceback__ = err.__traceback__
    return renamed


def created_parents(path: Path) -> list[Path]:
    """The folders above ``path`` that do not exist yet, innermost first."""
    missing = []
    for parent in path.absolute().parents:
        if parent.exists():
            break
        missing.append(parent)
    return missing


@contextmanager
def output_folder(out: str | Path, stale: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """Write a command's output folder whole or not at all.

    Yields a temporary sibling of ``out`` to write into; when the block ends, it becomes
    ``out`` with one rename (or, when ``out`` is an earlier run folder the command may reuse,
    each of its files replaces the one of that name, and what else is there stays, except the
    entries for which ``stale`` is true: what an earlier run of the command wrote that the new
    one does not, such as the folder of a model it no longer has). If the block raises, the
    temporary folder and any parent folder made for it are removed, so ``out`` is as it was:
    absent, or with its earlier files; a disk that refused a write (:data:`WRITE_FAULTS`)
    becomes a :class:`WriteError` saying so.
    """
    out = Path(out)
    made = created_parents(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    existed = out.exists()
    try:
        tmp.mkdir()
        yield tmp
        fsync_dir(tmp)
        if existed:
            names = {item.name for item in tmp.iterdir()}
            for item in sorted(tmp.iterdir()):
                if item.is_dir() and (out / item.name).is_dir():
                    shutil.rmtree(out / item.name)
                os.replace(item, out / item.name)
            if stale is not None:  # once the new run is in place, and said
                _drop_stale(out, names, stale)
            fsync_dir(out)
        else:
            os.rename(tmp, out)
        fsync_dir(out.parent)
    except OSError as err:
        named = as_written_to(err, tmp, out)  # the --out given, not the temporary folder
        if not is_write_fault(named):
            if named is err:
                raise
            raise named from err
        kept = (
            "Its earlier files are as they were; none was replaced."
            if existed
            else "Nothing was left there: the folder was not created."
        )
        raise write_fault(named, out, kept) from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not out.exists():
            for folder in made:  # innermost first, each only if still empty
                try:
                    folder.rmdir()
                except OSError:
                    break


def _drop_stale(out: Path, written: Collection[str], stale: Callable[[Path], bool]) -> None:
    """Remove the entries of ``out`` that the new output did not write and ``stale`` calls an
    earlier run's, one line on stderr each."""
    for item in sorted(out.iterdir()):
        if item.name in written or not stale(item):
            continue
        if item.is_dir():
            shutil.rmtree(item)
        else:
            item.unlink()
        print(
            f"audiorepro: removed {item}: the earlier run wrote it, and this run has none",
            file=sys.stderr,
            flush=True,
        )


# --------------------------------------------------------------------------------------------
# Model weights
# --------------------------------------------------------------------------------------------


def dedupe_shared(state: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict]:
    """Keep one name per tied tensor; return ``(unique tensors, {alias: kept name})``."""
    unique: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    owner: dict[tuple, str] = {}
    for name, tensor in state.items():
        if tensor.numel() == 0:
            unique[name] = tensor
            continue
        # Same memory, same view: one tensor with two names (tied weights).
        view = (
            tensor.device.type,
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tuple(tensor.stride()),
            tensor.dtype,
        )
        if view in owner:
            aliases[name] = owner[view]
        else:
            owner[view] = name
            unique[name] = tensor
    return unique, aliases


def frozen_parameter_names(model: torch.nn.Module) -> list[str]:
    """The ``state_dict`` names of ``model``'s frozen parameters (``requires_grad`` False), tied
    names included, in ``state_dict`` order."""
    frozen = {n for n, p in model.named_parameters(remove_duplicate=False) if not p.requires_grad}
    return [name for name in model.state_dict() if name in frozen]


def save_model_weights(
    model: torch.nn.Module, path: str | Path, exclude: Collection[str] = ()
) -> None:
    """Write ``model.state_dict()`` to a safetensors file, tied tensors once (with aliases),
    leaving out the names in ``exclude``."""
    path = Path(path)
    state = model.state_dict()
    unknown = sorted(set(exclude) - set(state))
    if unknown:
        raise KeyError(f"{path}: cannot exclude {unknown}: not in the model's state_dict")
    unique, aliases = dedupe_shared({k: v for k, v in state.items() if k not in set(exclude)})
    save_tensors(unique, path, metadata={"format": "pt", ALIASES_KEY: json.dumps(aliases)})


def _listed(items: list[str]) -> str:
    """Names one per line, cut after ``_MAX_LISTED`` with a count of the rest."""
    shown = items[:_MAX_LISTED]
    more = len(items) - len(shown)
    return "".join(f"\n    {item}" for item in shown) + (
        f"\n    ... and {more} more" if more else ""
    )


def check_state_dict(
    expected: Mapping[str, torch.Tensor], loaded: Mapping[str, torch.Tensor], *, source: str
) -> None:
    """Raise ``CheckpointError`` listing missing, unexpected and shape-mismatched keys.

    Args:
        expected: the model's own ``state_dict()``.
        loaded: the tensors read from the checkpoint.
        source: what ``loaded`` came from, for the message (a file path).
    """
    missing = sorted(set(expected) - set(loaded))
    unexpected = sorted(set(loaded) - set(expected))
    mismatched = [
        f"{key}: checkpoint {tuple(loaded[key].shape)} vs model {tuple(expected[key].shape)}"
        for key in expected
        if key in loaded and tuple(loaded[key].shape) != tuple(expected[key].shape)
    ]
    if not (missing or unexpected or mismatched):
        return
    parts = [f"{source} does not fit the model:"]
    if missing:
        parts.append(f"  {len(missing)} missing key(s) (in the model, not in the checkpoint):")
        parts.append(_listed(missing).lstrip("\n"))
    if unexpected:
        parts.append(f"  {len(unexpected)} unexpected key(s) (in the checkpoint, not the model):")
        parts.append(_listed(unexpected).lstrip("\n"))
    if mismatched:
        parts.append(f"  {len(mismatched)} shape mismatch(es):")
        parts.append(_listed(mismatched).lstrip("\n"))
    raise CheckpointError("\n".join(parts))


def load_model_weights(
    model: torch.nn.Module, path: str | Path, omitted: Collection[str] = ()
) -> None:
    """Load weights written by ``save_model_weights`` into ``model``, validating keys and shapes.

    ``omitted`` names what the file left out on purpose (``save_model_weights(exclude=...)``):
    each must be a frozen parameter of ``model``, which keeps its current value; every other key
    must be in the file.

    Raises:
        CheckpointError: the file is missing/unreadable, or its keys or shapes do not match the
            model (the message lists every missing, unexpected and mismatched key), or an
            omitted name is not a frozen parameter of the model.
    """
    path = Path(path)
    tensors, metadata = load_tensors(path)
    try:
        aliases = json.loads(metadata.get(ALIASES_KEY, "{}"))
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}: corrupt alias metadata ({err})") from err
    for alias, name in aliases.items():
        if name not in tensors:
            raise CheckpointError(f"{path}: alias {alias!r} points to missing tensor {name!r}")
        tensors[alias] = tensors[name]
    expected = model.state_dict()
    if omitted:
        trainable = sorted(set(omitted) - set(frozen_parameter_names(model)))
        if trainable:
            raise CheckpointError(
                f"{path} left out {len(trainable)} weight(s) as frozen that the model trains "
                f"or lacks (requires_grad True, or no such parameter):{_listed(trainable)}"
            )
        expected = {k: v for k, v in expected.items() if k not in set(omitted)}
    check_state_dict(expected, tensors, source=str(path))
    model.load_state_dict(tensors, strict=not omitted)


# --------------------------------------------------------------------------------------------
# Locks
# --------------------------------------------------------------------------------------------

# A place that may not be written: permission refused, an immutable folder, a read-only disk.
_REFUSED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def take_lock(
    path: Path,
    *,
    wait: bool,
    note: str = "",
    waiting: Callable[[], None] | None = None,
) -> Any:
    """The open file ``path`` (created) with an exclusive ``fcntl.flock`` on it, held until
    :func:`release_lock`. The lock goes with the process: one killed (or crashed) frees it, and
    the next process takes its file over. ``note`` (who holds it: :func:`lock_note` reads it)
    is written into the file once it is held.

    Another process holds it: ``wait`` waits for it (calling ``waiting()`` once first), else
    ``None`` is returned at once. A process that gets the lock of a file its holder removed
    meanwhile opens the new one instead, so two processes never both hold it. Without
    ``fcntl`` (not POSIX), the file is opened and nothing is locked.
    """
    while True:
        handle = open(path, "a+b")
        if fcntl is None:  # pragma: no cover - not POSIX
            return handle
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                handle.close()
                return None
            if waiting is not None:
                waiting()
                waiting = None
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        except OSError:
            handle.close()
            raise
        try:
            held = os.stat(path)
        except FileNotFoundError:
            held = None
        mine = os.fstat(handle.fileno())
        if held is not None and (held.st_dev, held.st_ino) == (mine.st_dev, mine.st_ino):
            break
        handle.close()  # the file was removed while we waited: lock the current one
    if note:
        handle.truncate(0)
        handle.write(note.encode("utf-8"))
        handle.flush()
    return handle


def release_lock(path: Path, handle: Any) -> None:
    """Remove the lock file ``path`` that :func:`take_lock` gave ``handle`` for, then free it."""
    try:
        path.unlink(missing_ok=True)
    finally:
        handle.close()  # releases the lock


def lock_note(path: Path) -> str:
    """What the holder of the lock ``path`` wrote into it (:func:`take_lock`'s ``note``), or
    ``""`` when it is gone or not written yet."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


# --------------------------------------------------------------------------------------------
# The run store
# --------------------------------------------------------------------------------------------

RUN_RECORD = "run.json"
_TMP_RUN = ".tmp-"
STAGING = ".staging-"
LOCK = ".lock-"


def plain_values(value: Any) -> Any:
    """JSON-friendly values for hashing and records: tuples as lists, paths as strings, keys as
    strings, NumPy scalars and dataclasses unpacked; any other type is a ``TypeError``."""
    if isinstance(value, Mapping):
        return {str(k): plain_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_values(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain_values(dataclasses.asdict(value))
    raise TypeError(f"cannot hash a configuration value of type {type(value).__name__}")


def config_hash(config: Any, length: int = 16) -> str:
    """Hex digest of a resolved configuration (mapping or dataclass): equal configurations,
    equal hashes, whatever the key order; tuples and lists hash alike."""
    text = json.dumps(plain_values(config), sort_keys=True, allow_nan=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def _rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


def _process_group() -> Any:
    """``torch.distributed``, its process group started (by accelerate, as the Trainer would)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        from accelerate import PartialState

        # Joins the group that accelerate launch / torchrun set up, as the Trainer's
        # Accelerator would on this machine: without a GPU it must be asked for the CPU,
        # else a later Accelerator(cpu=True) finds a state it reads as one process.
        PartialState(cpu=not torch.cuda.is_available())
    return dist


def barrier() -> None:
    """Wait for every process of an ``accelerate launch`` / ``torchrun`` (nothing in one)."""
    if _world_size() > 1:
        _process_group().barrier()


def main_process_value(value: T) -> T:
    """``value`` as the main process has it, in every process (``value`` in one process): a
    decision all processes must take alike, such as whether a run still has to be built."""
    if _world_size() <= 1:
        return value
    box = [value]
    _process_group().broadcast_object_list(box, src=0)
    return box[0]


@dataclass(frozen=True)
class Run:
    """One entry of a :class:`RunStore`: ``path`` holds the run's files once it is complete."""

    path: Path
    kind: str
    key: str
    config: dict[str, Any]

    @property
    def complete(self) -> bool:
        """True once the run's files are published (its ``run.json`` exists)."""
        return (self.path / RUN_RECORD).is_file()

    def record(self) -> dict[str, Any]:
        """What the run recorded when it was published (``run.json``)."""
        return read_json(self.path / RUN_RECORD)

    def file(self, name: str) -> Path:
        """A file of the run; missing from a complete run is an error naming the run."""
        path = self.path / name
        if not path.exists():
            raise CheckpointError(f"{path}: missing from run {self.kind}/{self.key}")
        return path


class RunStore:
    """Finished runs of one chapter, one folder per resolved configuration.

    ``store.cached(kind, config, build, load)`` returns ``load(run)`` for a complete run of
    that configuration, or builds it first: ``build(folder)`` writes the run's files into a
    temporary folder (and may return a mapping recorded in ``run.json``), which is then published
    with one rename. Changing anything in ``config`` changes the hash and so starts a new run;
    the configuration must therefore hold everything that defines the result (the resolved
    chapter config, the seed, the identity of the data and of any initial weights).

    Args:
        chapter: e.g. ``"01_retrieval"``; the runs live under ``<root>/<chapter>``.
        root: the store's root (default :func:`audiorepro.paths.runs_dir`).
    """

    def __init__(self, chapter: str, root: str | Path | None = None) -> None:
        self.chapter = chapter
        self.root = Path(root) if root is not None else runs_dir()

    def run(self, kind: str, config: Any) -> Run:
        """The entry of ``kind`` for ``config`` (complete or not yet)."""
        plain = plain_values(config)
        key = config_hash(plain)
        return Run(self.root / self.chapter / kind / key, kind, key, plain)

    def staging(self, run: Run) -> Path:
        """The folder (created) where the unfinished ``run`` keeps what lets it resume, e.g. the
        training loop's checkpoints: ``<kind>/.staging-<key>``.

        It is named by the run's configuration hash, so a call with the same configuration
        after a killed build finds it again and a changed configuration gets a fresh one; it
        is never cleared on restart, and :meth:`publish` removes it once the run is complete.
        """
        path = run.path.parent / f"{STAGING}{run.key}"
        with self.writable(run):
            path.mkdir(parents=True, exist_ok=True)
        return path

    @contextmanager
    def resumable(self, run: Run) -> Iterator[Path | None]:
        """The :meth:`staging` folder of ``run``, held by this process for the block (its
        lock, ``<kind>/.lock-<key>``, taken without waiting), for a command's checkpoints: the
        same command after an interruption finds them there and continues. Removed when the
        block ends without an error; kept when it raises (Ctrl-C included) unless empty.

        ``None`` when another process holds it (the same training running at once, into
        another ``--out``): this one then trains without checkpoints, saying so on stderr,
        and neither removes the other's folder under it."""
        path = run.path.parent / f"{LOCK}{run.key}"
        handle = None
        if fcntl is not None:
            with self.writable(run):
                path.parent.mkdir(parents=True, exist_ok=True)
                handle = take_lock(path, wait=False)
            if handle is None:
                print(
                    f"another process is training the same run now (it holds {path}): this "
                    "one keeps no checkpoints, so an interruption would start it again",
                    file=sys.stderr,
                    flush=True,
                )
                yield None
                return
        staging = self.staging(run)
        try:
            yield staging
            shutil.rmtree(staging, ignore_errors=True)
        finally:
            with contextlib.suppress(OSError):  # nothing to resume from: no empty folder kept
                staging.rmdir()
            if handle is not None:
                release_lock(path, handle)

    @contextmanager
    def lock(self, run: Run) -> Iterator[None]:
        """Hold the exclusive lock of ``run`` (``<kind>/.lock-<key>``, :func:`take_lock`) for the
        block: another process building the same run waits here, saying so once, until this
        one leaves the block. Taken by the main process only (the others of an ``accelerate
        launch`` follow it). The lock goes with the process, so a killed build frees it; the
        file is removed when the block ends (:func:`release_lock`)."""
        if fcntl is None or _rank() != 0:
            yield
            return
        path = run.path.parent / f"{LOCK}{run.key}"

        def waiting() -> None:
            print(
                f"waiting for another process that is building {self.chapter}/"
                f"{run.kind}/{run.key} (it holds {path}); its run is loaded once done",
                file=sys.stderr,
                flush=True,
            )

        with self.writable(run):
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = take_lock(path, wait=True, waiting=waiting)
        try:
            yield
        finally:
            release_lock(path, handle)

    @contextmanager
    def writable(self, run: Run) -> Iterator[None]:
        """Say a store that may not be written (a read-only or system-wide installation) as what
        it is: a permission refused under the store's root becomes a :class:`WriteError` that
        names the store, what it keeps (a feature cache) and the variable that moves it."""
        try:
            yield
        except OSError as err:
            name = getattr(err, "filename", None)
            if err.errno not in _REFUSED or name is None or isinstance(err, WriteError):
                raise
            where = Path(os.fsdecode(name)).absolute()
            root = self.root.absolute()
            if not (where == root or root.is_relative_to(where) or where.is_relative_to(root)):
                raise
            raise WriteError(err.errno, self._refused(run, where, err)) from err

    def _refused(self, run: Run, where: Path, err: OSError) -> str:
        what = (
            "the feature cache, where audiorepro keeps the features of the audio it reads so "
            "that the next command on the same files does not compute them again"
            if run.kind == "features"
            else f"the run store, where audiorepro keeps its {run.kind} runs for the next call"
        )
        origin, variable = runs_dir_origin()
        default = self.root.absolute() == runs_dir().absolute()
        move = f"Set {variable} to a folder you can write" if default else "Give another root"
        reason = (err.strerror or str(err)).lower()
        return (
            f"{where}: cannot write {what} ({self.root.absolute() / self.chapter / run.kind}"
            f"{f', under {origin}' if default else ''}): {reason}. {move}, and run again"
        )

    def runs(self, kind: str) -> list[Run]:
        """Every complete run of ``kind``, oldest first."""
        folder = self.root / self.chapter / kind
        if not folder.is_dir():
            return []
        found = []
        for path in folder.iterdir():
            if path.name.startswith(".") or not (path / RUN_RECORD).is_file():
                continue
            rec = read_json(path / RUN_RECORD)
            found.append(Run(path, kind, path.name, rec.get("config", {})))
        return sorted(found, key=lambda r: (r.path / RUN_RECORD).stat().st_mtime)

    def publish(self, run: Run, build: Callable[[Path], Mapping[str, Any] | None]) -> Run:
        """Build ``run`` in a temporary folder and publish it with one rename.

        The build holds the run's :meth:`lock`: a second process asking for the same run waits
        for the first, then (in one process; :meth:`cached` in any) finds the run complete and
        builds nothing. (Were it published meanwhile without the lock, its files are kept and
        ours dropped: both come from the same configuration.) Once published, the run's
        :meth:`staging` folder is removed; if ``build`` raises, it is kept for the next call,
        and a disk that refuses a write (:data:`WRITE_FAULTS`) is a :class:`WriteError` saying
        that nothing was published. Under several processes (``accelerate launch``) every
        process runs ``build`` (training is collective), only the main one publishes, and the
        others wait for it (a barrier) before they read the run.
        """
        with self.lock(run):
            # Another process may have published it while this one waited for the lock.
            # (Under accelerate launch the other ranks cannot know without one more collective:
            # there a run published meanwhile is built again, and its first files kept.)
            if _world_size() <= 1 and run.complete:
                return run
            return self._publish(run, build)

    def _publish(self, run: Run, build: Callable[[Path], Mapping[str, Any] | None]) -> Run:
        """:meth:`publish` with the lock held: a full disk said as a :class:`WriteError`."""
        try:
            with self.writable(run):
                return self._build(run, build)
        except OSError as err:
            if not is_write_fault(err):
                raise
            staging = run.path.parent / f"{STAGING}{run.key}"
            kept = "Nothing was published: the run store holds what it held before" + (
                f", and the checkpoints in {staging} are kept for the next call to resume from."
                if staging.is_dir() and any(staging.iterdir())
                else "."
            )
            raise write_fault(
                err,
                run.path,
                kept,
                "free some space there (or set AUDIOREPRO_RUNS to a folder on another disk) and "
                "run again",
            ) from err

    def _build(self, run: Run, build: Callable[[Path], Mapping[str, Any] | None]) -> Run:
        parent = run.path.parent
        parent.mkdir(parents=True, exist_ok=True)
        tmp = parent / f"{_TMP_RUN}{run.key}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            extra = build(tmp) or {}
            if _rank() == 0:
                write_json(
                    tmp / RUN_RECORD,
                    {"chapter": self.chapter, "kind": run.kind, "config": run.config, **extra},
                    indent=1,
                )
                fsync_dir(tmp)
                if run.path.exists() and not run.complete:
                    shutil.rmtree(run.path)  # left by a run killed before it was published
                try:
                    os.rename(tmp, run.path)
                except OSError:
                    if not run.complete:
                        raise
                fsync_dir(parent)
                # Complete now: the checkpoints it could have resumed from are no longer needed.
                shutil.rmtree(parent / f"{STAGING}{run.key}", ignore_errors=True)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        barrier()
        return run

    def cached(
        self,
        kind: str,
        config: Any,
        build: Callable[[Path], Mapping[str, Any] | None],
        load: Callable[[Run], T],
    ) -> T:
        """``load(run)`` of the complete run of ``config``, building and publishing it first if
        there is none."""
        run = self.run(kind, config)
        # The main process decides with the run's lock held (waiting for another process that
        # builds it, then finding it complete); every process decides as the main one.
        with self.lock(run) if not run.complete else nullcontext():
            if not main_process_value(run.complete):
                self._publish(run, build)
        return load(run)
