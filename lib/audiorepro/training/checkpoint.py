"""Atomic, resumable training checkpoints that load without unpickling anything.

Layout under a checkpoint root (``<out_dir>/checkpoints``)::

    checkpoints/
      step_00000200/              one complete checkpoint per saved optimizer step
        model.safetensors         model weights (tied tensors stored once, see below)
        optimizer.json            optimizer state_dict structure and param_groups
        optimizer.safetensors     its tensors (AdamW's exp_avg, exp_avg_sq, step, ...)
        scheduler.json            LR scheduler state_dict
        <name>.json[.safetensors] further components (trainer position and history, RNG states,
                                  fp16 grad-scaler state, callback state)
        checkpoint.json           manifest, written last: format version, step, file sizes
      step_00000300/
      latest                      text file naming the newest directory, for people and scripts
      .tmp-step_00000400-xxxx/    a write in progress (or one killed mid-write): ignored

**Atomicity.** A checkpoint is written into a fresh temporary directory in the same parent; each
file is flushed and ``fsync``-ed, then the directory is published with one ``os.rename``, which
POSIX makes atomic within a file system, and the parent directory is ``fsync``-ed. A reader
therefore sees either no ``step_XXXXXXXX`` directory or a complete one; an interrupted write
leaves at most a ``.tmp-`` directory, which ``list_checkpoints`` ignores and the next save
removes; a write the disk refuses (full, over quota, failing: ``storage.WRITE_FAULTS``)
removes it at once and is a ``storage.WriteError`` naming the root, the space left and the
newest checkpoint, which is intact and is where a resumed run continues. The ``latest``
pointer is replaced the same way (temporary file, ``fsync``, ``os.replace``). Resuming does
not trust the pointer: it takes the highest step among complete directories, which stays
right even if a crash falls between publishing a directory and updating the pointer.

**No pickle.** ``torch.load`` unpickles, and unpickling a file can run arbitrary code. Here every
tensor goes into a safetensors file and everything else into JSON: ``pack_tree`` walks a nested
state (dicts with any keys, lists, tuples, tensors, NumPy arrays, numbers, strings) and replaces
each tensor by a reference into the safetensors file, tagging tuples, non-string keys and NumPy
arrays so that ``unpack_tree`` rebuilds the exact Python objects (``random.getstate()`` needs
its tuples back, ``numpy.random.set_state`` its ``uint32`` array).

**Frozen weights.** ``save_checkpoint(include_frozen=False)`` leaves the model's frozen
parameters (``requires_grad`` False: a pretrained text encoder used as it is) out of
``model.safetensors`` and lists them in the manifest (``omitted``); loading keeps the model's own
values for exactly those names, which must be frozen parameters of the model loaded into, and is
strict about every other key. The caller promises that the model it resumes was built with the
same frozen values (from the same configuration and seed).

**Integrity.** ``verify_checkpoint`` checks every file against the sizes and SHA-256 digests of
the manifest before anything is loaded; a checkpoint that fails is never half-loaded, and the
Trainer then resumes from the newest earlier checkpoint that passes (``mark_corrupt`` moves the
bad one aside as ``corrupt-step_XXXXXXXX``, kept for inspection and ignored from then on).

**Tied weights.** safetensors refuses tensors that share memory, and a model with tied weights
(an output layer reusing the embedding matrix) has two state_dict names for one tensor. The file
stores each tensor once and records the other names as aliases in its metadata; loading expands
them again, so ``model.load_state_dict`` sees every key.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiorepro.storage import (
    CheckpointError,
    file_sha256,
    frozen_parameter_names,
    fsync_dir,
    is_write_fault,
    load_model_weights,
    load_tensors,
    read_json,
    save_model_weights,
    save_tensors,
    write_fault,
    write_json,
)
from audiorepro.training.device import mps_available

FORMAT_VERSION = 2  # 2: the manifest records a SHA-256 per file, verified on load
MANIFEST = "checkpoint.json"
LATEST = "latest"
TMP_PREFIX = ".tmp-"
CORRUPT_PREFIX = "corrupt-"
MODEL_FILE = "model.safetensors"
RESERVED_COMPONENTS = ("model", "optimizer", "scheduler", "checkpoint")
_STEP_DIR = re.compile(r"^step_(\d{8,})$")
_TAGS = ("__tensor__", "__tuple__", "__items__", "__ndarray__")


# --------------------------------------------------------------------------------------------
# Nested state <-> (JSON, tensors)
# --------------------------------------------------------------------------------------------


def pack_tree(tree: Any) -> tuple[Any, dict[str, torch.Tensor]]:
    """Split a nested state into a JSON-serialisable tree and a flat ``{key: tensor}`` dict.

    Tensors become ``{"__tensor__": key}``; tuples ``{"__tuple__": [...]}``; dicts whose keys are
    not all strings (an optimizer's ``{param index: state}``) ``{"__items__": [[k, v], ...]}``;
    NumPy arrays ``{"__ndarray__": values, "dtype": ..., "shape": ...}``. NumPy scalars become
    Python numbers. Anything else raises ``CheckpointError`` naming where it sits in the tree.

    Returns:
        ``(packed, tensors)``, the inverse of ``unpack_tree``.
    """
    tensors: dict[str, torch.Tensor] = {}

    def pack(obj: Any, path: str) -> Any:
        if isinstance(obj, torch.Tensor):
            key = f"t{len(tensors)}:{path}"
            tensors[key] = obj
            return {"__tensor__": key}
        if obj is None or isinstance(obj, bool | int | float | str):
            return obj
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return {"__ndarray__": obj.tolist(), "dtype": str(obj.dtype), "shape": list(obj.shape)}
        if isinstance(obj, tuple):
            return {"__tuple__": [pack(v, f"{path}/{i}") for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return [pack(v, f"{path}/{i}") for i, v in enumerate(obj)]
        if isinstance(obj, Mapping):
            if all(isinstance(k, str) for k in obj) and not any(k in _TAGS for k in obj):
                return {k: pack(v, f"{path}/{k}") for k, v in obj.items()}
            return {
                "__items__": [
                    [pack(k, f"{path}/{i}k"), pack(v, f"{path}/{k}")]
                    for i, (k, v) in enumerate(obj.items())
                ]
            }
        raise CheckpointError(
            f"cannot store {type(obj).__name__} at {path or '<root>'} in a checkpoint: only "
            "tensors, NumPy arrays, numbers, strings, None, lists, tuples and dicts are supported"
        )

    return pack(tree, ""), tensors


def unpack_tree(packed: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    """Rebuild the nested state written by ``pack_tree`` (the exact types: tuples, int keys)."""

    def unpack(obj: Any) -> Any:
        if isinstance(obj, list):
            return [unpack(v) for v in obj]
        if not isinstance(obj, dict):
            return obj
        if "__tensor__" in obj:
            key = obj["__tensor__"]
            if key not in tensors:
                raise CheckpointError(f"tensor {key!r} is referenced but missing from the file")
            return tensors[key]
        if "__tuple__" in obj:
            return tuple(unpack(v) for v in obj["__tuple__"])
        if "__items__" in obj:
            return {unpack(k): unpack(v) for k, v in obj["__items__"]}
        if "__ndarray__" in obj:
            array = np.asarray(obj["__ndarray__"], dtype=np.dtype(obj["dtype"]))
            return array.reshape(obj["shape"])
        return {k: unpack(v) for k, v in obj.items()}

    return unpack(packed)


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def save_tree(directory: Path, name: str, tree: Any) -> list[str]:
    """Write one component as ``<name>.json`` (+ ``<name>.safetensors`` if it holds tensors).

    Returns:
        The file names written.
    """
    packed, tensors = pack_tree(tree)
    files = [f"{name}.json"]
    if tensors:
        save_tensors(tensors, directory / f"{name}.safetensors")
        files.append(f"{name}.safetensors")
    write_json(directory / f"{name}.json", {"tree": packed, "has_tensors": bool(tensors)})
    return files


def load_tree(directory: Path, name: str) -> Any:
    """Read a component written by ``save_tree`` (JSON and safetensors only, no pickle)."""
    payload = read_json(directory / f"{name}.json")
    if not isinstance(payload, dict) or "tree" not in payload:
        raise CheckpointError(f"{directory / f'{name}.json'}: not a checkpoint component")
    tensors: dict[str, torch.Tensor] = {}
    if payload.get("has_tensors"):
        tensors, _ = load_tensors(directory / f"{name}.safetensors")
    return unpack_tree(payload["tree"], tensors)


# --------------------------------------------------------------------------------------------
# Random number generator states
# --------------------------------------------------------------------------------------------


def capture_rng_state(generators: Mapping[str, torch.Generator] | None = None) -> dict[str, Any]:
    """Every random stream a training step can draw from, as a tree ``pack_tree`` can store.

    Covers Python ``random``, NumPy's global generator, torch's CPU generator, every CUDA
    device's generator (when CUDA is available), the MPS generator (when available), and the
    named ``generators`` (the trainer's data-order generator).
    """
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch_cpu": torch.get_rng_state(),
        "generators": {name: g.get_state() for name, g in (generators or {}).items()},
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = list(torch.cuda.get_rng_state_all())
    if mps_available():
        state["torch_mps"] = torch.mps.get_rng_state()
    return state


def restore_rng_state(
    state: Mapping[str, Any], generators: Mapping[str, torch.Generator] | None = None
) -> None:
    """Put back the streams saved by ``capture_rng_state`` (the inverse operation).

    CUDA states are restored for as many devices as both the checkpoint and this machine have.
    A named generator missing from ``state`` is a ``CheckpointError``.
    """
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch_cpu"].to(torch.uint8))
    cuda_states = state.get("torch_cuda")
    if cuda_states and torch.cuda.is_available():
        for index in range(min(len(cuda_states), torch.cuda.device_count())):
            torch.cuda.set_rng_state(cuda_states[index].to(torch.uint8), index)
    if "torch_mps" in state and mps_available():
        torch.mps.set_rng_state(state["torch_mps"].to(torch.uint8))
    saved = state.get("generators", {})
    for name, generator in (generators or {}).items():
        if name not in saved:
            raise CheckpointError(
                f"the checkpoint has no state for generator {name!r} (it has {sorted(saved)})"
            )
        generator.set_state(saved[name].to(torch.uint8))


# --------------------------------------------------------------------------------------------
# Checkpoint directories
# --------------------------------------------------------------------------------------------


def checkpoint_name(step: int) -> str:
    """Directory name of the checkpoint after ``step`` optimizer steps: ``step_00000200``."""
    return f"step_{step:08d}"


def _complete_step(path: Path) -> int | None:
    """The step of a published checkpoint directory, or ``None`` if it is not one."""
    match = _STEP_DIR.match(path.name)
    if match is None or not path.is_dir():
        return None
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    step = int(match.group(1))
    if not isinstance(manifest, dict) or manifest.get("step") != step:
        return None
    return step


def list_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoint directories under ``root``, oldest (lowest step) first.

    Temporary ``.tmp-`` directories of interrupted writes and directories without a valid
    manifest are ignored.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    found = [(step, p) for p in root.iterdir() if (step := _complete_step(p)) is not None]
    return [p for _, p in sorted(found)]


def latest_checkpoint(root: str | Path) -> Path | None:
    """The complete checkpoint with the highest step under ``root``, or ``None``."""
    checkpoints = list_checkpoints(root)
    return checkpoints[-1] if checkpoints else None


def _write_latest(root: Path, name: str) -> None:
    """Point ``root/latest`` at ``name`` atomically (temporary file, fsync, ``os.replace``)."""
    handle, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{LATEST}-", dir=root)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(name + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, root / LATEST)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(root)


def _remove_stale_temporaries(root: Path, keep: Iterable[Path] = ()) -> None:
    """Delete leftovers of interrupted writes (one writer per root is assumed)."""
    keep = {Path(p).resolve() for p in keep}
    for path in root.iterdir():
        if path.name.startswith(TMP_PREFIX) and path.resolve() not in keep:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def clear_checkpoints(root: str | Path) -> int:
    """Delete every checkpoint (corrupt ones moved aside too), temporary directory and the
    ``latest`` pointer under ``root``.

    Only names this module writes are touched; other files stay. Returns how many checkpoint
    directories were removed.
    """
    root = Path(root)
    if not root.is_dir():
        return 0
    removed = 0
    for path in root.iterdir():
        if _STEP_DIR.match(path.name) and path.is_dir():
            shutil.rmtree(path)
            removed += 1
        elif _STEP_DIR.match(path.name.removeprefix(CORRUPT_PREFIX)) and path.is_dir():
            shutil.rmtree(path)
    _remove_stale_temporaries(root)
    (root / LATEST).unlink(missing_ok=True)
    return removed


def save_checkpoint(
    root: str | Path,
    step: int,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    components: Mapping[str, Any] | None = None,
    keep: int = 2,
    include_frozen: bool = True,
) -> Path:
    """Write the checkpoint of ``step`` under ``root`` atomically and keep the newest ``keep``.

    Args:
        root: the checkpoint root (``<out_dir>/checkpoints``); created if needed.
        step: optimizer steps taken; names the directory ``step_XXXXXXXX``.
        model: the (unwrapped) model; its ``state_dict`` goes to ``model.safetensors``.
        optimizer: its ``state_dict`` goes to ``optimizer.json`` + ``optimizer.safetensors``.
        scheduler: anything with ``state_dict()``; goes to ``scheduler.json``.
        components: further named states (trees of tensors, arrays, numbers, strings, lists,
            tuples, dicts), each written by ``save_tree``: the trainer's position and history,
            RNG states, grad-scaler state.
        keep: how many complete checkpoints to keep (the newest by step; >= 1).
        include_frozen: ``False`` leaves the model's frozen parameters out (see module docs).

    Returns:
        The published checkpoint directory.

    Raises:
        WriteError: the disk refused a write (full, over quota, failing); nothing of this
            checkpoint is left behind and the earlier ones are as they were.
    """
    try:
        return _save_checkpoint(
            Path(root),
            step,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            components=components,
            keep=keep,
            include_frozen=include_frozen,
        )
    except OSError as err:
        if not is_write_fault(err):
            raise
        name, newest = checkpoint_name(step), latest_checkpoint(root)
        if newest is not None and newest.name == name:  # published; a later step failed
            kept = f"{name} was saved whole (resuming does not need the pointer {LATEST})."
        elif newest is not None:
            kept = (
                f"{name} was not saved; the checkpoints written before are intact (newest: "
                f"{newest.name}, where a resumed run continues)."
            )
        else:
            kept = f"{name} was not saved and left nothing behind; there was no earlier one."
        raise write_fault(err, Path(root), kept) from err


def _save_checkpoint(
    root: Path,
    step: int,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    scheduler: Any,
    components: Mapping[str, Any] | None,
    keep: int,
    include_frozen: bool,
) -> Path:
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an int >= 0, got {step!r}")
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be an int >= 1, got {keep!r}")
    components = dict(components or {})
    for name in components:
        if name in RESERVED_COMPONENTS or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(
                f"component name {name!r} must be an identifier other than "
                f"{', '.join(RESERVED_COMPONENTS)}"
            )
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{final.name}-", dir=root))
    displaced = None
    try:
        _remove_stale_temporaries(root, keep=[tmp])
        files = [MODEL_FILE]
        omitted = [] if include_frozen else frozen_parameter_names(model)
        save_model_weights(model, tmp / MODEL_FILE, exclude=omitted)
        if optimizer is not None:
            files += save_tree(tmp, "optimizer", optimizer.state_dict())
        if scheduler is not None:
            files += save_tree(tmp, "scheduler", scheduler.state_dict())
        for name, tree in components.items():
            files += save_tree(tmp, name, tree)
        manifest = {
            "format_version": FORMAT_VERSION,
            "step": step,
            "components": ["model"]
            + (["optimizer"] if optimizer is not None else [])
            + (["scheduler"] if scheduler is not None else [])
            + list(components),
            "omitted": omitted,
            "files": {name: (tmp / name).stat().st_size for name in files},
            "sha256": {name: file_sha256(tmp / name) for name in files},
        }
        # The manifest goes last: a directory holding one has every file it lists.
        write_json(tmp / MANIFEST, manifest, indent=1)
        fsync_dir(tmp)
        if final.exists():
            displaced = root / f"{TMP_PREFIX}old-{final.name}-{uuid.uuid4().hex[:8]}"
            os.rename(final, displaced)
        os.rename(tmp, final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if displaced is not None and not final.exists():  # put back the one it replaced
            os.rename(displaced, final)
        raise
    if displaced is not None:
        shutil.rmtree(displaced, ignore_errors=True)
    _write_latest(root, final.name)
    for old in list_checkpoints(root)[:-keep]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _fallback(path: Path) -> str:
    """The sentence naming the earlier complete checkpoints beside ``path``, if any."""
    earlier = [p for p in list_checkpoints(path.parent) if p.name < path.name]
    if not earlier:
        return "; there is no earlier checkpoint to fall back to"
    return (
        f"; earlier checkpoint(s) to fall back to: {', '.join(p.name for p in earlier)} "
        f"(move {path.name} aside and resume)"
    )


def verify_checkpoint(path: str | Path, *, hashes: bool = True) -> dict[str, Any]:
    """Check a checkpoint directory against its manifest before anything is loaded from it:
    every listed file present, of the recorded size and (``hashes=False`` skips this, for a
    directory verified just before) SHA-256. Returns the manifest.

    Raises:
        CheckpointError: no such directory, no manifest, a newer format, or a file missing,
            truncated or corrupted (the message names the file and the earlier checkpoints
            beside it).
    """
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such checkpoint directory")
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise CheckpointError(f"{path}: incomplete checkpoint (no {MANIFEST})")
    manifest = read_json(manifest_path)
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{manifest_path}: format_version {version!r}; this library reads up to "
            f"{FORMAT_VERSION}"
        )
    digests = manifest.get("sha256", {}) if hashes else {}
    for name, size in manifest.get("files", {}).items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{file}: file missing from the checkpoint{_fallback(path)}")
        if file.stat().st_size != size:
            raise CheckpointError(
                f"{file}: {file.stat().st_size} bytes, the manifest says {size} (truncated?)"
                + _fallback(path)
            )
        if name in digests and file_sha256(file) != digests[name]:
            raise CheckpointError(
                f"{file}: contents differ from the SHA-256 the manifest recorded when it was "
                f"written (corrupted on disk?){_fallback(path)}"
            )
    return manifest


def mark_corrupt(path: str | Path) -> Path:
    """Move a checkpoint that failed :func:`verify_checkpoint` aside as
    ``corrupt-step_XXXXXXXX`` (replacing an earlier one of that name): ``list_checkpoints`` no
    longer sees it, nor can pruning after later saves count it. Returns the new path."""
    path = Path(path)
    target = path.parent / f"{CORRUPT_PREFIX}{path.name}"
    if target.exists():
        shutil.rmtree(target)
    os.rename(path, target)
    fsync_dir(path.parent)
    return target


@dataclass
class LoadedCheckpoint:
    """What ``load_checkpoint`` read besides the model, optimizer and scheduler it filled in.

    Attributes:
        path: the checkpoint directory.
        step: optimizer steps taken when it was written.
        components: the further named states given to ``save_checkpoint``, rebuilt.
    """

    path: Path
    step: int
    components: dict[str, Any] = field(default_factory=dict)


def load_checkpoint(
    path: str | Path,
    *,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    verify_hashes: bool = True,
) -> LoadedCheckpoint:
    """Load a checkpoint directory into ``model``/``optimizer``/``scheduler`` (where given).

    Nothing is unpickled: tensors come from safetensors files, the rest from JSON. The files
    are checked first (:func:`verify_checkpoint`); ``verify_hashes=False`` skips their SHA-256
    (sizes are still checked) when the caller has just verified the directory, so that a
    paper-size checkpoint is not read twice.

    Raises:
        CheckpointError: the directory is incomplete (no manifest, a listed file missing or of
            the wrong size), from a newer format, lacks a requested part, or does not fit the
            model (missing/unexpected/mismatched keys, all listed) or the optimizer.
    """
    path = Path(path)
    manifest = verify_checkpoint(path, hashes=verify_hashes)
    present = manifest.get("components", [])
    for name, wanted in (("optimizer", optimizer), ("scheduler", scheduler)):
        if wanted is not None and name not in present:
            raise CheckpointError(f"{path}: the checkpoint has no {name} state")
    if model is not None:
        load_model_weights(model, path / MODEL_FILE, omitted=manifest.get("omitted", []))
    if optimizer is not None:
        try:
            optimizer.load_state_dict(load_tree(path, "optimizer"))
        except (ValueError, KeyError) as err:
            raise CheckpointError(
                f"{path / 'optimizer.json'}: does not fit the optimizer ({err})"
            ) from err
    if scheduler is not None:
        scheduler.load_state_dict(load_tree(path, "scheduler"))
    extra = {name: load_tree(path, name) for name in present if name not in RESERVED_COMPONENTS}
    return LoadedCheckpoint(path=path, step=int(manifest["step"]), components=extra)
