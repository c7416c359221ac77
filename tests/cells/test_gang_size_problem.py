"""gang_size_problem: the pure check HiveD's filter and the admission webhook share."""

from __future__ import annotations

import pytest

from scheduler.cells.request import gang_size_problem, pods_at_once


@pytest.mark.parametrize(
    ("parallelism", "completions", "expected"),
    [(None, None, 1), (4, None, 4), (4, 2, 2), (4, 9, 4), (0, None, None), (0, 3, None)],
)
def test_pods_at_once(parallelism, completions, expected):
    assert pods_at_once(parallelism=parallelism, completions=completions) == expected


def test_a_gang_larger_than_the_jobs_parallelism_is_named_with_both_fields():
    assert gang_size_problem(4, parallelism=2, completions=None) == (
        "annotation cellfit.io/gang-size is 4 but the Job runs at most 2 pods at once (spec.parallelism 2): "
        "the gang could never be complete (set it to 2)"
    )
    assert "(spec.parallelism 8, spec.completions 3)" in (gang_size_problem(4, parallelism=8, completions=3) or "")
    # Unset parallelism is Kubernetes' default, 1.
    assert "at most 1 pod at once (spec.parallelism 1)" in (gang_size_problem(2, parallelism=None, completions=None) or "")


@pytest.mark.parametrize(("size", "parallelism", "completions"), [(2, 2, None), (2, 4, 8), (1, None, None), (8, 0, None)])
def test_gangs_the_job_can_complete_pass(size, parallelism, completions):
    assert gang_size_problem(size, parallelism=parallelism, completions=completions) is None
