"""JupyterLab settings for ``make lab``: pages open as notebooks, and nothing asks about news.

The book's pages are jupytext percent ``.py`` files. JupyterLab opens a ``.py`` file in its text
editor unless the ``python`` file type's default viewer is jupytext's notebook view, and on its
first start it asks whether to fetch the Jupyter news feed. Both are settings, which this module
writes as JupyterLab *overrides* (``<prefix>/share/jupyter/lab/settings/overrides.json``, the
defaults every user of that environment starts from)::

    python -m audiorepro.lab_settings [--prefix .venv]

The project's install step (``make install``) runs it. Keys are checked against the settings
schemas of the installed JupyterLab and jupytext before anything is written, and overrides
already in the file for other settings are kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from audiorepro.storage import atomic_write

#: The factory name under which jupytext's lab extension registers its notebook view.
JUPYTEXT_FACTORY = "Jupytext Notebook"

#: ``{plugin id: {setting: value}}`` written into ``overrides.json``.
OVERRIDES: dict[str, dict[str, Any]] = {
    # double-clicking a .py page opens it as a notebook (jupytext), not as text
    "@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"python": JUPYTEXT_FACTORY}},
    # never fetch the Jupyter news feed or check for updates, and so never ask about it
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


class LabSettingsError(RuntimeError):
    """A setting the installed JupyterLab does not know, or an unreadable overrides file."""


def settings_path(prefix: str | Path = sys.prefix) -> Path:
    """``overrides.json`` of the environment at ``prefix``, where JupyterLab reads it."""
    return Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def schema_path(plugin: str, prefix: str | Path = sys.prefix) -> Path:
    """The settings schema of ``plugin`` (``package:plugin``) in the environment at ``prefix``.

    Core plugins have theirs under ``share/jupyter/lab/schemas``, prebuilt extensions (jupytext)
    under ``share/jupyter/labextensions/<package>/schemas``.
    """
    package, _, name = plugin.partition(":")
    jupyter = Path(prefix) / "share" / "jupyter"
    for base in (jupyter / "lab" / "schemas", jupyter / "labextensions" / package / "schemas"):
        candidate = base / package / f"{name}.json"
        if candidate.is_file():
            return candidate
    raise LabSettingsError(
        f"no settings schema for {plugin!r} under {jupyter}/lab/schemas or "
        f"{jupyter}/labextensions: is JupyterLab installed in {prefix}?"
    )


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    """The subset of JSON Schema the settings here use: type, const, oneOf, and the value type
    of an object's additional properties."""
    if "oneOf" in schema:
        return any(_fits(value, option) for option in schema["oneOf"])
    if "const" in schema:
        return value == schema["const"]
    kinds = {"string": str, "boolean": bool, "object": dict, "number": (int, float)}
    kind = schema.get("type")
    if kind is not None and not isinstance(value, kinds[kind]):
        return False
    extra = schema.get("additionalProperties")
    if kind == "object" and isinstance(extra, Mapping):
        return all(_fits(item, extra) for item in value.values())
    return True


def check_overrides(
    overrides: Mapping[str, Mapping[str, Any]], prefix: str | Path = sys.prefix
) -> None:
    """Raise :class:`LabSettingsError` unless every plugin has a schema, every setting is one of
    its properties and every value fits that property's schema; the default viewer must be a
    factory that the installed jupytext lab extension registers."""
    for plugin, settings in overrides.items():
        path = schema_path(plugin, prefix)
        properties = json.loads(path.read_text(encoding="utf-8")).get("properties", {})
        for key, value in settings.items():
            if key not in properties:
                raise LabSettingsError(
                    f"{path}: {plugin} has no setting {key!r} (it has: {', '.join(properties)})"
                )
            if not _fits(value, properties[key]):
                raise LabSettingsError(
                    f"{path}: {plugin} setting {key!r} = {value!r} does not fit its schema "
                    f"{json.dumps(properties[key])}"
                )
    viewers = overrides.get("@jupyterlab/docmanager-extension:plugin", {}).get("defaultViewers")
    if viewers:
        static = Path(prefix) / "share/jupyter/labextensions/jupyterlab-jupytext/static"
        scripts = sorted(static.glob("*.js")) if static.is_dir() else []
        registered = any(
            f'"{JUPYTEXT_FACTORY}"' in p.read_text(encoding="utf-8", errors="replace")
            for p in scripts
        )
        if not registered:
            raise LabSettingsError(
                f"{static}: no jupytext lab extension registering the {JUPYTEXT_FACTORY!r} "
                "viewer; install the book extras (pip install -e '.[book]')"
            )


def merged(existing: Mapping[str, Any], overrides: Mapping[str, Mapping[str, Any]]) -> dict:
    """``existing`` overrides with ``overrides`` laid over them, plugin by plugin and, for the
    object-valued settings (``defaultViewers``), key by key; everything else is kept."""
    result = {plugin: dict(settings) for plugin, settings in existing.items()}
    for plugin, settings in overrides.items():
        target = result.setdefault(plugin, {})
        for key, value in settings.items():
            if isinstance(value, Mapping) and isinstance(target.get(key), Mapping):
                target[key] = {**target[key], **value}
            else:
                target[key] = value
    return result


def write_overrides(
    prefix: str | Path = sys.prefix, overrides: Mapping[str, Mapping[str, Any]] = OVERRIDES
) -> Path:
    """Check ``overrides`` against the installed schemas and merge them into the environment's
    ``overrides.json`` (written atomically); returns its path.

    An existing file that is not a JSON object of objects is an error naming it; nothing is
    written then.
    """
    check_overrides(overrides, prefix)
    path = settings_path(prefix)
    existing: Any = {}
    if path.exists():
        try:
            existing = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise LabSettingsError(f"{path}: not valid JSON ({err})") from err
        if not isinstance(existing, dict) or not all(
            isinstance(v, dict) for v in existing.values()
        ):
            raise LabSettingsError(f"{path}: expected an object of {{plugin id: {{settings}}}}")
    text = json.dumps(merged(existing, overrides), indent=2) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: write the overrides into the environment at ``--prefix``."""
    parser = argparse.ArgumentParser(
        prog="python -m audiorepro.lab_settings", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--prefix", default=sys.prefix, help="the environment (default: this Python's)"
    )
    args = parser.parse_args(argv)
    try:
        path = write_overrides(args.prefix)
    except LabSettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"JupyterLab settings: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
