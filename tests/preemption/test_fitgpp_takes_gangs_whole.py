"""F6 (user24): FitGpp preempted ONE pod of a running HiveD gang; the other member kept its 8 GPUs
and the distributed job hung. A gang member is now a victim only together with every other
running member of its gang: the score counts the whole gang (its members' sizes summed, the
longest of their grace periods), the room it frees is its members' on the preemptor's node, the
preempt verb answers those, and the members on other nodes come back in ``elsewhere`` for the
driver to delete (kube-scheduler deletes the victims of the one node it picks).

FitGppEngine around the real HivedEngine: three 8-GPU nodes, vc-a's quota all three; the
best-effort gang ns/gang-bert (2 x 8 GPUs) runs on n-a and n-b."""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from scheduler.cells import HivedEngine
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import PodInfo
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import V100_TYPES, node, pod, schedule

NODES = ["n-a", "n-b", "n-c"]


def config(nodes: list[str] = NODES) -> dict[str, Any]:
    """8-GPU ``nodes``, vc-a's quota all of them."""
    return {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [{"cellType": "V100-NODE", "nodeName": n} for n in nodes]},
        "virtualClusters": {"vc-a": [{"cellType": "V100-NODE", "count": len(nodes)}]},
    }


def trial(uid: str) -> PodInfo:
    p = pod(uid, 8, "vc-a")
    return msgspec.structs.replace(p, labels={**p.labels, "cellfit.io/job-class": "trial"}, priority=100)


def run(engine: FitGppEngine, p: PodInfo, where: str, *, grace: int = 30) -> PodInfo:
    """The pod bound where HiveD puts it, offered every node (a gang plans all its slots at once)."""
    placed = schedule(engine, msgspec.structs.replace(p, grace_period_seconds=grace), NODES)  # type: ignore[arg-type]
    assert placed is not None and placed.node_name == where, p.uid
    running = msgspec.structs.replace(placed, phase="Running")
    engine.apply_pod(running)
    return running


def scene(*, single_on_c: bool = False) -> FitGppEngine:
    engine = FitGppEngine(HivedEngine.from_config(config()), settings=FitGppSettings())
    for name in NODES:
        engine.apply_node(node(name))
    run(engine, pod("gang-bert-0", 8, "vc-a", gang=("gang-bert", 2)), "n-a")
    run(engine, pod("gang-bert-1", 8, "vc-a", gang=("gang-bert", 2)), "n-b")
    if single_on_c:
        run(engine, pod("single", 8, "vc-a"), "n-c")
    return engine


def test_a_gang_member_is_taken_with_every_other_member_of_its_gang() -> None:
    engine = scene()
    choice = engine.decide_preemption(trial("te-q"), {"n-a": ["gang-bert-0"]}, {})
    assert choice.victims == {"n-a": ["gang-bert-0"]}
    assert choice.elsewhere == {"n-b": ["gang-bert-1"]}
    assert set(choice.victim_uids) == {"gang-bert-0", "gang-bert-1"}
    assert choice.preemptor_messages() == (
        "preempting the gang ns/gang-bert (2 pods, 16 GPUs) on node n-a and its pods on node n-b, which cellfit deletes itself "
        "(score 6.00 = size 2.00 + 4.0 x grace 1.00: the gang's share of its nodes' CPU, memory and GPUs is 200% of the "
        "largest best-effort pod's, and the longest grace period of its pods to checkpoint, 30 s, is 100% of the longest, 30 s)",
    )
    messages = choice.victim_messages()
    assert set(messages) == {"gang-bert-0", "gang-bert-1"}
    # gang-bert-1, on n-b, is told its own node (tests/preemption/test_gang_member_elsewhere_told_its_own_node.py).
    assert messages["gang-bert-0"].startswith(
        "preempted by ns/te-q on node n-a: with every pod of the gang ns/gang-bert (2 pods, 16 GPUs), on nodes n-a, n-b, "
        "as a gang runs whole or not at all; the gang cheapest to suspend"
    ), messages
    for said in messages.values():
        assert said.endswith("(FitGpp score 6.00 = size 2.00 + 4.0 x grace 1.00: the gang's share of its nodes' CPU, memory and GPUs "
                             "is 200% of the largest best-effort pod's, and the longest grace period of its pods to checkpoint, 30 s, "
                             "is 100% of the longest, 30 s)"), said
    # Both leave: neither is a candidate for the next preemptor.
    again = engine.decide_preemption(trial("te-r"), {"n-b": ["gang-bert-1"]}, {})
    assert again.victims == {} and again.elsewhere == {}


def test_the_gangs_whole_size_is_weighed_against_a_single_pod_that_frees_as_much() -> None:
    engine = scene(single_on_c=True)
    choice = engine.decide_preemption(trial("te-q"), {"n-a": ["gang-bert-0"], "n-c": ["single"]}, {})
    assert choice.victims == {"n-c": ["single"]}
    assert choice.elsewhere == {}


def test_the_gang_counts_one_preemption_of_its_job() -> None:
    engine = scene()
    choice = engine.decide_preemption(trial("te-q"), {"n-a": ["gang-bert-0"]}, {})
    assert choice.counts_jobs
    assert [(job.name, count) for job, count in engine.victim_jobs(choice.victim_uids)] == [("gang-bert", 1)]


def test_a_gang_with_a_member_already_leaving_is_not_broken_further() -> None:
    engine = scene()
    leaving = engine.victim("gang-bert-1")
    assert leaving is not None
    engine.apply_pod(msgspec.structs.replace(leaving, terminating=True))
    choice = engine.decide_preemption(trial("te-q"), {"n-a": ["gang-bert-0"]}, {})
    assert choice.victims == {} and choice.elsewhere == {}
    assert choice.refusal is not None


def test_the_random_fallback_takes_a_gang_whole_and_its_members_are_told_so() -> None:
    """No single victim frees 8 GPUs on gpu-a (the gang's member there and a lone pod have 4
    each): the fallback takes both, and the gang's member on gpu-b with them."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    for name in ("gpu-a", "gpu-b"):
        engine.apply_node(node(name))
    for uid, where, gang in (("g-0", "gpu-a", ("g", 2)), ("g-1", "gpu-b", ("g", 2)), ("lone", "gpu-a", None), ("other", "gpu-b", None)):
        engine.apply_pod(pod(uid, 4, "vc-a", gang=gang, node=where, phase="Running"))
    choice = engine.decide_preemption(trial("te-q"), {"gpu-a": ["g-0", "lone"]}, {})
    assert choice.rule == "fallback"
    assert sorted(choice.victims["gpu-a"]) == ["g-0", "lone"]
    assert choice.elsewhere == {"gpu-b": ["g-1"]}
    messages = choice.victim_messages()
    whole = "with every pod of the gang ns/g (2 pods, 8 GPUs), on nodes gpu-a, gpu-b, as a gang runs whole or not at all"
    assert whole in messages["g-0"] and whole in messages["g-1"], messages
    assert "gang" not in messages["lone"], messages["lone"]
