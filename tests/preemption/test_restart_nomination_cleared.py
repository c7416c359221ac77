"""A restart of cellfit in the middle of a FitGpp preemption, when kube-scheduler has cleared the
preemptor's nomination meanwhile (live session, issue restart22). kube-scheduler's attempts for
the trial pod while cellfit is down end in an extender error ("connection refused"), and
``schedulingCycle`` answers an error that is not a FitError with ``clearNominatedNode``: the
restarted cellfit finds the victim still terminating and nothing naming its preemptor, so no
preemptor hold was rebuilt. The trial pod, asked about again, took a second victim on another
node, and the victim Job's next pod (its resume hold rebuilt) took the freed room.

Now the first trial pod that asks to preempt adopts the room such orphaned victims free (once per
node, when it fits there and outranks them), and waits for them as a preemptor whose hold was
rebuilt does. The scene of tests/preemption/test_holds_recovered.py, on node n1, plus node n2
where a second victim could be taken."""

from __future__ import annotations

import msgspec

from scheduler.core.model import NodeInfo
from scheduler.core.resources import Resources
from scheduler.kube.names import filter_offered
from tests.preemption.test_holds_recovered import (
    BE_PRIORITY,
    GI,
    JOB_B,
    RESUMED_PRIORITY,
    as_pod,
    preempted,
    restarted,
    running,
    trial,
)
from tests.support import kube_objects

BE = {"cellfit.io/job-class": "best-effort"}


def on_n2(name: str, *, job_uid: str) -> dict:
    body = running(name, job_uid=job_uid, gpus=8)
    body["spec"]["nodeName"] = "n2"
    return body


def mid_preemption_nomination_cleared() -> list[dict]:
    return [running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), on_n2("be-c-0", job_uid="job-c"),
            trial(nominated=None)]


def engine_after_restart():
    engine = restarted([])
    engine.apply_node(NodeInfo(name="n2", allocatable=Resources(32000, 256 * GI, 8)))
    for body in mid_preemption_nomination_cleared():
        engine.apply_pod(as_pod(body))
    return engine


def test_the_preemptor_takes_no_second_victim_while_the_orphaned_victim_leaves():
    engine = engine_after_restart()
    choice = engine.decide_preemption(as_pod(trial(nominated=None)), {"n1": ["be-a-0"], "n2": ["be-c-0"]}, {})
    assert choice.victims == {}, choice.victims  # before: be-c-0 on n2, a second preemption
    assert choice.refusal is not None and "already terminating on node n1" in choice.refusal
    assert [(h.node, h.kind, h.pods) for h in engine.holds.holds() if h.kind == "preemptor"] == [("n1", "preemptor", ("ml/te-1",))]


def test_once_the_victim_has_gone_the_resumed_pod_leaves_the_room_to_the_preemptor():
    engine = engine_after_restart()
    # kube-scheduler's dry run offers n2 only: on n1 it sees the victim leaving already.
    assert engine.decide_preemption(as_pod(trial(nominated=None)), {"n2": ["be-c-0"]}, {}).victims == {}  # before: be-c-0
    engine.delete_pod("be-b-0")
    resumed = as_pod(kube_objects.pod("be-b-1", uid="be-b-1", gpus=4, priority=RESUMED_PRIORITY, labels=BE, job_uid=JOB_B))
    engine.apply_pod(resumed)
    decision = filter_offered(engine, resumed, ["n1"])
    assert list(decision.feasible) == []  # before: n1, and the trial pod preempted it again or waited
    assert decision.unresolvable["n1"].startswith("its free resources are kept for ml/te-1, for which FitGpp preempted")
    assert list(filter_offered(engine, as_pod(trial(nominated=None)), ["n1"]).feasible) == ["n1"]


def test_the_orphaned_room_is_adopted_once_and_only_by_a_pod_that_outranks_the_victims():
    engine = engine_after_restart()
    low = msgspec.structs.replace(as_pod(trial("te-low", nominated=None)), priority=BE_PRIORITY)  # no higher than the victim's
    assert engine.decide_preemption(low, {"n1": ["be-a-0"]}, {}).victims == {"n1": ["be-a-0"]}  # FitGpp's own choice
    engine = engine_after_restart()
    engine.decide_preemption(as_pod(trial(nominated=None)), {"n1": ["be-a-0"], "n2": ["be-c-0"]}, {})
    engine.apply_pod(as_pod(trial("te-2", nominated=None)))
    second = engine.decide_preemption(as_pod(trial("te-2", nominated=None)), {"n2": ["be-c-0"]}, {})
    assert second.victims == {"n2": ["be-c-0"]}  # n1's room is te-1's: te-2 preempts for itself
