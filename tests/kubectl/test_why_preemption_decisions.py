"""``why`` counts preemption decisions, as the Job's cellfit.io/preemptions (what
preemption.maxPreemptions limits) does, with the pods they took beside (live session M2: one
FitGpp decision taking both pods of be-p read "preempted 2 times" beside a count of 1); and a
preempted Job's details say "now" as its summary does (L4: "now no pod yet: ..." in the summary,
"now: pending" in the details)."""

from __future__ import annotations

from scheduler.kubectl.objects import CellfitView, JobFacts, Preemption, events_from, job_from, preemption_from
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why import T0, event, job_json

FALLBACK = "preempted by ml2/te-x-4k2qz on node gpu-node-1: FitGpp took best-effort pods at random"


def preempted(victim: str, message: str = FALLBACK, at: str = T0) -> Preemption:
    return preemption_from(victim=f"ml/{victim}", preempted=events_from([event("Preempted", message, warning=True, at=at)])[0],
                           preemptor_events=())


def be_p(*preemptions: Preemption, count: str) -> JobFacts:
    return job_from(job_json("be-p", annotations={"cellfit.io/preemptions": count}), preemptions=preemptions)


def test_one_decision_taking_two_pods_is_one_preemption_of_two_pods() -> None:
    answer = explain_job(be_p(preempted("be-p-a1b2c"), preempted("be-p-d3e4f"), count="1"), CellfitView())
    assert answer.reason == "preempted"
    assert answer.summary.startswith("preempted 1 time (2 pods), last by ml2/te-x-4k2qz on node gpu-node-1; now "), answer.summary
    assert ("its cellfit.io/preemptions is 1: FitGpp's decisions that preempted it, which preemption.maxPreemptions limits "
            "(a decision taking several of its pods counts once)") in answer.details


def test_two_decisions_are_two_preemptions() -> None:
    second = FALLBACK.replace("te-x-4k2qz", "te-y-9q8w7")
    answer = explain_job(be_p(preempted("be-p-a1b2c"), preempted("be-p-d3e4f", second, "2026-11-26T12:05:00Z"), count="2"),
                         CellfitView())
    assert answer.summary.startswith("preempted 2 times, last by ml2/te-y-9q8w7 on node gpu-node-1; now "), answer.summary


def test_without_the_count_the_events_tell_the_decisions_apart() -> None:
    """kube-scheduler's own preemptions (resource-fit) write no count: its events name the preemptor and node."""
    theirs = "Preempted by pod 1e844d1f-7735-4253-9934-681a0eb57d7f on node gpu-node-2"
    answer = explain_job(be_p(preempted("be-p-a1b2c", theirs), preempted("be-p-d3e4f", theirs), count="0"), CellfitView())
    assert answer.summary.startswith("preempted 1 time (2 pods), last by pod 1e844d1f"), answer.summary
    assert not any("cellfit.io/preemptions" in line for line in answer.details)


def test_a_failed_job_counts_decisions_too() -> None:
    job = job_from({**job_json("be-p", annotations={"cellfit.io/preemptions": "1"}),
                    "status": {"failed": 2, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                                            "message": "Job has reached the specified backoff limit"}]}},
                   preemptions=(preempted("be-p-a1b2c"), preempted("be-p-d3e4f")))
    answer = explain_job(job, CellfitView())
    assert "cellfit preempted it 1 time (2 pods; last by ml2/te-x-4k2qz), and Kubernetes" in answer.summary, answer.summary


def test_the_details_say_now_as_the_summary_does() -> None:
    answer = explain_job(be_p(preempted("be-p-a1b2c"), count="1"), CellfitView())
    now = answer.summary.partition("; now ")[2]
    assert now.startswith("no pod yet: the Job controller has not created one"), answer.summary
    assert f"now: {now}" in answer.details and "now: pending" not in answer.details
