"""The reflector's list-then-watch protocol, driven by scripted list and watch sources: resume
from the last resourceVersion, relist on 410 (both as an ERROR event and as the watch call's
own answer), drop objects that vanished between lists, survive API errors."""

from __future__ import annotations

import json
import threading
import time

import pytest

from scheduler.cluster.reflector import Expired, Reflector
from scheduler.kube import wire


def event(kind: str, name: str, version: str) -> bytes:
    return json.dumps({"type": kind, "object": {"metadata": {"name": name, "resourceVersion": version}}}).encode()


def gone() -> bytes:
    return json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}}).encode()


class Script:
    """Lists and watches answered from queues; the watch blocks when its script runs out."""

    def __init__(self, lists, watches):
        self.lists = list(lists)
        self.watches = list(watches)
        self.watched_from: list[str] = []
        self.idle = threading.Event()

    def list_objects(self):
        item = self.lists.pop(0)
        if isinstance(item, Exception):
            raise item
        version, names = item
        return version, [wire.Node(metadata=wire.ObjectMeta(name=n, resourceVersion=version)) for n in names]

    def watch_lines(self, version):
        self.watched_from.append(version)
        if not self.watches:
            self.idle.set()
            time.sleep(30)
            return
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        yield from step


def run(script: Script) -> tuple[dict[str, str], Reflector]:
    store: dict[str, str] = {}

    def replace(nodes):
        store.clear()
        store.update({n.metadata.name: n.metadata.resourceVersion for n in nodes})

    reflector = Reflector[wire.Node](
        kind="nodes",
        list_objects=script.list_objects,
        watch_lines=script.watch_lines,
        decode_object=wire.NODE_DECODER.decode,
        version_of=lambda n: n.metadata.resourceVersion,
        replace=replace,
        apply=lambda n: store.__setitem__(n.metadata.name, n.metadata.resourceVersion),
        delete=lambda n: store.pop(n.metadata.name, None),
    )
    reflector.start()
    assert script.idle.wait(10), "the reflector never reached the end of its script"
    reflector.stop()
    return store, reflector


def test_list_then_watch_resumes_from_the_last_version():
    script = Script(
        lists=[("10", ["a", "b"])],
        watches=[
            [event("ADDED", "c", "11"), event("MODIFIED", "a", "12"), event("BOOKMARK", "", "15")],
            [event("DELETED", "b", "16")],
        ],
    )
    store, reflector = run(script)
    assert store == {"a": "12", "c": "11"}
    assert script.watched_from[:3] == ["10", "15", "16"]  # bookmarks advance the version too
    assert reflector.synced.is_set() and reflector.relists == 1


def test_a_pod_bookmark_advances_the_version_without_decoding_a_pod():
    # The API sends pod bookmarks with an empty spec ("containers": null), which is no valid Pod.
    bookmark = json.dumps({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
        "metadata": {"resourceVersion": "77", "annotations": {"k8s.io/initial-events-end": "true"}},
        "spec": {"containers": None}, "status": {}}}).encode()
    store: dict[str, str] = {}
    relisted: list[int] = []
    watched: list[str] = []
    done = threading.Event()

    def watch(version):
        watched.append(version)
        if len(watched) == 1:
            yield bookmark
        else:
            done.set()
            time.sleep(30)
            yield from ()

    reflector = Reflector[wire.Pod](
        kind="pods",
        list_objects=lambda: (relisted.append(1) or ("10", [])),
        watch_lines=watch,
        decode_object=wire.POD_DECODER.decode,
        version_of=lambda p: p.metadata.resourceVersion,
        replace=lambda pods: None,
        apply=lambda p: store.__setitem__(p.metadata.name, p.metadata.resourceVersion),
        delete=lambda p: None,
    )
    reflector.start()
    assert done.wait(10)
    reflector.stop()
    assert watched[:2] == ["10", "77"] and len(relisted) == 1


def test_a_410_error_event_relists_and_drops_what_vanished():
    script = Script(
        lists=[("10", ["a", "b"]), ("40", ["a", "z"])],
        watches=[[event("ADDED", "c", "11"), gone()]],
    )
    store, reflector = run(script)
    assert store == {"a": "40", "z": "40"}  # b and c vanished while the watch was gone
    assert reflector.relists == 2 and script.watched_from[-1] == "40"


def test_a_410_answer_to_the_watch_call_relists_too():
    script = Script(lists=[("10", ["a"]), ("20", ["b"])], watches=[Expired()])
    store, reflector = run(script)
    assert store == {"b": "20"} and reflector.relists == 2


def test_api_errors_back_off_and_recover():
    script = Script(lists=[ConnectionError("refused"), ("10", ["a"])], watches=[RuntimeError("stream broke")] + [])
    script.lists.append(("11", ["a", "b"]))
    store, reflector = run(script)
    assert store == {"a": "11", "b": "11"}
    assert reflector.relists == 2


def too_large() -> bytes:
    return json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 504, "reason": "Timeout",
                                                   "message": "Too large resource version: 31, current: 20"}}).encode()


class VersionedScript(Script):
    """:class:`Script` whose lists are asked for at a resourceVersion (``list_from``), recorded."""

    def __init__(self, lists, watches):
        super().__init__(lists, watches)
        self.listed_at: list[str] = []

    def list_from(self, version):
        self.listed_at.append(version)
        return self.list_objects()


def run_versioned(script: VersionedScript) -> Reflector:
    reflector = Reflector[wire.Node](
        kind="nodes", list_from=script.list_from, watch_lines=script.watch_lines, decode_object=wire.NODE_DECODER.decode,
        version_of=lambda n: n.metadata.resourceVersion, replace=lambda nodes: None, apply=lambda n: None, delete=lambda n: None,
    )
    reflector.start()
    assert script.idle.wait(10), "the reflector never reached the end of its script"
    reflector.stop()
    return reflector


def test_the_first_list_is_from_the_watch_cache_and_a_relist_no_older_than_the_version_seen():
    """client-go's relistResourceVersion: "0" first; after the watch's 410 (or any failure), the
    last version seen, which the API server serves no older than that."""
    script = VersionedScript(lists=[("10", ["a"]), ("31", ["a"]), ("40", ["a"])],
                             watches=[[event("ADDED", "b", "30"), event("BOOKMARK", "", "31"), gone()], RuntimeError("stream broke")])
    run_versioned(script)
    assert script.listed_at == ["0", "31", "31"]


def test_a_version_the_list_or_the_watch_is_refused_is_followed_by_a_consistent_list():
    """A list at the version seen answered 410 (compacted, served from etcd), or a watch whose
    API server does not hold it yet (504 "Too large resource version": its cache is behind): the
    next list asks for none, the latest; the one after a list that worked asks for its version."""
    script = VersionedScript(lists=[("10", ["a"]), Expired(), ("50", ["a"]), ("60", ["a"])],
                             watches=[[event("ADDED", "b", "31"), gone()], [too_large()]])
    run_versioned(script)
    assert script.listed_at == ["0", "31", "", ""]


def test_a_reflector_needs_one_way_to_list():
    with pytest.raises(ValueError, match="list_objects or list_from"):
        Reflector[wire.Node](kind="nodes", watch_lines=lambda version: iter(()), decode_object=wire.NODE_DECODER.decode,
                             version_of=lambda n: n.metadata.resourceVersion, replace=lambda nodes: None,
                             apply=lambda n: None, delete=lambda n: None)
