"""A relist's pass driven a step at a time on the loop the verbs run on (scheduler/cluster/pacing.py,
issue 14 "Concurrency"): each step runs once, in order, on the loop's thread; what the loop has to
serve meanwhile (a request that arrived) runs after the step under way and one more at most; a
loop that stops mid-pass hands the rest back to the caller; the watch cache and ``cellfit
serve`` use it. Real event loops, real threads, a real socket and the real server; nothing here
is timed."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.pacing import InThread, OnLoop, Steps
from scheduler.config import parse_settings
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.extender.runtime import build_runtime
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.support.api_double import ListingApi
from tests.support.kube_objects import node, pod


class RunningLoop:
    """An event loop serving in its own thread, as uvicorn's does."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="loop")
        self.thread.start()
        while not self.loop.is_running():
            pass

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        # Tasks left pending (a pass the caller took back) finish before the loop closes.
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()


@pytest.fixture
def running() -> Iterator[RunningLoop]:
    loop = RunningLoop()
    try:
        yield loop
    finally:
        loop.close()


def recorded(count: int, log: list[tuple[int, int]], *, at: dict[int, Any] | None = None) -> Steps:
    """``count`` steps, each logging (its number, the thread it ran on); ``at[k]()`` is called
    during step k."""
    for number in range(count):
        log.append((number, threading.get_ident()))
        if at is not None and number in at:
            at[number]()
        yield


def test_in_thread_runs_every_step_once_in_order_in_the_callers_thread() -> None:
    log: list[tuple[int, int]] = []
    InThread().run(recorded(5_000, log))
    assert [number for number, _ in log] == list(range(5_000))
    assert {thread for _, thread in log} == {threading.get_ident()}


def test_on_loop_runs_every_step_once_in_order_on_the_loops_thread(running: RunningLoop) -> None:
    log: list[tuple[int, int]] = []
    OnLoop(running.loop).run(recorded(5_000, log))
    assert [number for number, _ in log] == list(range(5_000))
    assert {thread for _, thread in log} == {running.thread.ident}


def test_a_request_arriving_mid_pass_is_served_after_the_step_under_way_and_one_more(running: RunningLoop) -> None:
    """A byte arrives on a socket the loop serves (a request) during step 100: the loop reads it
    before step 102; without a pass on the loop it would wait for the whole pass."""
    log: list[tuple[int, int]] = []
    served_before_step: list[int] = []
    ours, theirs = socket.socketpair()
    ours.setblocking(False)

    def serve() -> None:
        ours.recv(1)
        served_before_step.append(len(log))

    running.loop.call_soon_threadsafe(running.loop.add_reader, ours.fileno(), serve)
    try:
        OnLoop(running.loop).run(recorded(1_000, log, at={100: lambda: theirs.send(b"x")}))
    finally:
        running.loop.call_soon_threadsafe(running.loop.remove_reader, ours.fileno())
        ours.close()
        theirs.close()
    assert served_before_step and served_before_step[0] <= 102, served_before_step


def test_a_loop_that_stops_mid_pass_hands_the_rest_to_the_caller_none_twice_none_lost(running: RunningLoop) -> None:
    log: list[tuple[int, int]] = []
    OnLoop(running.loop).run(recorded(300, log, at={120: running.loop.stop}))
    assert [number for number, _ in log] == list(range(300))
    threads = [thread for _, thread in log]
    assert set(threads[:121]) == {running.thread.ident}
    assert set(threads[122:]) == {threading.get_ident()}


def test_a_loop_that_is_not_running_leaves_the_pass_to_the_caller() -> None:
    loop = asyncio.new_event_loop()
    try:
        log: list[tuple[int, int]] = []
        OnLoop(loop).run(recorded(10, log))
        assert log == [(number, threading.get_ident()) for number in range(10)]
    finally:
        loop.close()


def test_called_on_the_loops_own_thread_the_pass_runs_there_without_waiting_for_itself() -> None:
    log: list[tuple[int, int]] = []

    async def on_the_loop() -> None:
        OnLoop(asyncio.get_running_loop()).run(recorded(10, log))

    asyncio.run(on_the_loop())
    assert [number for number, _ in log] == list(range(10))


def test_what_a_step_raises_reaches_the_caller_and_the_loop_serves_on(running: RunningLoop) -> None:
    def failing() -> Steps:
        yield
        raise RuntimeError("a step failed")

    with pytest.raises(RuntimeError, match="a step failed"):
        OnLoop(running.loop).run(failing())
    log: list[tuple[int, int]] = []
    OnLoop(running.loop).run(recorded(3, log))
    assert [number for number, _ in log] == [0, 1, 2]


def _cluster(pods: int) -> tuple[ListingApi, list[dict[str, Any]]]:
    nodes = [node(f"node-{i:02d}", gpus=8, cpu="256") for i in range(20)]
    listed = [pod(f"train-{i:05d}", uid=f"uid-{i:05d}", cpu="1", node_name=f"node-{i % 20:02d}", phase="Running") for i in range(pods)]
    return ListingApi(nodes=nodes), listed


def test_the_watch_cache_relists_on_the_loop_and_the_loop_serves_between_two_pods(running: RunningLoop) -> None:
    """2,000 pods relisted from the reflector's thread: every pod is recorded on the loop's
    thread, and what the loop was asked to do meanwhile (a verb reading the cache) ran while the
    relist had applied some pods but not all."""
    api, listed = _cluster(2_000)
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = ClusterCache(api=api, engine=engine, lock=threading.RLock(), gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine)
    cache.nodes._list_and_replace()
    recorded_on: set[int | None] = set()
    apply_info = cache._apply_info

    def apply_where(info: Any) -> None:
        recorded_on.add(threading.get_ident())
        apply_info(info)

    cache._apply_info = apply_where  # type: ignore[method-assign]
    seen_by_verbs: list[int] = []
    relisted = threading.Event()

    def verb() -> None:  # asked again and again until the relist is done
        seen_by_verbs.append(cache.sizes()["pods"])
        if not relisted.is_set():
            running.loop.call_soon(verb)

    api.pods = listed
    cache.pace_on(OnLoop(running.loop))
    relist = threading.Thread(target=cache.pods._list_and_replace, name="relist")
    running.loop.call_soon_threadsafe(verb)
    relist.start()
    relist.join(60)
    relisted.set()
    assert cache.sizes()["pods"] == 2_000
    assert recorded_on == {running.thread.ident}
    assert any(0 < seen < 2_000 for seen in seen_by_verbs), seen_by_verbs[:20]


def test_cellfit_serve_relists_on_the_loop_its_verbs_run_on() -> None:
    """The runtime as ``cellfit serve`` builds it, served by uvicorn: a relist started from
    another thread records every pod on the server's event loop."""
    import httpx

    from tests.support.server import running_server, wait_until_ready

    api, listed = _cluster(500)
    settings = parse_settings(
        "policy: {name: resource-fit}\nestimator: {enabled: false}\nleaderElection: {enabled: false}\nnudge: {enabled: false}\n"
    )
    runtime = build_runtime(settings, api=api)  # type: ignore[arg-type]
    cache = runtime.cache
    assert cache is not None
    on_a_loop: list[bool] = []
    apply_info = cache._apply_info

    def apply_where(info: Any) -> None:
        try:
            asyncio.get_running_loop()
            on_a_loop.append(True)
        except RuntimeError:
            on_a_loop.append(False)
        apply_info(info)

    cache._apply_info = apply_where  # type: ignore[method-assign]
    with running_server(runtime.app) as url:
        with httpx.Client(base_url=url, timeout=10) as client:
            wait_until_ready(client)  # the cache's own first lists are done
        api.pods = listed
        relist = threading.Thread(target=cache.pods._list_and_replace, name="relist")
        relist.start()
        relist.join(60)
        assert cache.sizes()["pods"] == 500
    assert len(on_a_loop) == 500 and all(on_a_loop)


def test_a_pass_taken_back_is_never_stepped_again_by_the_loop_that_runs_once_more(running: RunningLoop) -> None:
    """A loop that stopped mid-pass may run again (asyncio.Runner's close runs it to cancel its
    tasks; a test loop is run to completion): the pass it gave back is the caller's alone, the
    loop's task steps it no more."""
    stepped: list[tuple[int, bool]] = []  # (step, on a running loop)

    def steps() -> Steps:
        for number in range(300):
            stepped.append((number, _running_loop() is not None))
            if number == 120:
                running.loop.stop()
            yield

    class RunsTheLoopOnceMore:
        def run(self, steps: Steps) -> None:
            running.thread.join(10)
            running.loop.run_until_complete(asyncio.sleep(0))
            InThread().run(steps)

    OnLoop(running.loop, fallback=RunsTheLoopOnceMore()).run(steps())
    assert [number for number, _ in stepped] == list(range(300))
    assert not any(on_loop for number, on_loop in stepped if number > 120), stepped[118:125]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def test_a_loop_that_cancels_its_tasks_mid_pass_hands_the_rest_to_the_caller(running: RunningLoop) -> None:
    """uvicorn under asyncio.run cancels every task on its way out: the pass's task is one; the
    steps it had not run go on in the caller's thread, none lost."""
    log: list[tuple[int, int]] = []

    def cancel_every_task() -> None:
        for task in asyncio.all_tasks(running.loop):
            task.cancel()

    OnLoop(running.loop).run(recorded(300, log, at={120: cancel_every_task}))
    assert [number for number, _ in log] == list(range(300))
    threads = [thread for _, thread in log]
    assert set(threads[:121]) == {running.thread.ident}
    assert set(threads[121:]) == {threading.get_ident()}


def test_the_estimator_is_handed_a_jobs_relist_in_the_watchs_thread_not_on_the_loop(running: RunningLoop) -> None:
    """The estimator decodes every interchangeable Job whole when a relist hands them over
    (feed.JobSubscriber: called from the Job watch's thread): 1,000 of them in one step of the
    loop held every verb ~15 ms. The engine's Jobs are applied on the loop, a step each; the
    hand-over is the reflector's."""
    from scheduler.cluster.feed import InterchangeableJobs
    from tests.cluster.test_interchangeable_jobs import Recorder, WatchingApi, job

    api = WatchingApi([job(f"j-{i}", interchangeable=i % 2 == 0) for i in range(20)])
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = ClusterCache(api=api, engine=engine, lock=threading.RLock(), gpu_resource="nvidia.com/gpu", pods=PodStore(),
                         jobs=engine, interchangeable_jobs=True)
    assert cache.jobs is not None and isinstance(cache.interchangeable, InterchangeableJobs)
    told_in: set[int] = set()

    class Where(Recorder):
        def replace_jobs(self, jobs: list[bytes]) -> None:
            told_in.add(threading.get_ident())
            super().replace_jobs(jobs)

        def delete_job(self, uid: str) -> None:
            told_in.add(threading.get_ident())
            super().delete_job(uid)

    subscriber = Where()
    cache.interchangeable.subscribe(subscriber)
    cache.pace_on(OnLoop(running.loop))
    for listed in (api.jobs, api.jobs[:10]):
        api.jobs = listed
        relist = threading.Thread(target=cache.jobs._list_and_replace, name="relist")
        relist.start()
        relist.join(60)
        assert relist.ident in told_in
    assert running.thread.ident not in told_in
    assert subscriber.calls[-1] == ("replace", [f"j-{i}" for i in range(0, 10, 2)])
    assert ("delete", "uid-j-10") in subscriber.calls and cache.sizes()["jobs"] == 10


def test_while_another_thread_holds_the_lock_the_loop_serves_on_and_the_pass_waits(running: RunningLoop) -> None:
    """A step takes the engine lock; blocked on it, the loop's thread would serve nothing (not
    /healthz, which never takes it) for as long as another thread (a large-body verb, a
    controller) holds it. Given the lock, the pass waits for it without blocking the loop."""
    lock = threading.RLock()
    served = threading.Event()
    log: list[tuple[int, int]] = []

    def locked_steps() -> Steps:
        for number in range(50):
            with lock:  # as the cache's steps do
                log.append((number, threading.get_ident()))
            yield

    with lock:  # this thread holds it until the loop has served a request
        relist = threading.Thread(target=OnLoop(running.loop, lock=lock).run, args=(locked_steps(),), name="relist")
        relist.start()
        running.loop.call_soon_threadsafe(served.set)
        served_while_held = served.wait(10)
    relist.join(60)
    assert served_while_held
    assert [number for number, _ in log] == list(range(50))
    assert {thread for _, thread in log} == {running.thread.ident}
