"""FitGpp's fallback (no single best-effort pod frees enough; pods taken at random until one
node has room) told its victims only that: each victim's Preempted Event left out what the
preemption does to its own Job, which the single-victim rule says (backoffLimit, status.failed,
podFailurePolicy; a592a14). Now each fallback victim is told its own Job's outcome, and two
pods of one Job taken by one decision are counted one after the other: the Job's status.failed
counts neither yet, so with backoffLimit 1 the second fails the Job, and both Events say so.

On FitGppEngine around the real HivedEngine (the live session's scene: vc-a's best-effort Job
be-p, two pods x 4 GPUs, and its trial pod te-x asking for 8), and the driver's write of one
Event per victim with its own message (scheduler/cluster/cache.py).
"""

from __future__ import annotations

import threading
from typing import Any

import msgspec

from scheduler.cluster.cache import ClusterCache
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, NodeInfo, OwnerRef, PodInfo
from scheduler.core.pods import PodStore
from scheduler.core.resources import Resources
from scheduler.kube import translate, wire
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.preemption.test_hived_fitgpp_candidates import NODES, engine, job_pod, run
from tests.support.api_double import ListingApi

NOT_IGNORING = "as its spec.podFailurePolicy does not ignore DisruptionTarget"
TOOK = "no single best-effort pod there freed enough, so FitGpp took best-effort pods at random until it did"
RESUME = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}


def watched_job(name: str, *, backoff_limit: int, failed: int = 0, policy: dict[str, Any] | None = None) -> JobInfo:
    """The Job as the watch translates it from the API server's JSON, its status included."""
    spec: dict[str, Any] = {"backoffLimit": backoff_limit, "template": {"spec": {"containers": [{"name": "train"}]}}}
    if policy is not None:
        spec["podFailurePolicy"] = policy
    body = {"metadata": {"uid": f"uid-{name}", "namespace": "ns", "name": name}, "spec": spec, "status": {"failed": failed}}
    return translate.job_info(msgspec.json.decode(msgspec.json.encode(body), type=wire.Job))


def te_x_preempts(be_p: JobInfo) -> dict[str, str]:
    """vc-a's trial pod te-x preempts both pods of be-p (the fallback); each victim's message."""
    made = engine()
    run(made, job_pod("be-p-0", 4, "vc-a", "be-p", "best-effort"), job_pod("be-p-1", 4, "vc-a", "be-p", "best-effort"))
    made.apply_job(be_p)
    te_x = job_pod("te-x-0", 8, "vc-a", "te-x", "trial")
    made.apply_pod(te_x)
    choice = made.decide_preemption(te_x, {name: [] for name in NODES}, {})
    assert choice.rule == "fallback" and sorted(choice.victim_uids) == ["be-p-0", "be-p-1"]
    messages = choice.victim_messages()
    assert list(messages) == list(choice.victim_uids)  # in the decision's order
    return messages


def test_two_pods_of_a_job_with_backoff_limit_1_are_told_the_job_fails() -> None:
    first, second = te_x_preempts(watched_job("be-p", backoff_limit=1)).values()
    head = "preempted by ns/te-x-0 on node "
    assert first.startswith(head) and second.startswith(head)
    assert first.endswith(
        f"{TOOK}; its Job counts it as a failed pod against its backoffLimit 1, {NOT_IGNORING}: its 1st failed pod, and "
        "the other pod of its Job preempted with it is its 2nd, over its backoffLimit 1, so its Job fails instead of resuming")
    assert second.endswith(
        f"{TOOK}; its Job fails instead of resuming, {NOT_IGNORING} and this is its 2nd failed pod, over its backoffLimit 1")


def test_the_second_pods_count_starts_from_the_jobs_status_failed_plus_the_first() -> None:
    first, second = te_x_preempts(watched_job("be-p", backoff_limit=6, failed=2)).values()
    assert first.endswith(": its 3rd failed pod, and the other pod of its Job preempted with it is its 4th, after which it "
                          "tolerates 2 more")
    assert second.endswith(": its 4th failed pod, after which it tolerates 2 more")


def test_a_job_that_ignores_disruption_is_told_nothing_more() -> None:
    first, second = te_x_preempts(watched_job("be-p", backoff_limit=0, policy=RESUME)).values()
    assert first.split(": ", 1)[1] == second.split(": ", 1)[1] == TOOK


def test_victims_of_two_jobs_are_each_told_their_own_jobs_outcome() -> None:
    made = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    made.apply_node(NodeInfo(name="n1", allocatable=Resources(32000, 2**38, 8)))
    made.apply_job(watched_job("counted", backoff_limit=0))
    made.apply_job(watched_job("resumes", backoff_limit=0, policy=RESUME))
    for name in ("counted", "resumes"):
        made.apply_pod(PodInfo(uid=f"{name}-0", namespace="ns", name=f"{name}-0", requests=Resources(1000, 2**30, 4),
                               labels={"cellfit.io/job-class": "best-effort"}, node_name="n1", phase="Running",
                               owner=OwnerRef("Job", name, f"uid-{name}")))
    te = PodInfo(uid="te", namespace="ns", name="te", requests=Resources(1000, 2**30, 8), labels={"cellfit.io/job-class": "trial"})
    choice = made.decide_preemption(te, {"n1": []}, {})
    assert choice.rule == "fallback"
    messages = choice.victim_messages()
    assert messages["counted-0"].endswith(f"{TOOK}; its Job fails instead of resuming, {NOT_IGNORING} and its backoffLimit is 0")
    assert messages["resumes-0"].endswith(f": {TOOK}")


class EventApi(ListingApi):
    def __init__(self) -> None:
        super().__init__(nodes=[])
        self.events: list[tuple[str, str, str]] = []

    def create_event(self, *, pod_name: str, reason: str, message: str, **_: Any) -> None:
        self.events.append((pod_name, reason, message))


def test_the_driver_writes_each_victim_its_own_message() -> None:
    api = EventApi()
    cache = ClusterCache(api=api, engine=ResourceFitEngine(), lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=PodStore(), jobs=None)
    victims = [PodInfo(uid=f"uid-{n}", namespace="ns", name=n, requests=Resources(1000, 2**30, 4), node_name="n1", phase="Running")
               for n in ("be-0", "be-1")]
    trial = PodInfo(uid="uid-te", namespace="ns", name="te", requests=Resources(1000, 2**30, 8))
    cache.record_preemption(preemptor=trial, preemptor_messages=[], victims=victims, victim_message="shared", job_counts=[],
                            victim_messages={"uid-be-1": "its own"})
    cache._writes.shutdown(wait=True)  # the background writes, done
    assert api.events == [("be-0", "Preempted", "shared"), ("be-1", "Preempted", "its own")]
