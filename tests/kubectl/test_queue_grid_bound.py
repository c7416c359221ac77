"""``kubectl cellfit queue`` and ``why`` tell an expected start on AlloX's grid as a bound (user25
#10): AlloX rounds a busy machine's expected end up onto allox.omegaGridSeconds (60 s by default,
ten steps, then 25% wider ones: scheduler/matching/admission.py), so a machine freeing in 7 s read
"~60 s", as if exact. A whole number of minutes up to ten now reads "~1 min or less"; other
figures (a queued Job's start after others' runs) keep "~95 s"."""

from __future__ import annotations

import pytest

from scheduler.config import AlloxSettings
from scheduler.kubectl import views
from scheduler.kubectl.objects import CellfitView, job_from
from scheduler.kubectl.why import explain_job
from scheduler.kubectl.wording import ALLOX_GRID_SECONDS
from scheduler.matching.admission import _on_grid


def test_the_plugin_reads_alloxs_default_grid() -> None:
    assert AlloxSettings().omega_grid_seconds == ALLOX_GRID_SECONDS


@pytest.mark.parametrize(("frees_in", "said"), [(7.0, "~1 min or less"), (61.0, "~2 min or less"), (599.0, "~10 min or less"),
                                               (601.0, "~12 min")])
def test_a_machine_freeing_soon_reads_as_a_bound(frees_in: float, said: str) -> None:
    on_grid = _on_grid(frees_in, step=ALLOX_GRID_SECONDS, ratio=1.25)  # what AlloX's queue says of it
    view = {"queue": {"gpu": [{"job": "ns/ij-2", "kind": "gpu", "position": 1, "expectedStartSeconds": on_grid}]}}
    assert [row["expected-start"] for row in views.queue_rows(view)] == [said]


def test_other_figures_keep_their_approximation() -> None:
    view = {"queue": {"cpu": [{"job": "ns/a", "kind": "cpu", "position": 1, "expectedStartSeconds": 87.0},
                              {"job": "ns/b", "kind": "cpu", "position": 2, "expectedStartSeconds": 660.0},
                              {"job": "ns/c", "kind": "cpu", "position": 3, "expectedStartSeconds": 0.0}]}}
    assert [row["expected-start"] for row in views.queue_rows(view)] == ["~87 s", "~11 min", "~0 s"]


def test_why_says_the_bound_too() -> None:
    job = job_from({"metadata": {"name": "ij", "namespace": "ns", "annotations": {
        "cellfit.io/configurations": "[]", "cellfit.io/estimate": '{"cpu": {"seconds": 100}, "gpu": {"seconds": 20}}'}},
        "spec": {"suspend": True}})
    for seconds, said in ((60.0, "expected start in ~1 min or less"), (95.0, "expected start in ~95 s")):
        entry = {"job": "ns/ij", "kind": "gpu", "position": 1, "expectedStartSeconds": seconds}
        assert explain_job(job, CellfitView(allox_entry=entry)).summary == f"queued by AlloX: 1st on gpu, {said}"
