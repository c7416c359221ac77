"""Seen live: a gang member FitGpp took on another node than the one the trial pod goes to
(cellfit deletes it itself) was told in its Preempted Event "preempted by ml/te-1 on node
gpu-2 ..." while it ran on gpu-3, as if gpu-2 were its own node. Its Event now says its gang
was preempted on the trial pod's node and the node it ran on itself; the member on the trial
pod's node is told as before, and ``kubectl cellfit why`` still reads who, where and the score
from either Event (scheduler/kubectl/objects.py).

The scene of tests/preemption/test_fitgpp_takes_gangs_whole.py: the best-effort gang
ns/gang-bert (2 x 8 GPUs) on n-a and n-b, the trial pod ns/te-q preempting on n-a."""

from __future__ import annotations

from scheduler.core.fit import ResourceFitEngine
from scheduler.kubectl.objects import PREEMPTED_BY, Event, preemption_from
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import node, pod
from tests.preemption.test_fitgpp_takes_gangs_whole import scene, trial

SCORE = (
    "(FitGpp score 6.00 = size 2.00 + 4.0 x grace 1.00: the gang's share of its nodes' CPU, memory and GPUs is 200% "
    "of the largest best-effort pod's, and the longest grace period of its pods to checkpoint, 30 s, is 100% of the "
    "longest, 30 s)"
)
WHOLE = "with every pod of the gang ns/gang-bert (2 pods, 16 GPUs), on nodes n-a, n-b, as a gang runs whole or not at all"


def test_the_member_on_another_node_is_told_its_own_node_and_where_its_gang_was_preempted() -> None:
    choice = scene().decide_preemption(trial("te-q"), {"n-a": ["gang-bert-0"]}, {})
    messages = choice.victim_messages()
    # What follows "cheapest to suspend" is what the preemption does to the gang's Job (unread here).
    assert messages["gang-bert-1"].startswith(
        "preempted with its gang ns/gang-bert: the trial pod ns/te-q takes the gang's room on node n-a; this pod ran on "
        f"node n-b and goes {WHOLE}; the gang cheapest to suspend"
    ), messages
    assert messages["gang-bert-0"].startswith(f"preempted by ns/te-q on node n-a: {WHOLE}; the gang cheapest to suspend"), messages
    assert all(message.endswith(SCORE) for message in messages.values()), messages


def test_why_reads_who_where_and_the_score_from_the_other_node_members_event() -> None:
    choice = scene().decide_preemption(trial("te-q"), {"n-a": ["gang-bert-0"]}, {})
    message = choice.victim_messages()["gang-bert-1"]
    found = PREEMPTED_BY.match(message)
    assert found is not None and found["by"] == "ns/te-q"
    told = preemption_from(victim="ns/gang-bert-1", preempted=Event(reason="Preempted", message=message, warning=False), preemptor_events=())
    assert (told.by, told.node) == ("ns/te-q", "n-a")
    assert told.breakdown is not None and told.breakdown.startswith("score 6.00 = size 2.00"), told


def test_the_random_fallbacks_member_on_another_node_is_told_its_own_node() -> None:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    for name in ("gpu-a", "gpu-b"):
        engine.apply_node(node(name))
    for uid, where, gang in (("g-0", "gpu-a", ("g", 2)), ("g-1", "gpu-b", ("g", 2)), ("lone", "gpu-a", None)):
        engine.apply_pod(pod(uid, 4, "vc-a", gang=gang, node=where, phase="Running"))
    choice = engine.decide_preemption(trial("te-q"), {"gpu-a": ["g-0", "lone"]}, {})
    assert choice.rule == "fallback" and choice.elsewhere == {"gpu-b": ["g-1"]}
    assert choice.victim_messages()["g-1"].startswith(
        "preempted with its gang ns/g: the trial pod ns/te-q takes the gang's room on node gpu-a; this pod ran on node gpu-b "
        "and goes with every pod of the gang ns/g (2 pods, 8 GPUs), on nodes gpu-a, gpu-b, as a gang runs whole or not at all; "
        "no single best-effort pod on node gpu-a freed enough, so FitGpp took best-effort pods at random until it did"
    )
