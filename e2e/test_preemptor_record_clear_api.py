"""A preemptor's record (``cellfit.io/preemptor-hold``) as the API server takes cellfit's clearing
of it when the hold it stood for ended (scheduler/cluster/preemptor_records.py): the JSON Patch of
the pod's status subresource takes the annotation off while the pod carries exactly that record,
and is refused, changing nothing, for a pod that carries another record or none, or a pod
re-created under the name. Against the local control plane's kube-apiserver, with an admin
kubeconfig (as e2e/test_preemption_count_api.py): the statuses the clearing reads as "not this
record" (422 for a failed ``test``, 404 for a pod gone) are the server's, not a double's."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.preemptor_records import clear_preemptor_record
from scheduler.config import ClusterSettings
from scheduler.core.model import PodInfo

pytestmark = pytest.mark.e2e
RECORD_KEY = "cellfit.io/preemptor-hold"
RECORD = '{"node":"gpu-node-0","victims":["uid-victim"]}'
LATER = '{"node":"gpu-node-1","victims":["uid-other"]}'


def pending_pod(name: str, record: str) -> dict[str, Any]:
    """A pod no scheduler serves: it stays pending, as a preemptor waiting for its room does."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {RECORD_KEY: record}},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]},
    }


def test_the_record_is_cleared_only_off_the_pod_that_carries_exactly_it(control_plane: Any) -> None:
    ns = control_plane.create_namespace("record-clear")
    control_plane.apply(pending_pod("te", RECORD), namespace=ns)
    control_plane.apply(pending_pod("later", LATER), namespace=ns)
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(control_plane.kubeconfig)))
    assert api is not None

    def shown(name: str) -> PodInfo:
        stored = control_plane.kubectl_json("-n", ns, "get", "pod", name)
        return PodInfo(uid=stored["metadata"]["uid"], namespace=ns, name=name)

    def records(name: str) -> dict[str, str]:
        annotations: dict[str, str] = control_plane.kubectl_json("-n", ns, "get", "pod", name)["metadata"].get("annotations") or {}
        return {key: value for key, value in annotations.items() if key == RECORD_KEY}

    te, later = shown("te"), shown("later")
    assert clear_preemptor_record(api, pod=later, record=RECORD) is False  # a later record: left alone
    assert records("later") == {RECORD_KEY: LATER}
    reborn = PodInfo(uid="uid-of-an-earlier-te", namespace=ns, name="te")
    assert clear_preemptor_record(api, pod=reborn, record=RECORD) is False  # another pod by the name
    assert records("te") == {RECORD_KEY: RECORD}

    assert clear_preemptor_record(api, pod=te, record=RECORD) is True
    assert records("te") == {}
    assert clear_preemptor_record(api, pod=te, record=RECORD) is False  # none left to clear
    gone = PodInfo(uid="uid-gone", namespace=ns, name="never-made")
    assert clear_preemptor_record(api, pod=gone, record=RECORD) is False
