"""Each pod is recorded once: the composition's PodStore, which the watch cache keeps, and from
which FitGpp and its holds read what they need beyond their own indexes.

The cache records a pod before the engine hears of it and forgets it after, so the engine can
always look up a pod it knows; the store also keeps the state this scheduler assumed for a pod
until the watch shows it: FitGpp's reservation (the bind verb may have read a pod from the API
before the watch had it) and the holds' pending-again pod after a failed binding; a preemptor
hold keeps the preemptor as FitGpp was given it until the watch has it."""

from __future__ import annotations

import threading
from msgspec.structs import replace
from typing import Any, Callable

import pytest

from scheduler.cluster.cache import ClusterCache
from scheduler.composition import assemble
from scheduler.config import PreemptionSettings
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.pods import PodStore
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from scheduler.preemption.holds import RoomHolds
from tests.support.api_double import ListingApi
from tests.support.kube_objects import node, pod
from scheduler.kube.names import filter_offered

GI = 2**30


def best_effort(name: str, *, node_name: str | None, gpus: int = 4, job: str = "job-be") -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ml", name=name, requests=Resources(1000, GI, gpus),
                   labels={"cellfit.io/job-class": "best-effort"}, node_name=node_name, phase="Running" if node_name else "Pending",
                   owner=OwnerRef("Job", job, f"uid-{job}"))


def trial(name: str, gpus: int = 4) -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ml", name=name, requests=Resources(1000, GI, gpus),
                   labels={"cellfit.io/job-class": "trial"}, priority=1000, owner=OwnerRef("Job", name, f"uid-job-{name}"))


def test_the_store_finds_a_pod_by_uid_and_name_and_a_pod_recreated_under_its_name() -> None:
    store = PodStore()
    first = best_effort("a", node_name=None)
    store.record(first)
    assert store.get(first.uid) is first and store.named("ml", "a") is first and len(store) == 1
    again = replace(first, uid="uid-a-2")  # deleted and created again before the old one's deletion arrived
    store.record(again)
    assert store.named("ml", "a") is again
    assert store.forget(first.uid) is first
    assert store.named("ml", "a") is again and len(store) == 1  # the old one's deletion leaves the new name alone
    assert store.forget("nobody") is None


def test_the_store_keeps_an_assumed_state_until_the_watch_shows_the_pod() -> None:
    """One record, two states of a pod: the watched one, and the one this scheduler assumed (bound
    by its bind verb, or pending again after that binding failed), read first by ``current``."""
    store = PodStore()
    waiting = best_effort("a", node_name=None)
    store.record(waiting)
    bound = replace(waiting, node_name="n1", phase="Running")
    store.assume(bound)
    assert store.current(waiting.uid) is bound and store.get(waiting.uid) is waiting
    store.record(waiting)  # an event older than the binding: the bound assumption outlives it
    assert store.current(waiting.uid) is bound
    store.drop_assumed(waiting.uid, bound=False)  # only a pending assumption would end
    assert store.current(waiting.uid) is bound
    watched = replace(bound, terminating=True)
    store.record(watched)  # the watch shows it bound: its own state from now on
    assert store.assumed(waiting.uid) is None and store.current(waiting.uid) is watched

    unseen = best_effort("b", node_name=None)  # pending again after a failed binding, never watched
    store.assume(unseen)
    assert store.current(unseen.uid) is unseen and store.get(unseen.uid) is None and len(store) == 1
    store.record(unseen)  # any watched state ends a pending assumption
    assert store.assumed(unseen.uid) is None
    store.assume(replace(unseen, node_name="n2", phase="Running"))
    store.drop_assumed(unseen.uid, bound=True)  # the binding failed
    assert store.current(unseen.uid) is unseen
    store.assume(replace(unseen, node_name="n2", phase="Running"))
    store.forget(unseen.uid)  # deleted: nothing of it stays
    assert store.current(unseen.uid) is None and store.assumed(unseen.uid) is None


def test_the_watch_cache_keeps_the_composition_s_record_and_fitgpp_reads_it() -> None:
    composition = assemble(cells=None, preemption=PreemptionSettings(), clock=lambda: 0.0, pods=PodStore())
    fitgpp = composition.preemption
    assert isinstance(fitgpp, FitGppEngine) and composition.holds is fitgpp.holds
    running = pod("train-0", uid="uid-0", cpu="1", gpus=4, node_name="node-000", phase="Running", labels={"cellfit.io/job-class": "best-effort"})
    api = ListingApi(nodes=[node("node-000", gpus=8, cpu="64")], pods=[running, pod("waiting-0", uid="uid-w", cpu="1", gpus=4)])
    cache = ClusterCache(api=api, engine=composition.engine, lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=composition.pods, jobs=composition.jobs)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    assert set(composition.pods) == {"uid-0", "uid-w"}
    assert fitgpp.victim("uid-0") is composition.pods.get("uid-0")  # the same object, not a copy
    assert fitgpp.victim("uid-w") is None  # pending: not a candidate victim
    api.pods = [api.pods[1]]  # train-0 deleted while the watch was down
    cache.pods._list_and_replace()
    assert set(composition.pods) == {"uid-w"} and fitgpp.victim("uid-0") is None
    assert fitgpp.stats()["preemptionCandidates"] == 0


def test_a_pod_reserved_before_the_watch_showed_it_is_known_until_the_watch_shows_it_bound() -> None:
    store = PodStore()  # kept by a driver that has not seen the pod yet
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), pods=store)
    engine.apply_node(NodeInfo(name="n1", allocatable=Resources(64000, 512 * GI, 4)))
    be = best_effort("be-0", node_name=None)
    engine.reserve(be, "n1")  # the bind verb read it from the API
    assert engine.victim(be.uid) is not None and engine.victim(be.uid).node_name == "n1"  # type: ignore[union-attr]
    choice = engine.decide_preemption(trial("te-0"), {"n1": []}, {})
    assert choice.victims == {"n1": [be.uid]}
    assert [(job.uid, count) for job, count in engine.victim_jobs([be.uid])] == [("uid-job-be", 1)]
    bound = replace(be, node_name="n1", phase="Running", terminating=True)
    store.record(bound)  # the driver records it, then the engine hears of it
    engine.apply_pod(bound)
    assert engine.victim(be.uid) is bound
    engine.delete_pod(be.uid)
    store.forget(be.uid)
    assert engine.victim(be.uid) is None and engine.stats()["preemptionCandidates"] == 0


def test_a_preemptor_hold_reads_the_preemptor_from_the_record_once_the_watch_has_it() -> None:
    store = PodStore()
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), pods=store)
    engine.apply_node(NodeInfo(name="n1", allocatable=Resources(64000, 512 * GI, 4)))
    victim = best_effort("be-0", node_name="n1")
    store.record(victim)
    engine.apply_pod(victim)
    preemptor = trial("te-0")  # as the preempt verb was given it: the watch has not shown it yet
    assert engine.decide_preemption(preemptor, {"n1": []}, {}).victims == {"n1": [victim.uid]}
    (hold,) = [h for h in engine.holds.holds() if h.kind == "preemptor"]
    assert hold.requests == preemptor.requests
    larger = replace(preemptor, requests=Resources(1000, GI, 2))  # resized before the watch showed it
    store.record(larger)
    engine.apply_pod(larger)
    (hold,) = [h for h in engine.holds.holds() if h.kind == "preemptor"]
    assert hold.requests == larger.requests


class RecordingDriver:
    """A driver in the watch cache's order: a pod recorded before the engine hears of it,
    forgotten after (a finished one forgotten at once)."""

    def __init__(self) -> None:
        self.store = PodStore()
        self.engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), pods=self.store)
        self.engine.apply_node(NodeInfo(name="n1", allocatable=Resources(64000, 512 * GI, 8)))

    def apply(self, pod: PodInfo) -> None:
        if not pod.holds_resources and pod.node_name is not None:
            self.delete(pod.uid)
            return
        self.store.record(pod)
        self.engine.apply_pod(pod)

    def delete(self, uid: str) -> None:
        self.engine.delete_pod(uid)
        self.store.forget(uid)


def held(name: str, job: str, *, node_name: str | None = None, grace: int = 30, labels: dict[str, str] | None = None) -> PodInfo:
    return replace(best_effort(name, node_name=node_name, job=job), priority=500, grace_period_seconds=grace,
                   labels={"cellfit.io/job-class": "best-effort", **(labels or {})})


def preempted_on_a_full_node(driver: RecordingDriver, preemptor: PodInfo) -> None:
    driver.apply(held("be-long", "a", node_name="n1", grace=600))
    driver.apply(held("be-short", "b", node_name="n1"))
    assert driver.engine.select_victims(preemptor, {"n1": ["uid-be-long", "uid-be-short"]}, {}) == {"n1": ["uid-be-short"]}
    driver.delete("uid-be-short")


def test_a_resumed_pod_whose_binding_failed_before_the_watch_showed_it_keeps_its_job_s_room() -> None:
    """Found by review: the bind verb read the resumed pod from the API, its binding failed, and
    the hold lost the pod it keeps room for until the watch showed it."""
    driver = RecordingDriver()
    te = replace(trial("te-1"), priority=1000)
    driver.apply(te)
    preempted_on_a_full_node(driver, te)
    driver.engine.reserve(te, "n1")
    driver.apply(replace(te, node_name="n1", phase="Running"))
    driver.apply(replace(te, node_name="n1", phase="Succeeded"))  # the trial is done: job b's room on n1 is free again
    resumed = held("be-short-2", "b")
    driver.engine.reserve(resumed, "n1")  # read from the API: the driver has not recorded it
    driver.engine.unreserve(resumed.uid)  # the Binding failed
    (hold,) = driver.engine.holds.holds()
    assert (hold.node, hold.kind, hold.pods) == ("n1", "resume", ("ml/be-short-2",))
    assert list(filter_offered(driver.engine, held("waiter", "w"), ["n1"]).feasible) == []
    driver.apply(resumed)  # the watch shows it pending
    assert [h.pods for h in driver.engine.holds.holds()] == [("ml/be-short-2",)]


def test_a_preemptor_hold_reads_the_preemptor_as_decided_for_until_the_watch_shows_it_again() -> None:
    """Found by review: the record may hold an older state of the preemptor than the one FitGpp
    decided for (relabelled out of a virtual cluster a moment ago)."""
    driver = RecordingDriver()
    driver.apply(replace(trial("te-1"), labels={"cellfit.io/job-class": "trial", "cellfit.io/virtual-cluster": "speech"}))
    now = trial("te-1")  # kube-scheduler's pod: no virtual cluster any more
    preempted_on_a_full_node(driver, now)
    assert list(filter_offered(driver.engine, held("waiter", "w"), ["n1"]).feasible) == []  # it yields to the preemptor's room
    assert list(filter_offered(driver.engine, replace(trial("te-2"), name="te-2"), ["n1"]).feasible) == []


def test_a_relist_forgets_a_reserved_pod_the_watch_never_showed_and_the_list_does_not() -> None:
    """Found by review: the bind verb read the pod from the API and reserved it; the watch broke
    before showing it and the pod was deleted meanwhile. The relist, begun after the
    reservation, lists no such pod: its reservation goes. A pod reserved after the list began
    stays (it may have been created since; the watch will bring it)."""
    store = PodStore()
    fit = ResourceFitEngine()
    engine = FitGppEngine(fit, settings=FitGppSettings(), pods=store)
    late = best_effort("late", node_name=None)

    class ReservingDuringTheList(ListingApi):
        def list_raw(self, kind: str, *, limit: int | None = None, continue_token: str | None = None) -> bytes:
            listing = super().list_raw(kind, limit=limit, continue_token=continue_token)
            if kind == "pods" and self.reserve_during_list:
                engine.reserve(late, "n1")  # the bind verb, while the list is on its way
            return listing

        reserve_during_list = False

    api = ReservingDuringTheList(nodes=[node("n1", gpus=8)])
    cache = ClusterCache(api=api, engine=engine, lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=store, jobs=engine)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    gone = best_effort("gone", node_name=None)
    engine.reserve(gone, "n1")  # read from the API; never watched
    assert fit.free_on("n1").gpus == 4
    api.reserve_during_list = True
    cache.pods._list_and_replace()  # the watch was down, "gone" was deleted meanwhile
    assert store.current(gone.uid) is None and engine.victim(gone.uid) is None
    assert store.current(late.uid) is not None and fit.free_on("n1").gpus == 4  # "late" keeps its room
    api.reserve_during_list = False
    cache.pods._list_and_replace()  # a later list that still does not show it: gone too
    assert store.current(late.uid) is None and fit.free_on("n1").gpus == 8


def two_nodes_served() -> tuple[Any, FitGppEngine, RoomHolds, Callable[[PodInfo], None]]:
    """FitGpp over resource fit as the composition serves it, on two 8-GPU nodes, and ``watch``:
    a pod's state recorded, then applied, as the watch cache does."""
    store = PodStore()
    composition = assemble(cells=None, preemption=PreemptionSettings(), clock=lambda: 0.0, pods=store)
    engine, fitgpp, holds = composition.engine, composition.preemption, composition.holds
    assert isinstance(fitgpp, FitGppEngine) and holds is not None
    for name in ("n1", "n2"):
        engine.apply_node(NodeInfo(name=name, allocatable=Resources(8000, 64 * GI, 8)))

    def watch(state: PodInfo) -> None:
        store.record(state)
        engine.apply_pod(state)

    return engine, fitgpp, holds, watch


def test_a_pending_event_older_than_a_binding_does_not_make_the_bound_pod_wait_for_room() -> None:
    """Found by review: a1 is bound by cellfit, then an event from before the binding shows it
    pending. It must not count among its Job's pending pods: a resume hold made for the Job
    would be kept for a1 and then ended by a1's confirmation, leaving the Job's next pod none."""
    engine, fitgpp, holds, watch = two_nodes_served()
    running = best_effort("a0", node_name="n1", job="job-a")
    watch(running)
    waiting = best_effort("a1", node_name=None, job="job-a")
    watch(waiting)
    engine.reserve(waiting, "n2")
    watch(waiting)  # older than the binding
    choice = fitgpp.decide_preemption(trial("t"), {"n1": [running.uid]}, {running.uid: running})
    assert choice.victims == {"n1": [running.uid]}
    assert [hold.pods for hold in holds.holds() if hold.kind == "resume"] == []  # a1 waits for nothing
    watch(replace(waiting, node_name="n2", phase="Running"))  # the binding confirmed
    watch(best_effort("a2", node_name=None, job="job-a"))  # the Job's replacement for a0
    assert [hold.pods for hold in holds.holds() if hold.kind == "resume"] == [("ml/a2",)]


@pytest.mark.parametrize("seen", ["pending event during the binding", "no event", "never watched"])
def test_a_job_pod_whose_binding_failed_waits_again_for_its_job_s_room(seen: str) -> None:
    """Found by review: bound() takes a Job's pod off its Job's pending pods; when the binding
    fails the pod waits again, so a resume hold made for its Job afterwards keeps room for it
    (whether or not a pending event came while the binding was in flight, which the bound
    assumption makes the holds skip, or the watch has shown the pod at all)."""
    engine, fitgpp, holds, watch = two_nodes_served()
    running = best_effort("a0", node_name="n1", job="job-a")
    watch(running)
    waiting = best_effort("a1", node_name=None, job="job-a")
    if seen != "never watched":
        watch(waiting)
    engine.reserve(waiting, "n2")
    if seen == "pending event during the binding":
        watch(waiting)
    engine.unreserve(waiting.uid)  # the Binding failed
    choice = fitgpp.decide_preemption(trial("t"), {"n1": [running.uid]}, {running.uid: running})
    assert choice.victims == {"n1": [running.uid]}
    assert [hold.pods for hold in holds.holds() if hold.kind == "resume"] == [("ml/a1",)]
