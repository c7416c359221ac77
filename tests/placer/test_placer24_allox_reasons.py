"""What a Job AlloX starts on its slower kind reads (user24's live session): a Job whose GPU
configuration no VC of HiveD's can run (an unknown VC, or opportunistic pods) is told that, not
that others' pods held every GPU (F10); the plural of "GPU of virtual cluster 'a'" (F4); a running
Job whose node was deleted is told its pods wait to be placed again, not that they run outside
allox.nodeSelector (F12). A real
HivedEngine behind the controller, the Jobs from the API's JSON."""

from __future__ import annotations

import json
import threading
from typing import Any

from estimator.objects import JOB_DECODER
from placer.holding import JobPods
from scheduler.cluster.cache import ClusterCache
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.cells import HivedEngine
from scheduler.core.resources import Resources
from tests.cells.helpers import rack_cluster
from tests.placer.test_controller import CONFIGURATIONS, RecordingApi, job
from tests.placer.test_guarantee import NODES
from tests.placer.test_holding import placer_with
from tests.placer.test_review_user21_what_users_read import hived_placer, placed
from tests.support.api_double import ListingApi
from tests.support.kube_objects import node, pod


def vc_job(name: str, labels: dict[str, str], *, cpu: float = 60, gpu: float = 10, created: int = 0) -> Any:
    annotations = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": cpu}, "gpu": {"seconds": gpu}})}
    body = {"metadata": {"name": name, "namespace": "bad", "uid": f"uid-{name}", "annotations": annotations,
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z"},
            "spec": {"suspend": True, "template": {"metadata": {"labels": labels},
                                                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def two_vcs() -> HivedEngine:
    return HivedEngine.from_config(rack_cluster(1, 2, vcs={"a": [{"cellType": "V100-NODE", "count": 1}],
                                                           "b": [{"cellType": "V100-NODE", "count": 1}]}))


IDLE = {name: Resources(cpu_millis=64000, memory_bytes=2**38, gpus=8) for name in NODES}  # every GPU free


def test_a_job_of_an_unknown_vc_started_on_cpu_is_told_its_vc_is_unknown() -> None:
    api = RecordingApi()
    hived_placer(api, two_vcs(), [vc_job("ij-z", {"cellfit.io/virtual-cluster": "team-z"})], free=IDLE).admit()
    assert placed(api)["ij-z"] == (
        "started on cpu: AlloX chose cpu (estimated 60 s; gpu 10 s) because AlloX starts no GPU configuration of it: "
        "cellfit.io/virtual-cluster 'team-z' of its pod template is no virtual cluster HiveD knows (a, b): label it with one of them")


def test_an_opportunistic_job_started_on_cpu_is_told_allox_gives_opportunistic_pods_no_gpu() -> None:
    api = RecordingApi()
    labels = {"cellfit.io/virtual-cluster": "b", "cellfit.io/priority": "opportunistic"}
    hived_placer(api, two_vcs(), [vc_job("ij-opp", labels)], free=IDLE).admit()
    message = placed(api)["ij-opp"]
    assert message.startswith("started on cpu: AlloX chose cpu (estimated 60 s; gpu 10 s) because AlloX starts no GPU "
                              "configuration of it: its pods are opportunistic (cellfit.io/priority: opportunistic)")
    assert "held every one" not in message


def test_a_job_whose_vcs_free_gpus_went_to_others_reads_them_in_the_plural() -> None:
    # VC a's 8 GPUs go to eight Jobs that gain more from them than the ninth.
    api = RecordingApi()
    fast = [vc_job(f"fast-{i}", {"cellfit.io/virtual-cluster": "a"}, cpu=1000, gpu=10, created=i) for i in range(8)]
    slow = vc_job("slow", {"cellfit.io/virtual-cluster": "a"}, cpu=50, gpu=40, created=9)
    hived_placer(api, two_vcs(), [*fast, slow], free=IDLE).admit()
    assert placed(api)["slow"].startswith(
        "started on cpu: AlloX chose cpu (estimated 50 s; gpu 40 s) because the 8 free GPUs of virtual cluster 'a' went to other Jobs")


# ------------------------------------------------------------------ F12: its node deleted


def test_a_running_jobs_pod_on_a_deleted_node_is_waiting_to_be_placed_again_not_outside_the_pool() -> None:
    # c ran on cpu-1 (AlloX's node, no allox.nodeSelector); cpu-1 was deleted: its pod, still
    # naming cpu-1, runs nowhere, and the pod the Job controller makes for it waits to be placed.
    cache = cache_of(nodes=[node("cpu-2", gpus=0)], pods=[pod("c-old", uid="p1", node_name="cpu-1", phase="Running", job_uid="uid-c")])
    api = RecordingApi()
    jobs = [job("c", gpu=3000, cpu=9000, suspend=False, placement="cpu", started="2025-12-31T23:20:00Z")]
    placer = placer_with(api, jobs, {"uid-c": JobPods(here=1)})
    placer.admit()  # bound on AlloX's node: holds its slot, told nothing
    assert not [c for name, c in api.conditions if name == "c"]
    placer._job_pods = lambda owners: cache.job_pods(owners, None)
    placer.admit()
    placer._job_pods = lambda owners: {"uid-c": JobPods(unbound=1)}  # PodGC took the old pod; its replacement is pending
    placer.admit()
    told = [(c["reason"], c["message"]) for name, c in api.conditions if name == "c"]
    assert told == [("NotBound", "its pods are waiting to be placed again (their node was deleted, or they were replaced), none "
                                 "bound to a node now: AlloX keeps no cpu machine for it until one is bound")]


def test_a_job_told_its_pods_run_outside_the_pool_is_told_again_when_they_wait_to_be_placed() -> None:
    # Unsuspended by its user (no cellfit.io/placement): told, never suspended again.
    api = RecordingApi()
    jobs = [job("c", gpu=3000, cpu=9000, suspend=False, started="2025-12-31T23:20:00Z")]
    placer = placer_with(api, jobs, {"uid-c": JobPods(elsewhere=1)})
    placer.admit()
    placer._job_pods = lambda owners: {"uid-c": JobPods(unbound=1)}
    placer.admit()
    told = [c["reason"] for name, c in api.conditions if name == "c"]
    assert told == ["PodsElsewhere", "NotBound"]


def cache_of(*, nodes: list[Any], pods: list[Any]) -> ClusterCache:
    cache = ClusterCache(api=ListingApi(nodes=nodes, pods=pods), engine=ResourceFitEngine(), lock=threading.RLock(),  # type: ignore[arg-type]
                         gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=None)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    return cache
