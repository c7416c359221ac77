"""HiveD's reclaim answered by the preempt verb (a guaranteed pod of VC a takes back a's cells
that an opportunistic pod of VC b borrowed; kube-scheduler deletes the pod) wrote no Event of
cellfit's on the victim: its user read only kube-scheduler's "Preempted by pod <uid> on node
<node>", while FitGpp's victims are told who preempted them, why, and what the preemption does
to their Job (live hand session). Now a reclaim victim is told who reclaims (the preemptor and
its VC), that it ran there opportunistically on cells its own VC is not guaranteed, and its
Job's outcome in the words FitGpp's victims get (scheduler/wording.py).

The scene of test_hived_preemptor_record.py (FitGppEngine around the real HivedEngine; VC a and
VC b own a rack each, b's opportunistic pods fill all eight nodes, a's guaranteed pod ``g``
books 4 GPUs); the victims' Jobs as the watch translates them from the API server's JSON, and
the Events as the preempt verb hands them to the watch cache, which writes them."""

from __future__ import annotations

import json
import threading
from typing import Any

import msgspec

from scheduler.cluster.cache import ClusterCache
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import AlwaysReady, ExtenderService
from scheduler.kube import translate, wire
from scheduler.kube.names import filter_offered
from scheduler.kubectl.objects import PREEMPTED_WHERE, PREEMPTING
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import pod, schedule
from tests.cluster.test_preemptor_record_write import WritingApi
from tests.preemption.test_hived_preemptor_record import GUARANTEED, NODES, engine, opportunistic, ours

IGNORE_RULE = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
NOT_IGNORING = "as its spec.podFailurePolicy does not ignore DisruptionTarget"


def job(name: str, *, backoff_limit: int, failed: int = 0, rules: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Job as the API server returns it."""
    spec: dict[str, Any] = {
        "backoffLimit": backoff_limit,
        "completions": 1,
        "parallelism": 1,
        "template": {"spec": {"containers": [{"name": "train", "image": "train:1"}], "restartPolicy": "Never"}},
    }
    if rules is not None:
        spec["podFailurePolicy"] = {"rules": rules}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"uid": f"uid-{name}", "namespace": "ns", "name": name, "resourceVersion": "4121"},
        "spec": spec,
        "status": {"failed": failed, "active": 1},
    }


def scene(victim_job: dict[str, Any]) -> tuple[FitGppEngine, PodInfo, str, str]:
    """b's opportunistic pods o0..o7, each of its own Job (``victim_job`` the Job of each); g
    booked and waiting; the victim HiveD names and its node."""
    made = engine()
    for i in range(8):
        owned = msgspec.structs.replace(opportunistic(f"o{i}"), owner=OwnerRef(kind="Job", name=f"ob-{i}", uid=f"uid-ob-{i}", api_version="batch/v1"))
        placed = schedule(made, owned, NODES)  # type: ignore[arg-type]
        assert placed is not None
        made.apply_pod(ours(placed, 10, phase="Running"))
        body = {**victim_job, "metadata": {**victim_job["metadata"], "uid": f"uid-ob-{i}", "name": f"ob-{i}"}}
        made.apply_job(translate.job_info(msgspec.json.decode(json.dumps(body).encode(), type=wire.Job)))
    g = ours(pod("g", 4, "a"), GUARANTEED)
    made.apply_pod(g)
    assert filter_offered(made, g, NODES).feasible == []  # g books its cells and waits
    ((victim,),) = made.inner.pending_preemptions().values()  # type: ignore[attr-defined]
    shown = made.pods.get(victim)
    assert shown is not None and shown.node_name is not None
    return made, g, victim, shown.node_name


def reclaim_message(victim_job: dict[str, Any]) -> tuple[str, str]:
    """The victim's Event message, after its head, and the preemptor's."""
    made, g, victim, where = scene(victim_job)
    choice = made.decide_preemption(g, {where: [victim]}, {})
    assert choice.rule == "reclaim" and choice.victims == {where: [victim]}
    messages = choice.victim_messages()
    assert list(messages) == [victim] and choice.victim_message() == messages[victim]
    found = PREEMPTED_WHERE.match(messages[victim])  # kubectl cellfit why reads who and where from it
    assert found is not None and found["node"] == where, messages[victim]
    (preempting,) = choice.preemptor_messages()
    return messages[victim].split(": ", 1)[1], preempting


def test_the_victim_is_told_who_reclaims_and_that_it_borrowed_the_cells() -> None:
    said, _ = reclaim_message(job("ob", backoff_limit=6, rules=[IGNORE_RULE]))
    assert said == (
        "HiveD reclaims the cells this pod ran on for ns/g, a guaranteed pod of virtual cluster a, whose cells they "
        "are; this pod ran there opportunistically (cellfit.io/priority: opportunistic), on cells its own virtual "
        "cluster b is not guaranteed; its controller creates it again, and it runs where cells are free"
    )


def test_a_job_that_counts_the_preempted_pod_is_told_so() -> None:
    said, _ = reclaim_message(job("ob", backoff_limit=2, failed=1))
    assert said.endswith(
        f"is not guaranteed; its Job counts it as a failed pod against its backoffLimit 2, {NOT_IGNORING}: its 2nd failed pod, so the next one fails the Job"
    ), said


def test_a_job_failing_at_once_is_told_so() -> None:
    said, _ = reclaim_message(job("ob", backoff_limit=6, rules=[{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]))
    assert said.endswith("; its Job fails, as its spec.podFailurePolicy fails the Job on DisruptionTarget"), said


def test_a_rule_on_exit_codes_before_the_ignore_rule_is_told() -> None:
    said, _ = reclaim_message(job("ob", backoff_limit=2, rules=[{"action": "Count", "onExitCodes": {"operator": "In", "values": [137]}}, IGNORE_RULE]))
    assert said.endswith(
        "; its Job resumes it unless it exits with 137, on which its spec.podFailurePolicy's rule 1 counts it "
        "against its backoffLimit 2 before its Ignore rule on DisruptionTarget is reached: a process stopped by "
        "SIGTERM usually exits with 143, by SIGKILL with 137"
    ), said


def test_the_preemptor_is_told_whose_cells_it_reclaims_as_kubectl_cellfit_reads_it() -> None:
    _, preempting = reclaim_message(job("ob", backoff_limit=6, rules=[IGNORE_RULE]))
    found = PREEMPTING.match(preempting)
    assert found is not None, preempting
    assert found["why"] == (
        f"reclaiming cells of virtual cluster a for this guaranteed pod: {found['victim']}, of virtual cluster b, ran on them opportunistically"
    )


def test_a_retry_that_finds_the_victim_chosen_tells_nothing_again() -> None:
    """kube-scheduler asks again where its nomination was cleared: the victim is told once, and
    its Job does not count it a second failed pod."""
    made, g, victim, where = scene(job("ob", backoff_limit=6))
    assert made.decide_preemption(g, {where: [victim]}, {}).victim_messages()
    again = made.decide_preemption(g, {where: [victim]}, {})
    assert again.victims == {where: [victim]} and not again.explained and again.preemptor_record is not None


def test_the_preempt_verb_writes_the_events_and_counts_no_preemption_of_the_job() -> None:
    """Through the preempt verb and the watch cache's writes: an Event on each side, and no
    write of the Job's cellfit.io/preemptions (which counts FitGpp's decisions, not HiveD's)."""
    made, g, victim, where = scene(job("ob", backoff_limit=6, rules=[IGNORE_RULE]))
    api = WritingApi(nodes=[])
    lock = threading.RLock()
    cache = ClusterCache(api=api, engine=made, lock=lock, gpu_resource="nvidia.com/gpu", pods=made.pods, jobs=None)  # type: ignore[arg-type]
    service = ExtenderService(
        engine=made,
        lock=lock,
        metrics=ExtenderMetrics(),
        gpu_resource="nvidia.com/gpu",
        cluster=cache,
        readiness=AlwaysReady(),
        preemption=made,
        pods=made.pods,
    )
    sent = {
        "metadata": {"name": "g", "namespace": "ns", "uid": "g", "labels": dict(g.labels)},
        "spec": {
            "schedulerName": "cellfit",
            "priority": GUARANTEED,
            "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "4", "cpu": "1"}}}],
        },
    }
    body = {"Pod": sent, "NodeNameToMetaVictims": {where: {"Pods": [{"UID": victim}], "NumPDBViolations": 0}}}
    answer = json.loads(service.preempt(json.dumps(body).encode()).body)
    cache._writes.shutdown(wait=True)  # the background writes, done
    assert answer["NodeNameToMetaVictims"] == {where: {"Pods": [{"UID": victim}], "NumPDBViolations": 0}}
    told = {(e["pod_name"], e["reason"]): e for e in api.events}
    assert set(told) == {("g", "Preempting"), (victim, "Preempted"), (f"ob-{victim.removeprefix('o')}", "PodPreempted")}  # and its Job
    assert told[victim, "Preempted"]["warning"] is True
    assert told[victim, "Preempted"]["message"].startswith(f"preempted by ns/g on node {where}: HiveD reclaims the cells")
    assert [w[0] for w in api.writes] == ["PATCH"]  # the preemptor's record; no GET of a Job to count
    assert made.preemptions_of_job(f"uid-ob-{victim.removeprefix('o')}") == 0
