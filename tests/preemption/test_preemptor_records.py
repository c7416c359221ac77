"""FitGpp's decision recorded on its preemptor (annotation ``cellfit.io/preemptor-hold``,
scheduler/preemption/records.py) rebuilds exactly that preemptor hold after a restart.

The scene of test_holds_recovered.py: node n1 (8 GPUs) runs best-effort Jobs a and b (4 GPUs
each); FitGpp preempted b's pod for trial pod te-1 (4 GPUs), and kube-scheduler marked the victim
DisruptionTarget and deleted it. Then cellfit restarted, and kube-scheduler's attempt for te-1
that met it down cleared te-1's nomination: only the record ties te-1 to n1 now. The pods come
from API objects through the translation the watch cache uses.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, NodeInfo
from scheduler.core.resources import Resources
from scheduler.errors import InvalidAnnotation
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings, records
from scheduler.preemption.engine import FitGppEngine
from tests.preemption.test_holds_recovered import (
    BE,
    GI,
    JOB_B,
    NODE,
    RESUMED_PRIORITY,
    as_pod,
    preempted,
    restarted,
    running,
    trial,
    waiter,
)
from tests.preemption.test_holds import FakeClock
from tests.support import kube_objects

RECORD = '{"node":"n1","victims":["be-b-0"]}'


def recorded(record: str = RECORD, **kwargs: Any) -> dict[str, Any]:
    """te-1 carrying the record, its nomination cleared unless ``nominated`` is given."""
    body = trial(**{"nominated": None, **kwargs})
    body["metadata"].setdefault("annotations", {})[ANNOTATION_PREEMPTOR_HOLD] = record
    return body


def resumed(name: str = "be-b-1") -> dict[str, Any]:
    return kube_objects.pod(name, uid=name, gpus=4, priority=RESUMED_PRIORITY, labels=BE, job_uid=JOB_B)


def holds(engine: FitGppEngine) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(h.node, h.kind, h.pods) for h in engine.holds.holds()]


def test_the_record_reads_back_as_written_and_an_empty_one_is_none() -> None:
    text = records.encode(node="n1", victims=("be-b-0", "be-c-0"))
    assert text == '{"node":"n1","victims":["be-b-0","be-c-0"]}'
    assert records.decode(text) == records.PreemptorRecord(node="n1", victims=("be-b-0", "be-c-0"))
    assert records.decode("") is None  # emptied by the pod's binding


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("n1", "does not read"),
        ('{"node":"n1"}', "does not read"),
        ('{"node":"","victims":["a"]}', "names no node"),
        ('{"node":"n1","victims":[]}', "names no victim"),
        ('{"node":"n1","victims":[""]}', "names no victim"),
        ('{"node":"n1","victims":["a"],"resumes":{"b":"job"}}', "names a resumed Job for a pod that is not one of its victims"),
        ('{"node":"n1","victims":["a"],"resumes":{"a":""}}', "by an empty UID"),
    ],
)
def test_a_record_that_does_not_read_is_told_naming_the_annotation(text: str, why: str) -> None:
    with pytest.raises(InvalidAnnotation) as raised:
        records.decode(text)
    assert raised.value.field == "metadata.annotations[cellfit.io/preemptor-hold]" and why in str(raised.value)


def test_fitgpps_choice_carries_the_record_of_the_node_and_the_victims_it_chose() -> None:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_pod(as_pod(running("be-a-0", job_uid="job-a", grace=600)))  # FitGpp takes the short grace period
    engine.apply_pod(as_pod(running("be-b-0", job_uid=JOB_B)))
    choice = engine.decide_preemption(as_pod(trial(nominated=None)), {"n1": ["be-a-0", "be-b-0"]}, {})
    assert choice.victims == {"n1": ["be-b-0"]}
    assert choice.preemptor_record is not None
    assert records.decode(choice.preemptor_record) == records.PreemptorRecord(
        node="n1", victims=("be-b-0",), resumes={"be-b-0": JOB_B},
        owed=records.Owed(jobs={JOB_B: records.OwedJob(namespace="ml", name="be-b", count=1, holds={"be-b-0": "n1"})},
                          pods={"be-b-0": "ml/be-b-0"}),
    )
    refused = engine.decide_preemption(waiter(), {"n1": ["be-a-0"]}, {})  # a best-effort pod preempts nobody
    assert refused.victims == {} and refused.preemptor_record is None


def test_after_a_restart_that_cleared_the_nomination_the_record_keeps_the_room_from_the_resumed_pod() -> None:
    engine = restarted([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded()])
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]
    engine.delete_pod("be-b-0")  # the victim exits; its Job makes its next pod, resumed
    engine.apply_pod(as_pod(resumed()))
    decision = filter_offered(engine, as_pod(resumed()), ["n1"])
    assert list(decision.feasible) == []
    assert decision.unresolvable["n1"].startswith("its free resources are kept for ml/te-1, for which FitGpp preempted")
    assert list(filter_offered(engine, as_pod(recorded()), ["n1"]).feasible) == ["n1"]


def test_after_a_restart_the_recorded_preemptor_takes_no_second_victim_while_its_victim_leaves() -> None:
    engine = restarted([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded()])
    choice = engine.decide_preemption(as_pod(recorded()), {"n1": ["be-a-0"]}, {})
    assert choice.victims == {} and choice.refusal is not None and "already terminating on node n1" in choice.refusal


def test_after_a_restart_once_the_victim_has_exited_the_record_keeps_the_room_from_the_resumed_pod() -> None:
    """The usual case: the victim exited while cellfit was down, so kube-scheduler's next attempt
    for te-1 (its cache no longer counting the victim) reached the extender, met it down and
    cleared the nomination; the Job made its next pod. Nothing but the record ties te-1 to n1."""
    engine = restarted([running("be-a-0", job_uid="job-a"), recorded(), resumed()])
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]
    decision = filter_offered(engine, as_pod(resumed()), ["n1"])
    assert list(decision.feasible) == [] and "kept for ml/te-1" in decision.unresolvable["n1"]
    assert list(filter_offered(engine, as_pod(recorded()), ["n1"]).feasible) == ["n1"]


@pytest.mark.parametrize(
    ("pods", "why"),
    [
        (
            [running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded('{"node":"n2","victims":["be-b-0"]}')],
            "the record names another node than the one its victim leaves",
        ),
        (
            [running("be-a-0", job_uid="job-a"), running("be-c-0", job_uid="job-c", gpus=0), recorded('{"node":"n1","victims":["be-b-0","be-c-0"]}')],
            "one victim it names is gone, another is not deleted yet",
        ),
        (
            [
                running("be-a-0", job_uid="job-a"),
                preempted(running("be-b-0", job_uid=JOB_B), message="default-scheduler: preempting to accommodate a higher priority Pod"),
                recorded(),
            ],
            "its victim leaves for another profile's preemption",
        ),
        (
            [running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded(scheduler="default-scheduler")],
            "the recorded pod is another scheduler's",
        ),
        ([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded("")], "its binding emptied the record"),
        ([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded("n1")], "the record does not read"),
    ],
)
def test_a_record_rebuilds_no_hold_unless_its_victims_leave_its_node_for_this_schedulers_preemption_or_are_gone(pods: list[dict[str, Any]], why: str) -> None:
    engine = restarted(pods, preemptions_of_b=0)
    assert holds(engine) == [], why
    engine.delete_pod("be-b-0")
    engine.delete_pod("be-c-0")
    assert list(filter_offered(engine, waiter(), ["n1"]).feasible) == ["n1"], why


def test_an_unreadable_record_leaves_the_nomination_trusted() -> None:
    engine = restarted([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded("n1", nominated="n1")])
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]


def test_a_victim_the_record_names_starting_to_leave_after_the_restart_rebuilds_the_hold() -> None:
    # cellfit restarted between its answer (the record written) and kube-scheduler's deletion.
    engine = restarted([running("be-a-0", job_uid="job-a"), running("be-b-0", job_uid=JOB_B), recorded()])
    assert holds(engine) == []
    engine.apply_pod(as_pod(preempted(running("be-b-0", job_uid=JOB_B))))
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]


def test_a_rebuilt_hold_follows_a_later_record_and_a_hold_decided_here_stays() -> None:
    n2 = NodeInfo(name="n2", allocatable=Resources(32000, 256 * GI, 8))
    on_n2 = running("be-c-0", job_uid="job-c")
    on_n2["spec"]["nodeName"] = "n2"
    engine = restarted([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded()])
    engine.apply_node(n2)
    engine.apply_pod(as_pod(preempted(on_n2)))
    # Another replica preempted be-c-0 for te-1 on n2 since, and recorded it.
    engine.apply_pod(as_pod(recorded('{"node":"n2","victims":["be-c-0"]}')))
    assert holds(engine) == [("n2", "preemptor", ("ml/te-1",))]

    here = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    for node in (NODE, n2):
        here.apply_node(node)
    for body in (running("be-a-0", job_uid="job-a", grace=600), running("be-b-0", job_uid=JOB_B), preempted(on_n2)):
        here.apply_pod(as_pod(body))
    assert here.select_victims(as_pod(trial(nominated=None)), {"n1": ["be-b-0"]}, {}) == {"n1": ["be-b-0"]}
    here.apply_pod(as_pod(recorded('{"node":"n2","victims":["be-c-0"]}')))  # an older record, watched late
    assert holds(here) == [("n1", "preemptor", ("ml/te-1",))]


def test_the_binding_empties_the_record_of_a_recorded_pod_and_of_a_preemptor_decided_here() -> None:
    engine = restarted([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded()])
    engine.delete_pod("be-b-0")
    assert engine.reserve(as_pod(recorded()), "n1").annotations == {ANNOTATION_PREEMPTOR_HOLD: ""}

    here = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    here.apply_node(NODE)
    here.apply_pod(as_pod(running("be-b-0", job_uid=JOB_B)))
    here.apply_job(JobInfo(uid=JOB_B, namespace="ml", name="be-b"))
    assert here.select_victims(as_pod(trial(nominated=None)), {"n1": ["be-b-0"]}, {}) == {"n1": ["be-b-0"]}
    # Bound on n1 before the watch showed the record written (the victim gone meanwhile).
    here.delete_pod("be-b-0")
    assert here.reserve(as_pod(trial(nominated=None)), "n1").annotations == {ANNOTATION_PREEMPTOR_HOLD: ""}
    assert here.reserve(waiter(), "n1").annotations == {}  # nothing recorded, nothing written


def test_a_hold_that_lapsed_here_comes_back_for_another_replicas_later_preemption_elsewhere_only() -> None:
    clock = FakeClock()
    n2 = NodeInfo(name="n2", allocatable=Resources(32000, 256 * GI, 8))
    on_n2 = running("be-c-0", job_uid="job-c")
    on_n2["spec"]["nodeName"] = "n2"
    # te-1 (2 GPUs) waits for be-b-0, which leaves n1 slowly; its rebuilt hold lapses here.
    engine = restarted(
        [running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B, gpus=2)), recorded(gpus=2)],
        preemptions_of_b=0,
        clock=clock,
        hold_seconds=60,
    )
    engine.apply_node(n2)
    engine.apply_pod(as_pod(on_n2))
    assert list(filter_offered(engine, waiter(gpus=2), ["n1"]).feasible) == []  # kept off: the clock starts
    clock.now += 61
    assert list(filter_offered(engine, waiter(gpus=2), ["n1"]).feasible) == ["n1"] and holds(engine) == []
    engine.apply_pod(as_pod(recorded(gpus=2)))  # the same record again: the hold stays given up
    assert holds(engine) == []
    # Another replica preempted be-c-0 on n2 for te-1 since, and recorded it.
    engine.apply_pod(as_pod(preempted(on_n2)))
    engine.apply_pod(as_pod(recorded('{"node":"n2","victims":["be-c-0"]}', gpus=2)))
    assert holds(engine) == [("n2", "preemptor", ("ml/te-1",))]


class Driver:
    """What the engine tells its driver of the records (FitGppEngine.follow_preemptor_records)."""

    def __init__(self, engine: FitGppEngine) -> None:
        self.watched: list[tuple[str, ...]] = []
        self.cleared: list[tuple[str, str]] = []  # (pod UID, record)
        engine.follow_preemptor_records(watch_victims=lambda uids: self.watched.append(tuple(uids)),
                                        clear_record=lambda pod, record: self.cleared.append((pod.uid, record)))


def lapsing(pods: list[dict[str, Any]], clock: FakeClock) -> tuple[FitGppEngine, Driver]:
    """A restarted engine (holds give up after 60 s of keeping pods off) whose driver follows
    the records from its first list on."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=60, clock=clock)
    driver = Driver(engine)
    engine.apply_node(NODE)
    for body in pods:
        engine.apply_pod(as_pod(body))
    return engine, driver


def test_a_hold_rebuilt_from_a_record_that_lapses_has_its_driver_clear_that_record() -> None:
    clock = FakeClock()
    # The victim exited while cellfit was down: the record alone rebuilds the hold.
    engine, driver = lapsing([running("be-a-0", job_uid="job-a"), recorded()], clock)
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]
    assert list(filter_offered(engine, waiter(), ["n1"]).feasible) == []  # kept off: the clock starts
    clock.now += 59
    assert holds(engine) and driver.cleared == []  # within its time, the record stays
    clock.now += 2
    assert list(filter_offered(engine, waiter(), ["n1"]).feasible) == ["n1"]
    assert driver.cleared == [("te-1", RECORD)]
    assert holds(engine) == [] and driver.cleared == [("te-1", RECORD)]  # told once


def test_a_hold_decided_here_that_lapses_has_its_record_cleared_and_one_of_a_nomination_clears_nothing() -> None:
    clock = FakeClock()
    engine, driver = lapsing([running("be-a-0", job_uid="job-a", grace=600), running("be-b-0", job_uid=JOB_B, gpus=2)], clock)
    choice = engine.decide_preemption(as_pod(trial(nominated=None, gpus=2)), {"n1": ["be-b-0"]}, {})
    assert choice.victims == {"n1": ["be-b-0"]} and choice.preemptor_record is not None
    engine.delete_pod("be-b-0")
    assert list(filter_offered(engine, waiter(), ["n1"]).feasible) == []
    clock.now += 61
    assert holds(engine) == [] and driver.cleared == [("te-1", choice.preemptor_record)]
    assert driver.watched == []  # the verb remembers the victims it chose itself

    # Rebuilt from kube-scheduler's nomination alone: no record to clear.
    nominated, told = lapsing([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), trial()], clock)
    assert holds(nominated) == [("n1", "preemptor", ("ml/te-1",))]
    nominated.delete_pod("be-b-0")
    assert list(filter_offered(nominated, waiter(), ["n1"]).feasible) == []
    clock.now += 61
    assert holds(nominated) == [] and told.cleared == []


def test_a_recorded_hold_whose_wait_for_stuck_victims_runs_out_has_its_record_cleared() -> None:
    clock = FakeClock()
    engine, driver = lapsing([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded()], clock)
    refused = engine.decide_preemption(as_pod(recorded()), {"n1": ["be-a-0"]}, {})
    assert refused.victims == {} and driver.cleared == []  # it waits for be-b-0 (grace 30 s) and 60 s more
    clock.now += 91
    engine.decide_preemption(as_pod(recorded()), {"n1": ["be-a-0"]}, {})  # be-b-0 is stuck (a finalizer, say)
    assert driver.cleared == [("te-1", RECORD)]


def test_a_hold_rebuilt_from_a_record_has_its_driver_watch_the_victims_still_there_once() -> None:
    clock = FakeClock()
    engine, driver = lapsing([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded()], clock)
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]
    assert driver.watched == [("be-b-0",)]
    engine.apply_pod(as_pod(recorded()))  # the same record again, and the victim's later events
    engine.apply_pod(as_pod(preempted(running("be-b-0", job_uid=JOB_B))))
    assert driver.watched == [("be-b-0",)]

    # A victim that starts leaving after the restart: watched once the hold is rebuilt.
    later, told = lapsing([running("be-a-0", job_uid="job-a"), running("be-b-0", job_uid=JOB_B), recorded()], clock)
    assert told.watched == []
    later.apply_pod(as_pod(preempted(running("be-b-0", job_uid=JOB_B))))
    assert told.watched == [("be-b-0",)]

    # Every victim gone already: nothing to watch for.
    gone, none = lapsing([running("be-a-0", job_uid="job-a"), recorded()], clock)
    assert holds(gone) == [("n1", "preemptor", ("ml/te-1",))] and none.watched == []

    # Rebuilt from the nomination: the victims leaving its node are watched as well.
    nominated, by_node = lapsing([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), trial()], clock)
    assert holds(nominated) == [("n1", "preemptor", ("ml/te-1",))] and by_node.watched == [("be-b-0",)]


def test_a_hold_on_a_deleted_node_gives_up_and_has_its_record_cleared() -> None:
    """No restart rebuilds a preemptor's hold on a node that is gone from the record it stood for."""
    clock = FakeClock()
    engine, driver = lapsing([running("be-a-0", job_uid="job-a"), recorded()], clock)
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]
    engine.delete_node("n1")
    assert holds(engine) == [] and driver.cleared == [("te-1", RECORD)]
    engine.apply_node(NODE)  # back (a re-registered node): the same record rebuilds nothing there
    engine.apply_pod(as_pod(recorded()))
    assert holds(engine) == []
