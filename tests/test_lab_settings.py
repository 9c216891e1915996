"""``make lab``'s JupyterLab overrides: valid for the installed schemas, merged, and applied."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from jupyterlab_server.settings_utils import get_settings

from audiorepro import lab_settings
from audiorepro.lab_settings import (
    OVERRIDES,
    LabSettingsError,
    check_overrides,
    schema_path,
    write_overrides,
)
from conftest import REPO

DOCMANAGER = "@jupyterlab/docmanager-extension:plugin"
NOTIFICATION = "@jupyterlab/apputils-extension:notification"


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """An environment whose schemas and lab extensions are those installed here."""
    root = tmp_path / "env"
    for sub in ("lab/schemas", "labextensions"):
        link = root / "share" / "jupyter" / sub
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(sys.prefix) / "share" / "jupyter" / sub)
    return root


def test_overrides_are_keys_of_the_installed_schemas():
    check_overrides(OVERRIDES)
    for plugin, settings in OVERRIDES.items():
        properties = json.loads(schema_path(plugin).read_text())["properties"]
        assert set(settings) <= set(properties), plugin
    assert OVERRIDES[DOCMANAGER]["defaultViewers"] == {"python": "Jupytext Notebook"}
    assert OVERRIDES[NOTIFICATION]["fetchNews"] == "false"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({NOTIFICATION: {"fetchNewz": "false"}}, r"has no setting 'fetchNewz' \(it has: "),
        ({NOTIFICATION: {"fetchNews": "never"}}, r"'fetchNews' = 'never' does not fit"),
        ({NOTIFICATION: {"checkForUpdates": "no"}}, r"'checkForUpdates' = 'no' does not fit"),
        ({DOCMANAGER: {"defaultViewers": {"python": 3}}}, "does not fit its schema"),
        ({"@jupyterlab/nothing-extension:plugin": {"x": 1}}, "no settings schema for"),
    ],
)
def test_unknown_settings_and_values_are_refused(overrides, message):
    with pytest.raises(LabSettingsError, match=message):
        check_overrides(overrides)


def test_default_viewer_needs_the_jupytext_lab_extension(tmp_path):
    root = tmp_path / "env"
    (root / "share/jupyter/lab").mkdir(parents=True)
    (root / "share/jupyter/lab/schemas").symlink_to(Path(sys.prefix) / "share/jupyter/lab/schemas")
    with pytest.raises(LabSettingsError, match="no jupytext lab extension registering"):
        write_overrides(root)
    assert not lab_settings.settings_path(root).exists()


def test_write_merges_with_existing_overrides(prefix):
    path = lab_settings.settings_path(prefix)
    path.parent.mkdir(parents=True)
    existing = {
        "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
        DOCMANAGER: {"defaultViewers": {"markdown": "Markdown Preview"}, "autosave": False},
        NOTIFICATION: {"fetchNews": "true", "doNotDisturbMode": True},
    }
    path.write_text(json.dumps(existing))
    assert write_overrides(prefix) == path
    written = json.loads(path.read_text())
    assert written == {
        "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"},
        DOCMANAGER: {
            "defaultViewers": {"markdown": "Markdown Preview", "python": "Jupytext Notebook"},
            "autosave": False,
        },
        NOTIFICATION: {"fetchNews": "false", "doNotDisturbMode": True, "checkForUpdates": False},
    }
    write_overrides(prefix)  # idempotent
    assert json.loads(path.read_text()) == written


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"a": 3}'])
def test_unreadable_existing_overrides_are_refused_and_kept(prefix, text):
    path = lab_settings.settings_path(prefix)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(
        LabSettingsError, match=r"overrides.json: (not valid JSON|expected an obj)"
    ):
        write_overrides(prefix)
    assert path.read_text() == text


def test_jupyterlab_server_applies_the_written_overrides(prefix, tmp_path, capsys):
    assert lab_settings.main(["--prefix", str(prefix)]) == 0
    assert "overrides.json" in capsys.readouterr().out
    app_settings = lab_settings.settings_path(prefix).parent
    schemas = prefix / "share/jupyter/lab/schemas"
    found = {}
    for plugin in (DOCMANAGER, NOTIFICATION):
        result, _ = get_settings(
            str(app_settings), str(schemas), str(tmp_path / "user"), schema_name=plugin
        )
        found[plugin] = {k: v.get("default") for k, v in result["schema"]["properties"].items()}
    assert found[DOCMANAGER]["defaultViewers"] == {"python": "Jupytext Notebook"}
    assert found[NOTIFICATION]["fetchNews"] == "false"
    assert found[NOTIFICATION]["checkForUpdates"] is False


def test_cli_exits_non_zero_on_a_broken_overrides_file(prefix, capsys):
    path = lab_settings.settings_path(prefix)
    path.parent.mkdir(parents=True)
    path.write_text("{")
    assert lab_settings.main(["--prefix", str(prefix)]) == 1
    assert "not valid JSON" in capsys.readouterr().err


def test_install_step_writes_the_settings():
    recipe = (REPO / "Makefile").read_text().split("$(STAMP): pyproject.toml", 1)[1]
    recipe = recipe.split("\n\n", 1)[0]
    assert "$(VPY) -m audiorepro.lab_settings" in recipe
