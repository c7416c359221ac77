"""The gang members a preemptor's record names are named on their Jobs before its binding
(fd66259), on the bind writes' naming lane, behind no pods-bound record (review28b #2).

1e9e36e queued the pods-bound records (cellfit.io/pods-bound, best-effort: the leader writes
one the binder could not) on the same two threads, first in first out, as that naming, which
the binding waits for NAMING_BEFORE_BINDING_SECONDS at most: two records retrying against a
throttling API server (pauses of 0.5 s and 2 s, each try up to the client's timeout) took both
threads, the naming missed its second, and the binding was created before the member was named,
the window fd66259 closed (a replica killed then, every replica down until after the trial pod
finished, left the member running for ever beside its deleted gang-mates).

Here the records' Job writes hang until the test ends; the naming's budget is made long, so a
naming that waits behind them fails the test however slow the machine, and one that does not
passes without any timing."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.errors import KubernetesApiError
from scheduler.preemption import gang_records
from scheduler.preemption.resume_records import JobRef
from tests.cluster.test_gang_members_named_at_binding import BindingApi, timers, watched_then_bound
from tests.cluster.test_gang_preemption_recovered import done
from tests.cluster.test_gang_recovery_waits_for_deciding_replica import Timers

__all__ = ["timers"]

WATCHDOG_SECONDS = 60.0
# The naming's budget here: a free thread names the member in milliseconds; the records' writes
# hang past it (until the test ends, or WATCHDOG_SECONDS).
NAMING_SECONDS = 10.0


class ThrottlingApi(BindingApi):
    """The pods-bound records' Job writes (Jobs held-*) hang until ``release`` is set, as many
    tries against an API server answering 429 would; the gang's Job answers at once."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.release = threading.Event()
        self.held = threading.Semaphore(0)

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        if name.startswith("held-"):
            self.held.release()
            self.release.wait(timeout=WATCHDOG_SECONDS)
            raise KubernetesApiError(f"patch job {name}: HTTP 404", status=404)
        super().patch_job(namespace=namespace, name=name, operations=operations)


def test_the_naming_a_binding_waits_for_is_not_queued_behind_pods_bound_records(
    timers: Timers, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cache_module, "NAMING_BEFORE_BINDING_SECONDS", NAMING_SECONDS)
    apis: list[ThrottlingApi] = []
    original = cache_module.ClusterCache.bind

    async def bind(self: cache_module.ClusterCache, **kwargs: Any) -> None:
        # Other Jobs' pods bound here just before: their records written (and hanging) first.
        (api,) = apis
        for number in range(cache_module.BIND_WRITE_THREADS):
            self._record_pods_bound(JobRef(uid=f"uid-held-{number}", namespace="ml", name=f"held-{number}"), "2026-11-29T08:00:00Z")
        for _ in range(cache_module.BIND_WRITE_THREADS):
            assert api.held.acquire(timeout=WATCHDOG_SECONDS)  # every record's write under way
        await original(self, **kwargs)

    monkeypatch.setattr(cache_module.ClusterCache, "bind", bind)

    class Api(ThrottlingApi):
        def __init__(self, **lists: Any) -> None:
            super().__init__(**lists)
            apis.append(self)

    decided_at = time.time() - 10
    try:
        api, cache = watched_then_bound(decided_at, api_type=Api)
    finally:
        for each in apis:
            each.release.set()
    done(cache)
    assert api.named_at_binding == [{"uid-be-1": gang_records.LeftMember(by="ml/te-0", node="gpu-a", at=decided_at)}]
