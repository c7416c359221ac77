"""FitGpp writes a pod's row of its victim table once where the watch's bound and Running events
of a pod it reserved show nothing new (the row is written at the reservation, and each event
rewrote it the same: a third of FitGpp's CPU per pod around HiveD), and again whenever
anything the row is made of changed (node, job class, requests, grace period, preemptions,
terminating, priority, owner) or the pod left the table since. A random run's tables equal
those of rewriting at every event."""

from __future__ import annotations

import random
from typing import Any

import msgspec

from scheduler.cells import HivedEngine
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.core.pods import PodStore
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import node, pod

NODES = [f"n{i}" for i in range(6)]


def _engine() -> tuple[FitGppEngine, list[str]]:
    fit = FitGppEngine(HivedEngine.from_nodes([node(n) for n in NODES]), settings=FitGppSettings(), pods=PodStore())
    for name in NODES:
        fit.apply_node(node(name))
    writes: list[str] = []
    apply_pod = fit._index.apply_pod

    def counted(p: PodInfo, *, preemptions: int | None = None) -> None:
        writes.append(p.uid)
        apply_pod(p, preemptions=preemptions)

    vars(fit._index)["apply_pod"] = counted
    return fit, writes


def _job_pod(uid: str, gpus: int = 1, *, job_class: str = "best-effort") -> PodInfo:
    made = pod(uid, gpus, None)
    return msgspec.structs.replace(made, labels={**made.labels, "cellfit.io/job-class": job_class}, priority=10,
                                   owner=OwnerRef(kind="Job", name=f"job-{uid}", uid=f"uid-job-{uid}"))


def _reserve(fit: FitGppEngine, p: PodInfo) -> tuple[PodInfo, PodInfo]:
    """Reserve the pod where HiveD places it: its bound event and its Running event."""
    fit.pods.record(p)
    fit.apply_pod(p)
    decision = fit.filter(p, fit.node_index.resolve(NODES))
    chosen = NODES[int(decision.feasible[0])]
    placement = fit.reserve(p, chosen)
    bound = msgspec.structs.replace(p, node_name=chosen, annotations={**p.annotations, **placement.annotations})
    return bound, msgspec.structs.replace(bound, phase="Running")


def _event(fit: FitGppEngine, p: PodInfo) -> None:
    fit.pods.record(p)
    fit.apply_pod(p)


def _table(fit: FitGppEngine) -> dict[str, Any]:
    table = fit._index.table()
    rows = {
        uid: (table.keys[i], table.node_names[int(table.node_of[i])] if table.node_of[i] >= 0 else None,
              tuple(table.demand[:, i].tolist()), float(table.grace_seconds[i]), int(table.preemptions[i]), bool(table.valid[i]),
              None if table.priorities is None else int(table.priorities[i]))
        for i, uid in enumerate(table.uids) if uid is not None
    }
    free = {name: tuple(table.node_free[:, slot].tolist()) for slot, name in enumerate(table.node_names) if name is not None}
    return {"rows": rows, "free": free, "candidates": fit.stats()["preemptionCandidates"]}


def test_the_bound_and_running_events_of_a_reserved_pod_write_no_row() -> None:
    fit, writes = _engine()
    bound, running = _reserve(fit, _job_pod("p"))
    assert writes == ["p"]  # at the reservation
    _event(fit, bound)
    _event(fit, running)
    assert writes == ["p"]
    assert _table(fit)["rows"]["p"][5]  # a candidate, as reserved


def test_a_change_of_what_the_row_is_made_of_is_written() -> None:
    changes: dict[str, dict[str, Any]] = {
        "terminating": {"terminating": True},
        "priority": {"priority": 11},
        "grace": {"grace_period_seconds": 5},
        "requests": {"requests": Resources(cpu_millis=2000, gpus=1)},
        "job class": {"labels": {"cellfit.io/job-class": "trial"}},
        "owner": {"owner": OwnerRef(kind="DaemonSet", name="ds", uid="uid-ds")},
    }
    for what, change in changes.items():
        fit, writes = _engine()
        bound, running = _reserve(fit, _job_pod("p"))
        _event(fit, bound)
        _event(fit, msgspec.structs.replace(running, **change))
        assert writes == ["p", "p"], what
    fit, writes = _engine()
    bound, _ = _reserve(fit, _job_pod("p"))
    _event(fit, msgspec.structs.replace(bound, annotations={**bound.annotations, "cellfit.io/preemptions": "2"}, owner=None))
    assert writes == ["p", "p"]  # owner and preemptions


def test_a_pod_that_left_the_table_is_written_again() -> None:
    fit, writes = _engine()
    bound, running = _reserve(fit, _job_pod("p"))
    fit.unreserve("p")  # a failed bind: out of the table
    assert "p" not in _table(fit)["rows"]
    _event(fit, running)  # the bind went through after all
    assert writes == ["p", "p"] and "p" in _table(fit)["rows"]
    _event(fit, msgspec.structs.replace(running, phase="Succeeded"))
    assert "p" not in _table(fit)["rows"]
    _event(fit, running)
    assert writes == ["p", "p", "p"] and "p" in _table(fit)["rows"]  # the Succeeded event untracked it


def _run(seed: int, *, skip: bool) -> list[Any]:
    rng = random.Random(seed)
    fit, writes = _engine()
    if not skip:
        fit._rows = _NeverEqual()
    seen: list[Any] = []
    live: dict[str, PodInfo] = {}
    for step in range(80):
        action = rng.random()
        if action < 0.35:
            p = _job_pod(f"p{step}", rng.choice([1, 2, 4]), job_class=rng.choice(["best-effort", "trial"]))
            try:
                bound, running = _reserve(fit, p)
            except Exception as error:  # noqa: BLE001 -- the same in both runs
                seen.append(type(error).__name__)
                continue
            live[p.uid] = bound
            if rng.random() < 0.8:
                _event(fit, bound)
            live[p.uid] = running
            _event(fit, running)
        elif action < 0.75 and live:
            uid = rng.choice(sorted(live))
            current = live[uid]
            change: dict[str, Any] = rng.choice([{}, {"terminating": True}, {"priority": rng.randint(0, 20)},
                                 {"annotations": {**current.annotations, "cellfit.io/preemptions": str(rng.randint(0, 3))}}])
            live[uid] = msgspec.structs.replace(current, **change)
            _event(fit, live[uid])
        elif live:
            uid = rng.choice(sorted(live))
            if rng.random() < 0.5:
                _event(fit, msgspec.structs.replace(live.pop(uid), phase="Succeeded"))
            else:
                fit.delete_pod(uid)
                live.pop(uid)
        seen.append(_table(fit))
    return seen


class _NeverEqual(dict):  # type: ignore[type-arg]
    """The rows as before: every event rewrites its pod's."""

    def get(self, *args: Any) -> Any:
        return object()


def test_tables_are_those_of_rewriting_every_event() -> None:
    for seed in range(10):
        assert _run(seed, skip=True) == _run(seed, skip=False), seed
