"""review26 #8 (9354d66/1b42bba): NoMachine says "it never fits" of a CPU configuration that lacks
only what AlloX keeps beside GPUs for GPU pods (the cores of a VC's gang, 32 of 64 per node),
and sends it as a Warning Event once. Since 1b42bba that room is forgotten 300 s after the GPU
pods are gone, and the same Job starts: "never" was "while those GPU pods are here and for
300 s after". A user told "never fits" edits or deletes a Job that would have started."""

from __future__ import annotations

from placer.holding import DEFAULT_UNBOUND_HOLD_SECONDS
from scheduler.core.model import PodInfo
from tests.placer import test_placer24_gpu_node_cores as cores
from tests.placer.test_controller import RecordingApi

START = 1767225700.0


def test_a_job_told_it_never_fits_is_not_started_once_the_gpu_pods_left() -> None:
    pods: list[PodInfo] = [cores.gang_pod("gang-bert-0")]
    api = RecordingApi()
    made = cores.placer(api, pods)
    assert made.admit().starts == ()
    told = [c["message"] for name, c in api.conditions if c["reason"] == "NoMachine"]
    pods.clear()
    made._clock = lambda: START + DEFAULT_UNBOUND_HOLD_SECONDS + 1
    started = [(s.key, s.kind) for s in made.admit().starts]
    assert started == [("u2/q-u2-3", "cpu")]
    # A Job that starts without any change of its own was not one that "never fits".
    assert not any("it never fits" in message for message in told), told
    assert told and told[0].endswith(
        "48 cores and 64 GiB a pod, more than they have in all (32 cores beside the 32 kept for their GPUs): it fits once the GPU "
        "pods asking that much beside their GPUs have been gone 300 s"), told
