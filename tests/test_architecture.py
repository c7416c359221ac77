"""The architecture in DESIGN.md, enforced: the pure core imports no web framework, Kubernetes
client or driver, and the layers only import downwards (contracts in pyproject.toml)."""

import ast
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
    # Sub-packages by their path below scheduler/ (`simulator/allox/`), in their package's row.
    subpackages = sorted(
        f"{init.parent.parent.name}/{init.parent.name}" for init in (ROOT / "scheduler").glob("*/*/__init__.py")
    )
    assert "simulator/allox" in subpackages  # the walk saw them
    missing = [package for package in packages + subpackages if f"`{package}/`" not in layout]
    assert not missing, f"packages missing from the README's layout table: {missing}"



# The engines' classes; only the composition root (and the simulator's, which builds the same
# composition) may name them: a driver names the capability it uses.
ENGINE_CLASSES = {"HivedEngine", "FitGppEngine", "ResourceFitEngine"}
COMPOSITION_ROOTS = {"scheduler/composition.py", "scheduler/extender/runtime.py"}
DRIVERS = ["scheduler/extender", "scheduler/cluster", "scheduler/kubectl", "estimator/controller.py", "placer/controller.py"]


def test_drivers_name_capabilities_not_engine_classes():
    """The live drivers reach the engine through the SchedulingEngine protocol and the typed
    capabilities the composition hands them (scheduler/composition.py, scheduler/cells/capabilities.py), never through
    an engine's concrete class: no import of one, so no isinstance on one either."""
    modules = [path for driver in DRIVERS for path in ([ROOT / driver] if driver.endswith(".py") else (ROOT / driver).rglob("*.py"))]
    assert len(modules) > 30  # the walk saw the drivers
    offenders = []
    for path in modules:
        if str(path.relative_to(ROOT)) in COMPOSITION_ROOTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and ENGINE_CLASSES & {alias.name for alias in node.names}:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {sorted(ENGINE_CLASSES & {a.name for a in node.names})}")
            elif isinstance(node, ast.Attribute) and node.attr in ENGINE_CLASSES:  # module.HivedEngine
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} names {node.attr}")
    assert not offenders, "drivers naming engine classes:\n" + "\n".join(offenders)


def _import_graph(root: Path, packages: list[str]) -> dict[str, set[str]]:
    """Every import between the modules of ``packages`` under ``root``: at module level, inside
    functions and under ``TYPE_CHECKING`` alike (a cycle of type-only or deferred imports is
    still two modules that cannot be understood, or moved, one without the other). ``from a
    import b`` names the module ``a.b`` when there is one, else ``a``; the packages a dotted
    import runs on the way (``a/__init__.py`` for ``a.b``) are not counted, as in import-linter."""
    paths = {}
    for package in packages:
        # A C extension's module is its stub (a .pyi beside the built file): what it imports is
        # what its stub does, and a plain import of it names it, not its package.
        for path in sorted((root / package).rglob("*.py")) + sorted((root / package).rglob("*.pyi")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            paths.setdefault(".".join(parts), path)
    graph: dict[str, set[str]] = {module: set() for module in paths}
    for module, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    base = module.split(".")[: len(module.split(".")) - node.level + (path.name == "__init__.py")]
                    source = ".".join(base + ([source] if source else []))
                targets = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in paths] or [source]
            else:
                continue
            for target in targets:
                while target and target not in paths:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_no_module_imports_itself_through_others():
    """No import cycles in scheduler/, placer/ or estimator/, counting imports inside functions
    and under ``TYPE_CHECKING`` too: shared names live in a module below both users (the
    simulator's exit codes and cluster options in ``scheduler/simulator/options.py``, its errors
    in ``errors.py``), and a policy is typed against a Protocol of what it reads of the
    simulation (``SimulationView``, ``InterchangeableView``), not the simulation class."""
    graph = _import_graph(ROOT, ["scheduler", "placer", "estimator"])
    assert len(graph) > 100 and sum(len(targets) for targets in graph.values()) > 500  # the walk saw the code
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(
        "  " + "; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c) for c in cycles
    )


def test_the_cycle_finder_sees_deferred_and_type_only_imports(tmp_path):
    """The finder above on a package whose only cycles go through a function body, a
    ``TYPE_CHECKING`` block and a relative import: it must report each of them."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg.b import g\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    (package / "sub" / "c.py").write_text("from . import d\n")
    (package / "sub" / "d.py").write_text("from ..sub.c import x\n")
    (package / "e.py").write_text("import pkg.a\n")
    assert _cycles(_import_graph(tmp_path, ["pkg"])) == [["pkg.a", "pkg.b"], ["pkg.sub.c", "pkg.sub.d"]]
