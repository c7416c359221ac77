"""The extender over real HTTP, with payloads shaped exactly as kube-scheduler sends them, in
both nodeCacheCapable modes."""

from __future__ import annotations

import json
import logging

import httpx
import msgspec
import pytest

from scheduler.config import parse_settings
from scheduler.core.model import PodInfo
from scheduler.extender.runtime import build_runtime
from scheduler.kube import translate, wire
from scheduler.core.resources import Resources
from tests.support import kube_objects as k
from tests.support.observe import records_about, requests_total
from tests.support.server import running_server

FILTER, PRIORITIZE, PREEMPT, BIND = (f"/v1/extender/{verb}" for verb in ("filter", "prioritize", "preempt", "bind"))
NODES = [k.node("gpu-a", gpus=8), k.node("gpu-b", gpus=8), k.node("gpu-small", gpus=2), k.node("cpu-only", gpus=0)]


def post(client, path, body):
    return client.post(path, content=k.dumps(body), headers={"Content-Type": "application/json"})


def occupy(runtime, node_name: str, gpus: int, uid: str = "running-1", priority: int = 0) -> None:
    runtime.engine.apply_pod(
        PodInfo(uid=uid, namespace="ml", name=uid, requests=Resources(1000, 2**30, gpus), node_name=node_name, phase="Running", priority=priority)
    )


def learn_nodes(client) -> None:
    """Standalone mode learns capacity from full Node objects, as kube-scheduler sends them."""
    assert post(client, FILTER, k.extender_args(k.pod("warmup-0"), NODES, node_cache_capable=False)).status_code == 200


def test_filter_with_full_nodes_echoes_the_feasible_node_objects(client, runtime):
    occupy(runtime, "gpu-b", 6)
    body = k.extender_args(k.pod("train-0", gpus=4), NODES, node_cache_capable=False)
    response = post(client, FILTER, body)
    assert response.status_code == 200
    result = response.json()
    assert set(result) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert result["Error"] == "" and result["NodeNames"] is None
    assert result["Nodes"]["items"] == [NODES[0]]  # the whole object, untouched
    # A node is left, so kube-scheduler schedules the pod and would drop reasons: none are sent.
    assert result["FailedNodes"] == {} and result["FailedAndUnresolvableNodes"] == {}
    occupy(runtime, "gpu-a", 6, uid="running-2")
    result = post(client, FILTER, body).json()
    assert result["Nodes"]["items"] == []
    assert set(result["FailedNodes"]) == {"gpu-a", "gpu-b"}
    assert set(result["FailedAndUnresolvableNodes"]) == {"gpu-small", "cpu-only"}
    assert all(isinstance(r, str) and r for r in result["FailedNodes"].values())


def test_filter_with_node_names_uses_what_cellfit_knows(client, runtime):
    learn_nodes(client)
    occupy(runtime, "gpu-a", 8)
    body = k.extender_args(k.pod("train-0", gpus=8), NODES, node_cache_capable=True)
    body["NodeNames"].append("never-seen")
    result = post(client, FILTER, body).json()
    assert result["NodeNames"] == ["gpu-b"] and result["Nodes"] is None
    assert result["FailedNodes"] == {} and result["FailedAndUnresolvableNodes"] == {}
    body["NodeNames"].remove("gpu-b")
    result = post(client, FILTER, body).json()
    assert result["NodeNames"] == []
    assert set(result["FailedNodes"]) == {"gpu-a"}
    assert set(result["FailedAndUnresolvableNodes"]) == {"gpu-small", "cpu-only", "never-seen"}


@pytest.mark.parametrize("node_cache_capable", [False, True])
def test_prioritize_returns_a_host_priority_list_in_0_to_10(client, runtime, node_cache_capable):
    learn_nodes(client)
    occupy(runtime, "gpu-b", 4)
    response = post(client, PRIORITIZE, k.extender_args(k.pod("train-0", gpus=2), NODES, node_cache_capable=node_cache_capable))
    assert response.status_code == 200
    scores = response.json()
    assert [s["Host"] for s in scores] == [n["metadata"]["name"] for n in NODES]
    assert all(set(s) == {"Host", "Score"} and 0 <= s["Score"] <= 10 for s in scores)
    by_host = {s["Host"]: s["Score"] for s in scores}
    assert by_host["gpu-b"] > by_host["gpu-a"] and by_host["cpu-only"] == 0


@pytest.fixture
def placement_client():
    """preemption.policy placement: the placement engine's own victims."""
    runtime = build_runtime(parse_settings("preemption: {policy: placement}"), standalone=True)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as http:
        yield http, runtime


@pytest.mark.parametrize("node_cache_capable", [False, True])
def test_preempt_with_placement_policy_narrows_kube_schedulers_victims(placement_client, node_cache_capable):
    client, runtime = placement_client
    learn_nodes(client)
    victims = [k.pod(f"be-{i}", gpus=2, node_name="gpu-a", phase="Running", priority=i) for i in range(4)]
    for victim in victims:
        occupy(runtime, "gpu-a", 2, uid=victim["metadata"]["uid"], priority=victim["spec"]["priority"])
    occupy(runtime, "gpu-small", 2, uid="small-1")
    body = k.preemption_args(
        k.pod("te-0", gpus=4, priority=100),
        {"gpu-a": victims, "gpu-small": [k.pod("x-0", gpus=2, node_name="gpu-small", uid="small-1")]},
        node_cache_capable=node_cache_capable,
    )
    response = post(client, PREEMPT, body)
    assert response.status_code == 200
    result = response.json()
    assert set(result) == {"NodeNameToMetaVictims"}
    # gpu-small can never hold 4 GPUs; on gpu-a the two lowest-priority pods are enough.
    assert set(result["NodeNameToMetaVictims"]) == {"gpu-a"}
    chosen = result["NodeNameToMetaVictims"]["gpu-a"]
    assert sorted(p["UID"] for p in chosen["Pods"]) == sorted(v["metadata"]["uid"] for v in victims[:2])
    assert chosen["NumPDBViolations"] == 0


@pytest.mark.parametrize("node_cache_capable", [False, True])
def test_preempt_answers_fitgpps_victim_for_a_trial_pod(client, runtime, node_cache_capable):
    learn_nodes(client)
    be = {"cellfit.io/job-class": "best-effort"}
    # on gpu-a: a long-grace BE pod and a short-grace one; on gpu-b: a trial pod (never a victim)
    long_grace = k.pod("be-long-0", gpus=4, node_name="gpu-a", phase="Running", labels=be, grace_period_seconds=1200)
    short_grace = k.pod("be-short-0", gpus=4, node_name="gpu-a", phase="Running", labels=be, grace_period_seconds=30)
    trial = k.pod("te-old-0", gpus=8, node_name="gpu-b", phase="Running", labels={"cellfit.io/job-class": "trial"})
    for body in (long_grace, short_grace, trial):
        runtime.engine.apply_pod(translate.pod_info(msgspec.convert(body, wire.Pod), gpu_resource="nvidia.com/gpu"))
    victims = {"gpu-a": [long_grace, short_grace], "gpu-b": [trial]}
    te = k.pod("te-new-0", gpus=2, priority=100, labels={"cellfit.io/job-class": "trial"})
    result = post(client, PREEMPT, k.preemption_args(te, victims, node_cache_capable=node_cache_capable)).json()
    assert result == {"NodeNameToMetaVictims": {"gpu-a": {"Pods": [{"UID": short_grace["metadata"]["uid"]}], "NumPDBViolations": 0}}}
    be_pod = k.pod("be-new-0", gpus=2, priority=100, labels=be)
    result = post(client, PREEMPT, k.preemption_args(be_pod, victims, node_cache_capable=node_cache_capable)).json()
    assert result == {"NodeNameToMetaVictims": {}}
    text = client.get("/metrics").text
    assert 'cellfit_preemptions_total{preemptor_class="trial",rule="fitgpp"} 1.0' in text


def test_the_node_a_preempted_pod_left_is_kept_for_its_jobs_next_pod(client, runtime):
    learn_nodes(client)
    be = {"cellfit.io/job-class": "best-effort"}
    kept = k.pod("be-kept-0", gpus=4, node_name="gpu-a", phase="Running", labels=be, grace_period_seconds=1200, job_uid="job-kept")
    victim = k.pod("be-victim-0", gpus=4, node_name="gpu-a", phase="Running", labels=be, grace_period_seconds=30, job_uid="job-victim")
    for body in (kept, victim):
        runtime.engine.apply_pod(translate.pod_info(msgspec.convert(body, wire.Pod), gpu_resource="nvidia.com/gpu"))
    te = k.pod("te-new-0", gpus=4, priority=1000, labels={"cellfit.io/job-class": "trial"}, job_uid="job-te")
    result = post(client, PREEMPT, k.preemption_args(te, {"gpu-a": [kept, victim]}, node_cache_capable=True)).json()
    assert result["NodeNameToMetaVictims"]["gpu-a"]["Pods"] == [{"UID": victim["metadata"]["uid"]}]
    # The victim is gone and its Job made a new pod, which waits. Until the trial pod is bound,
    # the room is kept for it first.
    runtime.engine.delete_pod(victim["metadata"]["uid"])
    resumed = k.pod("be-victim-1", gpus=4, priority=750, labels=be, job_uid="job-victim")
    runtime.engine.apply_pod(translate.pod_info(msgspec.convert(resumed, wire.Pod), gpu_resource="nvidia.com/gpu"))
    waiter = k.pod("be-waiter-0", gpus=4, priority=500, labels=be, job_uid="job-waiter")
    answer = post(client, FILTER, k.extender_args(resumed, NODES[:1], node_cache_capable=True)).json()
    assert answer["FailedAndUnresolvableNodes"]["gpu-a"].startswith("its free resources are kept for ml/te-new-0, for which")
    assert [h["kind"] for h in client.get("/v1/inspect/resume-holds").json()["holds"]] == ["preemptor", "resume"]
    assert "cellfit_preemptor_holds 1.0" in client.get("/metrics").text
    # The trial pod went elsewhere: its hold ends, the resumed pod's remains.
    te_elsewhere = {**te, "spec": {**te["spec"], "nodeName": "gpu-b"}, "status": {"phase": "Running"}}
    runtime.engine.apply_pod(translate.pod_info(msgspec.convert(te_elsewhere, wire.Pod), gpu_resource="nvidia.com/gpu"))
    answer = post(client, FILTER, k.extender_args(waiter, NODES[:1], node_cache_capable=True)).json()
    assert answer["NodeNames"] == [] and answer["FailedNodes"] == {}
    assert answer["FailedAndUnresolvableNodes"] == {
        "gpu-a": "its free resources are kept for ml/be-victim-1, of a best-effort Job preempted there and "
        "now resuming (FitGpp resumes preempted jobs first)"
    }
    answer = post(client, FILTER, k.extender_args(resumed, NODES[:1], node_cache_capable=True)).json()
    assert answer["NodeNames"] == ["gpu-a"]
    holds = client.get("/v1/inspect/resume-holds").json()
    assert holds == {
        "enabled": True,
        "holds": [{"node": "gpu-a", "job": "ml/be-victim", "requests": "cpu 2, memory 8Gi, gpus 4", "pods": ["ml/be-victim-1"],
                   "kind": "resume"}],
    }
    text = client.get("/metrics").text
    assert "cellfit_resume_holds 1.0" in text and "cellfit_resume_hold_kept_off_total 2.0" in text
    assert "cellfit_resume_holds_lapsed_total 0.0" in text


def test_bind_without_a_cluster_says_why_in_the_error_field(client):
    response = post(client, BIND, {"PodName": "train-0", "PodNamespace": "ml", "PodUID": "u", "Node": "gpu-a"})
    assert response.status_code == 200
    assert "no Kubernetes API connection" in response.json()["Error"]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        (FILTER, b"{not json", "malformed JSON"),
        (FILTER, b"", "malformed JSON"),
        (FILTER, b'{"NodeNames": ["a"]}', "Object missing required field `Pod`"),
        (PRIORITIZE, b'{"Pod": {"metadata": {"name": 5}}, "NodeNames": []}', "Pod.metadata.name"),
        (PREEMPT, b'{"Pod": {}, "NodeNameToMetaVictims": {"n": {"Pods": [{"uid": "x"}]}}}', "UID"),
        (BIND, b'{"PodName": "p"}', "PodNamespace"),
        (FILTER, b"[1, 2, 3]", "Expected `object`"),
    ],
)
def test_malformed_requests_get_http_400_naming_the_problem(client, caplog, path, body, fragment):
    caplog.set_level(logging.INFO)
    verb = path.rsplit("/", 1)[1]
    response = client.post(path, content=body)
    assert response.status_code == 400
    assert fragment in response.json()["Error"]
    # The operator's side: one WARNING naming the verb and the same reason, counted as rejected.
    [record] = records_about(caplog.records, verb)
    assert record.getMessage() == "request rejected" and record.reason == response.json()["Error"]
    assert requests_total(client, verb) == {"ok": 0, "rejected": 1, "error": 0}


def test_absurd_quantity_is_an_error_field_naming_the_field_for_filter_and_400_for_prioritize(client, caplog):
    caplog.set_level(logging.INFO)
    pod = k.pod("train-0", gpus=1)
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1e999"
    body = k.extender_args(pod, NODES, node_cache_capable=False)
    result = post(client, FILTER, body).json()
    assert "Pod.spec.containers[0].resources.requests.memory" in result["Error"]
    assert "larger than any real resource" in result["Error"]
    # HTTP 200 with the Error field: counted as an error (not ok), one WARNING with the reason.
    [record] = records_about(caplog.records, "filter")
    assert record.getMessage() == "request not carried out" and record.reason == result["Error"]
    assert requests_total(client, "filter") == {"ok": 0, "rejected": 0, "error": 1}
    response = post(client, PRIORITIZE, body)
    assert response.status_code == 400 and "requests.memory" in response.json()["Error"]
    [record] = records_about(caplog.records, "prioritize")
    assert record.getMessage() == "request rejected" and record.reason == response.json()["Error"]
    assert requests_total(client, "prioritize") == {"ok": 0, "rejected": 1, "error": 0}


def test_oversized_bodies_are_refused_with_413_and_the_service_keeps_serving(client, runtime):
    huge = b'{"Pod": {}, "NodeNames": ["' + b"x" * (10 * 2**20) + b'"]}'
    response = client.post(FILTER, content=huge)
    assert response.status_code == 413 and "maxRequestBytes" in response.json()["Error"]

    def chunks():
        yield b'{"Pod": {}, "NodeNames": ["'
        for _ in range(10):
            yield b"y" * 2**20
        yield b'"]}'

    response = client.post(FILTER, content=chunks())  # chunked: no Content-Length to trust
    assert response.status_code == 413
    ok = post(client, FILTER, k.extender_args(k.pod("train-0", gpus=1), NODES, node_cache_capable=False))
    assert ok.status_code == 200 and len(ok.json()["Nodes"]["items"]) == 3


def test_metrics_count_what_happened(client):
    learn_nodes(client)
    client.post(FILTER, content=b"{oops")
    post(client, PRIORITIZE, k.extender_args(k.pod("p-0"), NODES, node_cache_capable=True))
    text = client.get("/metrics").text
    assert 'cellfit_extender_request_duration_seconds_bucket{le="0.0001",verb="filter"}' in text
    assert 'cellfit_extender_requests_total{result="rejected",verb="filter"} 1.0' in text
    assert 'cellfit_extender_requests_total{result="ok",verb="prioritize"} 1.0' in text
    assert 'cellfit_filter_node_verdicts_total{verdict="feasible"} 4.0' in text
    assert 'cellfit_cache_objects{kind="nodes"} 4.0' in text


def test_health_readiness_and_openapi(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and "standalone" in ready.json()["reason"]
    document = client.get("/openapi.json").json()
    for verb in ("filter", "prioritize", "preempt", "bind"):
        assert f"/v1/extender/{verb}" in document["paths"]
    schemas = document["components"]["schemas"]
    assert {"ExtenderArgs", "ExtenderFilterResult", "HostPriority", "ExtenderPreemptionArgs", "ExtenderBindingArgs"} <= set(schemas)
    assert set(schemas["ExtenderFilterResult"]["properties"]) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    json.dumps(document)
