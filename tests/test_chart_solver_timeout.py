"""``allox.solverTimeoutSeconds`` and ``allox.solverProcess`` in the chart (helm from
tests/test_chart_offline.py): the values reach cellfit's config, and a bad deadline is refused at
render naming it."""

from __future__ import annotations

import pytest

from scheduler.config import parse_settings
from tests.test_chart_offline import cellfit_config_text, helm, render, render_args


def test_the_solver_settings_reach_cellfit() -> None:
    default = parse_settings(cellfit_config_text(render())).allox
    assert (default.solver_process, default.solver_timeout_seconds) == (True, 60)
    tuned = parse_settings(cellfit_config_text(render(
        "--set", "allox.solverTimeoutSeconds=180", "--set", "allox.solverProcess=false"))).allox
    assert (tuned.solver_process, tuned.solver_timeout_seconds) == (False, 180)


@pytest.mark.parametrize("value", ["0", "3601", "soon"])
def test_a_bad_deadline_is_refused_at_render(value: str) -> None:
    proc = helm(*render_args("--set", f"allox.solverTimeoutSeconds={value}"), check=False)
    assert proc.returncode != 0 and "solverTimeoutSeconds" in proc.stderr, proc.stderr
