"""One Job watch per process: the watch cache follows every Job for the engine and hands the
interchangeable ones (with ``cellfit.io/configurations``), as the API server's bytes, to the
leader's estimator, which is replayed what the watch holds when its term begins."""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator

from estimator.controller import Capacity, EstimatorController
from estimator.objects import POD_DECODER
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.feed import InterchangeableJobs
from scheduler.config import EstimatorSettings
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.support.api_double import ListingApi

CONFIGURATIONS = json.dumps({"cpu": {"resources": {"cpu": "2"}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}})


def job(name: str, *, interchangeable: bool, version: str = "7") -> dict[str, Any]:
    annotations = {"cellfit.io/preemptions": "1"}
    if interchangeable:
        annotations |= {"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "1000"}
    container = {"name": "train", "image": "train:1", "command": ["python", "train.py"]}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "resourceVersion": version,
                     "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations},
        "spec": {"suspend": True, "parallelism": 1, "completions": 1,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


class WatchingApi(ListingApi):
    """Lists ``jobs``; each watch call plays the lines queued in ``events``, then ends."""

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        super().__init__(nodes=[], jobs=jobs)
        self.events: list[bytes] = []
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []

    def watch(self, kind: str, *, resource_version: str) -> Iterator[bytes]:
        lines, self.events = self.events, []
        return iter(lines)

    def play(self, kind: str, obj: dict[str, Any]) -> None:
        self.events.append(json.dumps({"type": kind, "object": obj}).encode())

    # What the estimator writes: sampling pods created and deleted are recorded, the rest dropped.
    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        self.created.append(pod)

    def delete_pod(self, *, namespace: str, name: str, uid: str) -> None:
        self.deleted.append(name)

    def create_event(self, **_: Any) -> None:
        pass

    def set_job_condition(self, **_: Any) -> None:
        pass

    def annotate_job(self, **_: Any) -> None:
        pass


class Recorder:
    """A subscriber that records what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def replace_jobs(self, jobs: list[bytes]) -> None:
        self.calls.append(("replace", sorted(json.loads(raw)["metadata"]["name"] for raw in jobs)))

    def apply_job(self, job: bytes) -> None:
        self.calls.append(("apply", json.loads(job)["metadata"]["name"]))

    def forget_job(self, uid: str) -> None:
        self.calls.append(("forget", uid))

    def delete_job(self, uid: str) -> None:
        self.calls.append(("delete", uid))


def watched(api: WatchingApi, *, engine: FitGppEngine | None = None) -> ClusterCache:
    cache = ClusterCache(api=api, engine=engine or ResourceFitEngine(), lock=threading.RLock(),  # type: ignore[arg-type]
                         gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine, interchangeable_jobs=True)
    assert cache.jobs is not None and cache.interchangeable is not None
    return cache


def test_one_job_watch_feeds_the_engine_every_job_and_the_estimator_the_interchangeable_ones():
    api = WatchingApi([job("plain", interchangeable=False), job("mlp", interchangeable=True)])
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = watched(api, engine=engine)
    assert cache.jobs is not None and cache.interchangeable is not None
    early = Recorder()
    cache.interchangeable.subscribe(early)  # before the first list: the list is its first call
    assert early.calls == []
    version = cache.jobs._list_and_replace()
    assert early.calls == [("replace", ["mlp"])]
    assert engine.preemptions_of_job("uid-plain") == 1 and engine.preemptions_of_job("uid-mlp") == 1
    assert cache.sizes()["jobs"] == 2 and len(cache.interchangeable) == 1

    late = Recorder()  # a term beginning after the watch synced: replayed what it holds
    cache.interchangeable.subscribe(late)
    assert late.calls == [("replace", ["mlp"])]

    api.play("ADDED", job("bert", interchangeable=True, version="8"))
    api.play("MODIFIED", job("plain", interchangeable=False, version="9"))  # not interchangeable: not passed on
    api.play("MODIFIED", job("mlp", interchangeable=False, version="10"))  # lost its configurations
    api.play("DELETED", job("bert", interchangeable=True, version="11"))
    api.play("DELETED", job("plain", interchangeable=False, version="12"))
    assert cache.jobs._watch_from(version) == "12"
    # Every deletion is passed on (an ordinary Job may still own sampling pods from before).
    told = [("apply", "bert"), ("forget", "uid-mlp"), ("delete", "uid-bert"), ("delete", "uid-plain")]
    assert early.calls[1:] == told and late.calls[1:] == told
    assert engine.preemptions_of_job("uid-plain") == 0 and cache.sizes()["jobs"] == 1  # mlp, still a Job

    cache.interchangeable.unsubscribe(late)
    api.play("ADDED", job("gpt", interchangeable=True, version="13"))
    cache.jobs._watch_from("12")
    assert late.calls[-1] == ("delete", "uid-plain") and early.calls[-1] == ("apply", "gpt")


def test_a_relist_replaces_what_the_subscriber_holds():
    api = WatchingApi([job("a", interchangeable=True), job("b", interchangeable=True)])
    cache = watched(api)
    assert cache.jobs is not None and cache.interchangeable is not None
    cache.jobs._list_and_replace()
    recorder = Recorder()
    cache.interchangeable.subscribe(recorder)
    api.jobs = [job("b", interchangeable=True), job("c", interchangeable=False)]  # a deleted while the watch was down
    cache.jobs._list_and_replace()
    # a's deletion is passed on (its sampling pods go), then the list
    assert recorder.calls == [("replace", ["a", "b"]), ("delete", "uid-a"), ("replace", ["b"])]


def test_the_estimator_follows_the_jobs_through_the_cache_and_starts_sampling():
    """The estimator has no Job watch of its own: subscribed to the cache's, it reads the Job
    (pod template included) and plans its sampling pods; a Job losing its configurations is
    forgotten, its pods kept; a deletion stops its sampling pods."""
    api = WatchingApi([job("mlp", interchangeable=True), job("plain", interchangeable=False)])
    cache = watched(api)
    assert cache.jobs is not None and cache.interchangeable is not None
    created = api.created
    estimator = EstimatorController(api=api, settings=EstimatorSettings(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                                    capacity=lambda: Capacity(cpu_millis=64_000, gpus=8), jobs=cache.interchangeable)
    version = cache.jobs._list_and_replace()
    cache.interchangeable.subscribe(estimator)  # what start() does, without its threads
    assert [j.metadata.name for j in estimator.interchangeable_jobs()] == ["mlp"]
    estimator.reconcile()
    assert created and {pod["metadata"]["labels"]["cellfit.io/sample-job"] for pod in created} == {"uid-mlp"}
    assert all(pod["spec"]["containers"][0]["image"] == "train:1" for pod in created)  # the template, read whole

    # Its sampling pods as the watch cache passes them on to the estimator (pending).
    estimator._replace_pods([POD_DECODER.decode(json.dumps({**pod, "status": {"phase": "Pending"}}).encode()) for pod in created])
    deleted = api.deleted
    api.play("MODIFIED", job("mlp", interchangeable=False, version="20"))  # configurations removed: forgotten, pods kept
    api.play("MODIFIED", job("mlp", interchangeable=True, version="21"))
    version = cache.jobs._watch_from(version)
    assert [j.metadata.name for j in estimator.interchangeable_jobs()] == ["mlp"] and deleted == []
    api.play("DELETED", job("mlp", interchangeable=True, version="22"))
    cache.jobs._watch_from(version)
    assert estimator.interchangeable_jobs() == [] and estimator.inspect()["jobs"] == []
    estimator._creator.shutdown(wait=True)  # the deletions go out from its pool, off the watch's thread
    assert sorted(deleted) == sorted(pod["metadata"]["name"] for pod in created)
    cache.interchangeable.unsubscribe(estimator)


def test_a_job_the_estimator_cannot_read_is_skipped_and_the_others_count():
    feed = InterchangeableJobs()
    estimator = EstimatorController(api=ListingApi(nodes=[]), settings=EstimatorSettings(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                                    capacity=lambda: Capacity(cpu_millis=64_000, gpus=8), jobs=feed)
    unreadable = job("broken", interchangeable=True)
    unreadable["spec"]["parallelism"] = "many"
    feed.replace({"uid-broken": json.dumps(unreadable).encode(), "uid-ok": json.dumps(job("ok", interchangeable=True)).encode()})
    feed.subscribe(estimator)
    assert [j.metadata.name for j in estimator.interchangeable_jobs()] == ["ok"] and estimator._jobs_listed.is_set()


class Raising(Recorder):
    def apply_job(self, job: bytes) -> None:
        raise RuntimeError("a defect in the subscriber")


def test_a_subscriber_defect_does_not_cost_the_engine_its_job_watch():
    """Found by review: the subscribers run on the watch that feeds the engine its Jobs; one that
    raises is logged, and the watch, the engine and the other subscribers go on."""
    api = WatchingApi([])
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = watched(api, engine=engine)
    assert cache.jobs is not None and cache.interchangeable is not None
    version = cache.jobs._list_and_replace()
    cache.interchangeable.subscribe(Raising())
    recorder = Recorder()
    cache.interchangeable.subscribe(recorder)
    api.play("ADDED", job("mlp", interchangeable=True, version="8"))
    plain = job("plain", interchangeable=False, version="9")
    plain["metadata"]["annotations"]["cellfit.io/preemptions"] = "3"
    api.play("ADDED", plain)
    assert cache.jobs._watch_from(version) == "9"
    assert engine.preemptions_of_job("uid-plain") == 3 and recorder.calls[-1] == ("apply", "mlp")


def test_a_job_deleted_after_losing_its_configurations_has_its_sampling_pods_deleted():
    """Found by review: the estimator deletes the sampling pods of a deleted Job even when the
    Job had lost its configurations before (garbage collection does not, with an orphaning
    deletion)."""
    api = WatchingApi([job("mlp", interchangeable=True)])
    cache = watched(api)
    assert cache.jobs is not None and cache.interchangeable is not None
    created, deleted = api.created, api.deleted
    estimator = EstimatorController(api=api, settings=EstimatorSettings(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                                    capacity=lambda: Capacity(cpu_millis=64_000, gpus=8), jobs=cache.interchangeable)
    version = cache.jobs._list_and_replace()
    cache.interchangeable.subscribe(estimator)
    estimator.reconcile()
    assert created
    estimator._replace_pods([POD_DECODER.decode(json.dumps({**pod, "status": {"phase": "Running"}}).encode()) for pod in created])
    api.play("MODIFIED", job("mlp", interchangeable=False, version="20"))
    api.play("DELETED", job("mlp", interchangeable=False, version="21"))
    cache.jobs._watch_from(version)
    estimator._creator.shutdown(wait=True)
    assert sorted(deleted) == sorted(pod["metadata"]["name"] for pod in created)


def test_a_job_deleted_while_the_watch_was_down_has_its_sampling_pods_deleted():
    """Found by review: a relist that no longer lists a Job passes its deletion on, as the watch
    would have, so the estimator deletes its sampling pods (an orphaning delete leaves them)."""
    api = WatchingApi([job("mlp", interchangeable=True)])
    cache = watched(api)
    assert cache.jobs is not None and cache.interchangeable is not None
    estimator = EstimatorController(api=api, settings=EstimatorSettings(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                                    capacity=lambda: Capacity(cpu_millis=64_000, gpus=8), jobs=cache.interchangeable)
    cache.jobs._list_and_replace()
    cache.interchangeable.subscribe(estimator)
    estimator.reconcile()
    assert api.created
    estimator._replace_pods([POD_DECODER.decode(json.dumps({**pod, "status": {"phase": "Running"}}).encode()) for pod in api.created])
    api.jobs = []
    cache.jobs._list_and_replace()
    estimator._creator.shutdown(wait=True)
    assert sorted(api.deleted) == sorted(pod["metadata"]["name"] for pod in api.created)
