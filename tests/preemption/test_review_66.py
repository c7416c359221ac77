"""helper-66's adversarial review of FitGpp preemption as it runs live (FitGppEngine, its holds
and the preemption count a Job carries). Each test is a way a cluster user broke it."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.errors import InvalidAnnotation
from scheduler.preemption import FitGppSettings, preemption_count_of
from scheduler.preemption.engine import FitGppEngine

from tests.preemption.test_engine import GI, NODE, full_node, hived_full_of_opportunistic_pods, running, te
from tests.preemption.test_holds import RESUMED_PRIORITY, FakeClock, pending
from scheduler.kube.names import filter_offered

COUNT = "cellfit.io/preemptions"


@pytest.mark.parametrize("value", ["1" * 30, "9" * 5000, str(2**31), "²", "٣", "-1", "1.0", ""])
def test_a_preemption_count_cellfit_cannot_read_is_refused_naming_its_field(value):
    """A user writes the annotation on their own Job. A superscript digit passed str.isdigit and
    then broke int(); a number past 64 bits broke the victim table (OverflowError). Either one,
    raised out of apply_job, stopped the Jobs' relist, and the admission check answered 500."""
    with pytest.raises(InvalidAnnotation) as raised:
        preemption_count_of({COUNT: value})
    assert raised.value.field == f"metadata.annotations[{COUNT}]"


def test_the_largest_count_read_can_still_be_raised_by_a_preemption():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(max_preemptions=None))
    full_node(engine)
    largest = str(2**31 - 1)
    assert preemption_count_of({COUNT: largest}) == 2**31 - 1
    assert preemption_count_of({COUNT: "0" * 20 + "3 "}) == 3
    engine.apply_job(JobInfo(uid="job-b", namespace="ml", name="b", annotations={COUNT: largest}))
    assert engine.select_victims(te(gpus=4), {"n1": []}, {}) == {"n1": ["be-short"]}
    assert engine.preemptions_of_job("job-b") == 2**31


@pytest.mark.parametrize("value", ["1" * 30, "²"])
def test_a_job_with_an_unreadable_count_leaves_the_engine_serving(value):
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine)
    engine.apply_job(JobInfo(uid="job-b", namespace="ml", name="b", annotations={COUNT: value}))
    assert engine.select_victims(te(gpus=4), {"n1": []}, {}) == {"n1": ["be-short"]}


def two_full_nodes() -> FitGppEngine:
    """n1 and n2 (8 GPUs each), each running a long-grace and a short-grace BE pod of 4 GPUs."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine)
    engine.apply_node(NodeInfo(name="n2", allocatable=NODE.allocatable))
    engine.apply_pod(running("c-long", job="c", gpus=4, grace=600, node="n2"))
    engine.apply_pod(running("d-short", job="d", gpus=4, grace=30, node="n2"))
    return engine


def test_a_second_trial_pod_is_not_made_to_wait_for_the_room_kept_for_the_first():
    """Two trial pods arrive together on a full cluster. The first one's victim is leaving n1,
    and its GPUs are kept for the first one (its preemptor hold). The second one was told
    'pods already terminating on node n1 free enough for this pod; waiting for them to exit',
    waited out the victim's grace period, then found n1 taken by the first one and only then
    preempted on n2: a trial job delayed by a whole grace period that n2 could have spared."""
    engine = two_full_nodes()
    first = engine.decide_preemption(te("te-1", gpus=4), {"n1": [], "n2": []}, {})
    assert first.victims == {"n1": ["be-short"]}
    second = engine.decide_preemption(te("te-2", gpus=4), {"n1": [], "n2": []}, {})
    assert second.refusal is None
    assert second.victims == {"n2": ["d-short"]}


def test_the_first_trial_pod_asking_again_still_waits_for_its_own_victim():
    engine = two_full_nodes()
    trial = te("te-1", gpus=4)
    assert engine.select_victims(trial, {"n1": [], "n2": []}, {}) == {"n1": ["be-short"]}
    again = engine.decide_preemption(trial, {"n1": [], "n2": []}, {})
    assert again.victims == {}
    assert again.refusal is not None and "already terminating on node n1" in again.refusal


def test_a_victim_whose_job_was_deleted_leaves_no_count_and_no_hold_behind():
    """kubectl delete job (background propagation): the Job goes first, its pods a moment later.
    FitGpp chose such a pod in between: its Job got a count and a resume hold that no deletion
    would ever end again (the engine's stats kept the Job; every filter took the holds' path)."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine)
    engine.apply_job(JobInfo(uid="job-b", namespace="ml", name="b"))
    engine.delete_job("job-b")  # its pod still runs until the garbage collector deletes it
    trial = te(gpus=4)
    choice = engine.decide_preemption(trial, {"n1": []}, {})
    assert choice.victims == {"n1": ["be-short"]}
    assert engine.victim_jobs(choice.victim_uids) == []  # no count to write on a Job that is gone
    engine.delete_pod("be-short")
    engine.reserve(trial, "n1")  # its preemptor hold ends
    assert engine.preemptions_of_job("job-b") == 0
    assert engine.stats()["jobs"] == 0
    assert not engine.holds.active


def preempted_without_a_successor(clock: FakeClock) -> tuple[FitGppEngine, PodInfo]:
    """n1 after a trial pod took b's place: b's pod is gone, its Job makes no new pod (no
    podFailurePolicy, backoffLimit 0: the preemption failed it), the trial pod is bound."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=120, clock=clock)
    full_node(engine)
    trial = te(gpus=4)
    assert engine.select_victims(trial, {"n1": []}, {}) == {"n1": ["be-short"]}
    engine.delete_pod("be-short")
    engine.reserve(trial, "n1")
    return engine, trial


def test_a_resume_hold_whose_job_never_makes_another_pod_is_given_up():
    """The hold waited for a pod that never came: not shown by /v1/inspect/resume-holds (no
    pending pod), never timed (it kept nobody off), it stayed until the Job was deleted, which
    without ttlSecondsAfterFinished is never, and every filter of every pod walked it."""
    clock = FakeClock()
    engine, _ = preempted_without_a_successor(clock)
    assert engine.holds.active
    assert list(filter_offered(engine, pending("waiter", job="w", gpus=0), ["n1"]).feasible) == ["n1"]
    clock.now += 121
    assert list(filter_offered(engine, pending("waiter", job="w", gpus=0), ["n1"]).feasible) == ["n1"]
    assert not engine.holds.active
    assert engine.stats()["resumeHoldsLapsed"] == 1


def test_a_resume_hold_waits_out_its_victims_grace_period_before_its_successor_is_due():
    """The Job makes its next pod only once the victim has exited, which may be long after the
    preemption (its grace period): the hold's wait for that pod starts when the victim is gone."""
    clock = FakeClock()
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=120, clock=clock)
    full_node(engine)
    trial = te(gpus=4)
    assert engine.select_victims(trial, {"n1": []}, {}) == {"n1": ["be-short"]}
    engine.apply_pod(replace(running("be-short", job="b", gpus=4, grace=30), terminating=True))
    for _ in range(4):  # a long grace period, with filters all along
        clock.now += 100
        filter_offered(engine, pending("waiter", job="w", gpus=0), ["n1"])
    engine.delete_pod("be-short")
    engine.reserve(trial, "n1")
    clock.now += 60
    engine.apply_pod(pending("be-short-2", job="b", priority=RESUMED_PRIORITY))
    assert [(h.node, h.kind, h.pods) for h in engine.holds.holds()] == [("n1", "resume", ("ml/be-short-2",))]
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == []


def test_a_victim_the_watch_shows_again_before_its_deletion_is_not_chosen_twice():
    """kube-scheduler patches each victim's status (the DisruptionTarget condition) before it
    deletes it, so the watch shows the victim once more, running and not deleted. The victim
    table took that as a pod like any other again: a higher-priority trial pod asking in that
    moment got the same victim once more, and its Job was counted preempted twice."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(max_preemptions=None))
    full_node(engine)
    assert engine.select_victims(replace(te("te-1", gpus=4), priority=1000), {"n1": []}, {}) == {"n1": ["be-short"]}
    engine.apply_pod(running("be-short", job="b", gpus=4, grace=30))  # its status patched, not yet deleted
    choice = engine.decide_preemption(replace(te("te-2", gpus=8), priority=2000), {"n1": []}, {})
    assert "be-short" not in choice.victim_uids
    assert engine.preemptions_of_job("job-b") == 1


@pytest.mark.parametrize("limit", [1, 2])
def test_one_preemption_of_a_job_counts_once_however_many_of_its_pods_it_takes(limit):
    """The fallback took both pods of Job b in one decision, and b's cellfit.io/preemptions went
    from 0 to 2: above P = 1 (DESIGN: the count is capped by P), and with P = 2 the Job was
    spared for good after its first preemption, where the paper counts preemptions of the job."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(max_preemptions=limit))
    engine.apply_node(NODE)
    engine.apply_pod(running("b-0", job="b", gpus=4))
    engine.apply_pod(running("b-1", job="b", gpus=4))
    choice = engine.decide_preemption(te(gpus=8), {"n1": []}, {})
    assert sorted(choice.victim_uids) == ["b-0", "b-1"]
    assert engine.preemptions_of_job("job-b") == 1
    assert [count for _, count in engine.victim_jobs(choice.victim_uids)] == [1]
    # both pods left a hold: each of the Job's next two pods has room kept on n1
    engine.delete_pod("b-0")
    engine.delete_pod("b-1")
    engine.apply_pod(pending("b-2", job="b"))
    engine.apply_pod(pending("b-3", job="b"))
    assert [h.pods for h in engine.holds.holds() if h.kind == "resume"] == [("ml/b-2", "ml/b-3")]


def test_a_pod_deleted_by_its_user_does_not_stop_trial_pods_preempting_elsewhere():
    """A best-effort pod deleted by its user takes its grace period (an hour to checkpoint), or
    forever behind a finalizer. Every trial pod offered its node was refused preemption ('pods
    already terminating on node n1 free enough for this pod; waiting for them to exit') for that
    long, though n2 had a victim at once. kube-scheduler's rule, which this one keeps against
    cellfit's view, waits only on the node a pod's own preemption nominated it to."""
    engine = two_full_nodes()
    engine.apply_pod(replace(running("be-long", job="a", gpus=4, grace=3600), terminating=True))
    choice = engine.decide_preemption(te("te-1", gpus=4), {"n1": [], "n2": []}, {})
    assert choice.refusal is None
    assert len(choice.victim_uids) == 1  # FitGpp's cheapest (be-short on n1 and d-short on n2 tie)


def test_a_pod_hived_is_reclaiming_is_not_fitgpps_victim_again():
    """HiveD reclaims an opportunistic pod for the VC that owns its cells; until the watch shows
    it deleted, FitGpp still took it for a candidate and handed it to the next trial pod, which
    was nominated to cells HiveD had booked for another pod, and its Job counted preempted."""
    engine = hived_full_of_opportunistic_pods()
    owed = PodInfo(uid="vision-1", namespace="ml", name="vision-1", requests=Resources(1000, GI, 8),
                   labels={"cellfit.io/virtual-cluster": "vision", "cellfit.io/job-class": "best-effort"})
    reclaim = engine.decide_preemption(owed, {"g0": [], "g1": []}, {})
    assert reclaim.rule == "reclaim" and len(reclaim.victim_uids) == 1
    trial = PodInfo(uid="te-x", namespace="ml", name="te-x", requests=Resources(1000, GI, 8),
                    labels={"cellfit.io/virtual-cluster": "speech", "cellfit.io/job-class": "trial",
                            "cellfit.io/priority": "opportunistic"})
    choice = engine.decide_preemption(trial, {"g0": [], "g1": []}, {})
    assert not set(choice.victim_uids) & set(reclaim.victim_uids)


def node_with_a_system_pod(system: PodInfo) -> FitGppEngine:
    """n1 (32 CPUs, 8 GPUs): ``system`` (2 CPUs), Job b's BE pod (4 CPUs, 4 GPUs) and Job c's
    CPU-heavy BE pod (24 CPUs, long grace period): 2 CPUs and 4 GPUs free."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_pod(system)
    engine.apply_pod(running("be", job="b", gpus=4))
    engine.apply_pod(replace(running("be-cpu", job="c", gpus=0, grace=600), requests=Resources(24000, 32 * GI, 0)))
    return engine


TRIAL_4_CPUS = PodInfo(uid="te", namespace="ml", name="te", requests=Resources(4000, 8 * GI, 2),
                       labels={"cellfit.io/job-class": "trial"}, priority=1000)


@pytest.mark.parametrize(
    "system",
    [
        # the NVIDIA device plugin: no cellfit label (so best-effort by default), system-node-critical
        PodInfo(uid="dp", namespace="kube-system", name="nvidia-device-plugin", requests=Resources(2000, GI, 0),
                priority=2000001000, node_name="n1", phase="Running", owner=OwnerRef("DaemonSet", "nvidia-device-plugin", "ds-1")),
        # a DaemonSet pod of no priority: recreated on its node at once, it frees nothing
        PodInfo(uid="dp", namespace="monitoring", name="node-exporter", requests=Resources(2000, GI, 0),
                node_name="n1", phase="Running", owner=OwnerRef("DaemonSet", "node-exporter", "ds-2")),
        # a static pod (its mirror pod is owned by the Node): the kubelet restarts it at once
        PodInfo(uid="dp", namespace="kube-system", name="gpu-exporter-n1", requests=Resources(2000, GI, 0),
                node_name="n1", phase="Running", owner=OwnerRef("Node", "n1", "node-n1")),
        # a pod of a higher priority than the trial pod's: kube-scheduler never preempts those
        PodInfo(uid="dp", namespace="ml", name="important", requests=Resources(2000, GI, 0), priority=5000,
                node_name="n1", phase="Running", labels={"cellfit.io/job-class": "best-effort"}, owner=OwnerRef("Job", "i", "job-i")),
    ],
)
def test_fitgpp_never_preempts_a_system_pod_or_one_of_higher_priority(system):
    """FitGpp may choose any best-effort pod on an offered node, and an unlabelled pod is
    best-effort: the smallest pod with a short grace period scores lowest, so it took the
    device plugin (kube-scheduler resolves the UID and deletes it). Victims are now pods of no
    higher priority than the preemptor's, and never a DaemonSet's."""
    engine = node_with_a_system_pod(system)
    choice = engine.decide_preemption(TRIAL_4_CPUS, {"n1": []}, {})
    assert "dp" not in choice.victim_uids
    assert choice.victims == {"n1": ["be"]}


def test_a_trial_pod_without_a_priority_above_best_effort_is_told_why_nothing_is_preempted():
    """A trial Job without the cellfit-trial PriorityClass: every best-effort pod outranks it,
    and the refusal must say so rather than that no best-effort pod runs there."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_pod(replace(running("be", job="b", gpus=8), priority=500))
    choice = engine.decide_preemption(te(gpus=4), {"n1": []}, {})
    assert choice.victims == {}
    assert choice.refusal == (
        "every best-effort pod on the offered nodes has a higher priority than this pod's (0); "
        "give trial pods a PriorityClass above best-effort ones"
    )
