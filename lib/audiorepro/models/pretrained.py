"""Released encoder weights from local files (no downloads): PaSST and PANNs checkpoints.

The files come in several shapes: a plain state dict (PaSST's GitHub releases), a dict holding
one under ``model`` (PANNs' ``Cnn14_mAP=0.431.pth``) or ``state_dict`` (Lightning), keys with a
wrapper prefix (``net.`` in the PaSST training framework, ``module.`` from DDP), or safetensors.
:func:`load_pretrained` reads any of them, strips the prefix, drops keys the caller names as
not part of the encoder (e.g. PANNs' built-in front end), keeps the model's own values for keys
the caller names as not loaded (a classifier head of another size), and loads strictly: any
missing, unexpected or mismatched key raises :class:`~audiorepro.storage.CheckpointError` listing
them all (:func:`audiorepro.storage.check_state_dict`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path

import torch
from torch import nn

from audiorepro.storage import CheckpointError, check_state_dict

__all__ = ["PREFIXES", "load_pretrained", "load_state_dict_file"]

_WRAPPER_KEYS = ("state_dict", "model", "model_state_dict", "net")
PREFIXES = ("", "module.", "net.", "model.", "model.net.", "audio_embedding_model.")


def load_state_dict_file(path: str | PathLike) -> dict[str, torch.Tensor]:
    """Tensors of a local checkpoint: ``.safetensors``, or a torch ``.pt`` / ``.pth`` / ``.ckpt``
    holding a state dict directly or under ``state_dict``, ``model``, ``model_state_dict`` or
    ``net``. Read on the CPU with ``torch.load(weights_only=True)``: no code in the file runs.

    Raises:
        CheckpointError: the file is missing, unreadable, or holds no tensors.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return dict(load_file(str(path), device="cpu"))
        except Exception as err:
            raise CheckpointError(f"{path}: not a readable safetensors file ({err})") from err
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise CheckpointError(f"{path}: not a readable torch checkpoint ({err})") from err
    for _ in range(2):  # e.g. {"state_dict": {...}} or {"model": {"net": {...}}}
        if isinstance(obj, Mapping) and not all(isinstance(v, torch.Tensor) for v in obj.values()):
            inner = next((obj[k] for k in _WRAPPER_KEYS if isinstance(obj.get(k), Mapping)), None)
            if inner is None:
                break
            obj = inner
    if not isinstance(obj, Mapping):
        raise CheckpointError(f"{path}: expected a state dict, got {type(obj).__name__}")
    tensors = {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise CheckpointError(f"{path}: no tensors found (keys: {sorted(map(str, obj))[:10]})")
    return tensors


def load_pretrained(
    model: nn.Module,
    path: str | PathLike,
    prefix: str | None = None,
    ignore_prefixes: Sequence[str] = (),
    transform: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None,
    keep_own: Sequence[str] = (),
) -> nn.Module:
    """Load a local checkpoint into ``model`` with ``load_state_dict(strict=True)``.

    Args:
        model: the encoder.
        path: checkpoint file (see :func:`load_state_dict_file`).
        prefix: wrapper prefix to strip; ``None`` picks the one of :data:`PREFIXES` under which
            the most keys match the model, and keys outside the chosen prefix are ignored.
        ignore_prefixes: keys (after stripping) starting with any of these are dropped before
            the strict check, e.g. ``("spectrogram_extractor.", "logmel_extractor.")``.
        transform: applied to the (prefix-stripped, filtered) tensors before the check.
        keep_own: keys starting with any of these are not taken from the file, whatever their
            shape or presence there; the model keeps its own (e.g. ``("fc_audioset.",)`` to
            load a tagger's body under a head for another number of classes).

    Returns:
        ``model``, loaded in place.

    Raises:
        CheckpointError: unreadable file, or keys/shapes that differ (all of them listed).
    """
    state = load_state_dict_file(path)
    model_state = model.state_dict()
    if prefix is None:
        prefix = max(
            PREFIXES,
            key=lambda p: sum(1 for k in state if k.startswith(p) and k[len(p) :] in model_state),
        )
    if prefix:
        state = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    state = {k: v for k, v in state.items() if not k.startswith(tuple(ignore_prefixes))}
    if transform is not None:
        state = transform(state)
    if keep_own:
        keep = tuple(keep_own)
        state = {k: v for k, v in state.items() if not k.startswith(keep)}
        state |= {k: v for k, v in model_state.items() if k.startswith(keep)}
    check_state_dict(model_state, state, source=str(path))
    model.load_state_dict(state, strict=True)
    return model
