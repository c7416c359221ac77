"""A refusal the preempt verb told once is told again after a preemption for the same pod
(rev23b's note on 21520e1): kubectl cellfit why shows a PreemptionRefused Event only while no
preemption came since, so a refusal that stands again after one must have an Event of its own.
Over real HTTP, with the fixtures of test_preempt_refusal_http.py (a cluster API double recording
Events; the watch cache, engines, service and HTTP are real)."""

from __future__ import annotations

import time

from tests.integration.test_preempt_refusal_http import connected, full_cluster, preempt, refusals  # noqa: F401  (fixture)
from tests.support import kube_objects as k


def test_the_same_refusal_after_a_preemption_is_told_again(connected):  # noqa: F811
    api, client, runtime = connected
    on_node = full_cluster(runtime)
    mistaken = k.pod("trial-0", gpus=8, priority=1000, job_uid="job-trial",
                     labels={"cellfit.io/virtual-cluster": "vision", "cellfit.io/priority": "urgent", "cellfit.io/job-class": "trial"})
    assert preempt(client, mistaken, on_node) == {}
    assert len(refusals(api, mistaken, count=1)) == 1
    fixed = {**mistaken, "metadata": {**mistaken["metadata"], "labels": {**mistaken["metadata"]["labels"], "cellfit.io/priority": "guaranteed"}}}
    assert preempt(client, fixed, on_node) != {}  # a preemption for the pod: the refusal no longer stands
    assert preempt(client, mistaken, on_node) == {}  # the label broken again: the refusal stands again
    told = refusals(api, mistaken, count=2)
    time.sleep(0.2)
    assert len(told) == 2, [e["message"] for e in told]
