"""A watch that answers with nothing but an ERROR line, as kube-apiserver answers a watch from a
version its watch cache no longer holds (a 200 stream whose first line is ERROR 410 "too old
resource version"): the reflector waits between lists, as it does when the 410 is the watch
call's own answer. The reflector runs in the test's thread, its stop event answering each wait
at once and recording it: the waits are counted, never timed."""

from __future__ import annotations

import itertools
import json
from typing import Any, Iterator

import pytest

from scheduler.cluster.reflector import Reflector
from scheduler.kube import wire
from tests.cluster.test_review_67 import RecordedStop

LISTS = 8


def error_line(code: int, message: str) -> bytes:
    return json.dumps({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                   "code": code, "message": message}}).encode()


def added(name: str, version: str) -> bytes:
    return json.dumps({"type": "ADDED", "object": {"metadata": {"name": name, "resourceVersion": version}}}).encode()


def waits_over_lists(first_lines: list[bytes], *, lists: int = LISTS) -> list[float]:
    """Run a reflector whose every list answers version 5 and every watch sends ``first_lines``
    and ends, for ``lists`` lists; the waits it made."""
    stop = RecordedStop()
    listing = itertools.count(1)

    def list_objects() -> tuple[str, list[Any]]:
        if next(listing) == lists:  # the last list: the reflector ends after its watch
            stop.set()
        return "5", []

    def watch(version: str) -> Iterator[bytes]:
        yield from first_lines

    reflector = Reflector[wire.Node](
        kind="nodes", list_objects=list_objects, watch_lines=watch, decode_object=wire.NODE_DECODER.decode,
        version_of=lambda node: node.metadata.resourceVersion, replace=lambda nodes: None,
        apply=lambda node: None, delete=lambda node: None,
    )
    reflector._stop = stop
    reflector._run()
    return stop.waits


@pytest.mark.parametrize("line", [
    error_line(410, "too old resource version: 5 (7)"),
    error_line(500, "etcdserver: request timed out"),
], ids=["expired at the list's own version", "internal error"])
def test_a_watch_whose_only_line_is_an_error_backs_off_between_lists(line: bytes) -> None:
    """The ERROR line counted as the watch delivering something: the backoff started over on it
    and an expiry relisted at once, so a watch cache behind the list's version had every pending
    pod listed some 10,000 times a second."""
    waits = waits_over_lists([line])
    assert len(waits) >= LISTS - 2
    assert waits == sorted(waits) and waits[-1] >= 8 * waits[0]


def test_an_expiry_after_an_event_relists_at_once() -> None:
    """A watch that delivered an event and then expired has caught up past the list: relisting at
    once is right, and the backoff is back at its start."""
    waits = waits_over_lists([added("a", "6"), error_line(410, "too old resource version: 6 (9)")])
    assert waits == []
