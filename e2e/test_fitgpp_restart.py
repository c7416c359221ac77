"""cellfit killed in the middle of a FitGpp preemption keeps the freed GPUs for the trial pod after
its restart, not for the preempted Job's next pod.

The chart's kube-scheduler and cellfit run here (chart_support); KWOK plays the pods. A best-effort
Job's pod fills a node's 8 GPUs; its process exits 30 s after SIGTERM (grace period 90 s; time
for the test to see the preemption recorded and kill cellfit first), and its Job replaces a
preempted pod (podFailurePolicy ignores DisruptionTarget). A trial pod arrives:
kube-scheduler asks cellfit's preempt verb, FitGpp names the best-effort pod, kube-scheduler
deletes it and nominates the node, and the replica that answered records the decision on the
trial pod (``cellfit.io/preemptor-hold``). cellfit is killed (SIGKILL) while the victim leaves.
The victim exits; kube-scheduler's cache no longer counts it, so its next attempt for the trial
pod reaches the extender, meets the closed port and clears the nomination (schedule_one.go: an
extender error ends with ``clearNominatedNode``); the Job makes its next pod. Then cellfit starts
again.

Before the record nothing tied the trial pod to the node once cellfit restarted: its preemptor
hold had lived in memory, the nomination was gone, the victim too, and the resumed pod, new and
out of backoff, took the GPUs the trial pod had preempted for (and, its Job preempted once
already, FitGpp's P = 1, could not be preempted again). Now the restarted replica rebuilds the
hold from the record before it is ready: the resumed pod is kept off the node and the trial pod
is the next one bound there, and its binding empties the record.

The second scenario restarts cellfit at once, while the victim still leaves: the restarted
replica rebuilds the hold from the record and watches the victim the record names as it watches
the victims it chose itself, so once its watch has seen the victim go it sends the victims-gone
requeue signal, and the trial pod is bound within seconds of the victim's exit. Before, a
restarted replica remembered no victim: no signal came, and an attempt for the trial pod that
kube-scheduler made on the victim's deletion before cellfit's watch had applied it (cellfit still
counting the victim's GPUs) left the pod parked until kube-scheduler's 5-minute flush.

The third restarts cellfit after the trial pod was bound, the victim gone and its Job's next pod
pending: the trial pod's record is emptied by its binding, and nothing on the pods names the
victim any more. The Job's own record of its resume hold (``cellfit.io/resume-holds``, written by
the replica that decided) gives the restarted replica the hold back: once the trial pod is gone,
another best-effort pod waiting for the node is kept off it and the Job's next pod is bound there,
and that binding takes the hold off the Job. Before, the restarted replica had no resume hold.

The fourth (user26) has the replica that answered lose the victim Job's count
(``cellfit.io/preemptions``) and resume-holds record: the API server refuses its Job patches (its
ClusterRole's jobs verbs narrowed for the while), as if it was killed after the preemptor's record;
then it is killed and restarted. The restarted replica finishes what the record owes (``"owed"``):
the Job gets its count and its hold, so after the trial pod was bound (its record emptied) a second
kill and restart still keeps the room for the Job's next pod. Before, the Job kept no count (FitGpp
could preempt it again past maxPreemptions: 1) and the second restart kept no hold."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest

from chart_support import (
    EXTENDER_ONLY_SA,
    Cluster,
    Release,
    ChartScheduler,
    Scenarios,
    assert_no_double_booking,
    example_job,
    gpu_pod,
    is_active,
    running_on,
    scenario_scheduler,
    wait_for,
)

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("fitgpp-restart-")
RECORD = "cellfit.io/preemptor-hold"
RESUME_HOLDS = "cellfit.io/resume-holds"
TRIAL = {"cellfit.io/job-class": "trial"}


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, ChartScheduler, Any]]:
    workdir = tmp_path_factory.mktemp(f"fitgpp-restart-{SCENARIOS.run}")
    with scenario_scheduler(control_plane, workdir, SCENARIOS, nodes={"one": 1, "leaving": 1, "bound": 1, "lost": 1}, name="fitgpp-restart") as (cluster, release, procs):
        yield cluster, release, procs, control_plane


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), {})


@dataclass(frozen=True)
class Scene:
    """One scenario's node (its own), namespace, cellfit's profile and processes, and the
    best-effort Job's pods, read afresh at each call."""

    cluster: Cluster
    procs: ChartScheduler
    ns: str
    node: str
    where: dict[str, str]
    name: str
    be_pods: Callable[[], list[dict[str, Any]]]


def be_running(env: Any, scenario: str) -> Scene:
    """A best-effort Job's 8-GPU pod running on the scenario's node (its process exits 30 s after
    SIGTERM, grace period 90 s), in a namespace of its own."""
    cluster, release, procs, cp = env
    ns = cp.create_namespace(f"fitgpp-{scenario}")
    where, node, name = SCENARIOS.selector(scenario), SCENARIOS.node(scenario), release.scheduler_name
    cluster.apply(example_job("be-job", name="be", scheduler_name=name, node_selector=where, gpus=8, exit_after="30s", grace_seconds=90), namespace=ns)

    def be_pods() -> list[dict[str, Any]]:
        return [p for p in cluster.pods(ns) if p["metadata"]["name"].startswith("be-")]

    wait_for(
        lambda: any(running_on(cluster, ns, p["metadata"]["name"]) == node for p in be_pods()),
        90,
        f"the best-effort pod running (cellfit log {procs.cellfit.log})",
    )
    return Scene(cluster=cluster, procs=procs, ns=ns, node=node, where=where, name=name, be_pods=be_pods)


def preempted_and_killed(scene: Scene) -> tuple[str, Callable[[], dict[str, Any]]]:
    """The trial pod te preempting the best-effort pod through cellfit, the decision recorded on
    te, and cellfit killed while the victim leaves: the victim's name, and te read afresh."""
    cluster, procs, ns, node, be_pods = scene.cluster, scene.procs, scene.ns, scene.node, scene.be_pods
    (first,) = [p["metadata"]["name"] for p in be_pods() if running_on(cluster, ns, p["metadata"]["name"]) == node]
    te = gpu_pod("te", scheduler_name=scene.name, node_selector=scene.where, gpus=8, priority_class="cellfit-trial", labels=TRIAL)
    cluster.apply(te, namespace=ns)

    def trial() -> dict[str, Any]:
        found: dict[str, Any] = cluster.kubectl_json("-n", ns, "get", "pod", "te")
        return found

    wait_for(
        lambda: any(p["metadata"]["name"] == first and p["metadata"].get("deletionTimestamp") for p in be_pods()),
        60,
        f"kube-scheduler preempting {first} for te through cellfit (scheduler log {procs.scheduler.log})",
    )
    wait_for(lambda: trial()["status"].get("nominatedNodeName") == node, 30, "te nominated to the node")
    # Written by the replica that answered the preempt verb, in the background, after its answer.
    record = wait_for(
        lambda: (trial()["metadata"].get("annotations") or {}).get(RECORD), 30, f"the preemption recorded on te (cellfit log {procs.cellfit.log})"
    )
    first_meta = next(p["metadata"] for p in be_pods() if p["metadata"]["name"] == first)
    first_uid, job_uid = first_meta["uid"], first_meta["ownerReferences"][0]["uid"]
    # "resumes": its Job's resume hold, rebuilt from the record once the victim has exited; "owed":
    # what the replica writes after the record, finished by a replica that reads it (user26)
    owed = {"jobs": {job_uid: {"namespace": ns, "name": "be", "count": 1, "holds": {first_uid: node}}}, "pods": {first_uid: f"{ns}/{first}"}}
    assert json.loads(record) == {"node": node, "victims": [first_uid], "resumes": {first_uid: job_uid}, "owed": owed}, record

    assert procs.cellfit.process is not None
    procs.cellfit.process.kill()  # no goodbye: the extender port simply refuses
    procs.cellfit.process.wait(10)
    procs.cellfit.process = None
    return first, trial


def kept_for_te(scene: Scene) -> None:
    """The restarted replica keeps the node's room for te (rebuilt from the record before /readyz)."""
    kept = [h for h in scene.procs.cellfit.get("/v1/inspect/resume-holds")["holds"] if h["kind"] == "preemptor"]
    assert [(h["node"], h["pods"]) for h in kept] == [(scene.node, [f"{scene.ns}/te"])], kept


def test_the_trial_pod_keeps_the_room_fitgpp_freed_across_a_restart_mid_preemption(env: Any) -> None:
    scene = be_running(env, "one")
    cluster, procs, ns, node, be_pods = scene.cluster, scene.procs, scene.ns, scene.node, scene.be_pods
    with cluster.watch_pods(ns) as versions:
        first, trial = preempted_and_killed(scene)

        def nomination_cleared() -> bool:
            current = trial()
            message = scheduled_condition(current).get("message") or ""
            return not current["status"].get("nominatedNodeName") and "/v1/extender/" in message and not any(p["metadata"]["name"] == first for p in be_pods())

        wait_for(
            nomination_cleared, 120, f"{first} gone and kube-scheduler's attempt for te refused, its nomination cleared (scheduler log {procs.scheduler.log})"
        )
        wait_for(lambda: any(is_active(p) and p["metadata"]["name"] != first for p in be_pods()), 60, "the Job's next pod")
        procs.cellfit.start()  # returns once /readyz answers: the first list is applied
        kept_for_te(scene)
        assert (
            wait_for(lambda: running_on(cluster, ns, "te"), 120, f"te running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})") == node
        )

    # Nobody but te was bound to the node after the victim: the Job's next pod waited.
    takers = {v.pod["metadata"]["name"] for v in versions if v.pod["spec"].get("nodeName") == node and v.pod["metadata"]["name"] not in (first, "te")}
    assert not takers, f"{sorted(takers)} bound to {node} while te waited (cellfit log {procs.cellfit.log})"
    assert (trial()["metadata"].get("annotations") or {}).get(RECORD) == ""  # emptied by the binding
    preempted = [e for p in be_pods() for e in cluster.events(ns, p["metadata"]["name"]) if e["reason"] == "Preempted"]
    assert all(e["involvedObject"]["name"] == first for e in preempted), preempted
    assert_no_double_booking(cluster.pods(ns))


def test_a_restart_while_the_victim_leaves_signals_once_the_victim_is_gone_and_the_trial_pod_is_bound_within_seconds(env: Any) -> None:
    scene = be_running(env, "leaving")
    cluster, procs, ns, node, be_pods = scene.cluster, scene.procs, scene.ns, scene.node, scene.be_pods
    first, trial = preempted_and_killed(scene)
    procs.cellfit.start()  # at once: the victim still leaves (it exits 30 s after SIGTERM)
    assert any(p["metadata"]["name"] == first for p in be_pods()), f"{first} exited before cellfit was back: the scenario needs it leaving"
    kept_for_te(scene)
    signal = 'cellfit_requeue_signals_total{reason="victims-gone"}'
    wait_for(lambda: not any(p["metadata"]["name"] == first for p in be_pods()), 120, f"{first} exited")
    # The restarted replica watched the victim its record names, as the victims it chose itself.
    wait_for(lambda: procs.cellfit.metric(signal) >= 1, 30, f"the victims-gone requeue signal (cellfit log {procs.cellfit.log})")
    # Within seconds of the victim's exit, not at kube-scheduler's 5-minute flush.
    assert (
        wait_for(lambda: running_on(cluster, ns, "te"), 60, f"te running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})") == node
    )
    assert (trial()["metadata"].get("annotations") or {}).get(RECORD) == ""  # emptied by the binding
    assert_no_double_booking(cluster.pods(ns))


def test_a_restart_after_the_trial_pod_was_bound_keeps_the_room_for_the_victims_next_pod(env: Any) -> None:
    scene = be_running(env, "bound")
    cluster, procs, ns, node, be_pods = scene.cluster, scene.procs, scene.ns, scene.node, scene.be_pods
    (victim,) = [p["metadata"] for p in be_pods() if running_on(cluster, ns, p["metadata"]["name"]) == node]
    cluster.apply(gpu_pod("te", scheduler_name=scene.name, node_selector=scene.where, gpus=8, priority_class="cellfit-trial", labels=TRIAL),
                  namespace=ns)
    assert wait_for(lambda: running_on(cluster, ns, "te"), 150, f"te bound once {victim['name']} exited (cellfit log {procs.cellfit.log})") == node

    def job_holds() -> str | None:
        job: dict[str, Any] = cluster.kubectl_json("-n", ns, "get", "job", "be")
        return (job["metadata"].get("annotations") or {}).get(RESUME_HOLDS)

    assert json.loads(wait_for(job_holds, 30, "the victim's resume hold recorded on its Job")) == {victim["uid"]: node}
    next_pod = wait_for(lambda: next((p["metadata"]["name"] for p in be_pods() if is_active(p) and p["metadata"]["uid"] != victim["uid"]), None),
                        60, "the Job's next pod")
    assert procs.cellfit.process is not None
    procs.cellfit.process.kill()
    procs.cellfit.process.wait(10)
    procs.cellfit.process = None
    procs.cellfit.start()  # te bound, its record emptied; the victim gone
    held = [h for h in procs.cellfit.get("/v1/inspect/resume-holds")["holds"] if h["kind"] == "resume" and h["node"] == node]
    assert [(h["node"], h["pods"]) for h in held] == [(node, [f"{ns}/{next_pod}"])], held
    cluster.apply(gpu_pod("other", scheduler_name=scene.name, node_selector=scene.where, gpus=8, labels={"cellfit.io/job-class": "best-effort"}),
                  namespace=ns)
    cluster.kubectl("-n", ns, "delete", "pod", "te")  # the trial ends
    assert wait_for(lambda: running_on(cluster, ns, next_pod), 120, f"{next_pod} running (cellfit log {procs.cellfit.log})") == node
    assert running_on(cluster, ns, "other") is None
    wait_for(lambda: job_holds() is None, 30, "the hold taken off the Job once its next pod was bound")
    assert_no_double_booking(cluster.pods(ns))


def test_a_restart_finishes_the_job_count_and_hold_the_killed_replica_left_unwritten(env: Any) -> None:
    scene = be_running(env, "lost")
    cluster, procs, ns, node = scene.cluster, scene.procs, scene.ns, scene.node
    release = env[1]
    role: dict[str, Any] = cluster.kubectl_json("get", "clusterrole", release.extender_role)
    narrowed = json.loads(json.dumps(role))
    for rule in narrowed["rules"]:
        if "jobs" in rule.get("resources", []):
            rule["verbs"] = [v for v in rule["verbs"] if v != "patch"]
    for meta in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        narrowed["metadata"].pop(meta, None)
        role["metadata"].pop(meta, None)
    account = f"system:serviceaccount:{release.namespace}:{EXTENDER_ONLY_SA}"

    def may_patch_jobs() -> bool:
        said = cluster.kubectl("auth", "can-i", "patch", "jobs", "-n", ns, "--as", account, check=False).stdout.strip()
        return said == "yes"

    def job_annotations() -> dict[str, str]:
        job: dict[str, Any] = cluster.kubectl_json("-n", ns, "get", "job", "be")
        return dict(job["metadata"].get("annotations") or {})

    cluster.apply(narrowed)
    try:
        wait_for(lambda: not may_patch_jobs(), 30, "cellfit's Job patches refused")
        first, trial = preempted_and_killed(scene)  # its count and hold writes refused: lost as by a kill after the record
        assert "cellfit.io/preemptions" not in job_annotations() and RESUME_HOLDS not in job_annotations()
    finally:
        cluster.apply(role)
    wait_for(may_patch_jobs, 30, "cellfit's Job patches allowed again")
    victim_uid = json.loads(trial()["metadata"]["annotations"][RECORD])["victims"][0]
    procs.cellfit.start()  # reads te's record in its first list and finishes it
    kept_for_te(scene)
    wait_for(lambda: job_annotations().get("cellfit.io/preemptions") == "1", 30, f"the Job's count finished (cellfit log {procs.cellfit.log})")
    assert json.loads(wait_for(lambda: job_annotations().get(RESUME_HOLDS), 30, "the Job's hold finished")) == {victim_uid: node}
    assert wait_for(lambda: running_on(cluster, ns, "te"), 150, f"te running (cellfit log {procs.cellfit.log})") == node
    next_pod = wait_for(lambda: next((p["metadata"]["name"] for p in scene.be_pods() if is_active(p) and p["metadata"]["uid"] != victim_uid), None),
                        60, "the Job's next pod")
    assert procs.cellfit.process is not None
    procs.cellfit.process.kill()  # a second kill, te bound and its record emptied
    procs.cellfit.process.wait(10)
    procs.cellfit.process = None
    procs.cellfit.start()
    held = [h for h in procs.cellfit.get("/v1/inspect/resume-holds")["holds"] if h["kind"] == "resume" and h["node"] == node]
    assert [(h["node"], h["pods"]) for h in held] == [(node, [f"{ns}/{next_pod}"])], held
    # cellfit's own (kube-scheduler's, of events.k8s.io, has an action): the deciding replica's; the finisher's is the same one
    preempted = [e for e in cluster.events(ns, first) if e["reason"] == "Preempted" and not e.get("action")]
    assert len(preempted) == 1, preempted
    assert_no_double_booking(cluster.pods(ns))
