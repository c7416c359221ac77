"""A pod the leader's reclaim deletes itself (kube-scheduler will not preempt it: its priority is
not lower than the waiting guaranteed pod's) is told what the deletion does to its Job, in the
words the preempt verb's reclaim victims get (scheduler/preemption/reclaimed.py, FitGppEngine's
victim outcomes: counted against its backoffLimit, failed at once, or created again). Before,
its Preempted Event said who and why, nothing of its Job.

tests/cluster/test_reclaim.py's scene (VC a and VC b own a rack each, b's opportunistic pods of
priority 1000 fill the eight nodes, a's guaranteed g of priority 100 waits), on FitGppEngine
around the real HivedEngine, each opportunistic pod of its own Job as the API server returns it."""

from __future__ import annotations

import json
import threading
from typing import Any

import msgspec

from scheduler.cells import HivedEngine
from scheduler.cluster.reclaim import ReclaimController
from scheduler.config import ReclaimSettings
from scheduler.core.model import OwnerRef
from scheduler.core.pods import PodStore
from scheduler.kube import translate, wire
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import node, pod, rack_cluster, schedule
from tests.cluster.test_reclaim import AFTER, NODES, PROFILE, T0, Api, Clock
from tests.preemption.test_hived_reclaim_victim_event import IGNORE_RULE, NOT_IGNORING, job

OPPORTUNISTIC, WAITING = 1000, 100


def reclaimed_message(victim_job: dict[str, Any], *, with_jobs: bool = True, owner_api_version: str = "batch/v1",
                      api: Api | None = None) -> tuple[str, FitGppEngine, str]:
    """The victim's Preempted Event after the leader's reclaim deleted it, the engine, the victim.
    ``owner_api_version``: its Job's ownerReference's; ``api``: the one written to (a new one)."""
    hived = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]}))
    store = PodStore()
    engine = FitGppEngine(hived, settings=FitGppSettings(), pods=store)
    for name in NODES:
        engine.apply_node(node(name))
    for i in range(8):
        owned = msgspec.structs.replace(
            pod(f"o{i}", 8, "b", priority="opportunistic"),
            priority=OPPORTUNISTIC,
            scheduler_name=PROFILE,
            owner=OwnerRef(kind="Job", name=f"ob-{i}", uid=f"uid-ob-{i}", api_version=owner_api_version),
        )
        placed = schedule(engine, owned, NODES)  # type: ignore[arg-type]
        assert placed is not None
        running = msgspec.structs.replace(placed, phase="Running", priority=OPPORTUNISTIC, scheduler_name=PROFILE, owner=owned.owner)
        store.record(running)
        engine.apply_pod(running)
        body = {**victim_job, "metadata": {**victim_job["metadata"], "uid": f"uid-ob-{i}", "name": f"ob-{i}"}}
        engine.apply_job(translate.job_info(msgspec.json.decode(json.dumps(body).encode(), type=wire.Job)))
    waiting = msgspec.structs.replace(pod("g", 4, "a"), priority=WAITING, scheduler_name=PROFILE)
    store.record(waiting)
    engine.apply_pod(waiting)
    assert filter_offered(engine, waiting, NODES).failed  # g books its cells and waits
    (victim,) = hived.pending_preemptions()["g"]
    api, clock = api or Api(), Clock()
    controller = ReclaimController(
        api=api,
        engine=hived,
        pods=store,
        lock=threading.RLock(),
        settings=ReclaimSettings(after_seconds=AFTER),
        scheduler_name=PROFILE,
        clock=clock,
        jobs=engine if with_jobs else None,
    )
    controller.reconcile()
    clock.now = T0 + AFTER
    assert [r.victim.uid for r in controller.reconcile()] == [victim]
    (said,) = [e["message"] for e in api.events if e["reason"] == "Preempted"]
    assert said.startswith("preempted for guaranteed pod ns/g of virtual cluster a, which waits for cell "), said
    assert api.conditions[victim]["message"].endswith(said)  # its DisruptionTarget condition says the same
    return said, engine, victim


HEAD = "kube-scheduler preempts only lower priorities, and this pod's priority 1000 is not lower than its 100"


def test_a_job_that_resumes_it_creates_it_again() -> None:
    said, _, _ = reclaimed_message(job("ob", backoff_limit=6, rules=[IGNORE_RULE]))
    assert said.endswith(f"{HEAD}; its controller creates it again, and it runs where cells are free"), said


def test_a_job_that_counts_it_is_told_so_and_counts_it_for_the_next_preemption() -> None:
    said, engine, victim = reclaimed_message(job("ob", backoff_limit=2, failed=1))
    assert said.endswith(
        f"{HEAD}; its Job counts it as a failed pod against its backoffLimit 2, {NOT_IGNORING}: its 2nd failed pod, so the next one fails the Job"
    ), said
    shown = engine.victim(victim)
    assert shown is not None
    # The Job's status.failed does not count it yet: the next preemption of the Job is its 3rd.
    assert engine.victim_outcomes([msgspec.structs.replace(shown, uid="another")])["another"] == (
        f"its Job fails instead of resuming, {NOT_IGNORING} and this is its 3rd failed pod, over its backoffLimit 2"
    )


def test_a_job_failing_at_once_is_told_so() -> None:
    said, _, _ = reclaimed_message(job("ob", backoff_limit=6, rules=[{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]))
    assert said.endswith(f"{HEAD}; its Job fails, as its spec.podFailurePolicy fails the Job on DisruptionTarget"), said


def test_without_the_jobs_nothing_is_said_of_them() -> None:
    said, _, _ = reclaimed_message(job("ob", backoff_limit=2, failed=1), with_jobs=False)
    assert said.endswith(HEAD), said
