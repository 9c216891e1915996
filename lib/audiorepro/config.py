"""Frozen dataclass configuration loaded from per-chapter YAML presets.

A chapter defines one ``@dataclass(frozen=True)`` whose fields carry a docstring each (the
``metadata["help"]`` entry), and keeps one YAML file per preset next to its pages::

    book/03_zerospeech/presets/{smoke,embedded,paper}.yaml

``load_preset(Config, "book/03_zerospeech/presets", "smoke", num_epochs=2)`` reads the YAML,
applies single-field overrides and builds the dataclass. Unknown keys are an error that names the
key and lists the valid ones, so a typo in a notebook's parameters cell never passes silently.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

PRESETS = ("smoke", "embedded", "paper")

C = TypeVar("C")


class ConfigError(ValueError):
    """A preset file or an override does not fit the configuration dataclass."""


def field(default: Any = dataclasses.MISSING, *, help: str, **kwargs: Any) -> Any:
    """A dataclass field with its documentation attached (``metadata["help"]``).

    Mutable defaults (lists, dicts) are not allowed in frozen configs: use tuples.
    """
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata["help"] = help
    return dataclasses.field(default=default, metadata=metadata, **kwargs)


def config_help(cls: type) -> dict[str, str]:
    """``{field name: help text}`` for a configuration dataclass, in declaration order."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Turn YAML values into the annotated type (lists into tuples, ints into floats)."""
    if isinstance(annotation, str):
        return value
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _coerce(value, non_none[0], where)
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], where) for v in value)
        if args and len(args) != len(value):
            raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
        return tuple(
            _coerce(v, a, where) for v, a in zip(value, args or [Any] * len(value), strict=True)
        )
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is float and isinstance(value, str):
        try:
            return float(value)  # YAML reads "1e-3" as a string
        except ValueError as err:
            raise ConfigError(f"{where}: expected a number, got {value!r}") from err
    if annotation in (int, float, str, bool) and not isinstance(value, annotation):
        if not (annotation is float and isinstance(value, int)):
            raise ConfigError(
                f"{where}: expected {annotation.__name__}, got {type(value).__name__} {value!r}"
            )
    return value


def from_dict(cls: type[C], values: Mapping[str, Any], *, source: str = "<dict>") -> C:
    """Build ``cls`` from a mapping; unknown keys raise ``ConfigError`` naming the valid ones."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in values if k not in fields]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, fields, n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigError(
            f"{source}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(hints)} for "
            f"{cls.__name__}; valid keys: {', '.join(fields)}"
        )
    hints = typing.get_type_hints(cls)
    kwargs = {
        k: _coerce(v, hints.get(k, Any), f"{source}: field {k!r}") for k, v in values.items()
    }
    missing = [
        n
        for n, f in fields.items()
        if n not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(
            f"{source}: missing required field(s) {', '.join(missing)} for {cls.__name__}"
        )
    return cls(**kwargs)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; an empty file is an empty mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: preset file not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of field: value, got {type(data).__name__}")
    return data


def load_preset(cls: type[C], preset_dir: str | Path, preset: str, **overrides: Any) -> C:
    """Load ``<preset_dir>/<preset>.yaml`` into ``cls``, then apply single-field overrides.

    Overrides whose value is ``None`` are ignored, so a notebook's parameters cell can default
    every override to ``None`` and pass them all.
    """
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
    path = Path(preset_dir) / f"{preset}.yaml"
    values = load_yaml(path)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return from_dict(cls, values, source=str(path))


def to_dict(config: Any) -> dict[str, Any]:
    """The configuration as plain JSON-friendly values (tuples become lists)."""

    def plain(v: Any) -> Any:
        if isinstance(v, tuple | list):
            return [plain(x) for x in v]
        if isinstance(v, Path):
            return str(v)
        return v

    return {k: plain(v) for k, v in dataclasses.asdict(config).items()}
