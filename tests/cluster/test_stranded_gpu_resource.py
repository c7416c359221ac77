"""HiveD's reclaim of stranded guaranteed pods (scheduler/cluster/stranded.py) on a cluster whose
GPUs are not nvidia.com/gpu (``policy.gpuResourceName``), on the real HivedEngine and pod record
of tests/cluster/test_stranded.py."""

from __future__ import annotations

from tests.cluster.test_stranded import AFTER, Cluster, unschedulable


def test_a_pod_asking_for_the_policy_s_gpu_resource_gets_its_cells_reclaimed():
    # policy.gpuResourceName amd.com/gpu: the reclaim read every pod asking for it as asking for
    # a resource it does not check, and left every stranded pod to wait for ever.
    cluster = Cluster(gpu_resource="amd.com/gpu")
    gpus = {"amd.com/gpu": "4"}
    cluster.api.pending = [unschedulable(cluster.g, containers=[{"name": "main", "resources": {"requests": gpus, "limits": gpus}}])]
    cluster.look_at(0)
    deleted = cluster.look_at(AFTER)
    node = cluster.booked_node()
    assert node is not None and deleted == cluster.on(node) and len(deleted) == 1
    assert "CellsNotReclaimed" not in [event["reason"] for event in cluster.api.events]


def test_a_resource_other_than_the_policy_s_gpus_still_leaves_the_pod_to_kube_scheduler():
    cluster = Cluster(gpu_resource="amd.com/gpu")
    gpus = {"nvidia.com/gpu": "4"}
    cluster.api.pending = [unschedulable(cluster.g, containers=[{"name": "main", "resources": {"requests": gpus, "limits": gpus}}])]
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and not cluster.engine.has_booking(cluster.g)
    (event,) = cluster.api.events
    assert event["reason"] == "CellsNotReclaimed" and "'nvidia.com/gpu'" in event["message"], event["message"]
