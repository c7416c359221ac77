"""The refusal of a guaranteed non-trial pod whose VC HiveD does not know (a typo in
cellfit.io/virtual-cluster) gives HiveD's own reason, not "HiveD found no opportunistic pod on the
offered nodes ... on cells virtual cluster 'X' is owed" (review24 F10 of a8985d7): no cells are
owed and no reclaim was looked for."""

from __future__ import annotations

from tests.cells.helpers import pod
from tests.preemption.test_refusal_under_hived_reclaim import scene


def test_a_pod_of_an_unknown_vc_is_not_told_of_cells_it_is_owed() -> None:
    choice = scene().decide_preemption(pod("g2", 8, "vc-typo"), {"n-b": ["opp"]}, {})
    assert choice.victims == {}
    assert choice.refusal is not None
    assert "is owed" not in choice.refusal, choice.refusal
    assert choice.refusal.startswith("unknown virtual cluster 'vc-typo'"), choice.refusal
