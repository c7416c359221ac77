"""review25: what AlloX keeps beside each free GPU for GPU pods (placer/guarantee.py asked_per_gpu,
F17) was the most seen since cellfit started: a pod's cores or memory per GPU stood after the pod
was deleted, until a restart. Now it is the most over the passes of the last NotBound limit
(300 s; AskedLately): a pod replaced within it (a Job's retried pod, a gang's next) finds its
room, and once a pod is gone longer its room is forgotten."""

from __future__ import annotations

from placer.guarantee import AskedLately
from placer.holding import DEFAULT_UNBOUND_HOLD_SECONDS
from scheduler.core.model import PodInfo
from scheduler.matching.model import Demand
from tests.placer import test_gpu_node_memory_kept as memory
from tests.placer import test_placer24_gpu_node_cores as cores
from tests.placer.test_controller import Jobs, RecordingApi

START = 1767225700.0  # both tests' placers' clock


def test_the_memory_kept_goes_once_the_gpu_pod_is_deleted() -> None:
    pods: list[PodInfo] = [memory.guaranteed_pod("big-0")]
    made = memory.placer(pods)
    assert len(made.admit().starts) == 1  # 448 GiB of 512 kept beside the 8 GPUs: one CPU run of 64
    pods.clear()  # deleted
    made._jobs = Jobs([memory.cpu_job(f"d{i}", created=i) for i in range(10)])
    made._clock = lambda: START + DEFAULT_UNBOUND_HOLD_SECONDS
    assert len(made.admit().starts) == 1  # within the window: kept for the VC's next pod
    made._jobs = Jobs([memory.cpu_job(f"e{i}", created=i) for i in range(10)])
    made._clock = lambda: START + DEFAULT_UNBOUND_HOLD_SECONDS + 1
    assert len(made.admit().starts) == 8  # before: 1, until a restart


def test_the_cores_kept_go_once_the_gang_is_deleted() -> None:
    pods: list[PodInfo] = [cores.gang_pod("gang-bert-0")]
    made = cores.placer(RecordingApi(), pods)
    assert made.admit().starts == ()  # 32 cores of 64 kept beside the 8 GPUs: no 48-core slot
    pods.clear()
    made._clock = lambda: START + DEFAULT_UNBOUND_HOLD_SECONDS + 1
    assert [(s.key, s.kind) for s in made.admit().starts] == [("u2/q-u2-3", "cpu")]


def test_asked_lately_keeps_each_most_over_the_window() -> None:
    lately = AskedLately(window_seconds=300)
    assert lately.note(Demand(cpu=4.0, memory=56.0), now=0) == Demand(cpu=4.0, memory=56.0)
    assert lately.note(Demand(cpu=8.0, memory=8.0), now=100) == Demand(cpu=8.0, memory=56.0)  # each its own most
    assert lately.note(Demand(), now=300) == Demand(cpu=8.0, memory=56.0)
    assert lately.note(Demand(), now=301) == Demand(cpu=8.0, memory=8.0)  # the first pass's is forgotten
    assert lately.note(Demand(cpu=1.0, memory=1.0), now=401) == Demand(cpu=1.0, memory=1.0)
