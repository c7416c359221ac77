"""A relist never stalls the verbs: the watch cache applies it one event per hold of the engine
lock (issue 14, "Concurrency"), so a verb waits for one event at most; only where the list shows
a node's pods both leaving and newly booked (on it, or on nodes a HiveD gang's booking links to
it) are they applied in one hold, so that no verb sees a node freer than it ever was; and the
relist still ends in the state the list describes.

The lock is the one the verbs take (ExtenderService shares it with the cache); here it is wrapped
to count what happens inside each hold. The engine is the production composition's FitGpp over
resource fit; the API is the listing test double (the real list and watch run in e2e/)."""

from __future__ import annotations

import threading
from typing import Any

from scheduler.cluster.cache import LIST_PAGE_SIZE, ClusterCache
from scheduler.core.pods import PodStore
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.resources import ZERO, Resources
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.support.api_double import ListingApi
from tests.support.kube_objects import node, pod
from scheduler.kube.names import filter_offered

NODES = 100
PODS = 10_000  # 100 per node


class CountingLock:
    """An RLock that counts the engine changes made during each outermost hold."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self.changes_in_hold = 0
        self.most_changes_in_one_hold = 0
        self.holds = 0
        self.changes = 0  # in all holds

    def __enter__(self) -> CountingLock:
        self._lock.acquire()
        self._depth += 1
        if self._depth == 1:
            self.holds += 1
            self.changes_in_hold = 0
        return self

    def __exit__(self, *_: object) -> None:
        if self._depth == 1:
            self.most_changes_in_one_hold = max(self.most_changes_in_one_hold, self.changes_in_hold)
        self._depth -= 1
        self._lock.release()


class CountedEngine:
    """The real engine; each change it is told of counts against the lock's current hold."""

    def __init__(self, engine: FitGppEngine, lock: CountingLock) -> None:
        self._engine, self._lock = engine, lock

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._engine, name)
        if name not in ("apply_pod", "delete_pod", "apply_node", "delete_node", "apply_job", "delete_job"):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._lock.changes_in_hold += 1
            self._lock.changes += 1
            return attribute(*args, **kwargs)

        return counted


def cluster(pods: int = PODS) -> tuple[ListingApi, ClusterCache, CountingLock, FitGppEngine]:
    nodes = [node(f"node-{i:03d}", gpus=8, cpu="256") for i in range(NODES)]
    listed = [
        pod(f"train-{i:05d}", uid=f"uid-{i:05d}", cpu="1", gpus=0, node_name=f"node-{i % NODES:03d}", phase="Running")
        for i in range(pods)
    ]
    api = ListingApi(nodes=nodes, pods=listed)
    lock = CountingLock()
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = ClusterCache(api=api, engine=CountedEngine(engine, lock), lock=lock, gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine)  # type: ignore[arg-type]
    return api, cache, lock, engine


def test_a_relist_of_10000_pods_holds_the_lock_for_one_event_at_a_time() -> None:
    _, cache, lock, _ = cluster()
    cache.nodes._list_and_replace()
    lock.most_changes_in_one_hold = 0
    holds_before = lock.holds
    cache.pods._list_and_replace()
    assert cache.sizes()["pods"] == PODS
    assert lock.most_changes_in_one_hold == 1
    assert lock.holds - holds_before >= PODS  # a hold per pod (and one to read what is gone)


def test_a_relist_reads_the_list_page_by_page_and_applies_all_of_it() -> None:
    """Finding the items of a 10,000-pod list (20 MB) in one call holds the GIL for ~70 ms, a
    stall for every verb; the cache asks the API server for pages of LIST_PAGE_SIZE and follows
    each page's continue token to the last."""
    api, cache, _, engine = cluster()
    cache.nodes._list_and_replace()
    before = api.pages_listed
    cache.pods._list_and_replace()
    assert api.pages_listed - before == -(-PODS // LIST_PAGE_SIZE)  # 20 pages of 500
    assert cache.sizes()["pods"] == PODS
    for name in ("node-000", "node-057", "node-099"):  # every node's 100 pods, from every page
        assert engine.inner.free_on(name).cpu_millis == (256 - PODS // NODES) * 1000


def test_a_relist_forgets_what_it_no_longer_lists_one_object_at_a_time() -> None:
    api, cache, lock, engine = cluster(pods=300)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    assert cache.sizes()["pods"] == 300
    # Deleted while the watch was down (HTTP 410, relist): 100 pods and 10 nodes.
    api.pods = api.pods[100:]
    api.nodes = api.nodes[10:]
    lock.most_changes_in_one_hold = 0
    cache.pods._list_and_replace()
    cache.nodes._list_and_replace()
    assert cache.sizes()["pods"] == 200 and cache.sizes()["nodes"] == NODES - 10
    assert lock.most_changes_in_one_hold == 1  # departures alone: one per hold
    assert sorted(cache.free_by_node()) == sorted(f"node-{i:03d}" for i in range(10, NODES))


def test_a_verb_takes_the_lock_while_a_relist_of_10000_pods_is_still_running() -> None:
    """The verbs' side: the lock is free between two pods, so a caller gets it while the relist
    runs (before, the relist held it throughout and the caller got it only after the end)."""
    _, cache, lock, _ = cluster()
    cache.nodes._list_and_replace()
    relist = threading.Thread(target=cache.pods._list_and_replace)
    relist.start()
    while cache.sizes()["pods"] == 0 and relist.is_alive():  # the list decoded, the first pods applied
        pass
    with lock:
        applied_when_a_verb_got_the_lock = cache.sizes()["pods"]
    relist.join()
    assert 0 < applied_when_a_verb_got_the_lock < PODS
    assert cache.sizes()["pods"] == PODS


class SnapshotLock(CountingLock):
    """Reads the watched node's free GPUs at the end of every outermost hold: what a verb
    taking the lock next would see."""

    def __init__(self) -> None:
        super().__init__()
        self.cache: ClusterCache | None = None
        self.seen: list[int] = []

    def __exit__(self, *args: object) -> None:
        if self._depth == 1 and self.cache is not None:
            cache = self.cache
            self._depth += 1  # reading takes the lock again: not a hold of its own
            try:
                self.seen.append(cache.free_by_node().get("node-000", ZERO).gpus)
            finally:
                self._depth -= 1
        super().__exit__(*args)


def _relisted(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> tuple[ClusterCache, list[int]]:
    """node-000 (8 GPUs) with ``before`` listed and applied, then relisted as ``after``: the
    cache, and node-000's free GPUs a verb would see after each hold of the relist."""
    api = ListingApi(nodes=[node("node-000", gpus=8, cpu="256")], pods=before)
    lock = SnapshotLock()
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = ClusterCache(api=api, engine=engine, lock=lock, gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine)  # type: ignore[arg-type]
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    lock.cache = cache
    api.pods = after  # the relist after HTTP 410
    cache.pods._list_and_replace()
    return cache, lock.seen


def _gpu_pod(name: str, *, phase: str = "Running") -> dict[str, Any]:
    return pod(f"train-{name}", uid=f"uid-{name}", cpu="1", gpus=4, node_name="node-000", phase=phase)


def test_mid_relist_a_node_is_never_freer_than_it_ever_was() -> None:
    """While the watch was down, pod E (4 GPUs) was bound to the node and pod D (4 GPUs) deleted:
    4 GPUs used before and after. Applying D's deletion and E's arrival in separate holds would
    show the node with all 8 free to a verb in between (under HiveD, a pod booked then got E's
    GPU indices); in one hold it never does."""
    _, seen = _relisted([_gpu_pod("d")], [_gpu_pod("e")])
    assert seen and set(seen) == {4}, seen


def test_mid_relist_a_node_whose_pod_finished_and_was_replaced_is_never_freer_either() -> None:
    """The same with D still listed, as finished (its Job has not deleted it yet): a departure
    too, applied with E's arrival in one hold."""
    cache, seen = _relisted([_gpu_pod("d")], [_gpu_pod("d", phase="Succeeded"), _gpu_pod("e")])
    assert seen and set(seen) == {4}, seen
    assert cache.sizes()["pods"] == 1


def test_a_node_whose_pods_only_left_is_emptied_one_event_per_hold() -> None:
    """Departures beside pods that did not change (listed again as they were) are one-sided:
    one per hold, however many pods the node keeps."""
    api, cache, lock, engine = cluster(pods=300)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    on_node_0 = [p for p in api.pods if p["spec"]["nodeName"] == "node-000"]
    api.pods = [p for p in api.pods if p not in on_node_0[:2]]  # two of node-000's three gone
    lock.most_changes_in_one_hold = 0
    cache.pods._list_and_replace()
    assert lock.most_changes_in_one_hold == 1
    assert engine.inner.free_on("node-000").cpu_millis == (256 - 1) * 1000


def test_events_that_change_nothing_a_decision_reads_are_not_applied_again() -> None:
    api, cache, lock, engine = cluster(pods=300)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()

    def changes_during(action: Any) -> int:
        before = lock.changes
        action()
        return lock.changes - before

    # A relist of the same bound pods (or their status updates: conditions, IPs) tells the engine nothing.
    assert changes_during(cache.pods._list_and_replace) == 0
    # One pod's requests changed (an in-place resize): that one is applied.
    api.pods[0] = pod("train-00000", uid="uid-00000", cpu="2", gpus=0, node_name="node-000", phase="Running")
    assert changes_during(cache.pods._list_and_replace) == 1
    assert engine.victim("uid-00000").requests.cpu_millis == 2000
    # A pending pod's events are applied every time: a failed binding may have made the engine forget it.
    api.pods.append(pod("waiting-0", uid="uid-waiting", cpu="1", gpus=0))
    assert changes_during(cache.pods._list_and_replace) == 1
    assert changes_during(cache.pods._list_and_replace) == 1


def test_mid_relist_a_node_a_gangs_booking_links_is_never_freer_than_it_ever_was() -> None:
    """HiveD, two 8-GPU nodes of VC a. D (4 GPUs) ran on r0n0 and E (4 GPUs) on r0n1; a gang of
    two 4-GPU pods booked a slot on each node, G-1 bound on r0n1, G-0 still pending; then D was
    deleted, all while the watch was down. G-1's bind info books G-0's slot on r0n0, so r0n0
    never had 8 GPUs free: D's deletion and G-1's arrival go in one hold (r0n0 has no arrival
    of its own), and after every hold an 8-GPU pod of VC a finds no room on r0n0."""
    from scheduler.cells import HivedEngine
    from tests.cells.helpers import node as cell_node, pod as cell_pod, rack_cluster, schedule

    config = rack_cluster(racks=1, nodes_per_rack=2, vcs={"a": [{"cellType": "V100-NODE", "count": 2}]})
    names = ["r0n0", "r0n1"]
    truth = HivedEngine.from_config(config, nodes=[cell_node(n) for n in names])
    d = schedule(truth, cell_pod("uid-d", 4, "a"), ["r0n0"])
    e = schedule(truth, cell_pod("uid-e", 4, "a"), ["r0n1"])
    filter_offered(truth, cell_pod("uid-g0", 4, "a", gang=("g", 2)), names)  # the gang's slots booked
    g1 = schedule(truth, cell_pod("uid-g1", 4, "a", gang=("g", 2)), names)
    assert d is not None and e is not None and g1 is not None and g1.node_name == "r0n1"

    def listed(bound: Any, name: str, *, node_name: str | None, gang: bool = False) -> dict[str, Any]:
        annotations = dict(bound.annotations) if bound is not None else {}
        if gang:
            annotations.update({"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"})
        return pod(name, uid=f"uid-{name}", gpus=4, cpu="1", node_name=node_name, phase="Running" if node_name else "Pending",
                   labels={"cellfit.io/virtual-cluster": "a"}, annotations=annotations, job_uid="uid-g" if gang else "uid-solo")

    api = ListingApi(nodes=[node(n, gpus=8, cpu="64") for n in names],
                     pods=[listed(d, "d", node_name="r0n0"), listed(e, "e", node_name="r0n1")])
    seen: list[bool] = []
    engine = HivedEngine.from_config(config)

    class ProbingLock(CountingLock):
        probing = False

        def __exit__(self, *args: object) -> None:
            if self._depth == 1 and self.probing:
                self._depth += 1
                try:
                    decision = filter_offered(engine, cell_pod("uid-probe", 8, "a"), ["r0n0"])
                    seen.append(bool(decision.feasible))
                    if decision.feasible:
                        engine.delete_pod("uid-probe")  # filter booked it: undo
                finally:
                    self._depth -= 1
            super().__exit__(*args)

    lock = ProbingLock()
    cache = ClusterCache(api=api, engine=engine, lock=lock, gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine)  # type: ignore[arg-type]
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    lock.probing = True
    api.pods = [listed(e, "e", node_name="r0n1"), listed(None, "g0", node_name=None, gang=True),
                listed(g1, "g1", node_name="r0n1", gang=True)]
    cache.pods._list_and_replace()
    assert seen and not any(seen), seen
    slots = sorted((slot.node, slot.pod_uid) for group in engine.allocator.groups.values() for slot in group.slots)
    assert slots == [("r0n0", None), ("r0n1", "uid-g1")], slots  # G-0's slot still waits for it on r0n0


def test_mid_relist_a_pod_resized_to_ask_less_is_a_departure_too() -> None:
    """A (6 of 10 cores) ran; while the watch was down B (3 cores) was bound beside it, then A
    was resized in place to 2 cores: 4, 1, then 5 cores free. A's smaller request applied
    before B's arrival would show 8 free; in one hold with it, never more than 5."""
    a = pod("a-0", uid="uid-a", cpu="6", memory="1Gi", node_name="node-000", phase="Running")
    api = ListingApi(nodes=[node("node-000", gpus=0, cpu="10")], pods=[a])
    seen: list[int] = []
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())

    class CpuSnapshotLock(CountingLock):
        watching = False

        def __exit__(self, *args: object) -> None:
            if self._depth == 1 and self.watching:
                seen.append(engine.inner.free_on("node-000").cpu_millis)
            super().__exit__(*args)

    lock = CpuSnapshotLock()
    cache = ClusterCache(api=api, engine=engine, lock=lock, gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine)  # type: ignore[arg-type]
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    lock.watching = True
    api.pods = [pod("a-0", uid="uid-a", cpu="2", memory="1Gi", node_name="node-000", phase="Running"),
                pod("b-0", uid="uid-b", cpu="3", memory="1Gi", node_name="node-000", phase="Running")]
    cache.pods._list_and_replace()
    assert seen and max(seen) <= 5000 and seen[-1] == 5000, seen


def test_random_relists_never_show_a_node_freer_than_before_and_after_and_end_as_listed() -> None:
    """Random outages over three nodes: pods deleted, finished, bound anew, resized up or down,
    any mix. A verb taking the lock between two holds of the relist never sees a node with more
    of any resource free than it had before the relist or has after it (each group of changes
    only fills or only empties its nodes, or goes in one hold), and the relist ends with the
    engine holding exactly what the list describes."""
    import random

    names = ["node-000", "node-001", "node-002"]

    def listed(uid: int, *, node_name: str, cpu: int, gpus: int, phase: str = "Running") -> dict[str, Any]:
        return pod(f"p-{uid}", uid=f"uid-{uid}", cpu=str(cpu), memory="1Gi", gpus=gpus, node_name=node_name, phase=phase)

    for seed in range(150):
        rng = random.Random(seed)
        pods = {uid: (rng.choice(names), rng.randint(1, 8), rng.randint(0, 2)) for uid in range(rng.randint(0, 10))}
        api = ListingApi(nodes=[node(n, gpus=8, cpu="64") for n in names],
                         pods=[listed(uid, node_name=n, cpu=c, gpus=g) for uid, (n, c, g) in pods.items()])
        engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
        seen: list[dict[str, Any]] = []

        class Watching(CountingLock):
            on = False

            def __exit__(self, *args: object) -> None:
                if self._depth == 1 and self.on:
                    seen.append({n: engine.inner.free_on(n) for n in names})
                super().__exit__(*args)

        lock = Watching()
        cache = ClusterCache(api=api, engine=engine, lock=lock, gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine)  # type: ignore[arg-type]
        cache.nodes._list_and_replace()
        cache.pods._list_and_replace()
        before = {n: engine.inner.free_on(n) for n in names}
        after_pods: list[dict[str, Any]] = []
        for uid, (n, c, g) in pods.items():
            fate = rng.choice(["keep", "keep", "delete", "finish", "resize"])
            if fate == "keep":
                after_pods.append(listed(uid, node_name=n, cpu=c, gpus=g))
            elif fate == "finish":
                after_pods.append(listed(uid, node_name=n, cpu=c, gpus=g, phase="Succeeded"))
            elif fate == "resize":
                after_pods.append(listed(uid, node_name=n, cpu=rng.randint(1, 8), gpus=g))
        for uid in range(100, 100 + rng.randint(0, 4)):
            after_pods.append(listed(uid, node_name=rng.choice(names), cpu=rng.randint(1, 8), gpus=rng.randint(0, 2)))
        rng.shuffle(after_pods)
        api.pods = after_pods
        lock.on = True
        cache.pods._list_and_replace()
        lock.on = False
        after = {n: engine.inner.free_on(n) for n in names}
        expected = {n: Resources(64_000, node_memory(api, n), 8) for n in names}
        for body in after_pods:
            if body["status"]["phase"] == "Running":
                requests = body["spec"]["containers"][0]["resources"]["requests"]
                expected[body["spec"]["nodeName"]] -= Resources(int(requests["cpu"]) * 1000, 2**30, int(requests.get("nvidia.com/gpu", 0)))
        assert after == expected, (seed, after, expected)
        for snapshot in seen:
            for n in names:
                bound = before[n].as_tuple(), after[n].as_tuple()
                assert all(free <= max(b, a) for free, b, a in zip(snapshot[n].as_tuple(), *bound)), (seed, n, snapshot[n], before[n], after[n])


def node_memory(api: ListingApi, name: str) -> int:
    """The node's allocatable memory as the cache reads it, in bytes."""
    from scheduler.kube import translate, wire
    import msgspec

    body = next(n for n in api.nodes if n["metadata"]["name"] == name)
    return translate.node_info(msgspec.convert(body, wire.Node), gpu_resource="nvidia.com/gpu").allocatable.memory_bytes


def test_a_relist_frees_each_decoded_pod_in_its_own_step() -> None:
    """Freeing 10,000 decoded pods at once after the pass held the GIL for ~15 ms (a stall at the
    relist's end); the pass reads the list once and lets each pod go as it reads the next."""
    import msgspec

    from scheduler.cluster.cache import LazilyDecoded, _read_once
    from scheduler.kube import wire

    bodies = [pod(f"p-{i}", uid=f"uid-{i}", cpu="1", node_name="node-000", phase="Running") for i in range(50)]
    listed = LazilyDecoded([[msgspec.Raw(msgspec.json.encode(body)) for body in bodies]], wire.POD_DECODER.decode)
    held_while_reading: list[int] = []
    names = []
    for item in _read_once(listed):
        names.append(item.metadata.name)
        held_while_reading.append(sum(decoded is not None for decoded in listed._decoded))
    assert names == [body["metadata"]["name"] for body in bodies]
    assert max(held_while_reading) == 0  # read through a plain iterator, the list would keep all 50
    assert len(listed) == 50  # the reflector logs the list's length after the pass


def test_a_relist_that_changes_nothing_lets_each_nodes_pods_go_in_its_own_step() -> None:
    """A relist after a 410 mostly lists pods the cache holds as they are: their fresh records
    are dropped, not recorded. Kept to the pass's end, 10,000 of them were freed in its last step
    (~9 ms on the verbs' loop); each node's go with its own step."""
    import sys

    api, cache, _, _ = cluster(pods=NODES * 5)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    read: list[Any] = []
    translated = cache._translated

    def keeping(pod_object: Any) -> Any:
        info = translated(pod_object)
        read.append(info)
        return info

    cache._translated = keeping  # type: ignore[method-assign]
    _, listed = cache.pods._list()
    held_by_the_pass = []
    for _ in cache._replacing_pods(listed):
        # This list's reference, the loop's and getrefcount's own: any more is the pass's.
        held_by_the_pass.append(sum(sys.getrefcount(info) > 3 for info in read))
    assert len(read) == NODES * 5 and cache.sizes()["pods"] == NODES * 5
    assert held_by_the_pass[-1] <= 5, held_by_the_pass[-1]


def test_a_relist_links_its_nodes_a_few_hundred_pods_a_step(monkeypatch: Any) -> None:
    """Which nodes must change together is read from every listed pod's booking: 10,000 pods on
    5,000 nodes took ~6 ms (~14 ms on a loaded machine) in one step on the verbs' loop. The pass
    reads about _CHECKS_PER_STEP pods' bookings a step (a node's pods at once: 10 here)."""
    from scheduler.cluster import cache as cache_module

    _, cache, _, _ = cluster(pods=1_000)
    cache.nodes._list_and_replace()
    read_in_step = 0
    slot_nodes = cache_module._slot_nodes

    def counted(info: Any) -> Any:
        nonlocal read_in_step
        read_in_step += 1
        return slot_nodes(info)

    monkeypatch.setattr(cache_module, "_slot_nodes", counted)
    _, listed = cache.pods._list()
    most = 0
    for _ in cache._replacing_pods(listed):
        most, read_in_step = max(most, read_in_step), 0
    assert cache.sizes()["pods"] == 1_000
    assert max(most, read_in_step) <= cache_module._CHECKS_PER_STEP + 10, max(most, read_in_step)


def test_each_step_of_a_relist_applies_one_event_at_most() -> None:
    """A step is what the verbs' loop runs between two requests (pacing.OnLoop): the nodes',
    pods' and Jobs' passes change the engine once a step at most, and decode one object at most
    (no node here has pods both leaving and newly booked, the one case applied together; a
    step that decodes a whole list of 5,000 nodes holds the loop ~50 ms). The first 600 pods
    are bound, the 50 after them pending."""
    import functools

    from scheduler.cluster.cache import LazilyDecoded
    from tests.cluster.test_interchangeable_jobs import job

    api, cache, lock, engine = cluster(pods=600)
    cache._job_tracker = CountedEngine(engine, lock)  # type: ignore[assignment]  # its Jobs' changes counted too
    api.pods += [pod(f"waiting-{i}", uid=f"waiting-{i}") for i in range(50)]
    api.jobs = [job(f"j-{i}", interchangeable=False) for i in range(300)]
    assert cache.jobs is not None
    passes = ((cache.nodes, cache._replacing_nodes), (cache.pods, cache._replacing_pods), (cache.jobs, functools.partial(cache._replacing_jobs, gone=[])))
    for relist in range(3):  # everything new, every object listed again, a third of each gone
        if relist == 2:
            api.nodes, api.pods, api.jobs = api.nodes[:70], api.pods[:400], api.jobs[:200]
        for reflector, passing in passes:
            _, listed = reflector._list()
            assert isinstance(listed, LazilyDecoded)
            decodes = 0
            decode = listed._decode

            def counted(raw: Any, decode: Any = decode) -> Any:
                nonlocal decodes
                decodes += 1
                return decode(raw)

            listed._decode = counted
            most_changes = most_decodes = 0
            changes_before = lock.changes
            for _ in passing(listed):
                most_changes = max(most_changes, lock.changes - changes_before)
                most_decodes, decodes = max(most_decodes, decodes), 0
                changes_before = lock.changes
            assert max(most_changes, lock.changes - changes_before) <= 1, reflector.kind
            assert max(most_decodes, decodes) <= 1, reflector.kind
    assert cache.sizes() == {"nodes": 70, "pods": 400, "jobs": 200}
