"""One pod watch per process: with the estimator on, the watch cache lists and watches every pod
once, for the engine (which takes a finished pod as gone) and for the leader's estimator, which
gets the sampling pods (finished ones included: their results) replayed when its term begins,
then every change, and a relist as a replace. The estimator opens no watch of its own."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any, Iterator

import pytest

from estimator.controller import Capacity, EstimatorController
from estimator.objects import Pod
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.reflector import Expired, Reflector
from scheduler.config import EstimatorSettings
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from tests.cluster.test_interchangeable_jobs import WatchingApi, job

FINISHED = ("Succeeded", "Failed")


def ordinary(name: str, *, phase: str = "Running", node: str | None = "n1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "resourceVersion": "5"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": phase},
    }


def stored(created: dict[str, Any], *, version: str = "6", node: str | None = "n1", **status: Any) -> dict[str, Any]:
    """A sampling pod the estimator created, as the API server stores it (a UID, a version) and
    shows it with ``status``."""
    metadata = {**created["metadata"], "uid": f"uid-{created['metadata']['name']}", "resourceVersion": version}
    return {**created, "metadata": metadata, "spec": {**created["spec"], "nodeName": node}, "status": status}


def succeeded(created: dict[str, Any], *, seconds: float, version: str = "6") -> dict[str, Any]:
    """Finished, with the report the workload leaves in its termination message (which only the
    estimator's slice of a pod reads)."""
    iterations = int(created["metadata"]["annotations"]["cellfit.io/sample-iterations"])
    report = json.dumps({"iterations": iterations, "seconds": seconds})
    container = {"name": "train", "state": {"terminated": {"exitCode": 0, "message": report}}}
    return stored(created, version=version, phase="Succeeded", containerStatuses=[container])


class PodWatchingApi(WatchingApi):
    """:class:`WatchingApi` serving pods as the API server's selectors do ("pods": the
    unfinished ones, "all-pods": every one), counting the lists and watches of each kind."""

    def __init__(self, *, jobs: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        super().__init__(jobs)
        self.pods = list(pods)
        self.lists: Counter[str] = Counter()
        self.watches: Counter[str] = Counter()

    def list_raw(self, kind: str, *, limit: int | None = None, continue_token: str | None = None) -> bytes:
        if continue_token is None:  # a list's first page
            self.lists[kind] += 1
        every = self.pods
        if kind == "pods":
            self.pods = [pod for pod in every if pod["status"]["phase"] not in FINISHED]
        try:
            return super().list_raw(kind, limit=limit, continue_token=continue_token)
        finally:
            self.pods = every

    def watch(self, kind: str, *, resource_version: str) -> Iterator[bytes]:
        self.watches[kind] += 1
        return super().watch(kind, resource_version=resource_version)


class PodRecorder:
    """A sampling-pod subscriber that records what it is told, by pod name and phase."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def replace_pods(self, pods: list[Pod]) -> None:
        self.calls.append(("replace", sorted(described(pod) for pod in pods)))

    def apply_pod(self, pod: Pod) -> None:
        self.calls.append(("apply", described(pod)))

    def delete_pod(self, pod: Pod) -> None:
        self.calls.append(("delete", described(pod)))


def described(pod: Pod) -> str:
    return f"{pod.metadata.name}:{pod.status.phase if pod.status else None}"


def cache_of(api: PodWatchingApi, *, estimator: bool = True) -> ClusterCache:
    return ClusterCache(api=api, engine=ResourceFitEngine(), lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                        pods=PodStore(), jobs=None, interchangeable_jobs=estimator)


def estimator_of(api: PodWatchingApi, cache: ClusterCache) -> EstimatorController:
    assert cache.interchangeable is not None
    return EstimatorController(api=api, settings=EstimatorSettings(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                               capacity=lambda: Capacity(cpu_millis=64_000, gpus=64), jobs=cache.interchangeable)


def subscribed(cache: ClusterCache, subscriber: Any) -> None:
    """What the estimator's start() does, without its worker thread."""
    assert cache.interchangeable is not None
    cache.interchangeable.subscribe(subscriber)
    cache.interchangeable.sampling_pods.subscribe(subscriber)


def sampling_pods_of(api: PodWatchingApi) -> list[dict[str, Any]]:
    """The sampling pods a first estimator plans for Job mlp (one pilot: cpu and gpu, long runs)."""
    cache = cache_of(PodWatchingApi(jobs=api.jobs, pods=[]))
    planner = estimator_of(api, cache)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    subscribed(cache, planner)
    planner.reconcile()
    planner._creator.shutdown(wait=True)
    created = sorted(api.created, key=lambda pod: pod["metadata"]["name"])
    assert len(created) == 2
    api.created.clear()
    return created


def both_running() -> tuple[PodWatchingApi, ClusterCache, str, tuple[dict[str, Any], dict[str, Any]]]:
    """A cache that has listed Job mlp and its two sampling pods, both running: the API, the
    cache, the pod list's version and the two pods as created."""
    api = PodWatchingApi(jobs=[job("mlp", interchangeable=True)], pods=[])
    cpu_run, gpu_run = sampling_pods_of(api)
    api.pods = [stored(cpu_run, phase="Running"), stored(gpu_run, phase="Running")]
    cache = cache_of(api)
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    return api, cache, cache.pods._list_and_replace(), (cpu_run, gpu_run)


def sample_states(estimator: EstimatorController) -> dict[str, str]:
    (view,) = estimator.inspect()["jobs"]
    return {row["pod"]: row["state"] for row in view["samples"]}


def test_one_pod_list_and_watch_per_process_serves_the_engine_and_the_estimator():
    api = PodWatchingApi(jobs=[job("mlp", interchangeable=True)], pods=[])
    cpu_run, gpu_run = sampling_pods_of(api)
    api.pods = [
        ordinary("web"),
        ordinary("crashed", phase="Failed", node=None),  # finished before it was bound
        succeeded(cpu_run, seconds=12.0),
        stored(gpu_run, phase="Running"),
    ]
    cache = cache_of(api)
    estimator = estimator_of(api, cache)
    assert cache.jobs is not None
    assert not any(isinstance(value, Reflector) for value in vars(estimator).values()), "no watch of its own"
    subscribed(cache, estimator)
    cache.jobs._list_and_replace()
    assert not estimator.synced  # the sampling pods not replayed yet
    version = cache.pods._list_and_replace()
    assert estimator.synced

    assert api.lists == {"jobs": 1, "all-pods": 1}  # no second list of pods, none of unfinished pods alone
    # The engine holds the unfinished pods; the estimator has its finished run, termination message read.
    assert cache.sizes()["pods"] == 2
    estimator.reconcile()
    assert sample_states(estimator) == {cpu_run["metadata"]["name"]: "succeeded", gpu_run["metadata"]["name"]: "running"}
    assert {pod["metadata"]["name"] for pod in api.created}.isdisjoint(sample_states(estimator))  # no run started twice

    api.play("MODIFIED", succeeded(gpu_run, seconds=30.0, version="7"))
    cache.pods._watch_from(version)
    assert api.watches == {"all-pods": 1} and cache.sizes()["pods"] == 1  # finished: gone for the engine
    estimator.reconcile()
    assert set(sample_states(estimator).values()) == {"succeeded"}


def test_without_the_estimator_the_cache_watches_unfinished_pods_only():
    api = PodWatchingApi(jobs=[], pods=[ordinary("web"), ordinary("done", phase="Succeeded")])
    cache = cache_of(api, estimator=False)
    cache.pods._list_and_replace()
    assert api.lists == {"pods": 1} and cache.sizes()["pods"] == 1


def test_a_new_terms_estimator_is_replayed_the_sampling_pods_then_follows_the_watch():
    api = PodWatchingApi(jobs=[job("mlp", interchangeable=True)], pods=[])
    cpu_run, gpu_run = sampling_pods_of(api)
    cpu, gpu = cpu_run["metadata"]["name"], gpu_run["metadata"]["name"]
    api.pods = [ordinary("web"), stored(cpu_run, phase="Running")]
    cache = cache_of(api)
    assert cache.jobs is not None and cache.interchangeable is not None
    cache.jobs._list_and_replace()
    version = cache.pods._list_and_replace()
    api.play("ADDED", stored(gpu_run, phase="Pending", node=None, version="7"))
    api.play("MODIFIED", succeeded(cpu_run, seconds=12.0, version="8"))
    api.play("MODIFIED", {**ordinary("web"), "metadata": {**ordinary("web")["metadata"], "resourceVersion": "9"}})
    version = cache.pods._watch_from(version)  # while no estimator follows (a standby's cache)

    first = PodRecorder()  # a term beginning now: replayed the watch's current view
    cache.interchangeable.sampling_pods.subscribe(first)
    assert first.calls == [("replace", [f"{cpu}:Succeeded", f"{gpu}:Pending"])]
    leader = estimator_of(api, cache)
    subscribed(cache, leader)
    assert leader.synced
    leader.reconcile()
    assert sample_states(leader) == {cpu: "succeeded", gpu: "pending"}

    # Then every change, in the watch's order; an ordinary pod is not passed on, a pod that no
    # longer carries the label is passed on as deleted (as a label selector's watch said).
    unlabelled = stored(gpu_run, phase="Pending", node=None, version="10")
    unlabelled["metadata"] = {**unlabelled["metadata"], "labels": {"app": "mlp"}}
    api.play("MODIFIED", unlabelled)
    api.play("DELETED", ordinary("web"))
    api.play("DELETED", succeeded(cpu_run, seconds=12.0, version="11"))
    cache.pods._watch_from(version)
    assert first.calls[1:] == [("delete", f"{gpu}:Pending"), ("delete", f"{cpu}:Succeeded")]
    leader.reconcile()
    assert leader.inspect()["jobs"][0]["samples"] == []


def test_a_relist_reaches_the_estimator_as_a_replace():
    """The watch expires (410 Gone) while a sampling pod was deleted and another finished: the
    cache lists again and the estimator gets the list as a replace."""
    api, cache, version, (cpu_run, gpu_run) = both_running()
    cpu, gpu = cpu_run["metadata"]["name"], gpu_run["metadata"]["name"]
    recorder, estimator = PodRecorder(), estimator_of(api, cache)
    assert cache.interchangeable is not None
    cache.interchangeable.sampling_pods.subscribe(recorder)
    subscribed(cache, estimator)
    estimator.reconcile()
    assert sample_states(estimator) == {cpu: "running", gpu: "running"}

    api.pods = [succeeded(cpu_run, seconds=12.0, version="20")]  # gpu's pod deleted while the watch was down
    api.events.append(json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}).encode())
    with pytest.raises(Expired):
        cache.pods._watch_from(version)
    cache.pods._list_and_replace()
    assert recorder.calls == [("replace", [f"{cpu}:Running", f"{gpu}:Running"]), ("replace", [f"{cpu}:Succeeded"])]
    assert api.lists["all-pods"] == 2 and cache.sizes()["pods"] == 0
    estimator.reconcile()
    states = sample_states(estimator)
    assert states[cpu] == "succeeded" and gpu not in states  # the gpu run's pod is gone


def test_a_sampling_pod_whose_run_does_not_read_keeps_its_last_state():
    """A sampling pod the engine reads but whose run (the estimator's slice) does not read is
    logged, and the estimator keeps the last state that did, through the watch and a relist."""
    api, cache, version, (cpu_run, gpu_run) = both_running()
    cpu, gpu = cpu_run["metadata"]["name"], gpu_run["metadata"]["name"]
    estimator = estimator_of(api, cache)
    subscribed(cache, estimator)

    garbled = stored(gpu_run, version="30", phase="Running",
                     containerStatuses=[{"name": "train", "state": {"terminated": {"exitCode": "zero"}}}])
    api.play("MODIFIED", garbled)
    cache.pods._watch_from(version)
    api.pods = [stored(cpu_run, phase="Running"), garbled]
    cache.pods._list_and_replace()
    assert cache.sizes()["pods"] == 2  # the engine reads it
    estimator.reconcile()
    assert sample_states(estimator) == {cpu: "running", gpu: "running"}
