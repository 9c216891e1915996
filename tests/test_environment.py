"""pyproject.toml is the one dependency source; environment.yml must mirror it exactly."""

from __future__ import annotations

import re
import tomllib

import yaml

from conftest import REPO


def normalise(req: str) -> str:
    name, rest = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(.*)", req.strip()).groups()
    return re.sub(r"[-_.]+", "-", name.lower()) + rest.replace(" ", "")


def pyproject_requirements() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    return {normalise(r) for r in reqs}


def environment_requirements() -> set[str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    python = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert f"python{python}" in env["dependencies"], f"environment.yml's python is not {python}"
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return {normalise(r) for r in pip if not r.startswith("-e")}


def test_environment_yml_mirrors_pyproject():
    ours, theirs = pyproject_requirements(), environment_requirements()
    assert ours == theirs, (
        f"only in pyproject: {ours - theirs}; only in environment.yml: {theirs - ours}"
    )


def test_torch_is_pinned_exactly_and_majors_bounded():
    reqs = pyproject_requirements()
    assert "torch==2.13.0" in reqs
    assert any(r.startswith("jupyter-book>=1.0.4,<2") for r in reqs)
    for name in ("transformers", "pandas"):
        spec = next(r for r in reqs if r.startswith(name))
        assert "<" in spec, f"{name} needs an upper bound on its major version: {spec}"


def test_the_supported_pythons_agree_in_pyproject_and_the_makefile():
    """3.11-3.13: the Makefile looks for exactly the versions pyproject admits."""
    python = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert python == ">=3.11,<3.14"
    makefile = (REPO / "Makefile").read_text()
    found = re.search(r"^SUPPORTED_PYTHONS := (.*)$", makefile, re.M)
    assert found and found.group(1).split() == ["python3.11", "python3.12", "python3.13"]
