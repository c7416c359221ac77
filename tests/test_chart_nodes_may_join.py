"""``estimator.nodesMayJoin`` in the chart (helm from tests/test_chart_offline.py): the autoscaled
pools' labels reach cellfit's config, none by default, and an entry naming no label, or a label
key or value no node can carry, is refused at render naming the setting."""

from __future__ import annotations

import pytest

from scheduler.config import parse_settings
from tests.test_chart_offline import cellfit_config_text, helm, render, render_args


def test_the_autoscaled_pools_reach_cellfit() -> None:
    assert parse_settings(cellfit_config_text(render())).estimator.nodes_may_join == []
    pools = '[{"pool":"cpu-big"},{"karpenter.sh/nodepool":"gpu"}]'
    listed = parse_settings(cellfit_config_text(render("--set-json", f"estimator.nodesMayJoin={pools}"))).estimator
    assert listed.nodes_may_join == [{"pool": "cpu-big"}, {"karpenter.sh/nodepool": "gpu"}]


# An empty label key, or one no node can carry, passed the schema before and cellfit refused it
# at start: every replica crash-looped (review26 #9).
@pytest.mark.parametrize(
    "value", ["[{}]", '[{"pool":1}]', '{"pool":"cpu-big"}', '[{"":"x"}]', '[{"pool/":"x"}]', '[{"my pool":"x"}]', '[{"pool":"cpu big"}]']
)
def test_an_entry_that_names_no_labels_is_refused_at_render(value: str) -> None:
    proc = helm(*render_args("--set-json", f"estimator.nodesMayJoin={value}"), check=False)
    assert proc.returncode != 0 and "nodesMayJoin" in proc.stderr, proc.stderr
