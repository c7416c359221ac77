"""`.ci/tracked-imports`: no commit of cellfit's packages imports a module left out of it (a new
file not added beside the files that import it starts on no clean checkout: 5c76a3f imported
scheduler.matching.visit_order, committed only in the next commit)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "tracked-imports"


def script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("tracked_imports", str(SCRIPT))
    spec = importlib.util.spec_from_loader("tracked_imports", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def git(*arguments: str, cwd: Path) -> None:
    subprocess.run(["git", *arguments], cwd=cwd, check=True, capture_output=True)


@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None, reason="not a git checkout")
def test_every_import_between_the_packages_is_in_the_index() -> None:
    assert script().unresolved(ROOT) == []


@pytest.mark.skipif(shutil.which("git") is None, reason="no git")
def test_a_module_imported_but_not_added_is_named(tmp_path: Path) -> None:
    git("init", "-q", cwd=tmp_path)
    package = tmp_path / "scheduler" / "matching"
    package.mkdir(parents=True)
    (tmp_path / "scheduler" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "admission.py").write_text(
        "from scheduler.matching.visit_order import visiting_order\nfrom scheduler.matching import reuse\nfrom . import plan\n")
    for name in ("visit_order", "reuse", "plan"):
        (package / f"{name}.py").write_text("")
    git("add", "scheduler/__init__.py", "scheduler/matching/__init__.py", "scheduler/matching/admission.py", "scheduler/matching/plan.py",
        cwd=tmp_path)
    assert script().unresolved(tmp_path) == [
        "scheduler/matching/admission.py:1: imports scheduler.matching.visit_order, which is not in the index",
        "scheduler/matching/admission.py:2: imports scheduler.matching.reuse, which is not in the index",
    ]
    git("add", "scheduler", cwd=tmp_path)
    assert script().unresolved(tmp_path) == []
