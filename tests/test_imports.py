"""The import rules of the library and the book, read from the source with ``ast`` (nothing is
imported): no cycle between modules, the concept layers never reach up into the training loop or
the chapter experiments, only the experiments layer (and the page runner) is imported by name from
outside, and book pages use the experiments layer and a few helpers, never private names."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "lib" / "audiorepro"
BOOK = REPO / "book"

#: The concept layers: models, features, losses, metrics, data, distillation, the storage layer,
#: configuration and paths. None of them imports from :data:`UPPER_LAYERS`.
LOWER_LAYERS = (
    "audiorepro.models",
    "audiorepro.features",
    "audiorepro.losses",
    "audiorepro.metrics",
    "audiorepro.data",
    "audiorepro.distillation",
    "audiorepro.storage",
    "audiorepro.config",
    "audiorepro.paths",
)

#: The model-agnostic training loop and the chapter experiments, built on the lower layers.
UPPER_LAYERS = ("audiorepro.training", "audiorepro.experiments")

#: The chapter experiments: imported only from inside it and by these modules.
EXPERIMENTS = "audiorepro.experiments"
EXPERIMENTS_IMPORTERS = ("audiorepro.pages", "audiorepro.cli")

#: What a book page may import from audiorepro (a module and everything below it).
PAGE_IMPORTS = (
    "audiorepro.experiments",
    "audiorepro.reporting",
    "audiorepro.plotting",
    "audiorepro.config",
)

#: What the data pages may import in addition: they show the corpora and front ends and have no
#: experiments module of their own.
DATA_PAGES = "00_data"
DATA_PAGE_IMPORTS = (
    "audiorepro.data",
    "audiorepro.features",
    "audiorepro.signals",  # the test signals the front-end page plots
    "audiorepro.repro",  # seed_everything for the page's random example
    "audiorepro.paths",  # where the page's presets live
)


# ----------------------------------------------------------------------------- reading the source


def module_name(path: Path) -> str:
    """``lib/audiorepro/data/manifests.py`` → ``audiorepro.data.manifests``; a package's
    ``__init__.py`` is the package itself."""
    parts = list(path.relative_to(LIB.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def library_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(LIB.rglob("*.py")) if "__pycache__" not in p.parts}


MODULES = library_modules()


def is_within(name: str, prefix: str) -> bool:
    """``name`` is the module ``prefix`` or below it."""
    return name == prefix or name.startswith(prefix + ".")


def imports(tree: ast.AST, current: str, is_package: bool) -> Iterator[tuple[str, list[str], int]]:
    """``(module, imported names, line)`` of every audiorepro import in the tree, at any depth
    (function-level imports too). Relative imports are resolved against ``current``; in
    ``from package import name`` a ``name`` that is a module of the library counts as importing
    that module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_within(alias.name, "audiorepro"):
                    yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = current.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if not is_within(module, "audiorepro"):
                continue
            names = [alias.name for alias in node.names]
            submodules = [n for n in names if f"{module}.{n}" in MODULES]
            for name in submodules:
                yield f"{module}.{name}", [], node.lineno
            rest = [n for n in names if n not in submodules]
            if rest or not submodules:
                yield module, rest, node.lineno


def target(module: str) -> str | None:
    """The library module an import name refers to (the longest known prefix)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in MODULES:
            return name
    return None


def import_graph() -> dict[str, dict[str, int]]:
    """``{module: {imported module: first line}}`` over the library."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: dict[str, int] = {}
        for module, _, line in imports(tree, name, path.name == "__init__.py"):
            dest = target(module)
            if dest is not None and dest != name:
                edges.setdefault(dest, line)
        graph[name] = edges
    return graph


GRAPH = import_graph()


def where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(REPO)}:{line}"


# ----------------------------------------------------------------------------- the library


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, {})):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def cycle_path(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """One cycle through the first module of a strongly connected component (breadth first, so
    the shortest), as ``[a, b, ..., a]``."""
    start, members = component[0], set(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node]):
                if nxt not in members:
                    continue
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if nxt not in parents:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover


def describe_cycle(graph: dict[str, dict[str, int]], path: list[str]) -> str:
    steps = [f"{a} -> {b} ({where(a, graph[a][b])})" for a, b in zip(path, path[1:], strict=False)]
    return "\n    ".join(steps)


def test_the_import_graph_is_read():
    assert "audiorepro.data.manifests" in MODULES and "audiorepro.data" in MODULES
    # Both forms of import are edges: top-level and inside functions.
    assert "audiorepro.data.sources" in GRAPH["audiorepro.data.manifests"]
    tree = ast.parse("def f():\n    from audiorepro.models import passt\n")
    assert list(imports(tree, "audiorepro.x", False)) == [("audiorepro.models.passt", [], 2)]
    tree = ast.parse("from . import atomic\nfrom ..manifests import Problem\n")
    found = list(imports(tree, "audiorepro.data.embedded.word_corpus", False))
    assert found == [
        ("audiorepro.data.embedded.atomic", [], 1),
        ("audiorepro.data.manifests", ["Problem"], 2),
    ]
    cycle = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}
    assert strongly_connected(cycle) == [["a", "b", "c"]]
    assert cycle_path(cycle, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_cycle():
    cycles = [cycle_path(GRAPH, component) for component in strongly_connected(GRAPH)]
    assert not cycles, "import cycles:\n  " + "\n  ".join(
        describe_cycle(GRAPH, path) for path in cycles
    )


def test_lower_layers_never_import_training_or_experiments():
    bad = [
        f"{where(module, line)}: {module} imports {dest}"
        for module, edges in GRAPH.items()
        if any(is_within(module, layer) for layer in LOWER_LAYERS)
        for dest, line in edges.items()
        if any(is_within(dest, upper) for upper in UPPER_LAYERS)
    ]
    assert not bad, "lower layers reach up:\n  " + "\n  ".join(bad)


def test_only_the_page_runner_imports_the_experiments_from_outside():
    bad = [
        f"{where(module, line)}: {module} imports {dest}"
        for module, edges in GRAPH.items()
        if not is_within(module, EXPERIMENTS) and module not in EXPERIMENTS_IMPORTERS
        for dest, line in edges.items()
        if is_within(dest, EXPERIMENTS)
    ]
    assert not bad, "imports of the experiments from outside them:\n  " + "\n  ".join(bad)


# ----------------------------------------------------------------------------- the book

_MAGIC = re.compile(r"^(\s*)[%!]")


def page_source(path: Path, text: str | None = None) -> str:
    """A percent-format page as Python: IPython magics and shell escapes (``%time``, ``!ls``)
    become ``pass`` with the same indentation (jupytext's commented ``# %`` cells are comments
    already)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    return "\n".join(_MAGIC.sub(r"\1pass  # ", line) for line in text.splitlines())


def pages() -> list[Path]:
    return sorted(p for p in BOOK.rglob("*.py") if "_build" not in p.parts)


def page_problems(path: Path, source: str | None = None) -> list[str]:
    """Every audiorepro import of a page outside its allowed list, every private name it
    imports, and every private attribute it takes from an imported audiorepro module."""
    allowed = PAGE_IMPORTS
    if DATA_PAGES in path.relative_to(BOOK).parts:
        allowed = allowed + DATA_PAGE_IMPORTS
    source = page_source(path) if source is None else source
    tree = ast.parse(source, filename=str(path))
    here = path.relative_to(REPO)
    problems = []
    for module, names, line in imports(tree, "book", False):
        if not any(is_within(module, a) for a in allowed):
            problems.append(f"{here}:{line}: imports {module}")
        problems += [f"{here}:{line}: imports private {module}.{n}" for n in names if n[0] == "_"]
        private = [p for p in module.split(".") if p.startswith("_")]
        if private:
            problems.append(f"{here}:{line}: imports private module {module}")
    # Names bound to audiorepro modules: ``from audiorepro.experiments import zerospeech as zs``.
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = getattr(node, "module", None) or ""
            for alias in node.names:
                full = alias.name if isinstance(node, ast.Import) else f"{module}.{alias.name}"
                if is_within(full, "audiorepro"):
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            problems.append(f"{here}:{node.lineno}: uses private {node.value.id}.{node.attr}")
    return problems


def test_page_rules_catch_what_they_should():
    page = BOOK / "01_retrieval" / "probe.py"
    text = (
        "# %%\n%matplotlib inline\nfrom audiorepro.experiments import retrieval as r\n"
        "from audiorepro.training.loop import fit\nfrom audiorepro.reporting import _says\n"
        "def f():\n    !ls\n    return r._private, r.__doc__\n"
    )
    problems = page_problems(page, page_source(page, text))
    assert len(problems) == 3, problems
    assert "imports audiorepro.training.loop" in problems[0]
    assert "imports private audiorepro.reporting._says" in problems[1]
    assert "uses private r._private" in problems[2]
    data_page = BOOK / DATA_PAGES / "probe.py"
    text = "from audiorepro.features import load_audio\nfrom audiorepro.data.embedded import x\n"
    assert page_problems(data_page, page_source(data_page, text)) == []
    assert len(page_problems(page, page_source(page, text))) == 2


def test_pages_import_only_the_experiments_layer_and_no_private_names():
    problems = [p for path in pages() for p in page_problems(path)]
    assert not problems, (
        f"book pages break the import rules (allowed: {', '.join(PAGE_IMPORTS)}; in "
        f"{DATA_PAGES} also {', '.join(DATA_PAGE_IMPORTS)}; no private names):\n  "
        + "\n  ".join(problems)
    )


# ----------------------------------------------------------------------------- chapter packages

#: Each chapter is a package whose files have one order (its ``FILES``); these six come in this
#: relative order in every chapter, around files named after their science.
CORE_FILES = ("config", "data", "train", "evaluate", "plan", "findings")

#: The chapters in the book's order: a chapter may build on an earlier one, never on a later.
CHAPTER_PACKAGES = ("retrieval", "distillation", "zerospeech", "awe")

#: Longest file under these packages, in lines: a file a reader can take in.
MAX_LINES = 700
SIZED = ("audiorepro.experiments", "audiorepro.training")


def package_files(chapter: str) -> tuple[str, ...]:
    """The declared order of a chapter package's files (``FILES`` in its ``__init__``, read
    with ``ast``)."""
    init = LIB / "experiments" / chapter / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "FILES" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{init.relative_to(REPO)} declares no FILES")


def order_problems(
    chapter: str, files: tuple[str, ...], graph: dict[str, dict[str, int]]
) -> list[str]:
    """Every import of a chapter file that runs back up its package's order (a file importing
    one listed after it, or itself through the package), and every import of a later chapter."""
    package = f"audiorepro.experiments.{chapter}"
    rank = {f"{package}.{name}": i for i, name in enumerate(files)}
    later = CHAPTER_PACKAGES[CHAPTER_PACKAGES.index(chapter) + 1 :]
    problems = []
    for module, position in rank.items():
        for dest, line in graph.get(module, {}).items():
            at = where(module, line) if module in MODULES else f"{module}:{line}"
            if dest == package:
                problems.append(f"{at}: {module} imports its package's __init__")
            elif dest in rank and rank[dest] >= position:
                problems.append(f"{at}: {module} imports {dest}, after it")
            elif any(is_within(dest, f"audiorepro.experiments.{c}") for c in later):
                problems.append(f"{at}: {module} imports a later chapter {dest}")
    return problems


def test_order_rule_catches_an_import_running_back_up():
    pkg = "audiorepro.experiments.awe"
    graph = {f"{pkg}.config": {f"{pkg}.train": 3}, f"{pkg}.train": {f"{pkg}.config": 1}}
    files = ("config", "data", "train")
    if f"{pkg}.config" in MODULES:
        problems = order_problems("awe", files, graph)
        assert (
            len(problems) == 1
            and "imports audiorepro.experiments.awe.train, after it" in (problems[0])
        )
    assert order_problems("retrieval", (), {}) == []


@pytest.mark.parametrize("chapter", CHAPTER_PACKAGES)
def test_a_chapter_file_imports_only_the_files_before_it(chapter):
    files = package_files(chapter)
    on_disk = {
        p.stem for p in (LIB / "experiments" / chapter).glob("*.py") if p.name != "__init__.py"
    }
    assert set(files) == on_disk, f"{chapter}: FILES {files} but the folder holds {on_disk}"
    core = [f for f in files if f in CORE_FILES]
    assert core == list(CORE_FILES), f"{chapter}: core files {core}, expected {CORE_FILES}"
    problems = order_problems(chapter, files, GRAPH)
    assert not problems, "\n  ".join(problems)


def test_no_experiments_or_training_file_is_longer_than_a_reader_takes_in():
    long = {
        f"{path.relative_to(REPO)}: {n} lines"
        for name, path in MODULES.items()
        if any(is_within(name, s) for s in SIZED)
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines:\n  " + "\n  ".join(sorted(long))


def private_uses(tree: ast.AST, current: str, is_package: bool, of: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every private name ``tree`` takes from a module within ``of``:
    imported by name, or read as an attribute of a name bound to such a module."""
    found = [
        (line, f"{module}.{n}")
        for module, names, line in imports(tree, current, is_package)
        if is_within(module, of)
        for n in names
        if n.startswith("_") and not n.startswith("__")
    ]
    bound = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and is_within(node.module or "", of)
        for alias in node.names
    }
    found += [
        (node.lineno, f"{node.value.id}.{node.attr}")
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in bound
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]
    return found


def test_private_use_is_found():
    tree = ast.parse(
        "from audiorepro.experiments.awe.train import _fit, train\n"
        "from audiorepro.experiments import zerospeech as zs\nzs._int_lines(1)\n"
    )
    got = private_uses(tree, "audiorepro.cli", False, "audiorepro.experiments")
    assert got == [(1, "audiorepro.experiments.awe.train._fit"), (3, "zs._int_lines")]


def test_nothing_outside_a_chapter_uses_its_private_names():
    """The command (cli.py), the page runner and the other chapters use a chapter's public
    names only: what they need is part of that chapter's documented surface."""
    problems = [
        f"{where(name, line)}: {name} uses private {what}"
        for chapter in CHAPTER_PACKAGES
        for name, path in MODULES.items()
        if not is_within(name, f"audiorepro.experiments.{chapter}")
        for line, what in private_uses(
            ast.parse(path.read_text(encoding="utf-8")),
            name,
            path.name == "__init__.py",
            f"audiorepro.experiments.{chapter}",
        )
    ]
    assert not problems, "\n  ".join(problems)
