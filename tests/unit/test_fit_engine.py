"""The resource-fit engine's decisions, on the core values alone."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.constants import MAX_EXTENDER_PRIORITY
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.resources import Resources
from scheduler.errors import SchedulingConflict, UnknownNode
from scheduler.kube.names import filter_offered, prioritize_offered

GI = 2**30


def gpu_node(name: str, gpus: int = 8, cpu: int = 64, memory_gi: int = 512) -> NodeInfo:
    return NodeInfo(name=name, allocatable=Resources(cpu * 1000, memory_gi * GI, gpus))


def pod(uid: str, *, gpus: int = 0, cpu: int = 1, memory_gi: int = 1, node: str | None = None, phase: str = "Pending", priority: int = 0) -> PodInfo:
    return PodInfo(uid=uid, namespace="ml", name=uid, requests=Resources(cpu * 1000, memory_gi * GI, gpus), node_name=node, phase=phase, priority=priority)


@pytest.fixture
def engine() -> ResourceFitEngine:
    engine = ResourceFitEngine()
    for name, gpus in (("a", 8), ("b", 8), ("small", 2), ("cpu", 0)):
        engine.apply_node(gpu_node(name, gpus))
    return engine


def test_filter_sorts_nodes_into_feasible_failed_and_unresolvable(engine):
    engine.apply_pod(pod("busy", gpus=6, node="b", phase="Running"))
    decision = filter_offered(engine, pod("new", gpus=4), ["a", "b", "small", "cpu", "ghost"])
    assert decision.feasible == ["a"]
    assert set(decision.failed) == {"b"}  # 2 free now; preemption could free more
    assert set(decision.unresolvable) == {"small", "cpu", "ghost"}
    assert "free GPUs" in decision.failed["b"]
    assert "even when empty" in decision.unresolvable["small"]
    assert "not seen this node" in decision.unresolvable["ghost"]
    for reason in [*decision.failed.values(), *decision.unresolvable.values()]:
        assert reason.endswith(".") and "\n" not in reason and len(reason) < 120


def test_filter_checks_cpu_and_memory_too(engine):
    decision = filter_offered(engine, pod("fat", cpu=100), ["a", "cpu"])
    assert not decision.feasible and "CPU" in decision.unresolvable["a"]
    engine.apply_pod(pod("hog", memory_gi=510, node="a", phase="Running"))
    decision = filter_offered(engine, pod("m", memory_gi=4), ["a", "b"])
    assert decision.feasible == ["b"] and "memory" in decision.failed["a"]


def test_terminal_and_deleted_pods_release_their_resources(engine):
    engine.apply_pod(pod("p", gpus=8, node="a", phase="Running"))
    assert filter_offered(engine, pod("q", gpus=1), ["a"]).feasible == []
    engine.apply_pod(pod("p", gpus=8, node="a", phase="Succeeded"))
    assert filter_offered(engine, pod("q", gpus=1), ["a"]).feasible == ["a"]
    engine.apply_pod(pod("p", gpus=8, node="a", phase="Running"))
    engine.delete_pod("p")
    assert engine.free_on("a").gpus == 8


def test_pods_bound_before_their_node_is_seen_count_once_it_arrives():
    engine = ResourceFitEngine()
    engine.apply_pod(pod("early", gpus=3, node="late", phase="Running"))
    engine.apply_node(gpu_node("late"))
    assert engine.free_on("late").gpus == 5
    engine.delete_node("late")
    engine.apply_node(gpu_node("late", gpus=4))  # the node came back smaller
    assert engine.free_on("late").gpus == 1


def test_reserve_books_and_conflicts(engine):
    engine.reserve(pod("x", gpus=6), "a")
    assert engine.free_on("a").gpus == 2
    engine.reserve(pod("x", gpus=6), "a")  # idempotent: a retried bind does not double-book
    assert engine.free_on("a").gpus == 2
    with pytest.raises(SchedulingConflict, match="no longer has room"):
        engine.reserve(pod("y", gpus=4), "a")
    with pytest.raises(SchedulingConflict, match="already bound"):
        engine.reserve(pod("x", gpus=6), "b")
    with pytest.raises(UnknownNode):
        engine.reserve(pod("z"), "nowhere")
    engine.unreserve("x")
    assert engine.free_on("a").gpus == 8


def test_a_lagging_pending_event_does_not_erase_a_reservation(engine):
    engine.reserve(pod("x", gpus=8), "a")
    engine.apply_pod(pod("x", gpus=8))  # the watch still shows it pending
    assert engine.free_on("a").gpus == 0
    engine.apply_pod(pod("x", gpus=8, node="a", phase="Running"))  # now it sees the binding
    assert engine.free_on("a").gpus == 0 and engine.stats()["pods"] == 1


def test_prioritize_packs_gpu_pods_and_keeps_cpu_pods_off_gpu_nodes(engine):
    engine.apply_pod(pod("half", gpus=4, node="b", phase="Running"))
    scores = dict(zip(["a", "b", "small", "cpu"], prioritize_offered(engine, pod("g", gpus=2), ["a", "b", "small", "cpu"])))
    assert scores["b"] > scores["a"] > 0  # pack onto the busier node
    assert scores["cpu"] == 0  # cannot hold a GPU pod at all
    assert scores["small"] == MAX_EXTENDER_PRIORITY  # fills it exactly
    cpu_scores = dict(zip(["a", "b", "cpu"], prioritize_offered(engine, pod("c"), ["a", "b", "cpu"])))
    assert cpu_scores["cpu"] == MAX_EXTENDER_PRIORITY
    assert cpu_scores["a"] < cpu_scores["b"] <= MAX_EXTENDER_PRIORITY // 2
    assert list(prioritize_offered(engine, pod("c"), ["cpu", "ghost", "a"])) == [MAX_EXTENDER_PRIORITY, 0, cpu_scores["a"]]


def test_select_victims_keeps_only_the_victims_needed(engine):
    for uid, prio in (("low", 1), ("mid", 5), ("high", 9)):
        engine.apply_pod(pod(uid, gpus=2, node="a", phase="Running", priority=prio))
    engine.apply_pod(pod("rest", gpus=2, node="a", phase="Running", priority=0))
    victims = {p.uid: p for p in (pod("low", gpus=2, node="a", priority=1), pod("mid", gpus=2, node="a", priority=5), pod("high", gpus=2, node="a", priority=9))}
    chosen = engine.select_victims(pod("te", gpus=2), {"a": ["low", "mid", "high"]}, victims)
    assert chosen == {"a": ["low"]}  # evicting the lowest-priority pod is enough
    # By UID only (nodeCacheCapable), the engine's own records describe the victims.
    assert engine.select_victims(pod("te", gpus=4), {"a": ["low", "mid", "high"]}, {}) == {"a": ["mid", "low"]}
    # Not enough even when all candidates go: the node is dropped.
    assert engine.select_victims(pod("te", gpus=8), {"a": ["low"]}, {}) == {}
    # Victims cellfit never saw are kube-scheduler's call.
    assert engine.select_victims(pod("te", gpus=2), {"b": ["unknown-uid"]}, {}) == {"b": ["unknown-uid"]}
    assert engine.select_victims(pod("te", gpus=2), {"ghost": ["low"]}, {}) == {}


operations = st.lists(
    st.tuples(st.sampled_from(["bind", "finish", "delete", "reserve", "unreserve"]), st.integers(0, 7), st.sampled_from(["a", "b"]), st.integers(0, 8)),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_used_resources_always_equal_the_sum_of_live_bookings(ops):
    engine = ResourceFitEngine()
    engine.apply_node(gpu_node("a"))
    engine.apply_node(gpu_node("b"))
    live: dict[str, tuple[str, int]] = {}
    for op, number, node, gpus in ops:
        uid = f"p{number}"
        if op == "bind":
            engine.apply_pod(pod(uid, gpus=gpus, cpu=0, memory_gi=0, node=node, phase="Running"))
            live[uid] = (node, gpus)
        elif op == "finish":
            engine.apply_pod(pod(uid, gpus=gpus, cpu=0, memory_gi=0, node=node, phase="Succeeded"))
            live.pop(uid, None)
        elif op == "delete":
            engine.delete_pod(uid)
            live.pop(uid, None)
        elif op == "reserve":
            try:
                engine.reserve(pod(uid, gpus=gpus, cpu=0, memory_gi=0), node)
            except SchedulingConflict:
                # only when it is booked elsewhere or the node lacks room
                booked = sum(g for n, g in live.values() if n == node)
                assert (uid in live and live[uid][0] != node) or booked + gpus > 8
            else:
                live.setdefault(uid, (node, gpus))  # a repeated reserve changes nothing
        else:
            engine.unreserve(uid)
            live.pop(uid, None)
        for name in ("a", "b"):
            booked = sum(g for n, g in live.values() if n == name)
            assert engine.free_on(name).gpus == 8 - booked
    assert engine.stats()["pods"] == len(live)


# ---------------------------------------------------------------------- policy.offerBestNodes


def _best_engine(best: int | None) -> ResourceFitEngine:
    engine = ResourceFitEngine(best_nodes=best)
    for name in ("a", "b", "c", "d"):
        engine.apply_node(gpu_node(name))
    engine.apply_pod(pod("b-half", gpus=4, node="b", phase="Running"))
    engine.apply_pod(pod("d-half", gpus=4, node="d", phase="Running"))
    engine.apply_pod(pod("c-full", gpus=8, node="c", phase="Running"))
    return engine


def test_offer_best_nodes_keeps_the_highest_scored_first_in_the_offered_order():
    engine = _best_engine(1)
    offered = ["a", "b", "c", "d", "ghost"]
    decision = filter_offered(engine, pod("g", gpus=2), offered)
    # b and d pack best (6 of 8 GPUs after), b is offered first; a fits but scores less.
    assert decision.feasible == ["b"]
    # Passed over: unresolvable, as HiveD counts the nodes it did not choose (no preemption
    # there would help the pod); a node too full stays failed with the fit's own reason.
    assert set(decision.failed) == {"c"} and set(decision.unresolvable) == {"a", "d", "ghost"}
    assert "best-scored node (policy.offerBestNodes)" in decision.unresolvable["d"]
    assert "free GPUs" in decision.failed["c"]
    assert decision.failed_count == 1 and decision.unresolvable_count == 3
    assert filter_offered(engine, pod("g", gpus=2), ["d", "a", "b"]).feasible == ["d"]  # the offered order breaks ties
    assert filter_offered(_best_engine(None), pod("g", gpus=2), offered).feasible == ["a", "b", "d"]  # the default: every fit


def test_offer_best_nodes_keeps_several_in_the_offered_order_and_changes_nothing_when_few_fit():
    engine = _best_engine(2)
    decision = filter_offered(engine, pod("g", gpus=2), ["d", "a", "b"])
    assert decision.feasible == ["d", "b"]  # the two best, as offered
    assert list(decision.unresolvable) == ["a"] and not decision.failed
    assert filter_offered(engine, pod("big", gpus=8), ["a", "b", "c"]).feasible == ["a"]  # one fits: kept
    with pytest.raises(ValueError, match="at least 1"):
        ResourceFitEngine(best_nodes=0)
