"""One Job's sampling decided from its pods: what to create, stop, retry, and the estimate."""

import pytest

from estimator.model import Prior, Sample
from estimator.planner import EstimatorSettings, SampleKey, SamplePod, decide
from estimator.sampling import SamplingSettings, plan

KINDS = ("cpu", "gpu")
PLAN = plan(job_uid="uid-1", iterations=1000, pods=1, ratio=0.03)  # k = 10 and 20
RATE = {"cpu": (4.0, 2.0), "gpu": (8.0, 0.2)}  # start-up, seconds per iteration


def key(kind, length, pilot=0):
    return SampleKey(configuration=kind, pilot=pilot, length=length)


def done(kind, length, *, attempt=0, pilot=0):
    k = PLAN.iterations[length]
    startup, rate = RATE[kind]
    return SamplePod(
        name=f"{kind}-{length}-{attempt}", key=key(kind, length, pilot), attempt=attempt, state="succeeded",
        sample=Sample(kind, k, startup + rate * k, pilot=pilot),
    )


# Both lengths at once (``short_after_long=False``): the runs these tests play report no splits.
PARALLEL = EstimatorSettings(sampling=SamplingSettings(short_after_long=False))


def run(*, settings=PARALLEL, **kwargs):
    return decide(configurations=KINDS, plan=PLAN, job_iterations=1000, waves=1, settings=settings, **kwargs)


def test_nothing_yet_creates_every_run_once():
    decision = run(pods=[])
    assert sorted((c.key.configuration, c.key.length, c.iterations) for c in decision.create) == [
        ("cpu", "long", 20), ("cpu", "short", 10), ("gpu", "long", 20), ("gpu", "short", 10),
    ]
    assert not decision.done


def test_pods_that_exist_are_never_created_again():
    pending = [SamplePod(name="p", key=key("cpu", "short"), attempt=0, state="pending")]
    decision = run(pods=pending + [done("gpu", "short"), done("gpu", "long")])
    assert [(c.key.configuration, c.key.length) for c in decision.create] == [("cpu", "long")]
    assert decision.in_progress == 2 and not decision.done


def test_all_finished_gives_the_estimate_and_overhead():
    decision = run(pods=[done(kind, length) for kind in KINDS for length in ("short", "long")])
    assert decision.done and not decision.create
    assert decision.estimates["gpu"].seconds == pytest.approx(8 + 0.2 * 1000)
    assert decision.estimates["cpu"].seconds == pytest.approx(4 + 2.0 * 1000)
    spent = (4 + 20) + (4 + 40) + (8 + 2) + (8 + 4)
    assert decision.overhead_fraction == pytest.approx(spent / 208)  # against the fastest configuration
    assert [name for name, _ in decision.samples["gpu"]] == ["gpu-short-0", "gpu-long-0"]


def test_a_failed_run_is_retried_then_its_configuration_fails():
    failed = [SamplePod(name=f"cpu-short-{a}", key=key("cpu", "short"), attempt=a, state="failed", failure="OOMKilled") for a in range(2)]
    decision = run(pods=failed + [done("cpu", "long"), done("gpu", "short"), done("gpu", "long")])
    assert [(c.key.length, c.attempt) for c in decision.create] == [("short", 2)]
    failed.append(SamplePod(name="cpu-short-2", key=key("cpu", "short"), attempt=2, state="failed", failure="OOMKilled"))
    decision = run(pods=failed + [done("cpu", "long"), done("gpu", "short"), done("gpu", "long")])
    assert decision.done and not decision.create
    # The long run still gave a (proportional) cpu estimate; the failure is reported beside it.
    assert decision.estimates["cpu"].method == "proportional"
    assert "OOMKilled" in decision.failed["cpu"]


def test_a_configuration_whose_every_run_failed_has_no_estimate():
    pods = [
        SamplePod(name=f"cpu-{length}-{a}", key=key("cpu", length), attempt=a, state="failed", failure="ImagePullBackOff")
        for length in ("short", "long") for a in range(3)
    ]
    decision = run(pods=pods + [done("gpu", "short"), done("gpu", "long")])
    assert decision.done and set(decision.estimates) == {"gpu"}
    assert "ImagePullBackOff" in decision.failed["cpu"]


def test_a_run_far_past_its_peers_is_stopped_and_gives_a_lower_bound():
    settings = EstimatorSettings(sampling=SamplingSettings(long_factor=10, long_min_seconds=0, short_after_long=False))
    slow = SamplePod(name="cpu-long-0", key=key("cpu", "long"), attempt=0, state="running", running_seconds=500.0)
    gpu = [done("gpu", "short"), done("gpu", "long")]  # gpu predicts 12 s for k = 20
    decision = run(pods=gpu + [done("cpu", "short"), slow], settings=settings)
    assert [(s.pod, s.deadline_seconds) for s in decision.stop] == [("cpu-long-0", pytest.approx(120.0))]
    stopped = SamplePod(
        name="cpu-long-0", key=key("cpu", "long"), attempt=0, state="stopped",
        sample=Sample("cpu", 20, 500.0, complete=False),
    )
    decision = run(pods=gpu + [done("cpu", "short"), stopped], settings=settings)
    assert decision.done
    # The short run finished, so cpu is still fitted (through the origin) from what completed.
    assert decision.estimates["cpu"].seconds > decision.estimates["gpu"].seconds


def test_a_running_sample_within_its_deadline_is_left_alone():
    running = SamplePod(name="cpu-long-0", key=key("cpu", "long"), attempt=0, state="running", running_seconds=50.0)
    decision = run(pods=[done("gpu", "short"), done("gpu", "long"), done("cpu", "short"), running])
    assert not decision.stop and not decision.done


def test_a_tight_family_history_skips_sampling_that_configuration():
    tight = Prior(mean_per_iteration=0.21, std_per_iteration=0.001, count=5)
    decision = run(pods=[], priors={"gpu": tight})
    assert {c.key.configuration for c in decision.create} == {"cpu"}
    decision = run(pods=[done("cpu", "short"), done("cpu", "long")], priors={"gpu": tight})
    assert decision.estimates["gpu"].method == "history"
    assert decision.estimates["gpu"].seconds == pytest.approx(210.0)
    # Too few past Jobs, or too loose: sample, then combine.
    loose = Prior(mean_per_iteration=0.21, std_per_iteration=0.1, count=5)
    assert len(run(pods=[], priors={"gpu": loose}).create) == 4
    decision = run(pods=[done(k, length) for k in KINDS for length in ("short", "long")], priors={"gpu": loose})
    assert decision.estimates["gpu"].method == "posterior"


def test_wide_jobs_sample_every_pilot():
    wide = plan(job_uid="uid-2", iterations=1000, pods=100, ratio=0.03)
    decision = decide(configurations=("gpu",), plan=wide, job_iterations=1000, waves=10, pods=[], settings=PARALLEL)
    assert sorted({c.key.pilot for c in decision.create}) == list(wide.pilots)
    assert len(decision.create) == 2 * len(wide.pilots)
    # In sequence: one long run per pilot first.
    decision = decide(configurations=("gpu",), plan=wide, job_iterations=1000, waves=10, pods=[])
    assert [(c.key.pilot, c.key.length) for c in decision.create] == [(pilot, "long") for pilot in wide.pilots]
    assert decision.in_progress == 2 * len(wide.pilots)


# --- In sequence (the default): the long run first, the short one only when it is needed ---

SEQUENCE = EstimatorSettings()


def long_with_split(kind, *, split=True, pilot=0):
    """A long run of PLAN that reports (or not) the time it reached at the short length."""
    startup, rate = RATE[kind]
    k, short = PLAN.iterations["long"], PLAN.iterations["short"]
    splits = ((short, startup + rate * short),) if split else ()
    return SamplePod(
        name=f"{kind}-long-0", key=key(kind, "long", pilot), attempt=0, state="succeeded",
        sample=Sample(kind, k, startup + rate * k, pilot=pilot, splits=splits),
    )


def test_in_sequence_the_long_runs_go_first_asking_for_a_split_at_the_short_length():
    decision = run(pods=[], settings=SEQUENCE)
    assert [(c.key.configuration, c.key.length, c.iterations, c.split_iterations) for c in decision.create] == [
        ("cpu", "long", 20, 10), ("gpu", "long", 20, 10),
    ]
    assert decision.in_progress == 4 and not decision.done  # the short runs wait, counted
    running = [SamplePod(name=f"{k}-long-0", key=key(k, "long"), attempt=0, state="running", running_seconds=1.0) for k in KINDS]
    decision = run(pods=running, settings=SEQUENCE)
    assert not decision.create and decision.in_progress == 4


def test_a_long_run_that_reports_its_split_is_both_samples_one_start_up_paid():
    decision = run(pods=[long_with_split(k) for k in KINDS], settings=SEQUENCE)
    assert decision.done and not decision.create
    assert decision.estimates["cpu"].seconds == pytest.approx(4 + 2.0 * 1000)
    assert decision.estimates["gpu"].seconds == pytest.approx(8 + 0.2 * 1000)
    assert decision.estimates["gpu"].method == "samples"  # two lengths: start-up and rate told apart
    assert decision.estimates["gpu"].samples == 1
    assert decision.overhead_fraction == pytest.approx(((4 + 40) + (8 + 4)) / 208)  # one start-up each


def test_a_long_run_without_a_split_is_followed_by_the_short_run():
    pods = [long_with_split("cpu", split=False), long_with_split("gpu")]
    decision = run(pods=pods, settings=SEQUENCE)
    assert [(c.key.configuration, c.key.length, c.split_iterations) for c in decision.create] == [("cpu", "short", None)]
    assert not decision.done
    decision = run(pods=pods + [done("cpu", "short")], settings=SEQUENCE)
    assert decision.done and decision.estimates["cpu"].seconds == pytest.approx(4 + 2.0 * 1000)


def test_a_split_at_the_long_length_end_does_not_stand_for_the_short_run():
    # 18 of 20 iterations: nearer the long length than the short one, too close to fit a rate.
    pod = long_with_split("cpu")
    late = SamplePod(name=pod.name, key=pod.key, attempt=0, state="succeeded", sample=Sample("cpu", 20, 44.0, splits=((18, 40.0),)))
    decision = run(pods=[late, long_with_split("gpu")], settings=SEQUENCE)
    assert [(c.key.configuration, c.key.length) for c in decision.create] == [("cpu", "short")]


def test_a_long_run_stopped_as_long_needs_no_short_run():
    settings = EstimatorSettings(sampling=SamplingSettings(long_factor=10, long_min_seconds=0))
    stopped = SamplePod(name="cpu-long-0", key=key("cpu", "long"), attempt=0, state="stopped", sample=Sample("cpu", 20, 500.0, complete=False))
    decision = run(pods=[stopped, long_with_split("gpu")], settings=settings)
    assert decision.done and not decision.create
    assert decision.estimates["cpu"].method == "lower-bound"
    assert decision.estimates["cpu"].seconds == pytest.approx(500.0 * 1000 / 20)


def test_a_long_run_that_keeps_failing_hands_over_to_the_short_run():
    failed = [SamplePod(name=f"cpu-long-{a}", key=key("cpu", "long"), attempt=a, state="failed", failure="OOMKilled") for a in range(2)]
    decision = run(pods=failed + [long_with_split("gpu")], settings=SEQUENCE)
    assert [(c.key.length, c.attempt, c.split_iterations) for c in decision.create] == [("long", 2, 10)]  # retried first
    failed.append(SamplePod(name="cpu-long-2", key=key("cpu", "long"), attempt=2, state="failed", failure="OOMKilled"))
    decision = run(pods=failed + [long_with_split("gpu")], settings=SEQUENCE)
    assert [(c.key.length, c.attempt) for c in decision.create] == [("short", 0)]
    decision = run(pods=failed + [long_with_split("gpu"), done("cpu", "short")], settings=SEQUENCE)
    assert decision.done and decision.estimates["cpu"].method == "proportional"
    assert "OOMKilled" in decision.failed["cpu"]


def test_a_short_run_that_exists_is_used_whatever_the_order():
    # Started before a switch to sequence (or by an older cellfit): it counts, nothing is redone.
    decision = run(pods=[done("cpu", "short"), long_with_split("cpu", split=False), long_with_split("gpu")], settings=SEQUENCE)
    assert decision.done and not decision.create
    assert [name for name, _ in decision.samples["cpu"]] == ["cpu-long-0", "cpu-short-0"]
