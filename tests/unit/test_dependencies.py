"""Every package the code imports is declared in pyproject.toml (a dependency, or an extra)."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions

import pytest

from tests.helpers.paths import REPO

tomllib = pytest.importorskip("tomllib", reason="Python >= 3.11 reads pyproject.toml")


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    specs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        specs += extra
    return {re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in specs}


def _imported() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "phrase_rescorer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "phrase_rescorer"}


def test_every_imported_package_is_declared() -> None:
    distributions = packages_distributions()
    declared = _declared()
    missing = []
    for module in sorted(_imported()):
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not dists & declared:
            missing.append(f"{module} ({', '.join(sorted(dists))})")
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
