"""user26: a CPU start's reason said "no GPU was free for it, the first expected free in 19 s" for
a Job of 20 s on the GPU and 60 s on CPU, as if AlloX had weighed 39 s against 60 s. It decided on
the GPU free at its end rounded up to the ω grid (allox.omegaGridSeconds, 60 s): 80 s against 60.
The reason says both: by how much waiting would have ended it sooner by the estimates, and the
comparison AlloX made."""

from __future__ import annotations

from tests.placer.test_controller import RecordingApi, controller, job


def placed(api: RecordingApi) -> dict[str, str]:
    return {name: message for name, reason, message in api.events if reason == "Placed"}


def test_a_cpu_start_the_grid_decided_says_the_comparison_allox_made() -> None:
    api = RecordingApi()
    # r runs on the one GPU since 00:00:59, 60 s estimated: it frees at 00:01:59, 19 s after the
    # clock's 00:01:40. w: 19 + 20 = 39 s waiting, 60 s on CPU; as AlloX counts the GPU (at
    # 00:02:40, on the minute grid), 60 + 20 = 80 s. Before: the first sentence alone.
    running = job("r", cpu=600, gpu=60, suspend=False, placement="gpu", started="2026-01-01T00:00:59Z", version="7")
    placer = controller(api, [running, job("w", cpu=60, gpu=20, created=1)], gpus=1)
    assert [(s.key, s.kind) for s in placer.admit().starts] == [("alice/w", "cpu")]
    assert placed(api)["w"] == (
        "started on cpu: AlloX chose cpu (estimated 60 s; gpu 20 s) because no GPU was free for it, the first expected free "
        "in 19 s; waiting for it would have ended this Job ~21 s sooner by the estimates, but AlloX counts a busy machine free "
        "at its estimated end rounded up to its grid (allox.omegaGridSeconds), in 60 s here, so waiting as it counted it would "
        "have ended this Job ~20 s later than on cpu")
