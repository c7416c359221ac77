"""Resume holds: the node a preempted best-effort pod left keeps room for its Job's next pod.

The scene of every test: node n1 (8 GPUs) runs BE Jobs a and b (4 GPUs each); a trial pod
preempts b's pod (FitGpp's choice: the shorter grace period), b's Job makes a new pod that
waits, and a BE pod of another Job ("waiter") wants the same GPUs.
"""

from __future__ import annotations

from msgspec.structs import replace

import pytest

from scheduler.cells import HivedEngine
from scheduler.config import parse_settings
from scheduler.errors import ConfigError
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings, InvalidPreemptionSettings
from scheduler.preemption.engine import FitGppEngine
from scheduler.preemption.holds import RoomHolds

from tests.preemption.test_engine import GI, full_node, running, te
from scheduler.kube.names import filter_offered

BE_PRIORITY = 500
TRIAL_PRIORITY = 1000  # a trial pod preempts no pod of a higher priority
RESUMED_PRIORITY = 750


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pending(uid: str, *, job: str, gpus: int = 4, priority: int = BE_PRIORITY, labels: dict[str, str] | None = None) -> PodInfo:
    return PodInfo(
        uid=uid, namespace="ml", name=uid, requests=Resources(4000, 32 * GI, gpus),
        labels={"cellfit.io/job-class": "best-effort", **(labels or {})}, priority=priority,
        owner=OwnerRef("Job", job, f"job-{job}"),
    )


def engine_with_resumed_pod(*, clock: FakeClock | None = None, hold_seconds: float | None = None,
                            trial_done: bool = True) -> tuple[FitGppEngine, PodInfo]:
    """n1 after the trial pod took b's place: b's new pod pending; the trial pod finished
    (``trial_done``) or still running."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=hold_seconds, clock=clock)
    full_node(engine)
    trial = te(gpus=4)
    assert engine.select_victims(trial, {"n1": ["be-long", "be-short"]}, {}) == {"n1": ["be-short"]}
    engine.delete_pod("be-short")  # gone after its grace period
    engine.reserve(trial, "n1")
    resumed = pending("be-short-2", job="b", priority=RESUMED_PRIORITY)
    engine.apply_pod(resumed)
    if trial_done:
        engine.apply_pod(replace(trial, node_name="n1", phase="Succeeded"))
    return engine, resumed


def test_a_waiting_best_effort_pod_is_turned_away_from_the_room_the_resumed_pod_needs():
    engine, resumed = engine_with_resumed_pod()
    waiter = pending("waiter", job="w")
    decision = filter_offered(engine, waiter, ["n1"])
    assert list(decision.feasible) == []
    # unresolvable: preempting pods there would not help the waiter
    assert decision.failed_count == 0 and decision.unresolvable_count == 1
    assert decision.unresolvable["n1"] == (
        "its free resources are kept for ml/be-short-2, of a best-effort Job preempted there and "
        "now resuming (FitGpp resumes preempted jobs first)"
    )
    # the resumed pod itself, and a trial pod, pass
    assert list(filter_offered(engine, resumed, ["n1"]).feasible) == ["n1"]
    assert list(filter_offered(engine, te("te-2", gpus=4), ["n1"]).feasible) == ["n1"]
    assert engine.stats()["resumeHolds"] == 1


def test_the_hold_ends_when_the_resumed_pod_is_bound():
    engine, resumed = engine_with_resumed_pod()
    engine.reserve(resumed, "n1")
    assert not engine.holds.active
    assert engine.stats()["resumeHolds"] == 0
    # the node is full again: the waiter fails on resources, not on a hold
    assert "kept for" not in filter_offered(engine, pending("waiter", job="w"), ["n1"]).unresolvable.get("n1", "")


def test_a_failed_binding_gives_the_hold_back():
    engine, resumed = engine_with_resumed_pod()
    engine.reserve(resumed, "n1")
    engine.unreserve(resumed.uid)  # the binding API call failed: the pod waits again
    assert [(h.node, h.job, h.pods) for h in engine.holds.holds()] == [("n1", "ml/b", ("ml/be-short-2",))]
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == []
    engine.reserve(resumed, "n1")
    engine.apply_pod(replace(resumed, node_name="n1", phase="Running"))  # the watch confirms it
    engine.unreserve("unknown")  # nothing to give back
    assert not engine.holds.active


def test_the_hold_ends_when_the_watch_shows_the_resumed_pod_bound_elsewhere():
    engine, resumed = engine_with_resumed_pod()
    engine.apply_node(NodeInfo(name="n2", allocatable=Resources(32000, 256 * GI, 8)))
    engine.apply_pod(replace(resumed, node_name="n2", phase="Pending"))  # bound by someone, not yet running
    assert not engine.holds.active
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == ["n1"]


def test_no_pending_pod_no_hold_and_a_deleted_job_forgets_its_place():
    engine, resumed = engine_with_resumed_pod()
    engine.delete_pod(resumed.uid)
    assert engine.holds.holds() == []
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == ["n1"]
    engine.apply_pod(resumed)  # a new pending pod of the same Job holds again
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == []
    engine.delete_job("job-b")
    assert not engine.holds.active
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == ["n1"]


def test_room_nothing_could_use_is_not_kept():
    # The trial pod still runs: 4 GPUs are taken, the resumed pod (4) cannot fit, so a 2-GPU
    # waiter may use the rest; once the trial pod ends, the same waiter is turned away.
    engine, _ = engine_with_resumed_pod(trial_done=False)
    small = pending("small", job="s", gpus=2)
    assert list(filter_offered(engine, small, ["n1"]).feasible) == []  # n1 is full: be-long 4 + trial 4
    engine.apply_pod(replace(te(gpus=4), node_name="n1", phase="Succeeded"))
    assert list(filter_offered(engine, small, ["n1"]).feasible) == []  # 4 free, the resumed pod needs all 4


def test_a_pod_that_leaves_enough_room_passes():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    big = NodeInfo(name="n1", allocatable=Resources(64000, 512 * GI, 16))
    engine.apply_node(big)
    engine.apply_pod(running("be-long", job="a", gpus=4, grace=600))
    engine.apply_pod(running("be-short", job="b", gpus=12, grace=30))
    assert engine.select_victims(te(gpus=12), {"n1": ["be-long", "be-short"]}, {}) == {"n1": ["be-short"]}
    engine.delete_pod("be-short")
    engine.apply_pod(pending("be-short-2", job="b", gpus=4))
    assert list(filter_offered(engine, pending("w2", job="w", gpus=2), ["n1"]).feasible) == ["n1"]  # 12 free: 2 + 4 fit
    assert list(filter_offered(engine, pending("w9", job="w", gpus=9), ["n1"]).feasible) == []  # 12 - 9 < 4


@pytest.mark.parametrize(
    ("waiter", "turned_away"),
    [
        (pending("w", job="w", priority=RESUMED_PRIORITY), True),  # same priority: the resumed Job first
        (pending("w", job="w", priority=RESUMED_PRIORITY + 1), False),  # higher priority goes first
        (pending("w", job="w", labels={"cellfit.io/virtual-cluster": "speech"}), False),  # another tenant's guarantee
        (pending("w", job="w", labels={"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic"}), True),
        (pending("w", job="b"), False),  # another pod of the preempted Job itself
    ],
)
def test_who_yields_to_a_resumed_pod(waiter, turned_away):
    engine, _ = engine_with_resumed_pod()
    assert (list(filter_offered(engine, waiter, ["n1"]).feasible) == []) is turned_away


def test_a_hold_gives_up_hold_seconds_after_it_first_turned_a_pod_away():
    clock = FakeClock()
    engine, _ = engine_with_resumed_pod(clock=clock, hold_seconds=120)
    waiter = pending("waiter", job="w")
    clock.now += 500  # holding without refusing anybody costs nothing and starts no clock
    assert list(filter_offered(engine, waiter, ["n1"]).feasible) == []
    clock.now += 120
    assert list(filter_offered(engine, waiter, ["n1"]).feasible) == []  # at the limit, still kept
    clock.now += 1
    assert list(filter_offered(engine, waiter, ["n1"]).feasible) == ["n1"]
    assert engine.stats()["resumeHoldsLapsed"] == 1 and engine.stats()["resumeHolds"] == 0
    assert engine.stats()["resumeHoldKeptOff"] == 2


def test_only_the_held_nodes_are_refused_among_many():
    engine, _ = engine_with_resumed_pod()
    for name in ("n2", "n3"):
        engine.apply_node(NodeInfo(name=name, allocatable=Resources(32000, 256 * GI, 8)))
    decision = filter_offered(engine, pending("waiter", job="w"), ["n2", "n1", "n3"])
    assert list(decision.feasible) == ["n2", "n3"]
    assert set(decision.unresolvable) == {"n1"} and decision.unresolvable_count == 1


VC = {"cellfit.io/virtual-cluster": "default"}


def hived_engine(nodes: int) -> tuple[FitGppEngine, HivedEngine]:
    """FitGpp around HiveD on ``nodes`` 8-GPU nodes g0, g1, ..., all owned by VC "default"."""
    infos = [NodeInfo(name=f"g{i}", allocatable=Resources(64000, 512 * GI, 8), labels={"nvidia.com/gpu.product": "A100"}) for i in range(nodes)]
    hived = HivedEngine.from_config({"virtualClusters": {"default": [{"cellType": "A100-NODE", "count": nodes}]}}, nodes=infos)
    engine = FitGppEngine(hived, settings=FitGppSettings())
    for node in infos:
        engine.apply_node(node)
    return engine, hived


def test_hived_places_the_waiter_on_another_node_instead():
    engine, hived = hived_engine(2)
    first = pending("a-1", job="a", labels=VC)
    engine.reserve(first, filter_offered(engine, first, ["g0", "g1"]).feasible[0])
    second = pending("b-1", job="b", labels=VC)
    home = filter_offered(engine, second, ["g0", "g1"]).feasible[0]
    engine.reserve(second, home)  # HiveD packs: b lands next to a
    trial = replace(te(gpus=4, vc="default"), priority=TRIAL_PRIORITY)
    victims = engine.select_victims(trial, {home: ["a-1", "b-1"]}, {})
    (victim,) = victims[home]
    job = "a" if victim == "a-1" else "b"
    engine.delete_pod(victim)
    engine.apply_pod(pending(f"{job}-2", job=job, priority=RESUMED_PRIORITY, labels=VC))
    # The freed GPUs on the home node are the trial pod's, booked in HiveD (its VC's quota kept
    # for it: tests/preemption/test_hived_preemptor_quota_hold.py); the hold keeps the node too
    waiter = pending("waiter", job="w", labels=VC)
    assert list(filter_offered(hived, waiter, ["g0", "g1"]).feasible) != [home]
    decision = filter_offered(engine, waiter, ["g0", "g1"])
    other = "g1" if home == "g0" else "g0"
    assert list(decision.feasible) == [other]
    assert decision.unresolvable_count == 1 and "kept for" in decision.unresolvable[home]


def test_hold_seconds_must_be_positive():
    with pytest.raises(InvalidPreemptionSettings, match="resume_hold_seconds"):
        RoomHolds(hold_seconds=0)
    with pytest.raises(ConfigError, match="resumeHoldSeconds"):
        parse_settings("preemption:\n  resumeHoldSeconds: 0\n")
    assert parse_settings("preemption:\n  resumeHoldSeconds: null\n").preemption.resume_hold_seconds is None


# ---------------------------------------------------------------------- RoomHolds on its own

N1_FREE = {"n1": Resources(16000, 128 * GI, 4)}


def holds_with(*jobs_on_n1: str, clock: FakeClock | None = None, hold_seconds: float | None = None) -> RoomHolds:
    """Each named Job lost one pod on n1 and has a pending pod ``<job>-2`` (4 GPUs)."""
    holds = RoomHolds(clock=clock, hold_seconds=hold_seconds)
    for job in jobs_on_n1:
        holds.displaced(job_uid=f"job-{job}", node_name="n1")
        holds.apply_pod(pending(f"{job}-2", job=job, priority=RESUMED_PRIORITY))
    return holds


def test_nodes_not_offered_or_not_fitting_the_pod_count_nothing_and_start_no_clock():
    clock = FakeClock()
    engine, _ = engine_with_resumed_pod(clock=clock, hold_seconds=120)
    engine.apply_node(NodeInfo(name="n2", allocatable=Resources(32000, 256 * GI, 8)))
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n2"]).feasible) == ["n2"]  # n1 not offered
    too_big = pending("big", job="big", gpus=6)  # cannot fit n1's 4 free GPUs anyway
    decision = filter_offered(engine, too_big, ["n1"])
    assert "kept for" not in decision.failed.get("n1", "") + decision.unresolvable.get("n1", "")
    assert engine.stats()["resumeHoldKeptOff"] == 0
    clock.now += 1000  # no clock ran: the first real keep-off is not a lapse
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == []
    assert engine.stats()["resumeHoldsLapsed"] == 0


def test_a_stale_pending_event_after_the_binding_does_not_end_a_second_hold():
    holds = RoomHolds()
    for _ in range(2):  # two of Job b's pods were preempted on n1
        holds.displaced(job_uid="job-b", node_name="n1")
    first, second = pending("b-2", job="b"), pending("b-3", job="b")
    holds.apply_pod(first)
    holds.apply_pod(second)
    holds.bound(first, "n1")
    holds.apply_pod(first)  # the watch lags: an older event shows it pending
    holds.apply_pod(replace(first, node_name="n1", phase="Running"))
    holds.apply_pod(replace(first, node_name="n1", phase="Running"))  # status updates
    assert [h.pods for h in holds.holds()] == [("ml/b-3",)]


def test_a_binding_the_watch_confirmed_is_not_given_back_and_a_deleted_job_stays_deleted():
    holds = RoomHolds()
    holds.displaced(job_uid="job-b", node_name="n1")
    resumed = pending("b-2", job="b")
    holds.apply_pod(resumed)
    holds.bound(resumed, "n1")
    holds.apply_pod(replace(resumed, node_name="n1", phase="Running"))
    holds.unbound(resumed)  # the bind call reported an error, but the binding went through
    assert not holds.active and holds.holds() == []
    holds.displaced(job_uid="job-c", node_name="n1")
    other = pending("c-2", job="c")
    holds.apply_pod(other)
    holds.bound(other, "n1")
    holds.delete_job("job-c")
    holds.unbound(other)  # the binding failed after the Job was deleted
    assert not holds.active


def test_the_clock_runs_per_job_and_node_and_restarts_when_a_trial_pod_takes_the_room():
    clock = FakeClock()
    holds = holds_with("a", clock=clock, hold_seconds=120)
    waiter = pending("waiter", job="w")
    keeps = holds.kept_from(waiter, free_on=N1_FREE.get)
    holds.kept_off_nodes(keeps)
    holds.displaced(job_uid="job-b", node_name="n1")  # b's pod is still terminating: no pending pod yet
    clock.now += 100
    holds.bound(te("te-2", gpus=4), "n1")  # a trial pod takes the room: a's clock starts again
    clock.now += 100
    holds.apply_pod(pending("b-2", job="b", priority=RESUMED_PRIORITY))
    keeps = holds.kept_from(waiter, free_on=N1_FREE.get)
    assert keeps["n1"].jobs == ("job-a",)  # only one of the two 4-GPU pods fits the 4 free GPUs
    holds.kept_off_nodes(keeps)
    clock.now += 121  # b's clock never started: only a's hold lapses
    keeps = holds.kept_from(waiter, free_on=N1_FREE.get)
    assert holds.lapsed == 1 and keeps["n1"].jobs == ("job-b",)


def test_as_many_held_pods_as_fit_are_kept_for_and_a_job_keeps_a_hold_per_node():
    holds = holds_with("a", "b")
    keeps = holds.kept_from(pending("waiter", job="w", gpus=1), free_on=N1_FREE.get)
    assert keeps["n1"].jobs == ("job-a",)  # 4 free: one of the two 4-GPU pods can have them
    moved = RoomHolds()
    moved.displaced(job_uid="job-x", node_name="n1")
    moved.displaced(job_uid="job-x", node_name="n2")
    for uid in ("x-2", "x-3"):
        moved.apply_pod(pending(uid, job="x"))
    assert [(h.node, h.pods) for h in moved.holds()] == [("n1", ("ml/x-2",)), ("n2", ("ml/x-3",))]
    free = {"n1": Resources(16000, 128 * GI, 4), "n2": Resources(16000, 128 * GI, 4)}
    assert set(moved.kept_from(pending("waiter", job="w"), free_on=free.get)) == {"n1", "n2"}


def test_hived_gang_members_with_planned_slots_are_left_alone():
    gang = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"}
    engine, hived = hived_engine(3)
    a = pending("a-1", job="a", labels=VC)
    engine.reserve(a, filter_offered(engine, a, ["g0"]).feasible[0])
    engine.reserve(pending("b-1", job="b", labels=VC), "g0")
    trial = replace(te(gpus=4, vc="default"), priority=TRIAL_PRIORITY)
    (victim,) = engine.select_victims(trial, {"g0": ["a-1", "b-1"]}, {})["g0"]
    job = victim.split("-")[0]
    engine.delete_pod(victim)
    engine.delete_pod(trial.uid)  # its user deleted it: the resume hold alone keeps the room
    resumed = pending(f"{job}-2", job=job, priority=RESUMED_PRIORITY, labels=VC)
    engine.apply_pod(resumed)
    # The gang's first member is kept off g0; HiveD plans the whole gang elsewhere.
    w1 = replace(pending("w-1", job="w", labels=VC), annotations=gang)
    w2 = replace(pending("w-2", job="w", labels=VC), annotations=gang)
    first = filter_offered(engine, w1, ["g0", "g1", "g2"])
    assert list(first.feasible) in (["g1"], ["g2"])
    engine.reserve(w1, first.feasible[0])
    assert hived.has_booking(w2)  # its slot is planned: holds leave it to HiveD
    assert list(filter_offered(engine, w2, ["g0", "g1", "g2"]).feasible) != ["g0"]
    assert list(filter_offered(engine, resumed, ["g0", "g1", "g2"]).feasible) == ["g0"]  # the room is still there
