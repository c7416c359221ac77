"""A new solver process's first answers include its start (a new interpreter importing NumPy and
the matching: about a second on a loaded node), which ``allox.solverTimeoutSeconds`` may be set
below, as its description invites (a matching takes tens of milliseconds there). Each pass then
killed the child before it had started, started another, and no Job ever started."""

from __future__ import annotations

from placer.controller import PlacerController
from scheduler.config import parse_settings
from tests.placer.test_controller import Jobs, RecordingApi, job
from tests.placer.test_solver_timeout_setting import NODE


def test_a_deadline_below_the_childs_start_still_starts_jobs() -> None:
    # 1 ms: no process is spawned and imports the matching that fast, so the first answer is
    # always later; the start is given its own allowance, the deadline bounds the answers after.
    settings = parse_settings("allox: {solverProcess: true, solverTimeoutSeconds: 0.001, alpha: 1.0, mechanism: template}\n").allox
    api = RecordingApi()
    placer = PlacerController(
        api=api, jobs=Jobs([job("a", created=0)]), settings=settings, gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": NODE}, capacity=lambda: NODE, clock=lambda: 1767225700.0,
    )
    try:
        decision = placer.admit()
        assert [start.key for start in decision.starts] == ["alice/a"]
        assert len(api.patches) == 1
    finally:
        placer.stop()
