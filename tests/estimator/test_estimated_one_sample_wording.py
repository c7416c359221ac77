"""The Estimated Event counts its samples in words a user reads: "from 1 sample", not "from 1
samples" (a live session, user23b)."""

from __future__ import annotations

from estimator.controller import describe
from estimator.model import ConfigurationEstimate, Sample
from estimator.planner import Decision


def _estimate(kind: str, seconds: float) -> ConfigurationEstimate:
    return ConfigurationEstimate(configuration=kind, seconds=seconds, uncertainty_seconds=0.0, pod_seconds=seconds,
                                 memory_bytes=None, samples=1, method="samples")


def _decision(samples: int) -> Decision:
    rows = [(f"sample-{i}", Sample(configuration="gpu", iterations=10, seconds=3.0)) for i in range(samples)]
    return Decision(estimates={"gpu": _estimate("gpu", 27.0)}, samples={"gpu": rows}, overhead_fraction=None)


def test_one_sample_is_said_in_the_singular_and_more_in_the_plural() -> None:
    assert describe(_decision(1)) == "estimated gpu 27 s from 1 sample"
    assert describe(_decision(2)) == "estimated gpu 27 s from 2 samples"
