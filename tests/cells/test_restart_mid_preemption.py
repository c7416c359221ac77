"""A restart of cellfit in the middle of a preemption keeps the preemptor's cells (live hand
session, issue restart22): kube-scheduler preempted an opportunistic pod for a guaranteed one,
cellfit was killed while the victim left, kube-scheduler's attempts meanwhile met a closed port
and cleared the pod's nomination (schedule_one.go: an extender error returns
``clearNominatedNode``), and after the restart the victim Job's new pod took the freed cells and
was preempted again. The cells booked while the victims leave lived in the engine's memory only;
now the leader records them on the waiting pod (``cellfit.io/reclaim-booking``) as soon as the
watch shows its victims leaving, and a restarted engine keeps them from its first list.

On the real HivedEngine, pod record and ReclaimController of tests/cluster/test_reclaim.py; a
restart is a new engine fed the pods as the watch lists them."""

from __future__ import annotations

import msgspec

from scheduler.cells import HivedEngine
from scheduler.cluster.reclaim import ReclaimController
from scheduler.config import ReclaimSettings
from scheduler.constants import ANNOTATION_RECLAIM_BOOKING
from scheduler.core.model import Disruption, PodInfo
from scheduler.core.pods import PodStore
from scheduler.kube.names import filter_offered
from tests.cells.helpers import node as node_info, pod, rack_cluster, schedule
from tests.cluster.test_reclaim import NODES, Cluster

LOWER = 10  # the opportunistic pods' priority: kube-scheduler's own preemption takes them
# The DisruptionTarget condition kube-scheduler's preemption writes on each victim before deleting it.
PREEMPTED = Disruption(reason="PreemptionByScheduler", message="cellfit: preempting to accommodate a higher priority pod")


def preempted_by_kube_scheduler() -> tuple[Cluster, str, str]:
    """kube-scheduler's preempt verb names g's victim, deletes it (the watch shows it
    terminating) and a leader round passes; (the cluster, the victim, g's node)."""
    cluster = Cluster(opportunistic_priority=LOWER)
    node = cluster.engine.allocator.by_pod["g"].node
    assert node is not None
    assert cluster.engine.select_victims(cluster.waiting, {node: [cluster.victim]}, {}) == {node: [cluster.victim]}
    victim = cluster.pods.get(cluster.victim)
    assert victim is not None
    cluster.pods.record(msgspec.structs.replace(victim, terminating=True, disruption=PREEMPTED))
    assert cluster.look_at(1) == []  # kube-scheduler deletes this one: cellfit deletes nothing
    return cluster, cluster.victim, node


def restarted(cluster: Cluster, *, gone: set[str]) -> HivedEngine:
    """A new engine, as a restarted cellfit builds it from its first list: every pod the watch
    shows (less those ``gone``), g with whatever the API server holds on it now."""
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}],
                                                       "b": [{"cellType": "V100-RACK", "count": 1}]}))
    record = cluster.api.recorded("g")
    for uid in sorted(p.uid for p in cluster.pods.pods()):
        shown = cluster.pods.get(uid)
        assert shown is not None
        if uid in gone:
            continue
        if uid == "g":
            annotations = dict(shown.annotations)
            if record is not None:
                annotations[ANNOTATION_RECLAIM_BOOKING] = record
            shown = msgspec.structs.replace(shown, annotations=annotations, nominated_node_name=None)  # cleared
        engine.apply_pod(shown)
    return engine


def new_pod_of_victim_job() -> PodInfo:
    return msgspec.structs.replace(pod("o-next", 8, "b", priority="opportunistic"), priority=LOWER, scheduler_name="cellfit")


def test_the_leader_records_the_booking_once_kube_schedulers_victims_leave():
    cluster, _, node = preempted_by_kube_scheduler()
    record = cluster.api.recorded("g")
    assert record is not None and record == cluster.engine.reclaim_record("g")
    assert f'"node":"{node}"' in record
    cluster.look_at(2)
    assert len(cluster.api.records) == 1  # written once


def test_nothing_is_recorded_for_a_booking_whose_victims_nobody_deletes():
    cluster = Cluster(opportunistic_priority=LOWER)
    cluster.look_at(0)
    cluster.look_at(1)
    assert cluster.api.records == []


def test_after_a_restart_once_the_victims_left_the_victim_jobs_next_pod_does_not_take_the_cells():
    cluster, victim, node = preempted_by_kube_scheduler()
    engine = restarted(cluster, gone={victim})
    assert "o-next" not in [b.pod_uid for b in engine.allocator.bookings.values()]
    taken = filter_offered(engine, new_pod_of_victim_job(), NODES)
    assert node not in taken.feasible  # it took them before, and was preempted again
    assert filter_offered(engine, cluster.waiting, NODES).feasible == [node]


def test_after_a_restart_while_the_victims_leave_the_booking_waits_for_them():
    cluster, victim, node = preempted_by_kube_scheduler()
    engine = restarted(cluster, gone=set())
    assert engine.pending_preemptions() == {"g": [victim]}
    assert engine.allocator.by_pod["g"].node == node
    # kube-scheduler leaves the node out while the victim leaves: the booking is kept, and no
    # second victim is taken on another node.
    others = [name for name in NODES if name != node]
    decision = filter_offered(engine, cluster.waiting, others)
    assert decision.feasible == [] and engine.allocator.by_pod["g"].node == node
    assert engine.select_victims(cluster.waiting, {name: [] for name in others}, {}) == {}


def walk(cell: dict) -> list[dict]:
    return [cell] + [below for child in cell.get("children", []) for below in walk(child)]


def test_the_cells_view_counts_each_gpu_once_while_the_victims_leave():
    # The live session's `kubectl cellfit cells`: GUARANTEED 8 OPPORTUNISTIC 8 IDLE 0 on an 8-GPU
    # node while the victim left. g's 4 GPUs are booked on the node whose 8 GPUs its victim runs.
    cluster, victim, node = preempted_by_kube_scheduler()
    for engine in (cluster.engine, restarted(cluster, gone=set())):
        (entry,) = engine.inspect_cells(node=node)["cells"]
        assert entry["gpus"] == {"total": 8, "idle": 0, "guaranteed": 4, "opportunistic": 4, "leaving": 4, "bad": 0}
        for cell in walk(engine.inspect_cells()["cells"][0]) + walk(entry):
            if "gpus" in cell:
                counts = cell["gpus"]
                assert counts["idle"] + counts["guaranteed"] + counts["opportunistic"] == counts["total"], cell["id"]
        (vc_cell,) = [c for c in engine.inspect_virtual_cluster("a")["vcCells"] if node in c["nodes"]]
        assert vc_cell["gpus"]["guaranteed"] + vc_cell["gpus"]["opportunistic"] + vc_cell["gpus"]["idle"] == vc_cell["gpus"]["total"]
    # A bad GPU elsewhere in the rack (a node NotReady, its pod left alone): the same counts.
    engine = restarted(cluster, gone=set())
    other = next(name for name in NODES if name != node and name[:2] == node[:2])
    engine.apply_node(node_info(other, ready=False))
    for cell in walk(engine.inspect_cells()["cells"][0]):
        if cell.get("level") == 1:
            continue
        leaves = [leaf for leaf in walk(cell) if leaf.get("level") == 1]
        both = sum(1 for leaf in leaves if len(leaf["pods"]) == 2)
        assert cell["gpus"]["leaving"] == both and cell["gpus"]["opportunistic"] == sum(
            1 for leaf in leaves if leaf["priority"] == "opportunistic"), cell["id"]
    assert any(cell.get("gpus", {}).get("bad") and cell["gpus"]["leaving"] == 4 for cell in walk(engine.inspect_cells()["cells"][0]))
    # Once the victim has gone, nothing is leaving.
    engine = restarted(cluster, gone={victim})
    (entry,) = engine.inspect_cells(node=node)["cells"]
    assert entry["gpus"] == {"total": 8, "idle": 4, "guaranteed": 4, "opportunistic": 0, "leaving": 0, "bad": 0}


def test_nothing_is_recorded_for_victims_leaving_for_another_reason():
    # Its Job deleted (no DisruptionTarget): no preemption for g is under way, and a record would
    # pin g on every replica to cells kube-scheduler's preemption (answered elsewhere) did not free.
    cluster = Cluster(opportunistic_priority=LOWER)
    victim = cluster.pods.get(cluster.victim)
    assert victim is not None
    cluster.pods.record(msgspec.structs.replace(victim, terminating=True))
    cluster.look_at(1)
    assert cluster.api.records == []


def rebooked_elsewhere(*, free_a_node: bool) -> tuple[Cluster, str, str]:
    """g's victim is stuck past grace + margin (a finalizer), and kube-scheduler's next offers
    leave its node out: the filter places g anew (free_a_node: on a node of its VC freed since,
    without preemption; else booked on another node, waiting for other victims). (the cluster,
    the victim, g's first node)"""
    cluster, victim, node = preempted_by_kube_scheduler()
    engine = cluster.engine
    if free_a_node:
        other = next(p for p in cluster.pods.pods()
                     if p.uid.startswith("o") and p.uid != victim and p.node_name not in (None, node) and p.node_name[:2] == node[:2])
        engine.delete_pod(other.uid)
        cluster.pods.forget(other.uid)
    others = [name for name in NODES if name != node]
    filter_offered(engine, cluster.waiting, others)  # kept (or placed on the freed node)
    engine.expiry.expire(0.0)
    engine.expiry.expire(10_000.0)  # kept no longer
    filter_offered(engine, cluster.waiting, others)
    return cluster, victim, node


def test_a_record_whose_booking_the_engine_gave_up_is_cleared_and_a_restart_does_not_reapply_it():
    # review22 F3: g is placed on a freed node without preemption; its record still named the
    # first node, and a replica started later booked it again, with the victim Job's next pod
    # (which had taken the node meanwhile) as g's victim: the double preemption the record is for.
    cluster, victim, node = rebooked_elsewhere(free_a_node=True)
    assert "g" not in cluster.engine.allocator.by_pod  # placed without preemption: nothing kept
    cluster.look_at(40)
    assert cluster.api.recorded("g") is None  # cleared
    writes = len(cluster.api.records)
    cluster.look_at(80)
    assert len(cluster.api.records) == writes  # once
    cluster.engine.delete_pod(victim)
    cluster.pods.forget(victim)
    taken = schedule(cluster.engine, new_pod_of_victim_job(), [node])
    assert taken is not None and taken.node_name == node
    cluster.pods.record(msgspec.structs.replace(taken, priority=LOWER, scheduler_name="cellfit"))
    cluster.look_at(120)
    engine = restarted(cluster, gone=set())  # before kube-scheduler's binding of g lands
    assert engine.pending_preemptions() == {} and "g" not in engine.allocator.by_pod


def test_a_record_whose_booking_moved_is_rewritten_once():
    cluster, _, node = rebooked_elsewhere(free_a_node=False)
    moved = cluster.engine.allocator.by_pod["g"].node
    assert moved not in (None, node)
    cluster.look_at(40)
    record = cluster.api.recorded("g")
    assert record is not None and record == cluster.engine.reclaim_record("g") and f'"node":"{moved}"' in record
    writes = len(cluster.api.records)
    cluster.look_at(80)
    assert len(cluster.api.records) == writes
    engine = restarted(cluster, gone=set())
    assert engine.allocator.by_pod["g"].node == moved


def test_a_new_leader_clears_a_stale_record_the_watch_shows():
    # The record, written by a former leader, is on the pod as the watch shows it; the booking
    # was given up since (g placed without preemption): the new leader's first round clears it.
    cluster, _, _ = rebooked_elsewhere(free_a_node=True)
    record = cluster.api.recorded("g")
    assert record is not None
    shown = msgspec.structs.replace(cluster.waiting, annotations={**cluster.waiting.annotations, ANNOTATION_RECLAIM_BOOKING: record})
    cluster.pods.record(shown)
    cluster.controller = ReclaimController(api=cluster.api, engine=cluster.engine, pods=cluster.pods, lock=cluster.lock,
                                           settings=ReclaimSettings(after_seconds=30.0), scheduler_name="cellfit", clock=cluster.clock)
    cluster.look_at(40)
    assert cluster.api.records[-1] == ("g", None)
    # The watch shows it cleared: nothing more is written.
    cluster.pods.record(cluster.waiting)
    writes = len(cluster.api.records)
    cluster.look_at(80)
    assert len(cluster.api.records) == writes


def test_a_record_waits_for_every_victim_of_the_booking_to_be_preempted():
    # g's cells hold two opportunistic pods: only one of them preempted (a preemption planned on
    # other GPUs of the node, by a replica whose engine chose them) is not what g's booking waits for.
    cluster = Cluster(opportunistic_priority=LOWER)
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}],
                                                       "b": [{"cellType": "V100-RACK", "count": 1}]}))
    cluster.engine = engine
    cluster.pods = PodStore()
    for i in range(32):
        placed = schedule(engine, Cluster.cellfits(pod(f"o{i}", 2, "b", priority="opportunistic"), LOWER), NODES)
        assert placed is not None
        cluster.pods.record(Cluster.cellfits(placed, LOWER))
    cluster.pods.record(cluster.waiting)
    assert filter_offered(engine, cluster.waiting, NODES).failed
    first, second = (cluster.pods.get(uid) for uid in engine.pending_preemptions()["g"])
    assert first is not None and second is not None
    cluster.controller = ReclaimController(api=cluster.api, engine=engine, pods=cluster.pods, lock=cluster.lock,
                                           settings=ReclaimSettings(after_seconds=30.0), scheduler_name="cellfit", clock=cluster.clock)
    cluster.pods.record(msgspec.structs.replace(first, terminating=True, disruption=PREEMPTED))
    cluster.look_at(1)
    assert cluster.api.records == []
    cluster.pods.record(msgspec.structs.replace(second, terminating=True, disruption=PREEMPTED))
    cluster.look_at(2)
    assert cluster.api.records == [("g", engine.reclaim_record("g"))]
