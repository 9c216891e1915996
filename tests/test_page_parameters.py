"""The parameters cell of a page: read with ast, listed by papermill, checked before execution."""

from __future__ import annotations

import ast

import nbformat
import papermill
import pytest

from audiorepro import pages
from audiorepro.page_parameters import (
    PageParameter,
    ParameterError,
    read_parameters,
    validate_parameters,
)
from audiorepro.pages import (
    book_pages,
    build_parameters,
    execute_page,
    page_parameters,
    page_script,
    read_page,
)
from conftest import REPO

PAGES = book_pages(REPO)

CELL = """from typing import Optional

preset: str = "embedded"  # smoke | embedded | paper
seed: Optional[int] = None  # None keeps the preset's
lr: float = 0.001
seeds: Optional[list[int]] = None  # several seeds
tiny: bool = False
"""

PAGE = (
    '# %% [markdown]\n# # T\n\n# %% tags=["parameters"]\n' + CELL + 'outfile: str = "v.txt"\n'
    "\n# %%\nfrom pathlib import Path\n\n"
    "Path(outfile).write_text(repr((preset, seed, lr, seeds, tiny)))\n"
)


def test_read_parameters_gives_names_annotations_defaults_help_and_page_lines():
    params = read_parameters(CELL, "cell", line_offset=10)
    assert list(params) == ["preset", "seed", "lr", "seeds", "tiny"]
    seed = params["seed"]
    assert (seed.annotation, seed.default, seed.help, seed.lineno) == (
        "Optional[int]",
        None,
        "None keeps the preset's",
        14,
    )
    assert params["preset"].default == "embedded" and params["lr"].help == ""


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x = 1\n", r"cell, line 1: a parameters cell holds only typed fields.*'x = 1'"),
        ("x: int = 1 + y\n", r"line 1: the default of 'x' must be a literal, got '1 \+ y'"),
        ('x: int = "a"\n', r"the default 'a' of 'x' does not fit its annotation int"),
        ("x: np.ndarray = None\n", r"line 1: unsupported annotation 'np.ndarray'"),
        ("x: list[int, str] = []\n", r"unsupported annotation 'list\[int, str\]'"),
        ("x: int = 1\nx: int = 2\n", r"line 2: 'x' is defined twice"),
        ("x: int = \n", r"cell, line 1: invalid syntax"),
    ],
)
def test_malformed_parameters_cell_names_line_and_problem(source, message):
    with pytest.raises(ParameterError, match=message):
        read_parameters(source, "cell")


ADMITS = [
    ("int", 3, True),
    ("int", True, False),
    ("int", 3.0, False),
    ("int", "3", False),
    ("float", 3, True),
    ("float", 0.5, True),
    ("float", "abc", False),
    ("str", "a", True),
    ("str", 1, False),
    ("bool", False, True),
    ("bool", 0, False),
    ("list[int]", [1, 2], True),
    ("list[int]", [1, "2"], False),
    ("list[int]", 1, False),
    ("Optional[int]", None, True),
    ("Optional[int]", 2, True),
    ("Optional[int]", "x", False),
    ("int | None", None, True),
    ("int | None", 1.5, False),
    ("Optional[list[int]]", [3], True),
    ("Optional[list[int]]", [3.5], False),
    ("Union[int, str]", "a", True),
    ("Union[int, str]", 1.5, False),
    ('Literal["smoke", "paper"]', "paper", True),
    ('Literal["smoke", "paper"]', "huge", False),
    ("dict[str, int]", {"a": 1}, True),
    ("dict[str, int]", {"a": "b"}, False),
]


@pytest.mark.parametrize(("annotation", "value", "ok"), ADMITS)
def test_values_are_checked_against_the_annotation(annotation, value, ok):
    node = ast.parse(annotation, mode="eval").body
    assert PageParameter("x", annotation, None, "", 1, node).admits(value) is ok


def test_unknown_and_mistyped_parameters_name_field_type_and_value():
    params = read_parameters(CELL)
    validate_parameters(params, {"seed": 3, "lr": 1, "seeds": [1, 2]}, "p.py")
    with pytest.raises(ParameterError) as err:
        validate_parameters(params, {"lr": "abc", "batch": 3}, "p.py")
    text = str(err.value)
    assert text.startswith("p.py: ")
    assert "parameter 'lr' expects float, got 'abc' (str)" in text
    assert "unknown parameter 'batch' (valid parameters: preset, seed, lr, seeds, tiny)" in text


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("seed", "3", 3),
        ("seed", "None", None),
        ("seed", "null", None),
        ("lr", "1e-3", 0.001),
        ("lr", "2", 2),
        ("preset", "yes", "yes"),
        ("preset", "12", "12"),
        ("seeds", "[1, 2]", [1, 2]),
        ("tiny", "true", True),
        ("seed", "abc", "abc"),
    ],
)
def test_command_line_text_is_read_by_the_annotation(name, text, value):
    assert read_parameters(CELL)[name].parse_text(text) == value


def test_execute_page_refuses_bad_parameters_before_running(tmp_path):
    page = tmp_path / "page.py"
    page.write_text(PAGE)
    out = tmp_path / "out" / "page.ipynb"
    with pytest.raises(ParameterError, match=r"unknown parameter 'outdir'"):
        execute_page(page, out, preset="smoke", parameters={"outdir": str(tmp_path)})
    with pytest.raises(ParameterError, match=r"page.py: parameter 'seed' expects Optional\[int\]"):
        execute_page(page, out, preset="smoke", parameters={"seed": "abc"})
    with pytest.raises(ParameterError, match="parameter 'preset' expects str, got 3"):
        execute_page(page, out, preset=3)
    assert not out.parent.exists()
    with pytest.raises(ParameterError, match="unknown parameter 'n'"):
        page_script(page, {"n": 1})


def test_cli_run_and_script_exit_non_zero_on_bad_parameters(tmp_path, capsys):
    page = tmp_path / "page.py"
    page.write_text(PAGE)
    out = tmp_path / "out.ipynb"
    assert pages.main(["run", str(page), str(out), "-p", "lr", "abc"]) == 1
    err = capsys.readouterr().err
    assert "parameter 'lr' expects float, got 'abc' (str)" in err
    assert pages.main(["run", str(page), str(out), "-p", "batch", "3"]) == 1
    assert "unknown parameter 'batch'" in capsys.readouterr().err
    assert pages.main(["script", str(page), "-p", "seeds", "[1, x]"]) == 1
    assert "parameter 'seeds' expects Optional[list[int]]" in capsys.readouterr().err
    assert not out.exists()


def test_cli_build_checks_parameters_of_every_selected_page_before_staging(tmp_path, capsys):
    stage = REPO / pages.STAGE_DIR
    before = stage.exists()
    assert pages.main(["build", "--only", "04_awe", "-p", "seed", "abc"]) == 1
    assert "02_train.py: parameter 'seed' expects Optional[int], got 'abc'" in (
        capsys.readouterr().err
    )
    assert pages.main(["build", "--only", "01_retrieval", "-p", "seed", "1"]) == 1
    assert "no selected page has the parameter(s) 'seed'" in capsys.readouterr().err
    assert stage.exists() == before  # refused before anything was staged


def test_build_parameters_go_to_the_pages_that_have_the_field():
    per_page = build_parameters("smoke", {"seed": 2}, root=REPO, only=["04_awe"])
    assert per_page == {
        page: {
            "preset": "smoke",
            **({"seed": 2} if "seed" in page_parameters(REPO / page) else {}),
        }
        for page in PAGES
        if "04_awe" in str(page)
    }
    assert {"preset": "smoke", "seed": 2} in per_page.values()
    assert {"preset": "smoke"} in per_page.values()


def test_cli_run_executes_with_values_read_by_annotation(tmp_path):
    page = tmp_path / "page.py"
    page.write_text(PAGE)
    argv = ["run", str(page), str(tmp_path / "out.ipynb"), "-p", "preset", "smoke"]
    argv += [
        "-p",
        "lr",
        "1e-3",
        "-p",
        "seed",
        "None",
        "-p",
        "seeds",
        "[4, 5]",
        "-p",
        "tiny",
        "yes",
    ]
    assert pages.main([*argv, "-p", "outfile", str(tmp_path / "v.txt")]) == 0
    assert (tmp_path / "v.txt").read_text() == "('smoke', None, 0.001, [4, 5], True)"


@pytest.mark.parametrize("page", PAGES, ids=[f"{p.parent.name}/{p.stem}" for p in PAGES])
def test_papermill_lists_every_parameter_with_type_and_default(page, tmp_path):
    ours = page_parameters(REPO / page)
    assert list(ours)[0] == "preset" and ours["preset"].default == "embedded"
    notebook = tmp_path / "page.ipynb"
    nbformat.write(read_page(REPO / page), notebook)
    theirs = papermill.inspect_notebook(str(notebook))
    assert list(theirs) == list(ours), "papermill --help-notebook misses parameters"
    for name, field in ours.items():
        assert theirs[name]["inferred_type_name"] == field.annotation, name
        assert ast.literal_eval(theirs[name]["default"]) == field.default, name
        assert theirs[name]["help"] == field.help, name
        assert field.help, f"{page}: parameter {name!r} has no comment saying what it does"
