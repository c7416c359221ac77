"""A node selector no node carries is told in the grammar of its labels (found in a live hand
session): one label read "(pool=cpu-big): no node carries them"; it now reads "no node carries
it", and several labels, no node carrying them all together, "no node carries them all"."""

from __future__ import annotations

from tests.estimator.test_controller import RecordingApi
from tests.estimator.test_estim23_never_runs import estimator
from tests.estimator.test_placer24_selector_never_runs import AUTOSCALED_HINT, NODES, job, never_runs


def told(**selectors: dict[str, str]) -> list[str]:
    api = RecordingApi()
    sampler = estimator(api, nodes=NODES)
    sampler._replace_jobs([job("sel", **selectors)])
    sampler.reconcile()
    return never_runs(api)


def test_one_label_no_node_carries_is_it() -> None:
    assert told(cpu_selector={"pool": "cpu-big"}) == [
        "cpu is not sampled: cellfit.io/configurations.cpu.nodeSelector (pool=cpu-big): no node carries it, so no node could ever run it" + AUTOSCALED_HINT
    ]


def test_several_labels_no_node_carries_together_are_them_all() -> None:
    # Each label is on a node (pool=cpu-small, and the GPU node's pool=gpu is another value), none both.
    assert told(template_selector={"pool": "cpu-small", "zone": "mars"}) == [
        "cpu and gpu are not sampled: spec.template.spec.nodeSelector (pool=cpu-small, zone=mars): no node carries them all, "
        "so no node could ever run it" + AUTOSCALED_HINT
    ]
