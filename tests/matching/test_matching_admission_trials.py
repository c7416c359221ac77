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
    assert choice.reason == "done in ~65 s, counting the checkpoint of the best-effort Job its pod preempts; no CPU slot is free"


def test_with_no_best_effort_job_left_the_gpu_start_is_the_first_busy_gpu_freeing():
    choice = choose_for_trial(seconds=SECONDS, idle={}, gpu_free_in=65, preemption_seconds=None)
    assert choice is not None and (choice.kind, choice.gpu_by, choice.gpu_wait) == ("gpu", "frees", 65)
    assert choice.reason == ("done in ~100 s, starting when the first busy GPU frees, in ~65 s (no best-effort Job is left "
                             "to preempt); no CPU slot is free")
    # The CPU slot when that is sooner.
    choice = choose_for_trial(seconds={"cpu": 90, "gpu": 35}, idle={"cpu": 1}, gpu_free_in=65, preemption_seconds=None)
    assert choice is not None and choice.kind == "cpu"
    assert choice.reason == "done in ~90 s; on gpu it would be done in ~100 s, after the first busy GPU frees"


def test_with_nothing_to_preempt_and_no_gpu_expected_free_the_gpu_start_says_its_pod_waits():
    choice = choose_for_trial(seconds=SECONDS, idle={}, gpu_free_in=None, preemption_seconds=None)
    assert choice is not None and (choice.kind, choice.gpu_by, choice.gpu_wait) == ("gpu", "", None)
    assert "preempts" not in choice.reason
    assert choice.reason == ("its pod waits for a GPU, as none is expected to free and no best-effort Job is left to preempt; "
                             "no CPU slot is free")


def test_a_busy_gpu_freeing_before_the_victim_checkpoints_is_named_and_the_preemption_still_comes():
    choice = choose_for_trial(seconds=SECONDS, idle={}, gpu_free_in=10, preemption_seconds=300)
    assert choice is not None and (choice.kind, choice.gpu_by, choice.gpu_wait) == ("gpu", "preemption", 10)
    assert choice.reason == ("done in ~45 s (a busy GPU frees in ~10 s, before the best-effort Job its pod preempts has "
                             "checkpointed); no CPU slot is free")


def test_what_a_trial_job_is_told_names_no_kind_twice_nor_fitgpp_and_says_durations_as_everywhere():
    # user21's item 18: "started on gpu: trial Job, gpu: done in ~35 s; no CPU slot is free (FitGpp
    # preempts a best-effort Job for it)" said "gpu" twice (the placer's "started on gpu" comes
    # first), named the algorithm, and wrote its durations its own way (scheduler.wording.duration
    # says 2.5 h, not "150 min").
    cases = [
        choose_for_trial(seconds={"cpu": 600, "gpu": 35}, idle={"gpu": 1}, gpu_free_in=None, preemption_seconds=None),
        choose_for_trial(seconds={"cpu": 600, "gpu": 35}, idle={}, gpu_free_in=None, preemption_seconds=30),
        choose_for_trial(seconds={"cpu": 600, "gpu": 35}, idle={}, gpu_free_in=10, preemption_seconds=300),
        choose_for_trial(seconds={"cpu": 600, "gpu": 35}, idle={}, gpu_free_in=65, preemption_seconds=None),
        choose_for_trial(seconds={"cpu": 600, "gpu": 35}, idle={}, gpu_free_in=None, preemption_seconds=None),
        choose_for_trial(seconds={"cpu": 60, "gpu": 35}, idle={"cpu": 1}, gpu_free_in=None, preemption_seconds=300),
        choose_for_trial(seconds={"cpu": 600, "gpu": 35}, idle={"cpu": 1}, gpu_free_in=None, preemption_seconds=30),
    ]
    for choice in cases:
        assert choice is not None
        said = f"started on {choice.kind}: trial Job, {choice.reason}"
        assert "FitGpp" not in said, said
        assert not choice.reason.startswith(("gpu", "cpu")), said
    assert cases[0].reason == "on a free GPU, done in ~35 s"
    assert cases[5].reason == "done in ~60 s; on gpu it would be done in ~6 min, after a best-effort Job checkpoints"
    assert cases[6].reason == ("done in ~65 s, counting the checkpoint of the best-effort Job its pod preempts; "
                               "on cpu it would be done in ~10 min")
    choice = choose_for_trial(seconds={"cpu": 9000, "gpu": 35}, idle={}, gpu_free_in=None, preemption_seconds=9000)
    assert choice is not None and choice.reason.startswith("done in ~2.5 h,"), choice.reason
