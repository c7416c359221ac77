"""The architecture in DESIGN.md, enforced: the pure core imports no web framework, Kubernetes
client or driver, and the layers only import downwards (contracts in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_pure_core_type_checks_strictly():
    """mypy --strict over the pure core ([tool.mypy] in pyproject.toml): the drivers rely on its
    Protocols and dataclasses, so a wrong type there is a defect the tests may not reach."""
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]



def test_the_code_lints_clean():
    """ruff's pyflakes, pycodestyle and bugbear rules ([tool.ruff] in pyproject.toml) over
    every Python file of the repository."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_readme_layout_names_every_package():
    """A newcomer finds every package in the README's layout table (a package added without a
    line there is invisible from the front page)."""
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    packages = ["estimator", "placer"] + sorted(
        f"scheduler/{init.parent.name}" for init in (ROOT / "scheduler").glob("*/__init__.py")
    )
    missing = [package for package in packages if f"`{package}/`" not in layout]
    assert not missing, f"packages missing from the README's layout table: {missing}"
