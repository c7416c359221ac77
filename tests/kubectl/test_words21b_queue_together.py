"""``kubectl cellfit queue`` says which Jobs of a kind start together (user21's item 11): ij-5 "1
~60 s" and ij-6 "2 ~60 s" on cpu, three CPU slots freeing at once, read as "2nd after the 1st".
The inspect API's ``startsWith`` (placer/controller.py) names the first of those expected at a
Job's time."""

from __future__ import annotations

from scheduler.kubectl import output, views


def test_a_job_starting_with_those_before_it_says_so_in_its_position() -> None:
    view = {"queue": {"cpu": [{"job": "ns/ij-5", "kind": "cpu", "position": 1, "expectedStartSeconds": 60.0},
                              {"job": "ns/ij-6", "kind": "cpu", "position": 2, "expectedStartSeconds": 60.0, "startsWith": 1},
                              {"job": "ns/ij-7", "kind": "cpu", "position": 3, "expectedStartSeconds": 60.0, "startsWith": 1},
                              {"job": "ns/ij-8", "kind": "cpu", "position": 4, "expectedStartSeconds": 660.0}],
                      "gpu": [{"job": "ns/ij-2", "kind": "gpu", "position": 1, "expectedStartSeconds": 60.0},
                              {"job": "ns/ij-3", "kind": "gpu", "position": 2, "expectedStartSeconds": 87.0}]}}
    assert output.table(views.queue_rows(view), views.QUEUE_COLUMNS, empty="").splitlines() == [
        "JOB       KIND   POSITION              EXPECTED-START   VC",
        "ns/ij-5   cpu    1                     ~1 min or less   -",
        "ns/ij-6   cpu    2 (starts with 1)     ~1 min or less   -",
        "ns/ij-7   cpu    3 (starts with 1-2)   ~1 min or less   -",
        "ns/ij-8   cpu    4                     ~11 min          -",
        "ns/ij-2   gpu    1                     ~1 min or less   -",
        "ns/ij-3   gpu    2                     ~87 s            -",
    ]


def test_an_older_cellfits_view_without_starts_with_shows_positions_as_before() -> None:
    view = {"queue": {"gpu": [{"job": "ml/a", "kind": "gpu", "position": 1, "expectedStartSeconds": 30.0},
                              {"job": "ml/b", "kind": "gpu", "position": 2, "expectedStartSeconds": 30.0}]}}
    assert [row["position"] for row in views.queue_rows(view)] == [1, 2]
