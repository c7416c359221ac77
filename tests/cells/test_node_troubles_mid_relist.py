"""NodeTroubles once judged the VCs' quota not bound once any pod is known (bool(by_pod)). The
cache relists pods one hold at a time (cache.py _replacing_pods: 'one event per hold'), and the
node watch runs beside it, so a node status seen after the first pod applied and before the
rest judges VCs whose pods are not yet recovered: user25 #8's false warnings come back for
every VC whose pods come later in the list (here vc-b and vc-c, bound with running pods).
"""

from __future__ import annotations

import logging

import pytest

from scheduler.cells import HivedEngine
from tests.cells.helpers import node
from tests.cells.test_node_troubles_after_restart import A_NODE, B_NODE, C_NODE, CONFIG, GONE, running_pods, told


def test_a_node_status_seen_mid_relist_does_not_judge_vcs_not_recovered_yet(caplog: pytest.LogCaptureFixture) -> None:
    pods = running_pods()
    caplog.set_level(logging.WARNING, logger="scheduler.cells.node_troubles")
    restarted = HivedEngine.from_config(CONFIG)
    for name in (A_NODE, C_NODE):
        restarted.apply_node(node(name))
    restarted.apply_node(node(B_NODE, unschedulable=True))
    restarted.delete_node(GONE)
    first, *rest = pods
    restarted.apply_pod(first)  # the relist's first pod (vc-a's)
    restarted.apply_node(node(A_NODE))  # a node status between two of the relist's holds
    for bound in rest:
        restarted.apply_pod(bound)
    restarted.apply_node(node(A_NODE))
    wrongly = [s for s in told(caplog) if s.startswith(("virtual cluster vc-b's guarantee", "virtual cluster vc-c's guarantee"))]
    assert wrongly == []  # vc-b and vc-c are bound: their quota is not short
