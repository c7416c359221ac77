"""``allox.solverTimeoutSeconds``: how long the placer waits for its solver process before
killing it is the operator's to set (a cluster whose matchings are large, or whose nodes are
slow, raises it; one that wants a stuck child gone sooner lowers it), validated like its
neighbours."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from placer import controller
from placer.controller import PlacerController
from scheduler.config import AlloxSettings, parse_settings
from scheduler.core.resources import Resources
from scheduler.errors import ConfigError
from tests.placer.test_controller import Jobs, RecordingApi, job
from tests.placer.test_review_92 import exit_code_of

NODE = Resources(cpu_millis=6000, memory_bytes=64 * 2**30, gpus=2)


def stop_the_next_child(before: set[int], stopped: list[Any], done: threading.Event) -> None:
    """SIGSTOP the first process the placer spawns (not in ``before``): its solver process,
    stopped before it answers anything, as a node under memory pressure stops it."""
    while not done.is_set():
        new = [child for child in multiprocessing.active_children() if child.pid not in before]
        if new:
            os.kill(new[0].pid, signal.SIGSTOP)  # type: ignore[arg-type]
            stopped.append(new[0])
            return
        done.wait(0.005)


def placer_of(settings: AlloxSettings, jobs: Jobs, api: RecordingApi) -> PlacerController:
    return PlacerController(
        api=api, jobs=jobs, settings=settings, gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": NODE}, capacity=lambda: NODE, clock=lambda: 1767225700.0,
    )


def test_the_configured_deadline_kills_a_silent_solver_process() -> None:
    settings = parse_settings("allox: {solverProcess: true, solverTimeoutSeconds: 1.5, alpha: 1.0, mechanism: template}\n").allox
    api, watch = RecordingApi(), Jobs([job("a", created=0)])
    placer = placer_of(settings, watch, api)
    try:
        assert len(placer.admit().starts) == 1  # the child started, and answered
        assert placer._solver is not None
        (child,) = placer._solver._processes.values()  # type: ignore[attr-defined]
        os.kill(child.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        watch.jobs = [job("a", created=0, suspend=False, placement="gpu", started="2026-01-01T00:01:40Z"), job("b", created=1)]
        with ThreadPoolExecutor(max_workers=1) as passes:
            error = passes.submit(placer.admit).exception(timeout=120)  # what the admission loop logs
        try:
            assert "answered nothing in 1.5 s (allox.solverTimeoutSeconds)" in str(error)
            assert [name for name, _ in api.patches] == ["a"]  # nothing started without a decision
            assert exit_code_of(child, within_seconds=30) is not None  # killed, not left stopped
        finally:
            if child.exitcode is None:
                os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    finally:
        placer.stop()


def test_a_child_stopped_in_its_start_is_killed_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stopped before it answered its first request (the pid ask): no pid known, so it was left
    # stopped for ever while each pass started another. Its start is given at least
    # SOLVER_START_SECONDS (60; 2 here, to be quick), then it is killed by its pool's record.
    monkeypatch.setattr(controller, "SOLVER_START_SECONDS", 2.0)
    settings = parse_settings("allox: {solverProcess: true, solverTimeoutSeconds: 1.5, alpha: 1.0, mechanism: template}\n").allox
    api = RecordingApi()
    placer = placer_of(settings, Jobs([job("a", created=0)]), api)
    stopped: list[Any] = []
    done = threading.Event()
    watcher = threading.Thread(
        target=stop_the_next_child, args=({c.pid for c in multiprocessing.active_children()}, stopped, done), daemon=True
    )
    watcher.start()
    with ThreadPoolExecutor(max_workers=1) as passes:
        error = passes.submit(placer.admit).exception(timeout=120)  # what the admission loop logs
    done.set()
    try:
        assert "answered nothing in 2 s (starting, at least 2 s; allox.solverTimeoutSeconds)" in str(error)
        assert api.patches == []  # nothing started without a decision
        (child,) = stopped
        assert exit_code_of(child, within_seconds=30) is not None  # killed, not left stopped
    finally:
        for child in stopped:
            if child.exitcode is None:
                os.kill(child.pid, signal.SIGKILL)
        placer.stop()


def test_the_deadline_defaults_to_60_seconds() -> None:
    assert AlloxSettings().solver_timeout_seconds == 60


@pytest.mark.parametrize("value", ["0", "-1", "3601", ".inf", "soon"])
def test_a_bad_deadline_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_settings(f"allox: {{solverTimeoutSeconds: {value}}}\n")
    assert "allox.solverTimeoutSeconds" in str(refused.value) and "not a known" not in str(refused.value)
