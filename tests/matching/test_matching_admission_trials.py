"""choose_for_trial and what a trial Job may count on: the best-effort pods FitGpp may still
preempt once the trial Jobs started before it have taken theirs, and words that say whether a
preemption is coming for it or its pod waits for a busy GPU."""

from __future__ import annotations

from scheduler.matching.admission import BestEffortGpus, choose_for_trial, preemptible_for_trials

SECONDS = {"cpu": 10 * 60, "gpu": 35}


def test_trial_jobs_started_earlier_take_the_leaving_pods_first_then_the_shortest_graces():
    found = BestEffortGpus(graces=(180.0, 30.0, 60.0), leaving=1)
    assert preemptible_for_trials(found, owed=0) == [30.0, 60.0, 180.0]
    # One trial pod waiting: its victim is the one leaving.
    assert preemptible_for_trials(found, owed=1) == [30.0, 60.0, 180.0]
    # Two: the second takes the pod FitGpp preempts first.
    assert preemptible_for_trials(found, owed=2) == [60.0, 180.0]
    assert preemptible_for_trials(found, owed=5) == []
    assert preemptible_for_trials(BestEffortGpus(), owed=0) == []


def test_a_gpu_start_counting_on_a_preemption_says_so():
    choice = choose_for_trial(seconds=SECONDS, idle={}, gpu_free_in=3600, preemption_seconds=30)
    assert choice is not None and (choice.kind, choice.gpu_by, choice.gpu_wait) == ("gpu", "preemption", 30)
    assert choice.reason == "gpu: done in ~65 s; no CPU slot is free (FitGpp preempts a best-effort Job for it)"


def test_with_no_best_effort_job_left_the_gpu_start_is_the_first_busy_gpu_freeing():
    choice = choose_for_trial(seconds=SECONDS, idle={}, gpu_free_in=65, preemption_seconds=None)
    assert choice is not None and (choice.kind, choice.gpu_by, choice.gpu_wait) == ("gpu", "frees", 65)
    assert choice.reason == ("gpu: done in ~100 s; no CPU slot is free (it starts when the first busy GPU frees, ~65 s: "
                             "no best-effort Job is left for FitGpp to preempt)")
    # The CPU slot when that is sooner.
    choice = choose_for_trial(seconds={"cpu": 90, "gpu": 35}, idle={"cpu": 1}, gpu_free_in=65, preemption_seconds=None)
    assert choice is not None and choice.kind == "cpu"
    assert choice.reason == "cpu: done in ~90 s; gpu would start when the first busy GPU frees, ~100 s"


def test_with_nothing_to_preempt_and_no_gpu_expected_free_the_gpu_start_says_its_pod_waits():
    choice = choose_for_trial(seconds=SECONDS, idle={}, gpu_free_in=None, preemption_seconds=None)
    assert choice is not None and (choice.kind, choice.gpu_by, choice.gpu_wait) == ("gpu", "", None)
    assert "FitGpp preempts" not in choice.reason
    assert choice.reason == ("gpu; no CPU slot is free (no GPU is expected to free and no best-effort Job is left for "
                             "FitGpp to preempt: its pod waits for a GPU)")


def test_a_busy_gpu_freeing_before_the_victim_checkpoints_is_named_and_the_preemption_still_comes():
    choice = choose_for_trial(seconds=SECONDS, idle={}, gpu_free_in=10, preemption_seconds=300)
    assert choice is not None and (choice.kind, choice.gpu_by, choice.gpu_wait) == ("gpu", "preemption", 10)
    assert choice.reason == ("gpu: done in ~45 s; no CPU slot is free (FitGpp preempts a best-effort Job for it; "
                             "a busy GPU frees sooner, ~10 s)")
