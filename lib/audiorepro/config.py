"""Frozen dataclass configuration loaded from per-chapter YAML presets.

A chapter defines one ``@dataclass(frozen=True)`` whose fields carry a docstring each (the
``metadata["help"]`` entry), and keeps one YAML file per preset next to its pages::

    book/03_zerospeech/presets/{smoke,embedded,paper}.yaml

``load_preset(Config, "book/03_zerospeech/presets", "smoke", num_epochs=2)`` reads the YAML,
applies single-field overrides and builds the dataclass. Unknown keys are an error that names the
key and lists the valid ones, so a typo in a notebook's parameters cell never passes silently.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from audiorepro.paths import data_dir

PRESETS = ("smoke", "embedded", "paper")

C = TypeVar("C")


class ConfigError(ValueError):
    """A preset file or an override does not fit the configuration dataclass."""


def refuse_unused(
    overrides: Mapping[str, Any] | None, used: Collection[str], what: str, source: str
) -> None:
    """Refuse each override whose top-level field ``what`` does not read, rather than ignore it.

    ``used``: the top-level fields (sections or single fields) that shape one run of ``what``;
    the others belong to a chapter's pages (sweeps, seed lists, the corpus). ``source`` says
    where ``what`` reads its data instead of the ``corpus`` section. A ``ConfigError`` names the
    key and the fields that apply."""
    for key in overrides or {}:
        head = str(key).split(".", 1)[0]
        if head in used:
            continue
        why = (
            f"{what} reads its recordings from {source}, not the corpus section"
            if head == "corpus"
            else f"{what} trains one run, and {head!r} is a field of the chapter's pages"
        )
        raise ConfigError(
            f"--set {key}: not used ({why}); the fields that apply: {', '.join(sorted(used))}"
        )


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
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{where}: expected a mapping of {annotation.__name__} fields, got "
                f"{type(value).__name__} {value!r}"
            )
        return from_dict(annotation, value, source=where)
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
    values = merge(load_yaml(path), {k: v for k, v in overrides.items() if v is not None})
    return from_dict(cls, values, source=str(path))


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` applied; nested mappings merge field by field, and a dotted
    key (``"model.d_model"``) sets one field of a nested section."""
    out: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in base.items()}
    for key, value in overrides.items():
        head, dot, rest = key.partition(".")
        if dot:
            value, key = {rest: value}, head
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def preset_loader(
    cls: type[C], preset_dir: str | Path, steps_alone: tuple[str, ...] = ()
) -> typing.Callable[..., C]:
    """A chapter's ``load_config(preset, overrides=None, **more)``: the :class:`cls` of
    ``<preset_dir>/<preset>.yaml`` (:func:`load_preset`) with single-field overrides, given as
    a mapping or as keywords; dotted names set nested fields (``{"train.max_steps": 10}``) and
    ``None`` values are ignored. For each section of ``steps_alone``, a ``max_steps`` set
    without its ``num_epochs`` is the run's length (:func:`max_steps_alone`)."""

    def load_config(preset: str, overrides: Mapping[str, Any] | None = None, **more: Any) -> C:
        values = {**dict(overrides or {}), **more}
        if steps_alone:
            values = max_steps_alone(values, steps_alone)
        return load_preset(cls, preset_dir, preset, **values)

    load_config.__doc__ = (
        f"The chapter's :class:`{cls.__name__}` of ``preset`` (``{Path(preset_dir).name}/"
        f"<preset>.yaml``) with single-field overrides (:func:`audiorepro.config.preset_loader`)."
    )
    return load_config


def max_steps_alone(
    overrides: Mapping[str, Any], sections: tuple[str, ...] = ("train",)
) -> dict[str, Any]:
    """``overrides`` (``None`` values dropped, dotted keys nested) in which a training section's
    ``max_steps`` set without its ``num_epochs`` also lifts ``num_epochs`` to ``max_steps``.

    A preset caps a loop by both epochs and steps; raising only ``max_steps`` would otherwise
    leave the preset's epochs to stop training first. Every epoch holds at least one step, so
    ``max_steps`` epochs always reach ``max_steps`` steps; it suits sections whose learning rate
    does not follow ``num_epochs`` (a constant rate, or a plateau schedule).
    """
    nested = merge({}, copy.deepcopy({k: v for k, v in overrides.items() if v is not None}))
    for name in sections:
        section = nested.get(name)
        steps = section.get("max_steps") if isinstance(section, Mapping) else None
        # only a number of steps (>= 1) is a run length; another is refused naming max_steps
        if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 1:
            if section.get("num_epochs") is None:
                section["num_epochs"] = section["max_steps"]
    return nested


def replace(config: C, **changes: Any) -> C:
    """A copy of a (nested) configuration with some fields changed; a dotted name
    (``**{"model.d_model": 8}``) or a mapping changes fields of a nested section."""
    values = merge(dataclasses.asdict(config), changes)
    return from_dict(type(config), values, source=type(config).__name__)


CORPUS_KINDS = ("smoke", "embedded", "paper")


@dataclasses.dataclass(frozen=True)
class CorpusSpec:
    """Which corpus a chapter reads: one section of every chapter config.

    ``smoke`` and ``embedded`` are generated on first use, deterministically from ``seed``, under
    the data folder unless ``root`` names another place; ``paper`` reads a prepared real corpus
    from ``root`` (required).
    """

    kind: str = field("embedded", help="smoke | embedded (generated) | paper (a real corpus).")
    root: str | None = field(
        None,
        help="Corpus folder (absolute, or relative to the data folder); None: the generated "
        "corpus's default place. Required for paper.",
    )
    seed: int = field(0, help="Seed of a generated corpus (smoke, embedded).")

    def __post_init__(self) -> None:
        if self.kind not in CORPUS_KINDS:
            raise ConfigError(
                f"corpus.kind: expected one of {', '.join(CORPUS_KINDS)}, got {self.kind!r}"
            )
        if self.kind == "paper" and not self.root:
            raise ConfigError("corpus.root: a paper corpus needs the folder it was prepared in")

    def resolve(self, default: Path) -> Path:
        """The corpus folder: ``root`` (relative to the data folder when not absolute), else
        ``default`` (where the generator writes it)."""
        if self.root is None:
            return Path(default)
        root = Path(self.root).expanduser()
        return root if root.is_absolute() else data_dir() / root


def to_dict(config: Any) -> dict[str, Any]:
    """The configuration as plain JSON-friendly values (tuples become lists)."""

    def plain(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, tuple | list):
            return [plain(x) for x in v]
        if isinstance(v, Path):
            return str(v)
        return v

    return {k: plain(v) for k, v in dataclasses.asdict(config).items()}
