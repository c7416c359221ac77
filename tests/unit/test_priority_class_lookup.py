"""The resumed PriorityClass is read from the API server, kept, and looked for again in time."""

from __future__ import annotations

from scheduler.cluster.priority_class import PriorityClassLookup
from scheduler.errors import KubernetesApiError
from scheduler.kube import wire


class Api:
    def __init__(self) -> None:
        self.classes: dict[str, wire.PriorityClass] = {}
        self.reads = 0
        self.down = False

    def get_priority_class(self, name: str) -> wire.PriorityClass | None:
        self.reads += 1
        if self.down:
            raise KubernetesApiError("get priorityclass: unreachable", status=503)
        return self.classes.get(name)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_class_is_read_once_per_refresh_and_a_missing_one_is_looked_for_again():
    api, clock = Api(), Clock()
    lookup = PriorityClassLookup(api, name="cellfit-resumed", refresh_seconds=60, clock=clock)
    assert lookup.get() is None and api.reads == 1
    api.classes["cellfit-resumed"] = wire.PriorityClass(value=750, preemptionPolicy="Never")
    assert lookup.get() is None and api.reads == 1  # not hammering the API server for a missing class
    clock.now += 61
    found = lookup.get()
    assert found is not None and (found.name, found.value, found.preemption_policy) == ("cellfit-resumed", 750, "Never")
    for _ in range(100):
        lookup.get()
    assert api.reads == 2


def test_an_unreachable_api_keeps_the_last_class_read():
    api, clock = Api(), Clock()
    api.classes["cellfit-resumed"] = wire.PriorityClass(value=750)
    lookup = PriorityClassLookup(api, name="cellfit-resumed", refresh_seconds=60, clock=clock)
    assert lookup.get() is not None
    api.down = True
    clock.now += 61
    kept = lookup.get()
    assert kept is not None and kept.value == 750 and kept.preemption_policy == "PreemptLowerPriority"


def test_a_deleted_class_stops_being_used():
    api, clock = Api(), Clock()
    api.classes["cellfit-resumed"] = wire.PriorityClass(value=750)
    lookup = PriorityClassLookup(api, name="cellfit-resumed", refresh_seconds=60, clock=clock)
    assert lookup.get() is not None
    del api.classes["cellfit-resumed"]
    clock.now += 61
    assert lookup.get() is None
