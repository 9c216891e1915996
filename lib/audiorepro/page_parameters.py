"""The typed parameters cell of a book page, read with ``ast`` and checked before execution.

Every page has one cell tagged ``parameters`` (STYLE.md, item 3) of annotated assignments with
literal defaults and a comment saying what the field does::

    from typing import Optional

    preset: str = "embedded"  # smoke | embedded | paper
    seed: Optional[int] = None  # None keeps the preset's

:func:`read_parameters` turns such a cell into :class:`PageParameter` records, and
:func:`validate_parameters` checks given values against them before anything executes: an
unknown name or a value that does not fit the annotation is a :class:`ParameterError` naming the
page, the parameter, the expected type and the value.

Optional fields are spelled ``Optional[int]`` rather than ``int | None``: papermill's own reader
of parameters cells (``PythonTranslator.inspect``, which ``papermill --help-notebook`` prints)
only accepts annotations made of names, brackets and commas, and silently drops a parameter whose
annotation has a ``|``.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

#: The names an annotation may be built from, and what each admits.
SCALARS: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (float, int),
    "str": (str,),
    "bool": (bool,),
}
#: Generic containers: the name and the Python type of the value.
CONTAINERS: dict[str, type] = {"list": list, "List": list, "dict": dict, "Dict": dict}


class ParameterError(ValueError):
    """A page's parameters cell is malformed, or a given parameter does not fit it."""


@dataclass(frozen=True)
class PageParameter:
    """One field of a page's parameters cell.

    Attributes:
        name: the variable, e.g. ``seed``.
        annotation: the annotation's source text, e.g. ``Optional[int]``.
        default: the literal default value.
        help: the comment after the assignment (empty when there is none).
        lineno: line of the assignment in the page (in the cell when the offset is unknown).
        node: the annotation's syntax tree, which :meth:`admits` walks.
    """

    name: str
    annotation: str
    default: Any
    help: str
    lineno: int
    node: ast.expr = field(repr=False, compare=False)

    def admits(self, value: Any) -> bool:
        """Whether ``value`` fits the annotation (``int`` is accepted where ``float`` is)."""
        return _admits(self.node, value)

    def parse_text(self, text: str) -> Any:
        """A command-line value for this parameter, read as YAML and then by the annotation.

        ``-p seed 3`` gives ``3`` and ``-p seed None`` gives ``None`` for ``Optional[int]``;
        ``-p word yes`` gives ``"yes"`` for ``str`` (YAML would say ``True``) and ``-p lr 1e-3``
        gives ``0.001`` for ``float`` (YAML 1.1 would say ``"1e-3"``). A text that fits no
        reading is returned as YAML reads it, for :func:`validate_parameters` to refuse.
        """
        value = yaml.safe_load(text)
        if self.admits(value):
            return value
        if text.strip() == "None" and self.admits(None):
            return None
        if self.admits(text):
            return text
        try:
            number = float(text)
        except ValueError:
            return value
        return number if self.admits(number) else value


def _admits(node: ast.expr, value: Any) -> bool:
    if isinstance(node, ast.Constant) and node.value is None:
        return value is None
    if isinstance(node, ast.Name):
        if node.id == "None":
            return value is None
        if node.id == "bool":
            return isinstance(value, bool)
        return isinstance(value, SCALARS[node.id]) and not isinstance(value, bool)
    if isinstance(node, ast.BinOp):  # X | Y
        return _admits(node.left, value) or _admits(node.right, value)
    assert isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
    outer, args = node.value.id, _subscript_args(node)
    if outer == "Optional":
        return value is None or _admits(args[0], value)
    if outer == "Union":
        return any(_admits(arg, value) for arg in args)
    if outer == "Literal":
        return any(
            type(value) is type(arg.value) and value == arg.value
            for arg in args
            if isinstance(arg, ast.Constant)
        )
    if not isinstance(value, CONTAINERS[outer]):
        return False
    if CONTAINERS[outer] is list:
        return all(_admits(args[0], item) for item in value)
    return all(_admits(args[0], k) and _admits(args[1], v) for k, v in value.items())


def _subscript_args(node: ast.Subscript) -> list[ast.expr]:
    inner = node.slice
    return list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]


def _check_annotation(node: ast.expr, where: str) -> None:
    """Refuse annotations :func:`_admits` cannot check, naming the page and line."""
    if isinstance(node, ast.Constant) and node.value is None:
        return
    if isinstance(node, ast.Name) and (node.id in SCALARS or node.id == "None"):
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _check_annotation(node.left, where)
        _check_annotation(node.right, where)
        return
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        outer, args = node.value.id, _subscript_args(node)
        arity = {"Optional": 1, "list": 1, "List": 1, "dict": 2, "Dict": 2}
        if outer == "Literal" and all(isinstance(a, ast.Constant) for a in args):
            return
        if outer == "Union" or arity.get(outer) == len(args):
            for arg in args:
                _check_annotation(arg, where)
            return
    raise ParameterError(
        f"{where}: unsupported annotation {ast.unparse(node)!r}; use int, float, str, bool, "
        "None, list[...], dict[..., ...], Literal[...], Optional[...] or Union[...]"
    )


def _comments(source: str) -> dict[int, str]:
    """The comment on each line of ``source``, by line number, without the ``#``."""
    found: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = tok.string.lstrip("#").strip()
    return found


def read_parameters(
    source: str, origin: str = "<parameters cell>", line_offset: int = 0
) -> dict[str, PageParameter]:
    """The fields of a parameters cell, in order.

    ``line_offset`` is the number of lines above the cell's first line in the page, so that
    errors and :attr:`PageParameter.lineno` give the line in the page file.

    The cell may hold imports (``from typing import Optional``) and annotated assignments
    ``name: annotation = literal``; anything else (a bare assignment, a computed default, a
    default that does not fit its own annotation) is a :class:`ParameterError` naming ``origin``
    and the line.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise ParameterError(
            f"{origin}, line {(err.lineno or 0) + line_offset}: {err.msg}"
        ) from err
    comments = _comments(source)
    params: dict[str, PageParameter] = {}
    for stmt in tree.body:
        lineno = stmt.lineno + line_offset
        where = f"{origin}, line {lineno}"
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            continue
        if not (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.value is not None
        ):
            raise ParameterError(
                f"{where}: a parameters cell holds only typed fields "
                f"`name: type = literal`, got {ast.unparse(stmt)!r}"
            )
        name = stmt.target.id
        _check_annotation(stmt.annotation, where)
        try:
            default = ast.literal_eval(stmt.value)
        except ValueError as err:
            raise ParameterError(
                f"{where}: the default of {name!r} must be a literal, "
                f"got {ast.unparse(stmt.value)!r}"
            ) from err
        param = PageParameter(
            name=name,
            annotation=ast.unparse(stmt.annotation),
            default=default,
            help=comments.get(stmt.lineno, ""),
            lineno=lineno,
            node=stmt.annotation,
        )
        if not param.admits(default):
            raise ParameterError(
                f"{where}: the default {default!r} of {name!r} does not fit its annotation "
                f"{param.annotation}"
            )
        if name in params:
            raise ParameterError(f"{where}: {name!r} is defined twice")
        params[name] = param
    return params


def validate_parameters(
    params: Mapping[str, PageParameter], given: Mapping[str, Any], origin: str
) -> None:
    """Raise :class:`ParameterError` unless every given name is a field of ``params`` and every
    value fits that field's annotation. Checks all given values and reports every problem."""
    problems = []
    for name, value in given.items():
        if name not in params:
            problems.append(
                f"unknown parameter {name!r} (valid parameters: {', '.join(params) or 'none'})"
            )
        elif not params[name].admits(value):
            problems.append(
                f"parameter {name!r} expects {params[name].annotation}, "
                f"got {value!r} ({type(value).__name__})"
            )
    if problems:
        raise ParameterError(f"{origin}: " + "; ".join(problems))
