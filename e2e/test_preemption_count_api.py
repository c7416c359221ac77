"""A victim Job's preemption count as the API server takes cellfit's write of it: raised, never
lowered, and a JSON Patch whose resourceVersion test fails answered HTTP 422 (the status the
write reads as "another writer came first"). Against the local control plane's kube-apiserver,
with an admin kubeconfig: the chart's RBAC for the read is checked by test_scenarios' preemption,
which runs under the chart's ServiceAccount."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.cache import ClusterCache
from scheduler.config import ClusterSettings
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, PodInfo
from scheduler.core.pods import PodStore
from scheduler.core.resources import Resources
from scheduler.errors import KubernetesApiError

pytestmark = pytest.mark.e2e
ANNOTATION = "cellfit.io/preemptions"


def suspended_job(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    }


def count_written(cache: ClusterCache, job: JobInfo, count: int) -> None:
    victim = PodInfo(uid=f"{job.uid}-0", namespace=job.namespace, name=f"{job.name}-0", requests=Resources(1000, 2**30, 1), node_name="n1")
    cache.record_preemption(preemptor=victim, preemptor_messages=[], victims=[], victim_message="", job_counts=[(job, count)])


def test_the_count_is_raised_never_lowered_and_a_stale_write_is_refused(control_plane: Any) -> None:
    ns = control_plane.create_namespace("count")
    control_plane.apply(suspended_job("be", {ANNOTATION: "3"}), namespace=ns)
    control_plane.apply(suspended_job("fresh", {}), namespace=ns)
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(control_plane.kubeconfig)))
    assert api is not None

    def job(name: str) -> JobInfo:
        stored = api.get_job(namespace=ns, name=name)
        assert stored is not None
        return JobInfo(uid=stored.metadata.uid, namespace=ns, name=name)

    def annotations(name: str) -> dict[str, str]:
        stored = api.get_job(namespace=ns, name=name)
        assert stored is not None
        return stored.metadata.annotations or {}

    cache = ClusterCache(api=api, engine=ResourceFitEngine(), lock=threading.RLock(), gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=None)
    count_written(cache, job("be"), 2)  # an older leader's count, written last
    count_written(cache, job("be"), 5)
    count_written(cache, job("fresh"), 1)
    count_written(cache, JobInfo(uid="not-this-job", namespace=ns, name="fresh"), 7)  # a Job by that name since deleted
    cache._writes.shutdown(wait=True)  # the background writes, done
    assert annotations("be")[ANNOTATION] == "5"
    assert annotations("fresh")[ANNOTATION] == "1"

    with pytest.raises(KubernetesApiError) as refused:
        api.patch_job(namespace=ns, name="be", operations=[
            {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
            {"op": "add", "path": "/metadata/annotations/cellfit.io~1preemptions", "value": "9"},
        ])
    assert refused.value.status == 422
    assert annotations("be")[ANNOTATION] == "5"
