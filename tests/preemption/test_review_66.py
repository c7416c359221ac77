"""helper-66's adversarial review of FitGpp preemption as it runs live (FitGppEngine, its holds
and the preemption count a Job carries). Each test is a way a cluster user broke it."""

from __future__ import annotations

import pytest

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo
from scheduler.errors import InvalidAnnotation
from scheduler.preemption import FitGppSettings, preemption_count_of
from scheduler.preemption.engine import FitGppEngine

from tests.preemption.test_engine import full_node, te

COUNT = "cellfit.io/preemptions"


@pytest.mark.parametrize("value", ["1" * 30, "9" * 5000, str(2**31), "²", "٣", "-1", "1.0", ""])
def test_a_preemption_count_cellfit_cannot_read_is_refused_naming_its_field(value):
    """A user writes the annotation on their own Job. A superscript digit passed str.isdigit and
    then broke int(); a number past 64 bits broke the victim table (OverflowError). Either one,
    raised out of apply_job, stopped the Jobs' relist, and the admission check answered 500."""
    with pytest.raises(InvalidAnnotation) as raised:
        preemption_count_of({COUNT: value})
    assert raised.value.field == f"metadata.annotations[{COUNT}]"


def test_the_largest_count_read_can_still_be_raised_by_a_preemption():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(max_preemptions=None))
    full_node(engine)
    largest = str(2**31 - 1)
    assert preemption_count_of({COUNT: largest}) == 2**31 - 1
    assert preemption_count_of({COUNT: "0" * 20 + "3 "}) == 3
    engine.apply_job(JobInfo(uid="job-b", namespace="ml", name="b", annotations={COUNT: largest}))
    assert engine.select_victims(te(gpus=4), {"n1": []}, {}) == {"n1": ["be-short"]}
    assert engine.preemptions_of_job("job-b") == 2**31


@pytest.mark.parametrize("value", ["1" * 30, "²"])
def test_a_job_with_an_unreadable_count_leaves_the_engine_serving(value):
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine)
    engine.apply_job(JobInfo(uid="job-b", namespace="ml", name="b", annotations={COUNT: value}))
    assert engine.select_victims(te(gpus=4), {"n1": []}, {}) == {"n1": ["be-short"]}
