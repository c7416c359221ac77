"""Review of AlloX admission (helper-72): what a Job's pods ask beside its configuration (init
containers, sidecars, pod-level resources), a GPU configuration whose cores or memory no node
holds, pods of several GPUs, and what a long-lived controller keeps of Jobs that are gone."""

from __future__ import annotations


from tests.placer.test_controller import RecordingApi, controller, job


def test_a_job_deleted_before_the_watch_shows_its_start_is_forgotten() -> None:
    api = RecordingApi()
    started = job("brief", created=0)
    placer = controller(api, [started], gpus=1)
    (start,) = placer.admit().starts
    assert start.key == "alice/brief"
    # Its user deletes it at once: the watch never shows it unsuspended, only gone. Its UID was
    # kept for the life of the process, one per such Job.
    placer._jobs.jobs = []  # type: ignore[attr-defined]
    placer.admit()
    assert placer._started == {}
