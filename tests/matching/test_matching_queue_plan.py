"""decide_starts' decision and its QueuePlan are decide apart: on random live states, pass
after pass with the kept state, the starts equal decide's and the plan's queue, asked for only
after the next pass was decided (as a solver process holds it), equals decide's queue from
scratch."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduler.matching.admission import AdmissionDecision, DecideReuse, QueuePlan, decide, decide_starts
from scheduler.matching.fairness import Capacity
from tests.matching.test_matching_reuse import live_state, running_job, waiting_job


@pytest.mark.parametrize(("seed", "pools"), [(seed, seed % 2 == 1) for seed in range(16)])
def test_the_plans_queue_is_decides_queue_pass_after_pass(seed: int, pools: bool) -> None:
    now = 50_000.0
    users, counter, waiting, running, nodes = live_state(random.Random(7300 + seed), now=now, pools=pools, most_waiting=40, most_running=8)
    rng = random.Random(seed)  # the passes' changes
    reuse = DecideReuse()
    earlier: tuple[QueuePlan, AdmissionDecision] | None = None  # last pass's plan, and decide's decision then
    queued = 0
    for _ in range(10):
        options = {"now": now, "waiting": list(waiting), "running": list(running), "free_nodes": nodes,
                   "capacity": Capacity(cpu=sum(n.cpu for n in nodes), gpu=max(1, sum(n.gpu for n in nodes)), memory=64.0 * len(nodes)),
                   "alpha": rng.choice([1.0, 1.0, 0.5, 0.1]), "policy": rng.choice(["allox"] * 3 + ["allox+"]),
                   "omega_grid_seconds": rng.choice([0.0, 60.0, 60.0]),
                   "gpu_pools": {"a": rng.randint(0, 3), "b": rng.randint(0, 2)} if pools else None}
        whole = decide(**options)
        decision, plan = decide_starts(**options, reuse=reuse)
        assert decision.queue == ()  # planned apart
        assert decision == replace(whole, queue=())
        assert decision == decide(**options, plan_queue=False)
        if earlier is not None:  # a plan outlives the next pass's decide_starts unchanged
            assert earlier[0].queue() == earlier[1].queue
        assert plan.queue() == whole.queue
        earlier = (plan, whole)
        queued += len(whole.queue)
        # The watch moves on: some Jobs start (running from now on), others arrive, the clock advances.
        started = {start.key for start in whole.starts}
        for job in [job for job in waiting if job.key in started]:
            start = next(s for s in whole.starts if s.key == job.key)
            running.append(replace(running_job(rng, next(counter), now=now, users=users, pools=pools), key=job.key, user=job.user,
                                   kind=start.kind, started=now, pods=job.pods, pool=start.pool))
        waiting = [job for job in waiting if job.key not in started]
        waiting += [waiting_job(rng, next(counter), now=now, users=users, pools=pools) for _ in range(rng.randint(0, 5))]
        if running and rng.random() < 0.5:
            running.pop(rng.randrange(len(running)))
        now += rng.choice([0.0, 1.0, 45.0])
    assert queued > 0  # queues were planned, not only empty ones compared
