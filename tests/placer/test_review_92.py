"""Adversarial review of AlloX admission (helper-92), as a cluster user or an operator breaks it:
Jobs changed by hand between a start and the watch showing it, the solver process hanging, the
rewrite against what a user's pod template already carries, and what waiting Jobs are told."""

from __future__ import annotations

from tests.placer.test_controller import Jobs
from tests.placer.test_review_61 import ServerApi, server_controller, stored_job


def test_a_job_suspended_again_before_the_watch_showed_its_start_waits_and_starts_again() -> None:
    api = ServerApi([stored_job("a", created=0)])
    watch = Jobs(api.watched())
    placer = server_controller(api, watch)
    (start,) = placer.admit().starts
    assert start.key == "alice/a" and api.jobs["a"]["spec"]["suspend"] is False
    # Its user (or a tool that suspends Jobs) suspends it again at once: the watch never shows it
    # unsuspended, only suspended at a later version. It was taken for AlloX's own start not
    # shown yet, pass after pass: never started again, and told it runs.
    api.edit("a", lambda body: body["spec"].update(suspend=True))
    watch.jobs = api.watched()
    (again,) = placer.admit().starts
    assert again.key == "alice/a" and api.jobs["a"]["spec"]["suspend"] is False
