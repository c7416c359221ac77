"""A Job whose sampling pods the API server refuses for a missing PriorityClass (8c7aa2f: no
attempt spent, retried every pass until the class exists) does not hold the sampling budget
(estimator.maxClusterShare) from the Jobs whose pods it takes. Before, the oldest Job came first
at every pass: its runs, never created, took the budget each time and were counted as held until
its next recount, so a younger Job whose runs did not fit beside them waited for ever
('2 sampling runs wait for the sampling budget') while the first Job's template named a class
that did not exist (spec.template.spec.priorityClassName, estimator.priorityClassName unset)."""

from __future__ import annotations

from typing import Any

from estimator.controller import EstimatorController
from scheduler.config import EstimatorSettings
from tests.estimator.test_review_62 import CREATED_AT, Clock, estimator_for
from tests.estimator.test_user29_missing_priority_class import NoClassApi, own_class_job

# 3.2 of the 64 cores: one 2-core cpu run at a time, and no 1-GPU run (0.4 of the 8 GPUs).
ONE_RUN = EstimatorSettings(max_cluster_share=0.05, priority_class_name=None)
# 9.6 cores and 1.2 GPUs: one Job's cpu and gpu runs, and a second Job's cpu run, not its gpu run.
ONE_GPU_RUN = EstimatorSettings(max_cluster_share=0.15, priority_class_name=None)


def created_of(api: NoClassApi, job: str) -> list[str]:
    return [pod["metadata"]["name"] for pod in api.created if pod["metadata"]["name"].startswith(f"{job}-")]


def two_jobs(*, settings: EstimatorSettings = ONE_RUN) -> tuple[NoClassApi, EstimatorController, Any]:
    """The older Job ('a') names a class that does not exist; the younger ('b') none."""
    api = NoClassApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60), settings=settings)
    older = own_class_job("a", "typo-class")
    estimator._replace_jobs([older, own_class_job("b", "")])
    return api, estimator, older


def test_the_younger_job_is_sampled_while_the_older_one_s_class_is_missing() -> None:
    api, estimator, _ = two_jobs()
    for _ in range(3):
        estimator.reconcile(everything=True)
    assert created_of(api, "b") != []
    assert created_of(api, "a") == [] and api.refused == 1  # then it waits for the budget, as any Job


def test_a_refused_run_is_not_counted_as_held_until_the_job_s_recount() -> None:
    """The pass after the refusal, over the Jobs waiting for the budget alone (no resync): the
    older Job's runs all fitted (it waits for nothing, so that pass does not recount it), and
    its GPU run, never created, kept the younger one's from the budget's one GPU."""
    api, estimator, _ = two_jobs(settings=ONE_GPU_RUN)
    estimator.reconcile(everything=True)
    assert [name for name in created_of(api, "b") if "-gpu-" in name] == [] and api.refused == 2
    estimator.reconcile(everything=False)
    assert [name for name in created_of(api, "b") if "-gpu-" in name] != []


def test_the_older_job_is_sampled_once_its_class_exists_and_the_budget_frees() -> None:
    api, estimator, _ = two_jobs()
    for _ in range(2):
        estimator.reconcile(everything=True)
    api.created_class = True
    estimator.delete_job("uid-b")  # the younger one is gone with its run: the budget is free
    for _ in range(2):
        estimator.reconcile(everything=True)
    assert created_of(api, "a") != []


def test_the_older_job_waiting_behind_the_budget_is_still_told_its_class_is_missing() -> None:
    """Last in the pass, its runs may wait for the budget: its view still names the class, the
    reason none of them will be created once there is room."""
    api, estimator, _ = two_jobs()
    for _ in range(3):
        estimator.reconcile(everything=True)
    views = {entry["name"]: entry for entry in estimator.inspect()["jobs"]}
    assert (views["a"]["state"], views["a"]["message"]) == (
        "sampling", "sampling pods not created: their PriorityClass 'typo-class' (spec.template.spec.priorityClassName) does not exist")
