"""The clears of bound pods' reclaim-booking records (df47554) come after the round's due
deletions, at most CLEARS_PER_ROUND a round, and a clear refused for ever is warned of once per
pod and tried again after a back-off (review28 on df47554).

Before, every clear ran first, one status PATCH each: on the first round after the upgrade to
df47554 (or after a leader that could not write for a while) every bound pod the reclaim ever
booked for carried its record, and with 300 of them at 15 ms a PATCH a due deletion came 4.6 s
later, nearly a round's period; and a clear refused for ever (a third-party webhook) warned every
round for every such pod. On tests/cluster/test_stranded.py's cluster (the real HivedEngine)."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import pytest

from scheduler.cluster import reclaim as reclaim_module
from scheduler.constants import ANNOTATION_RECLAIM_BOOKING
from scheduler.errors import KubernetesApiError
from tests.cells.helpers import pod
from tests.cluster.test_stranded import AFTER, Cluster, ClusterApi

OLD = '{"node":"n-old","gpuIndices":[0]}'
NOT_CLEARED = "the reclaim's record of cells given back was not cleared from the pod"


class RefusingApi(ClusterApi):
    """Refuses the record writes on the pods named in ``refuse`` (a webhook denying them), and
    counts the tries per pod."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.refuse: set[str] = set()
        self.tries: dict[str, int] = {}

    def write_path(self, method: str, path: str, body: Any, *, content_type: str = "application/json") -> bytes:
        name = path.split("/")[-2]
        if "status" not in body:
            self.tries[name] = self.tries.get(name, 0) + 1
            if name in self.refuse:
                raise KubernetesApiError(f"patch pod ns/{name}: HTTP 403 denied by webhook", status=403)
        return super().write_path(method, path, body, content_type=content_type)


def carrying_old_records(cluster: Cluster, count: int) -> list[str]:
    """``count`` pods bound before the upgrade, each carrying the record an older leader left."""
    names = [f"old-{i}" for i in range(count)]
    for name in names:
        cluster.pods.record(msgspec.structs.replace(pod(name, 1, "a"), node_name=f"elsewhere-{name}", phase="Running",
                                                    annotations={ANNOTATION_RECLAIM_BOOKING: OLD}))
    return names


def refused_for_ever() -> tuple[Cluster, RefusingApi, str]:
    """The cluster with one bound pod carrying an old record, whose clear a webhook refuses."""
    cluster = Cluster()
    api = RefusingApi()
    api.pending = cluster.api.pending
    cluster.api = api
    cluster.controller._api = api
    cluster.controller._records._api = api
    (name,) = carrying_old_records(cluster, 1)
    api.refuse.add(name)
    return cluster, api, name


def cleared(cluster: Cluster) -> set[str]:
    return {name for name, record in cluster.api.records if record is None}


def test_the_due_deletion_comes_before_the_clears_and_a_round_clears_at_most_its_share() -> None:
    cluster = Cluster()
    cluster.look_at(0)  # g seen waiting
    names = carrying_old_records(cluster, 300)
    cluster.api.calls.clear()
    deleted = cluster.look_at(AFTER)
    assert deleted
    calls = cluster.api.calls
    first_delete = next(i for i, call in enumerate(calls) if call.startswith("delete"))
    clears = [i for i, call in enumerate(calls) if call.startswith("record old-")]
    assert clears and min(clears) > first_delete, calls[:5]
    assert len(clears) == reclaim_module.CLEARS_PER_ROUND
    for later in range(1, 10):
        if cleared(cluster) >= set(names):
            break
        before = len(cluster.api.records)
        cluster.look_at(AFTER + 5 * later)
        assert len(cluster.api.records) - before <= reclaim_module.CLEARS_PER_ROUND
    assert cleared(cluster) >= set(names)  # the rest, the next rounds (six in all)
    assert [name for name, _ in cluster.api.records].count("old-0") == 1  # each cleared once


def test_a_clear_refused_for_ever_is_warned_of_once_and_tried_after_a_growing_pause(caplog: pytest.LogCaptureFixture) -> None:
    cluster, api, name = refused_for_ever()
    tried_at = []
    with caplog.at_level(logging.DEBUG, logger="scheduler.cluster.stranded"):
        for seconds in range(0, 160, 5):  # a round every 5 s (reclaim.periodSeconds)
            before = api.tries.get(name, 0)
            cluster.look_at(seconds)
            if api.tries.get(name, 0) > before:
                tried_at.append(seconds)
    assert tried_at == [0, 5, 15, 35, 75, 155]  # the period, doubled per refusal
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING and NOT_CLEARED in r.getMessage()]
    assert len(warned) == 1
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG and NOT_CLEARED in r.getMessage()]) == len(tried_at) - 1
    api.refuse.clear()
    cluster.look_at(155 + 160)
    assert cluster.api.recorded(name) is None and (name, None) in api.records


def test_the_back_off_is_at_most_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reclaim_module, "CLEAR_BACK_OFF_MAX_SECONDS", 20.0)
    cluster, api, name = refused_for_ever()
    tried_at = []
    for seconds in range(0, 100, 5):
        before = api.tries.get(name, 0)
        cluster.look_at(seconds)
        if api.tries.get(name, 0) > before:
            tried_at.append(seconds)
    assert tried_at == [0, 5, 15, 35, 55, 75, 95]
