"""``cells.victimExitMarginSeconds`` in the chart (helm from tests/test_chart_offline.py): the
value reaches cellfit's config, applies live (no roll of the pods), and a bad one is refused at
render naming it."""

from __future__ import annotations

import pytest

from scheduler.config import parse_settings
from tests.test_chart_offline import cellfit_config_text, helm, one, render, render_args


def _margin_and_checksum(*values: str) -> tuple[float, str]:
    docs = render(*values)
    checksum = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/cellfit-config"]
    return parse_settings(cellfit_config_text(docs)).cells.victim_exit_margin_seconds, checksum


def test_the_margin_reaches_cellfit_and_applies_without_a_roll() -> None:
    default, default_checksum = _margin_and_checksum()
    five, five_checksum = _margin_and_checksum("--set", "cells.victimExitMarginSeconds=5")
    assert (default, five) == (60, 5)
    assert five_checksum == default_checksum  # cellfit reloads it live


@pytest.mark.parametrize("value", ["-1", "3601", "soon"])
def test_a_bad_margin_is_refused_at_render(value: str) -> None:
    proc = helm(*render_args("--set", f"cells.victimExitMarginSeconds={value}"), check=False)
    assert proc.returncode != 0 and "victimExitMarginSeconds" in proc.stderr, proc.stderr
