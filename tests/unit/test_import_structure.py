"""The package's imports flow one way: no module imports itself back through others (no
circle), and the lowest layers import nothing above them: moses/ (Moses's formats) imports no
other subpackage, data/ only moses/, model/ only moses/ and data/; every other subpackage
(training, rescoring, lm, reranking, parallel, pipeline, experiment, analysis, cli) is above
those three.

The imports are read from the source with ``ast`` (nothing is run): every ``import`` and ``from
... import`` of every module, those inside functions and under ``TYPE_CHECKING`` included, with
relative imports resolved against the module's package. An import of a package's
``__init__`` (``from . import cli``, the way click commands join their group) is no edge of a
circle: a package's ``__init__`` runs before any of its modules whoever imports them.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

#: The lowest layers, lowest first; every other subpackage is above all three.
LOWER_LAYERS = ("moses", "data", "model")


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under the package directory ``root`` (a package by
    its own name, for its ``__init__.py``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The module ``name`` names: itself, else its longest prefix that is a module (an attribute
    of a module, or a package's re-export); None outside the package."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (anywhere in its source)."""
    mods = modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        package = m.split(".") if path.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    assert len(base) == len(package) - node.level + 1, f"{path}:{node.lineno}: beyond the top"
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                # from X import a: the submodule X.a where there is one, else X itself
                names = [
                    f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in mods else origin for alias in node.names
                ]
            else:
                continue
            for name in names:
                target = _resolve(name, mods)
                if target is not None and target != m:
                    graph[m].add(target)
    return graph


def circles(graph: dict[str, set[str]], mods: dict[str, Path]) -> list[list[str]]:
    """The sets of two or more modules that import each other, directly or through others
    (strongly connected components, Tarjan), package ``__init__`` modules left out."""
    edges = {
        m: sorted(t for t in targets if mods[t].name != "__init__.py")
        for m, targets in graph.items()
        if mods[m].name != "__init__.py"
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth: the longest import chain, a few dozen
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def upward_imports(graph: dict[str, set[str]], mods: dict[str, Path]) -> list[str]:
    """``a -> b`` for every import of a module of a lower layer from a higher subpackage."""
    subpackages = {m.split(".")[1] for m in mods if m.count(".") >= 2}
    rank = {name: i for i, name in enumerate(LOWER_LAYERS)}
    out = []
    for m, targets in sorted(graph.items()):
        layer = m.split(".")[1] if m.count(".") >= 2 else None
        if layer not in rank:
            continue
        for t in sorted(targets):
            other = t.split(".")[1] if t.count(".") >= 1 else None
            if other is None or other == layer or other not in subpackages:
                continue  # the package itself, its own layer, or a top-level module
            if rank.get(other, len(LOWER_LAYERS)) > rank[layer]:
                out.append(f"{m} -> {t}")
    return out


def test_the_package_has_no_import_circle() -> None:
    root = REPO / "phrase_rescorer"
    assert circles(import_graph(root), modules(root)) == []


def test_no_lower_layer_imports_a_higher_one() -> None:
    root = REPO / "phrase_rescorer"
    assert upward_imports(import_graph(root), modules(root)) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


CLEAN = {
    "__init__.py": "",
    "moses/__init__.py": "",
    "moses/table.py": "import os\n",
    "data/__init__.py": "",
    "data/vocab.py": "from ..moses.table import os\n",
    "data/pairs.py": "from . import vocab\nfrom .vocab import os\n",
    "cli/__init__.py": "from . import run\n",
    "cli/run.py": "from . import cli\nfrom ..data.pairs import vocab\nfrom pkg.moses import table\n",
}


def test_the_checks_pass_a_clean_tree(tmp_path: Path) -> None:
    root = _tree(tmp_path, CLEAN)
    graph, mods = import_graph(root), modules(root)
    assert graph["pkg.data.pairs"] == {"pkg.data.vocab"}
    assert graph["pkg.cli.run"] == {"pkg.cli", "pkg.data.pairs", "pkg.moses.table"}
    assert circles(graph, mods) == [] and upward_imports(graph, mods) == []


def test_the_checks_see_a_planted_circle_and_upward_import(tmp_path: Path) -> None:
    """A circle closed by an import inside a function (relative, two levels up), and an import
    of data/ from moses/ under TYPE_CHECKING: both are found."""
    root = _tree(
        tmp_path,
        {
            **CLEAN,
            "moses/table.py": "import os\nfrom typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ..data import extra\n",
            "data/extra.py": "",
            "data/vocab.py": "from ..moses.table import os\n\n\ndef late():\n    from ..data.pairs import vocab\n",
        },
    )
    graph, mods = import_graph(root), modules(root)
    assert circles(graph, mods) == [["pkg.data.pairs", "pkg.data.vocab"]]
    assert upward_imports(graph, mods) == ["pkg.moses.table -> pkg.data.extra"]


def test_an_import_of_a_higher_subpackage_from_model_is_upward(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**CLEAN, "model/__init__.py": "", "model/net.py": "import pkg.cli.run\n"})
    assert upward_imports(import_graph(root), modules(root)) == ["pkg.model.net -> pkg.cli.run"]


@pytest.mark.parametrize("name", ["rescore_model_dir", "WindowScorer", "BatchedScorer", "rescore_table"])
def test_the_public_names_of_moved_code_still_resolve(name: str) -> None:
    package = importlib.import_module("phrase_rescorer")
    assert callable(getattr(package, name))
