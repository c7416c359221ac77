"""The synthetic ``fitgpp`` workload (§4.2) and its truncated normals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.preemption import JobClass
from scheduler.simulator.distributions import TruncatedNormal
from scheduler.simulator.errors import InvalidWorkload
from scheduler.simulator.cluster import ClusterSpec
from scheduler.simulator.fitgpp.workload import BEST_EFFORT_PROFILE, GRACE_PERIOD_MINUTES, TRIAL_PROFILE, FitGppWorkload

CLUSTER = ClusterSpec()


@settings(max_examples=60, deadline=None)
@given(
    mean=st.floats(-100, 100),
    sd=st.floats(0, 50),
    low=st.floats(-50, 50),
    width=st.floats(0, 100),
    seed=st.integers(0, 2**32 - 1),
)
def test_truncated_normal_stays_within_its_bounds(mean: float, sd: float, low: float, width: float, seed: int) -> None:
    distribution = TruncatedNormal(mean=mean, sd=sd, low=low, high=low + width)
    values = distribution.sample(np.random.default_rng(seed), 200)
    assert np.isfinite(values).all()
    assert (values >= low).all() and (values <= low + width).all()


def test_truncated_normal_matches_the_paper_parameters() -> None:
    rng = np.random.default_rng(0)
    te = TRIAL_PROFILE.duration_minutes.sample(rng, 200_000)
    be = BEST_EFFORT_PROFILE.duration_minutes.sample(rng, 200_000)
    gp = GRACE_PERIOD_MINUTES.sample(rng, 200_000)
    # §4.2: TE mean 5 min cut at 30, BE mean 30 min cut at 24 h, GP mean 3 min cut at 20.
    assert te.max() <= 30 and be.max() <= 24 * 60 and gp.max() <= 20
    assert np.median(te) == pytest.approx(5.0, abs=0.6)
    assert np.median(be) == pytest.approx(30.0, abs=0.6)
    assert np.median(gp) == pytest.approx(3.0, abs=0.2)
    scaled = GRACE_PERIOD_MINUTES.scaled(2.0)
    assert (scaled.mean, scaled.sd, scaled.high) == (6.0, 3.0, 40.0)


def test_truncated_normal_is_validated() -> None:
    with pytest.raises(InvalidWorkload, match="sd"):
        TruncatedNormal(mean=0, sd=-1, low=0, high=1)
    with pytest.raises(InvalidWorkload, match="low"):
        TruncatedNormal(mean=0, sd=1, low=2, high=1)
    assert TruncatedNormal(mean=5, sd=0, low=0, high=3).sample(np.random.default_rng(1), 3).tolist() == [3.0] * 3


def test_generated_jobs() -> None:
    jobs = FitGppWorkload().generate(jobs=5000, seed=1, cluster=CLUSTER)
    assert len({job.job_id for job in jobs}) == 5000
    trial = np.mean([job.job_class is JobClass.TRIAL for job in jobs])
    assert trial == pytest.approx(0.3, abs=0.03)
    for job in jobs:
        assert job.demand.fits_in(CLUSTER.node)
        assert job.demand.cpu_millis >= 1000 and job.demand.cpu_millis % 1000 == 0
        assert job.demand.memory_bytes >= 2**30
        assert job.duration > 0 and job.grace_period >= 0 and job.submit_time == 0
    assert jobs == FitGppWorkload().generate(jobs=5000, seed=1, cluster=CLUSTER)
    assert jobs != FitGppWorkload().generate(jobs=5000, seed=2, cluster=CLUSTER)


def test_changing_one_distribution_leaves_the_other_attributes_alone() -> None:
    base = FitGppWorkload().generate(jobs=500, seed=4, cluster=CLUSTER)
    scaled = FitGppWorkload(gp_scale=4.0).generate(jobs=500, seed=4, cluster=CLUSTER)
    for a, b in zip(base, scaled):
        assert (a.job_class, a.demand, a.duration) == (b.job_class, b.demand, b.duration)
        assert b.grace_period == pytest.approx(4 * a.grace_period)


def test_workload_is_validated() -> None:
    with pytest.raises(InvalidWorkload, match="te_share"):
        FitGppWorkload(te_share=1.5)
    with pytest.raises(InvalidWorkload, match="gp_scale"):
        FitGppWorkload(gp_scale=-1)
    with pytest.raises(InvalidWorkload, match="nodes"):
        ClusterSpec(nodes=0)


def test_one_parameter_can_be_changed_by_name() -> None:
    base = FitGppWorkload()
    changed = base.with_parameter("te.gpus.mean", 3.0)
    assert changed.trial.gpus.mean == 3.0 and changed.trial.gpus.sd == base.trial.gpus.sd
    assert changed.best_effort == base.best_effort and changed.grace_period_minutes == base.grace_period_minutes
    assert base.with_parameter("be.duration.high", 60.0).best_effort.duration_minutes.high == 60.0
    assert base.with_parameter("gp.mean", 6.0).grace_period_minutes.mean == 6.0
    for key in ("te.gpu.mean", "xx.gpus.mean", "te.gpus", "gp.median", "be.memory.max"):
        with pytest.raises(InvalidWorkload, match="not a workload parameter"):
            base.with_parameter(key, 1.0)
