"""The AlloX core is pure (DESIGN.md): no I/O, no wall clock, no hidden randomness. Only the CLI
module reads and writes files. (Forbidden frameworks and drivers are import-linter's job.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "scheduler" / "matching"
IMPURE_MODULES = {"time", "datetime", "random", "os", "sys", "pathlib", "io", "socket", "subprocess", "threading", "secrets"}
IMPURE_CALLS = {"open", "print", "input"}
CORE = sorted(path for path in PACKAGE.glob("*.py") if path.name != "cli.py")


@pytest.mark.parametrize("path", CORE, ids=lambda path: path.name)
def test_core_module_is_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0]]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in IMPURE_CALLS, f"{path.name}:{node.lineno} calls {node.func.id}()"
            continue
        else:
            continue
        impure = IMPURE_MODULES.intersection(names)
        assert not impure, f"{path.name}:{node.lineno} imports {impure}"


def test_there_are_core_modules() -> None:
    assert len(CORE) >= 10
