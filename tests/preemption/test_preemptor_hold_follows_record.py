"""A preemptor hold that stands for a record (``cellfit.io/preemptor-hold``) follows it: when the
watch shows the pending preemptor without that record (the replica whose hold lapsed, or whose
wait for stuck victims ran out, took it off, ``scheduler/cluster/preemptor_records.py``), the
hold ends here too. Review: a standby replica rebuilt the hold from the record the active one
wrote; the active one's hold lapsed and cleared the record, and after a failover the former
standby, beside the active kube-scheduler now, kept the node's room for the pod again for a
full ``resumeHoldSeconds``, with no record left to say why.

The scene of test_preemptor_records.py: te-1's record names n1 and its victim be-b-0, gone."""

from __future__ import annotations

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo
from scheduler.core.resources import Resources
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.preemption.test_holds import FakeClock
from tests.preemption.test_holds_recovered import JOB_B, NODE, as_pod, preempted, restarted, running, trial, waiter
from tests.preemption.test_preemptor_records import RECORD, Driver, holds, lapsing, recorded

N2_RECORD = '{"node":"n2","victims":["be-c-0"]}'


def test_a_standby_hold_rebuilt_from_a_record_ends_when_the_record_is_taken_off() -> None:
    standby = restarted([running("be-a-0", job_uid="job-a"), recorded()])
    assert holds(standby) == [("n1", "preemptor", ("ml/te-1",))]
    standby.apply_pod(as_pod(trial(nominated=None)))  # the active replica's hold lapsed: it cleared the record
    assert holds(standby) == []
    assert list(filter_offered(standby, waiter(), ["n1"]).feasible) == ["n1"]  # after the failover, nothing kept


def test_a_hold_whose_record_went_is_not_rebuilt_on_its_node_from_the_nomination() -> None:
    # The victim still leaves n1 and kube-scheduler's nomination of n1 stands: the record going
    # says the hold ended where it kept pods off, as a hold that lapsed here is not rebuilt there.
    standby = restarted([running("be-a-0", job_uid="job-a"), preempted(running("be-b-0", job_uid=JOB_B)), recorded(nominated="n1")])
    assert holds(standby) == [("n1", "preemptor", ("ml/te-1",))]
    standby.apply_pod(as_pod(trial()))
    assert holds(standby) == []


def test_a_hold_decided_here_ends_when_the_record_it_wrote_is_taken_off_but_not_before_the_watch_showed_it() -> None:
    clock = FakeClock()
    engine, driver = lapsing([running("be-a-0", job_uid="job-a", grace=600), running("be-b-0", job_uid=JOB_B, gpus=2)], clock)
    choice = engine.decide_preemption(as_pod(trial(nominated=None, gpus=2)), {"n1": ["be-b-0"]}, {})
    assert choice.preemptor_record is not None
    engine.apply_pod(as_pod(trial(nominated="n1", gpus=2)))  # the watch, before the record's write landed
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]
    engine.apply_pod(as_pod(recorded(choice.preemptor_record, nominated="n1", gpus=2)))  # written
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]
    engine.apply_pod(as_pod(trial(nominated="n1", gpus=2)))  # another replica's hold for it ended and cleared it
    assert holds(engine) == [] and driver.cleared == []  # nothing of ours to clear


def test_a_record_replaced_by_a_later_decision_moves_the_hold_to_its_node() -> None:
    engine = restarted([running("be-a-0", job_uid="job-a"), recorded()])
    on_n2 = running("be-c-0", job_uid="job-c")
    on_n2["spec"]["nodeName"] = "n2"
    engine.apply_node(NodeInfo(name="n2", allocatable=Resources(32000, 256 * 2**30, 8)))
    engine.apply_pod(as_pod(preempted(on_n2)))
    engine.apply_pod(as_pod(recorded(N2_RECORD)))
    assert holds(engine) == [("n2", "preemptor", ("ml/te-1",))]
    body = recorded(N2_RECORD)
    body["metadata"]["annotations"][ANNOTATION_PREEMPTOR_HOLD] = RECORD  # n1's again: a later decision there
    engine.apply_pod(as_pod(body))
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]


def test_the_same_record_shown_again_keeps_the_hold() -> None:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    Driver(engine)
    engine.apply_node(NODE)
    for body in (running("be-a-0", job_uid="job-a"), recorded(), recorded()):
        engine.apply_pod(as_pod(body))
    assert holds(engine) == [("n1", "preemptor", ("ml/te-1",))]
