"""The space-vs-time benchmark (tests/benchmarks/bench_estimator_space_time.py) on a small trace:
it reproduces SLearn §4.1's regimes through the estimator's own code, so the table in
estimator/README.md says what the code does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_estimator_space_time.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_estimator_space_time", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _mae(bench: ModuleType, index: int) -> dict[str, float]:
    result = bench.evaluate(bench.SCENARIOS[index], families=20, runs=15, seed=3)
    assert result["jobs"] == 20 * (15 - bench.MIN_HISTORY)
    return {name: figures["mae"] for name, figures in result["predictors"].items()}


def test_drifting_families_are_learnt_better_in_space(bench: ModuleType) -> None:
    mae = _mae(bench, 0)
    assert mae["sampling"] < 0.6 * mae["history"], mae
    assert mae["posterior"] <= mae["sampling"], mae


def test_stable_families_with_skewed_tasks_are_learnt_better_in_time(bench: ModuleType) -> None:
    mae = _mae(bench, 1)
    assert mae["history"] < 0.6 * mae["sampling"], mae
    # One or two pilots cannot see the skew; σ1 floored at the family's task spread (learnt from
    # its past Jobs' pilots) keeps the posterior near history, far from sampling alone.
    assert mae["posterior"] < 1.3 * mae["history"], mae
    assert mae["posterior"] < 0.5 * mae["sampling"], mae


def test_stable_families_with_even_tasks_skip_sampling(bench: ModuleType) -> None:
    result = bench.evaluate(bench.SCENARIOS[2], families=20, runs=15, seed=3)
    assert result["planner_skipped_sampling"] > 0.8
    mae = {name: figures["mae"] for name, figures in result["predictors"].items()}
    assert max(mae.values()) < 0.08, mae


def test_the_table_has_a_row_per_trace(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--families", "5", "--runs", "6"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "trace" not in line]
    assert len(rows) == len(bench.SCENARIOS)
    assert all(row.count("|") == 10 for row in rows)
