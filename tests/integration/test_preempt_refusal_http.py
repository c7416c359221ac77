"""The preempt verb's refusals carry a reason users can read (issue 18 item 4).

kube-scheduler discards an extender's preempt answer body on any error and has no field for a
reason, so a pod cellfit takes no victims for shows only "no candidate node for preemption". On
a full cluster its own resource check turns every node away before cellfit's filter runs, so
for a pod with a mistake in its labels that was all the user ever saw. cellfit now refuses to
preempt for a pod HiveD can never place as written (before, FitGpp preempted a running pod for
it all the same) and says why in an Event on the pod, once per pod and reason.

Over real HTTP, connected to a cluster whose API is a double recording Events
(tests/support/api_double.py); the watch cache, engines, service and HTTP are real.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import httpx
import msgspec
import pytest

from scheduler.config import parse_settings
from scheduler.extender.runtime import Runtime, build_runtime
from scheduler.kube import translate, wire
from tests.support import hived
from tests.support import kube_objects as k
from tests.support.api_double import EventRecordingApi
from tests.support.server import running_server, wait_until_ready
from scheduler.kube.names import filter_offered

PREEMPT = "/v1/extender/preempt"
NAMES = [n["metadata"]["name"] for n in hived.NODES]
BE = {"cellfit.io/job-class": "best-effort"}


@pytest.fixture
def connected() -> Iterator[tuple[EventRecordingApi, httpx.Client, Runtime]]:
    api = EventRecordingApi(nodes=hived.NODES)
    runtime = build_runtime(parse_settings(hived.CONFIG + "estimator: {enabled: false}\n"), api=api)  # type: ignore[arg-type]
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        yield api, client, runtime


def full_cluster(runtime: Runtime) -> dict[str, list[dict[str, Any]]]:
    """speech's opportunistic best-effort pods on all three GPU nodes, vision's cells included:
    kube-scheduler's own check finds no room anywhere, and each of them is a victim FitGpp may
    take for a trial pod."""
    on_node: dict[str, list[dict[str, Any]]] = {}
    for i in range(3):
        body = k.pod(f"opp{i}-0", gpus=8, job_uid=f"job-opp{i}",
                     labels={"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic", **BE})
        info = translate.pod_info(msgspec.convert(body, wire.Pod), gpu_resource="nvidia.com/gpu")
        with runtime.lock:
            [node_name] = filter_offered(runtime.engine, info, NAMES).feasible
            runtime.engine.reserve(info, node_name)
        body["spec"]["nodeName"], body["status"]["phase"] = node_name, "Running"
        on_node[node_name] = [body]
    return on_node


def preempt(client: httpx.Client, pod: dict[str, Any], on_node: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    response = client.post(PREEMPT, content=k.dumps(k.preemption_args(pod, on_node, node_cache_capable=True)))
    assert response.status_code == 200, response.text
    return dict(response.json()["NodeNameToMetaVictims"])


def refusals(api: EventRecordingApi, pod: dict[str, Any], *, count: int) -> list[dict[str, Any]]:
    """The PreemptionRefused Events on ``pod`` once ``count`` of them are written (background)."""
    deadline = time.monotonic() + 5
    while True:
        found = [e for e in api.events if e["reason"] == "PreemptionRefused" and e["pod_uid"] == pod["metadata"]["uid"]]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_a_trial_pod_with_a_mistake_preempts_no_one_and_its_event_names_the_field(connected):
    api, client, runtime = connected
    on_node = full_cluster(runtime)
    mistaken = k.pod("trial-0", gpus=8, priority=1000, job_uid="job-trial",
                     labels={"cellfit.io/virtual-cluster": "vision", "cellfit.io/priority": "urgent", "cellfit.io/job-class": "trial"})
    # FitGpp would take an opportunistic pod for it, and HiveD's filter would then refuse it.
    assert preempt(client, mistaken, on_node) == {}
    assert preempt(client, mistaken, on_node) == {}  # kube-scheduler's retry: one Event, not two
    (event,) = refusals(api, mistaken, count=1)
    assert (event["namespace"], event["pod_name"], event["warning"]) == ("ml", "trial-0", True)
    assert event["message"] == ("cellfit cannot place this pod as written, so it preempts no one for it: "
                                "label cellfit.io/priority: 'urgent' is not 'guaranteed' or 'opportunistic'")
    time.sleep(0.2)
    assert len(refusals(api, mistaken, count=2)) == 1
    # Fixed, the same pod reclaims vision's cells from the opportunistic pod holding them.
    fixed = {**mistaken, "metadata": {**mistaken["metadata"], "labels": {**mistaken["metadata"]["labels"], "cellfit.io/priority": "guaranteed"}}}
    (node_name, victims), = preempt(client, fixed, on_node).items()
    assert [v["UID"] for v in victims["Pods"]] == [on_node[node_name][0]["metadata"]["uid"]]


@pytest.mark.parametrize(("labels", "annotations", "said"), [
    ({"cellfit.io/virtual-cluster": "nlp"}, {}, "label cellfit.io/virtual-cluster: unknown virtual cluster 'nlp' (known: speech, vision)"),
    ({"cellfit.io/virtual-cluster": "vision"}, {"cellfit.io/cell-type": "A100-RACK"}, "unknown cell type 'A100-RACK' in annotation cellfit.io/cell-type (known: A100, A100-PAIR, A100-NODE)"),
    ({"cellfit.io/virtual-cluster": "vision"}, {"cellfit.io/gang": "true", "cellfit.io/gang-size": "abc"},
     "annotation cellfit.io/gang-size: 'abc' is not an integer"),
], ids=["unknown VC", "unknown cell type", "gang-size abc"])
def test_each_mistake_of_the_issue_is_the_refusals_reason(connected, labels, annotations, said):
    api, client, runtime = connected
    on_node = full_cluster(runtime)
    mistaken = k.pod("trial-0", gpus=8, priority=1000, job_uid="job-trial", labels={**labels, "cellfit.io/job-class": "trial"},
                     annotations=annotations)
    assert preempt(client, mistaken, on_node) == {}
    (event,) = refusals(api, mistaken, count=1)
    assert event["warning"] is True and event["message"].endswith(said), event["message"]


def test_fitgpps_own_reason_for_taking_no_one_is_told_too(connected):
    api, client, runtime = connected
    on_node = full_cluster(runtime)
    late = k.pod("late-0", gpus=8, priority=1000, job_uid="job-late",
                 labels={"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic", **BE})
    assert preempt(client, late, on_node) == {}
    (event,) = refusals(api, late, count=1)
    assert event["warning"] is False
    assert event["message"] == "cellfit preempts no one for this pod: a best-effort pod never preempts others (FitGpp)"
