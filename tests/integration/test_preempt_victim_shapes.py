"""The preempt verb over real HTTP with every victim-list shape a supported kube-scheduler sends.

Newer kube-schedulers (kubernetes#139270, PR #135486) also offer a preemption-capable extender
candidate nodes whose dry run found no victim, because it cannot see the resources the extender
manages; Go writes that empty list as ``null``. So a node's victims arrive as the full list,
``[]``, ``null`` or (from a hand-written client) no ``Pods`` key at all, in
``NodeNameToVictims`` (``nodeCacheCapable: false``, full pods) or ``NodeNameToMetaVictims``
(``nodeCacheCapable: true``, UIDs), the other map being ``null``. Whatever the shape, cellfit
answers the victims it chooses itself from what it knows of each node: FitGpp's under
resource-fit, HiveD's reclaim under hived, and leaves out a node where nothing it may preempt
makes room. Every victim answered runs on the node it is answered for.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import httpx
import msgspec
import pytest

from scheduler.config import parse_settings
from scheduler.extender.runtime import Runtime, build_runtime
from scheduler.kube import translate, wire
from tests.support import hived
from tests.support import kube_objects as k
from tests.support.observe import requests_total
from tests.support.server import running_server
from scheduler.kube.names import filter_offered

FILTER, PREEMPT = "/v1/extender/filter", "/v1/extender/preempt"
SHAPES = ["full", "empty", "null", "missing", "null-entry"]
# Each shape in both maps: NodeNameToVictims (nodeCacheCapable false), NodeNameToMetaVictims (true).
EVERY_SHAPE = pytest.mark.parametrize(
    ("shape", "node_cache_capable"),
    [(shape, capable) for shape in SHAPES for capable in (False, True)],
    ids=[f"{shape}-{'node-cache-capable' if capable else 'full-pods'}" for shape in SHAPES for capable in (False, True)],
)
BE = {"cellfit.io/job-class": "best-effort"}
TRIAL = {"cellfit.io/job-class": "trial"}


def preemption_args(
    preemptor: dict[str, Any], victims: dict[str, list[dict[str, Any]]], *, shape: str, node_cache_capable: bool
) -> dict[str, Any]:
    """ExtenderPreemptionArgs as kube-scheduler writes it: ``full`` lists the victims its dry
    run chose; the other shapes offer the same nodes with none, written as Go's ``[]``, as
    Go's nil slice (``null``), without the ``Pods`` key, or as a nil ``*Victims``."""
    if shape == "full":
        return k.preemption_args(preemptor, victims, node_cache_capable=node_cache_capable)
    entry: dict[str, Any] | None
    if shape == "empty":
        entry = {"Pods": [], "NumPDBViolations": 0}
    elif shape == "null":
        entry = {"Pods": None, "NumPDBViolations": 0}
    elif shape == "missing":
        entry = {"NumPDBViolations": 0}
    else:
        assert shape == "null-entry"
        entry = None
    offered = dict.fromkeys(victims, entry)
    if node_cache_capable:
        return {"Pod": preemptor, "NodeNameToVictims": None, "NodeNameToMetaVictims": offered}
    return {"Pod": preemptor, "NodeNameToVictims": offered, "NodeNameToMetaVictims": None}


def post(client: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    return client.post(path, content=k.dumps(body), headers={"Content-Type": "application/json"})


def preempt(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = post(client, PREEMPT, body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert set(result) == {"NodeNameToMetaVictims"}
    return result["NodeNameToMetaVictims"]


def place(runtime: Runtime, body: dict[str, Any]) -> None:
    """A pod running where its ``spec.nodeName`` says, as the watch would report it."""
    with runtime.lock:
        runtime.engine.apply_pod(translate.pod_info(msgspec.convert(body, wire.Pod), gpu_resource="nvidia.com/gpu"))


def uids(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["uid"] for p in pods]


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, Runtime]]:
    """The default configuration standalone: resource-fit placement, FitGpp preemption."""
    runtime = build_runtime(parse_settings(""), standalone=True)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as http:
        yield http, runtime


# ---------------------------------------------------------------- resource-fit + FitGpp

NODES = [k.node("gpu-a", gpus=8), k.node("gpu-b", gpus=8), k.node("gpu-small", gpus=2)]


def fitgpp_cluster(client: httpx.Client, runtime: Runtime) -> dict[str, list[dict[str, Any]]]:
    """gpu-a: two best-effort pods, either of which makes room (the short grace period scores
    lower); gpu-b: a trial pod (never a victim); gpu-small: too small for the preemptor whatever
    goes. Returns each node's pods, which kube-scheduler's dry run would list as victims."""
    assert post(client, FILTER, k.extender_args(k.pod("warmup-0"), NODES, node_cache_capable=False)).status_code == 200
    on_node = {
        "gpu-a": [
            k.pod("be-long-0", gpus=4, node_name="gpu-a", phase="Running", labels=BE, grace_period_seconds=1200, job_uid="job-long"),
            k.pod("be-short-0", gpus=4, node_name="gpu-a", phase="Running", labels=BE, grace_period_seconds=30, job_uid="job-short"),
        ],
        "gpu-b": [k.pod("te-old-0", gpus=8, node_name="gpu-b", phase="Running", labels=TRIAL, job_uid="job-te-old")],
        "gpu-small": [k.pod("be-small-0", gpus=2, node_name="gpu-small", phase="Running", labels=BE, job_uid="job-small")],
    }
    for pods in on_node.values():
        for body in pods:
            place(runtime, body)
    return on_node


@EVERY_SHAPE
def test_fitgpp_chooses_its_victim_whatever_the_shape(served, shape, node_cache_capable):
    client, runtime = served
    on_node = fitgpp_cluster(client, runtime)
    preemptor = k.pod("te-new-0", gpus=4, priority=100, labels=TRIAL, job_uid="job-te-new")
    answer = preempt(client, preemption_args(preemptor, on_node, shape=shape, node_cache_capable=node_cache_capable))
    # FitGpp's victim on the one node where room can be made; gpu-b (only a trial pod) and
    # gpu-small (too small) are left out.
    short = on_node["gpu-a"][1]["metadata"]["uid"]
    assert answer == {"gpu-a": {"Pods": [{"UID": short}], "NumPDBViolations": 0}}
    assert short in uids(on_node["gpu-a"])  # a pod running on that very node
    assert requests_total(client, "preempt") == {"ok": 1, "rejected": 0, "error": 0}


@EVERY_SHAPE
def test_fitgpp_leaves_out_nodes_where_nothing_it_may_preempt_makes_room(served, shape, node_cache_capable):
    client, runtime = served
    on_node = fitgpp_cluster(client, runtime)
    trial = k.pod("te-new-0", gpus=4, priority=100, labels=TRIAL, job_uid="job-te-new")
    # gpu-b holds only a trial pod, gpu-small can never hold 4 GPUs: no node is left.
    offered = {name: on_node[name] for name in ("gpu-b", "gpu-small")}
    assert preempt(client, preemption_args(trial, offered, shape=shape, node_cache_capable=node_cache_capable)) == {}
    # A best-effort pod never preempts, not even on gpu-a.
    best_effort = k.pod("be-new-0", gpus=4, priority=100, labels=BE, job_uid="job-be-new")
    assert preempt(client, preemption_args(best_effort, on_node, shape=shape, node_cache_capable=node_cache_capable)) == {}


@pytest.mark.parametrize("node_cache_capable", [False, True], ids=["full-pods", "node-cache-capable"])
def test_a_node_offered_empty_next_to_nodes_offered_with_victims(served, node_cache_capable):
    client, runtime = served
    on_node = fitgpp_cluster(client, runtime)
    body = k.preemption_args(k.pod("te-new-0", gpus=4, priority=100, labels=TRIAL), on_node, node_cache_capable=node_cache_capable)
    victims = body["NodeNameToMetaVictims" if node_cache_capable else "NodeNameToVictims"]
    victims["gpu-a"]["Pods"] = None  # the node where room can be made comes without victims
    answer = preempt(client, body)
    assert answer == {"gpu-a": {"Pods": [{"UID": on_node["gpu-a"][1]["metadata"]["uid"]}], "NumPDBViolations": 0}}


@pytest.mark.parametrize(
    "body",
    [
        {"NodeNameToVictims": None, "NodeNameToMetaVictims": None},
        {},
        {"NodeNameToVictims": {}, "NodeNameToMetaVictims": None},
        {"NodeNameToVictims": None, "NodeNameToMetaVictims": {}},
    ],
    ids=["both-null", "both-missing", "empty-victims-map", "empty-meta-map"],
)
def test_no_candidate_node_at_all_is_an_empty_answer(served, body):
    client, runtime = served
    fitgpp_cluster(client, runtime)
    assert preempt(client, {"Pod": k.pod("te-new-0", gpus=4, priority=100, labels=TRIAL), **body}) == {}


def test_a_node_answered_without_victims_is_left_out(caplog):
    """preemption.policy placement: resource-fit only narrows kube-scheduler's list. A node
    where the pod already fits would come back with no victims, which kube-scheduler refuses
    ("expected at least one victim pod on node") when it offered some: it is left out."""
    caplog.set_level(logging.INFO)
    runtime = build_runtime(parse_settings("preemption: {policy: placement}"), standalone=True)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert post(client, FILTER, k.extender_args(k.pod("warmup-0"), NODES, node_cache_capable=False)).status_code == 200
        low = k.pod("low-0", gpus=2, node_name="gpu-a", phase="Running", priority=0)
        place(runtime, low)
        preemptor = k.pod("te-new-0", gpus=4, priority=100)
        for shape in ("full", "empty", "null"):
            for node_cache_capable in (False, True):
                body = preemption_args(preemptor, {"gpu-a": [low]}, shape=shape, node_cache_capable=node_cache_capable)
                assert preempt(client, body) == {}, (shape, node_cache_capable)
    dropped = [r for r in caplog.records if r.getMessage() == "preemption nodes dropped"]
    assert len(dropped) == 6 and all(r.nodes == ["gpu-a"] for r in dropped)


# ---------------------------------------------------------------- hived (+ FitGpp)


@pytest.fixture
def hived_served() -> Iterator[tuple[httpx.Client, Runtime]]:
    runtime = build_runtime(parse_settings(hived.CONFIG), standalone=True)
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as http:
        yield http, runtime


def hived_cluster(client: httpx.Client, runtime: Runtime) -> dict[str, list[dict[str, Any]]]:
    """speech's opportunistic pods fill all three GPU nodes (vision's cells included)."""
    names = [n["metadata"]["name"] for n in hived.NODES]
    on_node: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for i in range(3):
        body = k.pod(
            f"opp{i}-0", gpus=8, labels={"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic", **BE},
            job_uid=f"job-opp{i}",
        )
        info = translate.pod_info(msgspec.convert(body, wire.Pod), gpu_resource="nvidia.com/gpu")
        with runtime.lock:
            [node_name] = filter_offered(runtime.engine, info, names).feasible
            runtime.engine.reserve(info, node_name)
        body["spec"]["nodeName"], body["status"]["phase"] = node_name, "Running"
        on_node[node_name].append(body)
    assert all(on_node[name] for name in ("gpu-a", "gpu-b", "gpu-c"))
    return on_node


@EVERY_SHAPE
def test_hived_reclaims_the_opportunistic_pods_on_the_owed_cells_whatever_the_shape(hived_served, shape, node_cache_capable):
    client, runtime = hived_served
    on_node = hived_cluster(client, runtime)
    # vision's guaranteed pod, labelled best-effort: FitGpp alone would never let it preempt,
    # HiveD's reclaim of vision's cells comes first.
    owed = k.pod("vision-0", gpus=8, priority=100, labels={"cellfit.io/virtual-cluster": "vision", **BE}, job_uid="job-vision")
    filtered = post(client, FILTER, k.extender_args(owed, hived.NODES, node_cache_capable=True)).json()
    assert filtered["NodeNames"] == []
    [node_name] = filtered["FailedNodes"]  # "waiting for preemption of opportunistic pods ..."
    answer = preempt(client, preemption_args(owed, on_node, shape=shape, node_cache_capable=node_cache_capable))
    assert answer == {node_name: {"Pods": [{"UID": uid} for uid in uids(on_node[node_name])], "NumPDBViolations": 0}}
    # Once they are gone the pod fits there: they freed enough.
    with runtime.lock:
        for uid in uids(on_node[node_name]):
            runtime.engine.delete_pod(uid)
    filtered = post(client, FILTER, k.extender_args(owed, hived.NODES, node_cache_capable=True)).json()
    assert filtered["NodeNames"] == [node_name]


@EVERY_SHAPE
def test_hived_leaves_out_nodes_where_it_may_reclaim_nothing(hived_served, shape, node_cache_capable):
    client, runtime = hived_served
    on_node = hived_cluster(client, runtime)
    # Opportunistic pods never preempt, and this one is best-effort for FitGpp too.
    late = k.pod("late-0", gpus=8, priority=100, labels={"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic", **BE})
    assert preempt(client, preemption_args(late, on_node, shape=shape, node_cache_capable=node_cache_capable)) == {}
