"""A preempted pod counts in its Job's status.failed only once it has terminated (its grace period
later). A second FitGpp decision against the same Job inside that window read the old count: with
backoffLimit 1 and status.failed 0 both victims were told "its 1st failed pod, so the next one
fails the Job", while the second is the Job's 2nd failure and fails it (review23). The engine now
counts its own victims of the Job that status.failed does not count yet, until status.failed
rises to count them, or a Job update comes after the pod is gone; a restarted engine knows none
of them and reads status.failed alone."""

from __future__ import annotations

from msgspec.structs import replace

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.kube import translate
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine, VictimChoice
from tests.preemption.test_victim_event_failed_count import watched_job

GI = 2**30
FIRST = "its 1st failed pod, so the next one fails the Job"
FAILS = "its Job fails instead of resuming, as its spec.podFailurePolicy does not ignore DisruptionTarget and this is its 2nd failed pod, over its backoffLimit 1"


def best_effort(uid: str, node: str) -> PodInfo:
    return PodInfo(uid=uid, namespace="ml", name=uid, requests=Resources(4000, 32 * GI, 8),
                   labels={"cellfit.io/job-class": "best-effort"}, node_name=node, phase="Running",
                   grace_period_seconds=60, owner=OwnerRef("Job", "be", "job-be"))


def trial(uid: str) -> PodInfo:
    return PodInfo(uid=uid, namespace="ml", name=uid, requests=Resources(4000, 32 * GI, 4),
                   labels={"cellfit.io/job-class": "trial"}, owner=OwnerRef("Job", uid, "job-" + uid))


def engine_with(*nodes: str, failed: int = 0) -> FitGppEngine:
    """Job ml/be (backoffLimit 1, no resume rule) with one best-effort pod on each node."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(max_preemptions=None))
    for node in nodes:
        engine.apply_node(NodeInfo(name=node, allocatable=Resources(32000, 256 * GI, 8)))
    engine.apply_job(translate.job_info(watched_job(backoff_limit=1, failed=failed)))
    for at, node in enumerate(nodes):
        engine.apply_pod(best_effort(f"be-{at}", node))
    return engine


def preempt(engine: FitGppEngine, preemptor: str, node: str, victim: str) -> str:
    choice: VictimChoice = engine.decide_preemption(trial(preemptor), {node: [victim]}, {})
    assert choice.victims == {node: [victim]}, choice
    message = choice.victim_messages()[victim]
    return message


def test_a_second_preemption_before_status_failed_counts_the_first_is_its_2nd_failed_pod() -> None:
    engine = engine_with("n1", "n2")
    assert FIRST in preempt(engine, "te-1", "n1", "be-0")
    second = preempt(engine, "te-2", "n2", "be-1")
    assert FAILS in second, second
    assert FIRST not in second


def test_a_victim_counted_by_status_failed_is_not_counted_twice() -> None:
    engine = engine_with("n1", "n2", "n3")
    engine.apply_job(translate.job_info(watched_job(backoff_limit=3, failed=0)))
    assert "its 1st failed pod, after which it tolerates 2 more" in preempt(engine, "te-1", "n1", "be-0")
    engine.apply_job(translate.job_info(watched_job(backoff_limit=3, failed=1)))  # be-0 counted
    assert "its 2nd failed pod, after which it tolerates 1 more" in preempt(engine, "te-2", "n2", "be-1")
    # be-1 terminating, not counted yet, and still in the pod store: the watch shows the Job again
    engine.apply_job(translate.job_info(watched_job(backoff_limit=3, failed=1)))
    assert "its 3rd failed pod, so the next one fails the Job" in preempt(engine, "te-3", "n3", "be-2")


def test_a_victim_gone_is_counted_by_the_next_update_of_its_job() -> None:
    engine = engine_with("n1", "n2", "n3")
    engine.apply_job(translate.job_info(watched_job(backoff_limit=3, failed=0)))
    assert "its 1st failed pod" in preempt(engine, "te-1", "n1", "be-0")
    engine.apply_pod(replace(best_effort("be-0", "n1"), phase="Failed"))
    engine.delete_pod("be-0")
    assert "its 2nd failed pod" in preempt(engine, "te-2", "n2", "be-1")  # be-0 gone, the Job not shown since
    # The Job controller counted both (be-1 before it was let go, an update this one stands for).
    engine.apply_job(translate.job_info(watched_job(backoff_limit=3, failed=2)))
    engine.delete_pod("be-1")
    engine.apply_job(translate.job_info(watched_job(backoff_limit=3, failed=2)))
    assert not engine._uncounted, engine._uncounted  # noqa: SLF001 - nothing kept once all are counted
    assert "its 3rd failed pod, so the next one fails the Job" in preempt(engine, "te-3", "n3", "be-2")


def test_a_restarted_engine_reads_status_failed_alone() -> None:
    engine = engine_with("n1", "n2")
    assert FIRST in preempt(engine, "te-1", "n1", "be-0")
    restarted = engine_with("n2")  # be-0 terminating elsewhere, its preemption unknown here
    assert FIRST in preempt(restarted, "te-2", "n2", "be-0")


def test_a_job_that_resumes_its_pods_keeps_nothing() -> None:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(max_preemptions=None))
    engine.apply_node(NodeInfo(name="n1", allocatable=Resources(32000, 256 * GI, 8)))
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    engine.apply_job(translate.job_info(watched_job(backoff_limit=1, policy=policy)))
    engine.apply_pod(best_effort("be-0", "n1"))
    preempt(engine, "te-1", "n1", "be-0")
    assert not engine._uncounted  # noqa: SLF001
