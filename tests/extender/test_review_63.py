"""The verbs as kube-scheduler and a misbehaving client call them, over real HTTP, under HiveD
connected to a cluster: a bind repeated for a pod that is already bound, two binds of one pod in
flight at once, a bind naming no pod, a gang member's failed bind, pods sent without a UID, an
offered Node cellfit cannot read. Each is answered with a clear error naming what is wrong, and
the cells stay exactly as the cluster holds them (read back through the inspect API). Then the
webhooks with inputs kube-apiserver does not send: a malformed env on a placed pod, an
unreadable oldObject.

The Kubernetes API is a double that lists canned objects and refuses a binding of a pod that is
already bound (HTTP 409), as kube-apiserver does; the watch cache, the engine, the service and
HTTP are real."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Iterator

import httpx
import pytest

from scheduler.config import parse_settings
from scheduler.errors import InvalidRequest, KubernetesApiError
from scheduler.extender.runtime import build_runtime
from tests.support import kube_objects as k
from tests.support.api_double import ListingApi
from tests.support.hived import CONFIG, NODES
from tests.support.server import running_server, wait_until_ready

SETTINGS = CONFIG + "  gangBookingTimeoutSeconds: 60\nestimator: {enabled: false}\n"
VISION = {"cellfit.io/virtual-cluster": "vision"}
RUNNING = k.pod("run-0", uid="uid-run-0", gpus=8, labels=VISION, node_name="gpu-a", phase="Running")
PENDING = k.pod("train-0", uid="uid-train-0", gpus=8, labels=VISION)


class BindingApi(ListingApi):
    """Refuses to bind a pod that is bound already, as kube-apiserver does ("pod ... is already
    assigned to node ..."). While ``gate`` is clear, a binding waits for it once it has arrived
    (``arrived``): the API server's answer is on its way."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.assigned = {pod["metadata"]["uid"]: pod["spec"]["nodeName"] for pod in self.pods if pod["spec"].get("nodeName")}
        self.gate = threading.Event()
        self.gate.set()
        self.arrived = threading.Event()
        self.unavailable_for: set[str] = set()  # pod names whose binding fails as if the API were down

    async def create_binding(self, *, namespace: str, name: str, uid: str, node_name: str, annotations: dict[str, str]) -> None:
        self.arrived.set()
        while not self.gate.is_set():
            await asyncio.sleep(0.005)
        if name in self.unavailable_for:
            raise KubernetesApiError(f"bind pod {namespace}/{name} to {node_name}: Kubernetes API did not answer within 10s")
        if uid in self.assigned:
            raise KubernetesApiError(
                f'bind pod {namespace}/{name} to {node_name}: pod {name} is already assigned to node "{self.assigned[uid]}" (HTTP 409)',
                status=409,
            )
        self.assigned[uid] = node_name
        await super().create_binding(namespace=namespace, name=name, uid=uid, node_name=node_name, annotations=annotations)


@pytest.fixture
def connected() -> Iterator[tuple[BindingApi, httpx.Client]]:
    api = BindingApi(nodes=NODES, pods=[RUNNING, PENDING])
    runtime = build_runtime(parse_settings(SETTINGS), api=api)  # type: ignore[arg-type]
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        yield api, client


def bind(client: httpx.Client, *, name: str, uid: str, node: str, namespace: str = "ml") -> httpx.Response:
    body = {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node}
    return client.post("/v1/extender/bind", content=json.dumps(body))


def vision(client: httpx.Client) -> dict[str, Any]:
    """What the inspect API says vision holds: its cells bound, pods and placements."""
    view = client.get("/v1/inspect/virtual-clusters/vision").json()
    return {"cells": view["cells"], "pods": view["pods"], "gpus": view["gpus"], "placements": view["placements"]}


@pytest.mark.parametrize("node", ["gpu-a", "gpu-b"], ids=["its-own-node", "another-node"])
def test_binding_a_pod_that_is_already_bound_keeps_its_cells(connected, node):
    api, client = connected
    before = vision(client)
    assert before["pods"]["guaranteed"] == 1  # the running pod, recovered from the list
    response = bind(client, name="run-0", uid="uid-run-0", node=node)
    assert response.status_code == 200
    assert "ml/run-0 is already bound to node gpu-a" in response.json()["Error"]
    # The running pod still holds its node: nothing was handed back, nothing sent to the API.
    assert vision(client) == before
    assert api.bindings == []


def test_a_second_bind_of_a_pod_while_the_first_is_in_flight_leaks_nothing(connected):
    api, client = connected
    api.gate.clear()
    answers: dict[str, httpx.Response] = {}
    first = threading.Thread(target=lambda: answers.setdefault("first", bind(client, name="train-0", uid="uid-train-0", node="gpu-b")))
    first.start()
    assert api.arrived.wait(10)
    # Sent while the first waits on the API server, and answered before it may go on (refused
    # at once; a second binding that reached the API would wait at the gate as well, until the
    # join gives up). Whichever binding succeeds must keep the pod's cells.
    second = threading.Thread(target=lambda: answers.setdefault("second", bind(client, name="train-0", uid="uid-train-0", node="gpu-b")))
    second.start()
    second.join(5)
    api.gate.set()
    first.join(10)
    second.join(10)
    assert answers["first"].json() == {"Error": ""}
    assert "a binding of pod ml/train-0 to node gpu-b is already in flight" in answers["second"].json()["Error"]
    assert api.bindings == [("ml/train-0", "gpu-b")]
    held = vision(client)
    assert held["pods"]["guaranteed"] == 2 and held["gpus"]["guaranteed"] == 16, held


@pytest.mark.parametrize("node", ["gpu-b", "gpu-c"], ids=["its-own-node", "another-node"])
def test_a_bind_repeated_before_the_watch_shows_the_pod_bound_keeps_its_cells(connected, node):
    """The watch shows a binding a moment after the API made it (here: never, the double's
    watch is quiet), so the pod still reads as pending when the same bind comes again."""
    api, client = connected
    assert bind(client, name="train-0", uid="uid-train-0", node="gpu-b").json() == {"Error": ""}
    held = vision(client)
    assert held["pods"]["guaranteed"] == 2
    response = bind(client, name="train-0", uid="uid-train-0", node=node)
    assert "pod ml/train-0 is already bound to node gpu-b" in response.json()["Error"]
    assert vision(client) == held
    assert api.bindings == [("ml/train-0", "gpu-b")]


def pending_copy_of_running() -> dict[str, Any]:
    """RUNNING as a pod still in kube-scheduler's queue would read: the same UID, no node."""
    pod = json.loads(json.dumps(RUNNING))
    pod["spec"].pop("nodeName")
    pod["status"] = {"phase": "Pending"}
    return pod


@pytest.mark.parametrize("verb", ["filter", "preempt"])
def test_a_verb_for_a_running_pods_uid_that_leaves_out_its_node_keeps_its_cells(connected, verb):
    """kube-scheduler's late copy of a pod cellfit bound (a retry after a bind it gave up on)
    is placed nowhere and preempts no one: the cells it runs on stay its own."""
    _, client = connected
    before = vision(client)
    pod = pending_copy_of_running()
    body = (
        {"Pod": pod, "Nodes": None, "NodeNames": ["gpu-b", "gpu-c"]}
        if verb == "filter"
        else {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": {"gpu-b": {"Pods": []}, "gpu-c": None}}
    )
    answer = client.post(f"/v1/extender/{verb}", content=json.dumps(body))
    assert answer.status_code == 200
    assert vision(client) == before
    if verb == "filter":
        assert answer.json()["NodeNames"] in (None, [])
        assert answer.json()["FailedAndUnresolvableNodes"] == dict.fromkeys(["gpu-b", "gpu-c"], f"pod ml/{pod['metadata']['name']} is already bound to node gpu-a")
    else:
        assert answer.json()["NodeNameToMetaVictims"] in (None, {})


def test_a_verb_for_a_pod_this_replica_bound_before_the_watch_shows_it_places_it_nowhere(connected):
    """The same for a pod whose binding this replica made and the watch has not shown yet."""
    api, client = connected
    assert bind(client, name="train-0", uid="uid-train-0", node="gpu-b").json() == {"Error": ""}
    held = vision(client)
    answer = client.post("/v1/extender/filter", content=json.dumps({"Pod": PENDING, "Nodes": None, "NodeNames": ["gpu-c"]}))
    assert answer.json()["FailedAndUnresolvableNodes"] == {"gpu-c": "pod ml/train-0 is already bound to node gpu-b"}
    assert vision(client) == held

@pytest.mark.parametrize("field", ["PodName", "PodNamespace", "Node"])
def test_a_bind_naming_no_pod_or_node_is_refused_naming_the_field(connected, field):
    api, client = connected
    before = vision(client)
    args = {"name": "train-0", "namespace": "ml", "uid": "uid-train-0", "node": "gpu-b"}
    args[{"PodName": "name", "PodNamespace": "namespace", "Node": "node"}[field]] = ""
    response = bind(client, **args)
    # The verb's Error field (HTTP 200): what the OpenAPI document allows is accepted as JSON.
    assert response.status_code == 200
    assert response.json()["Error"].startswith(f"{field}: must not be empty")
    assert vision(client) == before and api.bindings == []
    # The service keeps serving: the pod binds once asked properly.
    assert bind(client, name="train-0", uid="uid-train-0", node="gpu-b").json() == {"Error": ""}




GANG = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"}
MEMBERS = [k.pod(f"gang-{index}", uid=f"uid-gang-{index}", gpus=8, labels=VISION, annotations=GANG, job_uid="uid-job-gang") for index in (0, 1)]


@pytest.fixture
def gang() -> Iterator[tuple[BindingApi, httpx.Client]]:
    api = BindingApi(nodes=NODES, pods=MEMBERS)
    runtime = build_runtime(parse_settings(SETTINGS), api=api)  # type: ignore[arg-type]
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        yield api, client


def test_a_gang_member_whose_bind_fails_leaves_its_slot_to_the_gang_and_binds_on_retry(gang):
    api, client = gang
    nodes = [
        client.post("/v1/extender/filter", content=k.dumps(k.extender_args(member, NODES, node_cache_capable=True))).json()["NodeNames"][0]
        for member in MEMBERS
    ]
    booked = engine_state(client)
    assert booked[0]["bookings"] == 2 and booked[0]["gangs"] == 1
    api.unavailable_for.add("gang-1")
    answers: dict[int, httpx.Response] = {}
    binds = [
        threading.Thread(target=lambda i=index: answers.setdefault(i, bind(client, name=f"gang-{i}", uid=f"uid-gang-{i}", node=nodes[i])))
        for index in (0, 1)
    ]
    for thread in binds:
        thread.start()
    for thread in binds:
        thread.join(10)
    assert answers[0].json() == {"Error": ""} and "did not answer" in answers[1].json()["Error"]
    # The failed member holds nothing; its slot stays the gang's, on the node it was placed on.
    stats, _ = engine_state(client)
    assert (stats["bookings"], stats["gangs"], stats["pods"]) == (2, 1, 1)
    slots = {p["node"]: p["pod"] for p in vision(client)["placements"]}
    assert slots == {nodes[0]: "ml/gang-0", nodes[1]: None}
    # kube-scheduler retries the member: the same slot takes it, and nothing else is booked.
    api.unavailable_for.clear()
    retried = client.post("/v1/extender/filter", content=k.dumps(k.extender_args(MEMBERS[1], NODES, node_cache_capable=True))).json()
    assert retried["NodeNames"] == [nodes[1]]
    assert bind(client, name="gang-1", uid="uid-gang-1", node=nodes[1]).json() == {"Error": ""}
    stats, _ = engine_state(client)
    assert (stats["bookings"], stats["gangs"], stats["pods"]) == (2, 1, 2)
    assert {p["node"]: p["pod"] for p in vision(client)["placements"]} == {nodes[0]: "ml/gang-0", nodes[1]: "ml/gang-1"}


def test_a_preemptors_booking_outlives_a_failed_bind_once_its_victims_are_gone():
    """A guaranteed pod of vision reclaims gpu-a from speech's opportunistic pod; once the
    victim is gone its bind meets a transient API failure. Its cells should stay booked for it
    (as a gang member's slot stays with the gang), not go to the next opportunistic pod, which
    the retried preemption would have to evict again."""
    preemptor = k.pod("guard-0", uid="uid-guard-0", gpus=8, labels=VISION)
    api = BindingApi(nodes=NODES, pods=[*BORROWED, preemptor])
    runtime = build_runtime(parse_settings(SETTINGS), api=api)  # type: ignore[arg-type]
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        offered = {node: {"Pods": [{"UID": f"uid-borrow-{index}"}]} for index, node in enumerate(("gpu-a", "gpu-b", "gpu-c"))}
        chosen = client.post("/v1/extender/preempt", content=json.dumps({"Pod": preemptor, "NodeNameToMetaVictims": offered})).json()
        [(node, victims)] = chosen["NodeNameToMetaVictims"].items()
        with runtime.lock:  # the watch shows the victim gone
            runtime.engine.delete_pod(victims["Pods"][0]["UID"])
        booked = [p for p in vision(client)["placements"] if p["uid"] == "uid-guard-0"]
        assert [p["node"] for p in booked] == [node]
        api.unavailable_for.add("guard-0")
        assert "did not answer" in bind(client, name="guard-0", uid="uid-guard-0", node=node).json()["Error"]
        assert [p for p in vision(client)["placements"] if p["uid"] == "uid-guard-0"] == booked

# ---------------------------------------------------------------------- pods without a UID

OPPORTUNISTIC = {"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic"}
# speech's opportunistic pods on every node: a guaranteed pod of vision must reclaim a node.
BORROWED = [
    k.pod(f"borrow{index}-0", uid=f"uid-borrow-{index}", gpus=8, labels=OPPORTUNISTIC, node_name=node, phase="Running")
    for index, node in enumerate(("gpu-a", "gpu-b", "gpu-c"))
]


@pytest.fixture
def borrowed() -> Iterator[httpx.Client]:
    runtime = build_runtime(parse_settings(SETTINGS), api=BindingApi(nodes=NODES, pods=BORROWED))  # type: ignore[arg-type]
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        yield client


def without_uid(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"].pop("uid")
    return pod


def engine_state(client: httpx.Client) -> tuple[Any, Any]:
    return client.get("/v1/inspect/engine").json()["stats"], client.get("/v1/inspect/virtual-clusters").json()


def test_a_filter_for_a_pod_without_a_uid_books_nothing_and_names_the_field(connected):
    """HiveD books a gang's cells by pod UID: every pod sent without one would share them."""
    _, client = connected
    before = engine_state(client)
    pod = without_uid(k.pod("ghost-0", gpus=8, labels=VISION, annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"}))
    result = client.post("/v1/extender/filter", content=k.dumps(k.extender_args(pod, NODES, node_cache_capable=True))).json()
    assert result["Error"].startswith("Pod.metadata.uid: ")
    assert engine_state(client) == before


def test_a_preempt_for_a_pod_without_a_uid_takes_no_victims_and_books_nothing(borrowed):
    before = engine_state(borrowed)
    pod = without_uid(k.pod("ghost-0", gpus=8, labels=VISION))
    offered = {node: {"Pods": [{"UID": f"uid-borrow-{index}"}], "NumPDBViolations": 0} for index, node in enumerate(("gpu-a", "gpu-b", "gpu-c"))}
    response = borrowed.post("/v1/extender/preempt", content=json.dumps({"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": offered}))
    assert response.status_code == 200 and response.json() == {"NodeNameToMetaVictims": {}}
    assert engine_state(borrowed) == before
    # The same pod with its UID reclaims a node: the refusal was the UID's doing.
    pod["metadata"]["uid"] = "uid-ghost-0"
    response = borrowed.post("/v1/extender/preempt", content=json.dumps({"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": offered}))
    assert len(response.json()["NodeNameToMetaVictims"]) == 1

# ---------------------------------------------------------------------- the pod-create webhook


@pytest.mark.parametrize("env", ["OMP_NUM_THREADS=8", [1], [["OMP_NUM_THREADS", "8"]]], ids=["string", "number", "pair"])
def test_a_placed_pod_with_an_env_that_is_no_list_of_objects_is_admitted_unchanged(env, caplog):
    """The placer's patch reads the pod's containers as raw JSON, beyond what the review's
    struct checks: a malformed ``env`` there is the client's mistake, told in the log, and the
    pod is admitted as created (the webhook never refuses a pod), not an HTTP 500."""
    from tests.unit.test_admission import admission, placed_pod

    service, _, metrics = admission()
    pod = placed_pod("cpu")
    pod["spec"]["containers"][0]["env"] = env
    answer = service.review(k.dumps(k.admission_review(pod)))
    assert answer.status == 200
    response = json.loads(answer.body)["response"]
    assert response["allowed"] is True and "patch" not in response
    assert "placed pod left as created" in caplog.text
    assert metrics.admission_reviews.labels(result="unchanged")._value.get() == 1


# ---------------------------------------------------------------------- the validating webhook


@pytest.mark.parametrize("kind", ["Pod", "Job"])
def test_an_update_whose_old_object_cannot_be_read_names_the_old_object(kind):
    """With admission.rejectInvalid an update is judged against its old object too: a review
    whose oldObject is unreadable is refused naming ``request.oldObject``, not the new object
    (which is fine)."""
    from tests.support.admission_reviews import job, validating_review
    from tests.unit.test_validation import validation

    service, _ = validation(reject=True)
    new = job("train", labels=VISION) if kind == "Job" else k.pod("train-0", gpus=2, labels=VISION)
    old = json.loads(json.dumps(new))
    old["spec"] = "not an object"
    document = validating_review(new, operation="UPDATE", old=old)
    reviewed = service.review_job if kind == "Job" else service.review_pod
    with pytest.raises(InvalidRequest, match=r"^request\.oldObject: .*spec"):
        reviewed(k.dumps(document))
    # The same update with a readable old object is reviewed.
    document["request"]["oldObject"] = new
    assert json.loads(reviewed(k.dumps(document)).body)["response"]["allowed"] is True


# ---------------------------------------------------------------------- full Node objects


def test_a_filter_offered_a_node_cellfit_cannot_read_answers_in_error_naming_the_field(connected):
    """With nodeCacheCapable false the Node objects come in the body: one whose allocatable
    cellfit cannot read is a decision's failure (Error, which becomes the pod's FailedScheduling
    event), not an HTTP 400 whose body kube-scheduler drops."""
    _, client = connected
    before = engine_state(client)
    broken = json.loads(json.dumps(NODES[2]))
    broken["status"]["allocatable"]["cpu"] = "-1"
    body = k.extender_args(k.pod("prep-0", uid="uid-prep-0", gpus=2, labels=VISION), [*NODES[:2], broken], node_cache_capable=False)
    response = client.post("/v1/extender/filter", content=k.dumps(body))
    assert response.status_code == 200
    assert response.json()["Error"] == "Nodes.items[2].status.allocatable.cpu: '-1' is negative"
    assert engine_state(client) == before
