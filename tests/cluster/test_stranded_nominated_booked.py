"""A stranded pod the reclaim books on the node kube-scheduler nominated it to counts there once
(scheduler/cluster/stranded.py's node_use says so of a pod booked before the round): booked in
this round, it was counted twice for the next pod of the round, as booked and as nominated."""

from __future__ import annotations

import msgspec

from tests.cells.helpers import pod
from tests.cluster.test_stranded import AFTER, Cluster, unschedulable


def test_two_pods_nominated_to_the_node_that_takes_both_are_both_booked_in_one_round():
    # r0n2 alone suits them (a node selector); its opportunistic pod's 8 GPUs hold room for both
    # 4-GPU pods, which kube-scheduler nominated there. g was booked first and then counted for h
    # as booked and as nominated: 4 + 4 + 4 GPUs of 8, so h waited a round (AFTER) for nothing.
    cluster = Cluster()
    cluster.api.nodes["r0n2"]["metadata"]["labels"] = {"pool": "g"}
    h = cluster.cellfits(pod("h", 4, "a"), cores=1)
    g, h = (msgspec.structs.replace(p, nominated_node_name="r0n2") for p in (cluster.g, h))
    cluster.pods.record(g)
    cluster.pods.record(h)
    cluster.api.pending = [unschedulable(p, nodeSelector={"pool": "g"}) for p in (g, h)]
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == cluster.on("r0n2")
    booked = {w.pod_uid: w.node for w in cluster.engine.waiting_guarantees()}
    assert booked == {"g": "r0n2", "h": "r0n2"}
