"""``kubectl cellfit why`` after a preemption kube-scheduler alone recorded: its ``Preempted``
Event names the preemptor only by UID ("Preempted by pod 1e844d1f-... on node gpu-node-2"), and
``why`` repeated it ("preempted 1 time, last by pod 1e844d1f-..."). Now the UID is looked up among
the pods the user may list (the victim's namespace, then every namespace) and said as ns/name;
when it cannot be, the UID stays and the answer says why.

The API server is test_cli's double (kube-apiserver's paths and Status bodies, the service proxy
forwarding to a real cellfit inspect listener)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from scheduler.kubectl import cli
from tests.kubectl.test_cli import ApiServer, config, inspect_url, status
from tests.kubectl.test_review_71 import T0, event

__all__ = ["config", "inspect_url"]  # test_cli's fixtures: a kubeconfig (alice, namespace ml), a real HiveD inspect listener

UID = "1e844d1f-7735-4253-9934-681a0eb57d7f"
PREEMPTED = f"Preempted by pod {UID} on node gpu-node-2"


@pytest.fixture
def apiserver(inspect_url: str) -> Iterator[ApiServer]:
    server = ApiServer(inspect_url)
    server.routes["/apis/batch/v1/namespaces/ml/jobs/opp"] = (200, {
        "metadata": {"name": "opp", "namespace": "ml", "uid": "job-uid", "annotations": {"cellfit.io/preemptions": "1"}},
        "spec": {}, "status": {}})
    server.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [event("Preempted", PREEMPTED, pod="opp-x7k2q", uid="victim-uid")]})
    yield server
    server.close()


def pod(namespace: str, name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid, "creationTimestamp": T0},
            "spec": {"schedulerName": "cellfit", "nodeName": "gpu-node-2"}, "status": {"phase": "Running"}}


def forbidden(what: str) -> tuple[int, Any]:
    return 403, status(403, "Forbidden", f'pods is forbidden: User "alice" cannot list resource "pods" {what}')


def why() -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(cli.run(["why", "job/opp", "-o", "json"]))
    return answer


def test_a_preemptor_of_the_same_namespace_is_named(config: Path, apiserver: ApiServer) -> None:
    apiserver.routes["/api/v1/namespaces/ml/pods"] = (200, {"items": [pod("ml", "trial-0", UID), pod("ml", "other", "u2")]})
    answer = why()
    assert answer["summary"].startswith("preempted 1 time, last by ml/trial-0 on node gpu-node-2; now "), answer
    assert answer["details"][0] == f"ml/opp-x7k2q preempted by ml/trial-0 on node gpu-node-2 at {T0}"
    assert UID not in json.dumps(answer)


def test_a_preemptor_of_another_namespace_the_user_may_list_is_named(config: Path, apiserver: ApiServer) -> None:
    apiserver.routes["/api/v1/namespaces/ml/pods"] = (200, {"items": []})
    apiserver.routes["/api/v1/pods"] = (200, {"items": [pod("team-b", "trial-0", UID)]})
    assert why()["summary"].startswith("preempted 1 time, last by team-b/trial-0 on node gpu-node-2; now ")


def test_a_preemptor_elsewhere_the_user_may_not_list_stays_a_uid_and_says_why(config: Path, apiserver: ApiServer) -> None:
    apiserver.routes["/api/v1/namespaces/ml/pods"] = (200, {"items": []})
    apiserver.routes["/api/v1/pods"] = forbidden("at the cluster scope")
    answer = why()
    assert answer["summary"].startswith(f"preempted 1 time, last by pod {UID} on node gpu-node-2; now "), answer
    assert answer["details"][0] == (
        f"ml/opp-x7k2q preempted by pod {UID} on node gpu-node-2 at {T0} (kube-scheduler's Preempted Event names its "
        "preemptor only by its UID, and no pod of namespace ml has it: a pod of another namespace, whose pods you may "
        "not list, or one gone since)")


def test_a_preemptor_gone_since_stays_a_uid_and_says_so(config: Path, apiserver: ApiServer) -> None:
    apiserver.routes["/api/v1/namespaces/ml/pods"] = (200, {"items": []})
    apiserver.routes["/api/v1/pods"] = (200, {"items": [pod("team-b", "trial-1", "u3")]})
    answer = why()
    assert answer["summary"].startswith(f"preempted 1 time, last by pod {UID} on node gpu-node-2; now ")
    assert answer["details"][0].endswith("(kube-scheduler's Preempted Event names its preemptor only by its UID, and no pod "
                                         "has that UID now: it is gone)")
