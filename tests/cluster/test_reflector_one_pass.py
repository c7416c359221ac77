"""The reflector's one-pass decoding of watch events (event and object read together), as the
watch cache builds it: the same outcome as decoding the event and then its object, including
for the lines whose object is no valid object of the kind (ERROR's Status, BOOKMARK's stub),
which a permissive struct such as Job's could otherwise read as an empty object."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

import msgspec
import pytest

from scheduler.cluster.reflector import Reflector
from scheduler.kube import wire


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


def job(name: str, version: str, parallelism: int = 1) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": version},
            "spec": {"parallelism": parallelism, "template": {"spec": {"containers": [{"name": "c"}]}}}}


GONE = line("ERROR", {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "too old resource version", "reason": "Expired", "code": 410})


def follow(decoder: msgspec.json.Decoder, lists: list[tuple[str, list[Any]]], watches: list[list[bytes]],
           *, one_pass: bool) -> tuple[dict[str, Any], list[str], list[str]]:
    """Runs a reflector over scripted lists and watches; returns the store by name, the versions
    each watch started from, and the order of callbacks."""
    store: dict[str, Any] = {}
    watched: list[str] = []
    calls: list[str] = []
    done = threading.Event()
    lists = list(lists)
    watches = list(watches)

    def list_objects() -> tuple[str, list[Any]]:
        version, items = lists.pop(0)
        return version, [decoder.decode(json.dumps(item)) for item in items]

    def watch(version: str):  # type: ignore[no-untyped-def]
        watched.append(version)
        if not watches:
            done.set()
            time.sleep(30)
            return
        yield from watches.pop(0)

    def replace(objects: list[Any]) -> None:
        calls.append("replace")
        store.clear()
        store.update((o.metadata.name, o) for o in objects)

    def recorded(name: str, action: Callable[[Any], None]) -> Callable[[Any], None]:
        def call(obj: Any) -> None:
            calls.append(f"{name} {obj.metadata.name}")
            action(obj)
        return call

    reflector = Reflector[Any](
        kind="test",
        list_objects=list_objects,
        watch_lines=watch,
        decode_object=decoder.decode,
        version_of=lambda o: o.metadata.resourceVersion,
        replace=replace,
        apply=recorded("apply", lambda o: store.__setitem__(o.metadata.name, o)),
        delete=recorded("delete", lambda o: store.pop(o.metadata.name, None)),
        decode_event=msgspec.json.Decoder(wire.ObjectEvent[decoder.type]).decode if one_pass else None,
    )
    reflector.start()
    assert done.wait(10), "the reflector never reached the end of its script"
    reflector.stop()
    return store, watched, calls


@pytest.mark.parametrize("one_pass", [False, True], ids=["two passes", "one pass"])
def test_a_410_among_job_events_relists_rather_than_applying_an_empty_job(one_pass: bool) -> None:
    store, watched, calls = follow(
        wire.JOB_DECODER,
        lists=[("10", [job("a", "10")]), ("40", [job("z", "40")])],
        watches=[[line("ADDED", job("b", "11", parallelism=4)), line("MODIFIED", job("a", "12")), GONE]],
        one_pass=one_pass,
    )
    assert calls == ["replace", "apply b", "apply a", "replace"]
    assert sorted(store) == ["z"] and watched == ["10", "40"]


@pytest.mark.parametrize("one_pass", [False, True], ids=["two passes", "one pass"])
def test_pod_events_and_a_pod_bookmark(one_pass: bool) -> None:
    pod = {"metadata": {"name": "p", "namespace": "ml", "uid": "u", "resourceVersion": "11"},
           "spec": {"nodeName": "gpu-a", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    bookmark = line("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "77"},
                                 "spec": {"containers": None}, "status": {}})
    deleted = {**pod, "metadata": {**pod["metadata"], "resourceVersion": "80"}}
    store, watched, calls = follow(
        wire.POD_DECODER, lists=[("10", [])], watches=[[line("ADDED", pod), bookmark], [line("DELETED", deleted)]],
        one_pass=one_pass,
    )
    assert calls == ["replace", "apply p", "delete p"]
    assert watched == ["10", "77", "80"] and store == {}


def test_one_pass_reads_the_same_pod_as_two() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ml", "uid": "u", "resourceVersion": "11", "labels": {"a": "b"},
                        "annotations": {"cellfit.io/bind-info": "{}"}, "managedFields": [{"manager": "kubectl"}]},
           "spec": {"nodeName": "gpu-a", "priority": 5, "containers": [{"name": "c", "image": "x",
                    "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}}]},
           "status": {"phase": "Running"}}
    raw = line("MODIFIED", pod)
    one = msgspec.json.Decoder(wire.ObjectEvent[wire.Pod]).decode(raw)
    two = wire.POD_DECODER.decode(wire.WATCH_EVENT_DECODER.decode(raw).object)
    assert one.type == "MODIFIED" and one.object == two
