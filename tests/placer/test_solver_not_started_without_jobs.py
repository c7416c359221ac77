"""A pass with no waiting Job decides in process and starts no AlloX solver process (perf26):
each leader's first pass came 11 s after it led, with or without Jobs, and its new child spent
1.0-1.8 s of CPU importing the matching on the cores kube-scheduler was binding a burst on."""

from __future__ import annotations

from placer.controller import PlacerController
from scheduler.config import parse_settings
from tests.placer.test_controller import Jobs, RecordingApi, job
from tests.placer.test_solver_timeout_setting import NODE


def test_no_child_until_a_job_waits() -> None:
    settings = parse_settings("allox: {solverProcess: true, alpha: 1.0, mechanism: template}\n").allox
    jobs = Jobs([])
    placer = PlacerController(
        api=RecordingApi(), jobs=jobs, settings=settings, gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": NODE}, capacity=lambda: NODE, clock=lambda: 1767225700.0,
    )
    try:
        assert placer.admit().starts == ()
        assert placer._solver is None
        jobs.jobs.append(job("a", created=0))
        assert [start.key for start in placer.admit().starts] == ["alice/a"]
        assert placer._solver is not None  # a Job to match: the child decides it
    finally:
        placer.stop()
