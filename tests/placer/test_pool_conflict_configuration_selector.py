"""04ca7ce judges a Job's required node affinity against the labels every pool node carries, but
not against the labels the rewrite itself puts in the pod's node selector (the configuration's
nodeSelector, the template's own): every node the placed pod may run on carries those too, so a
requirement on them decides as certainly as one on the pool's. The gpu configuration selects
accelerator=a100 while the template's affinity asks accelerator In [v100]: pool_conflict says
nothing, AlloX places the Job, and kube-scheduler refuses every node for its pods (Pending for
ever), the outcome the commit set out to refuse at admission."""

from __future__ import annotations

import msgspec
import pytest

from placer.rewrite import PoolConflict, apply_configuration, pool_conflict
from scheduler.kube.node_rules import ConstrainedPodSpec, TaintedNode, why_not
from tests.placer.test_live23_pool_selector import POOL, configured, template

AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "accelerator", "operator": "In", "values": ["v100"]}]}]}}}


def test_a_configuration_selector_the_affinity_excludes_is_a_conflict() -> None:
    spec = template({"affinity": AFFINITY})["spec"]
    # the pod as the rewrite would place it (the configuration's selector, the pool's, merged in)
    placed = {**spec, "nodeSelector": {"accelerator": "a100", **POOL}}
    # every node the placed pod could be put on carries its node selector's labels, and kube-scheduler refuses each
    node = msgspec.convert({"metadata": {"name": "n", "labels": dict(placed["nodeSelector"])}, "spec": {}}, TaintedNode)
    assert why_not(msgspec.convert(placed, ConstrainedPodSpec), node) == "node(s) didn't match Pod's node affinity/selector"
    assert pool_conflict(spec, configured("gpu"), POOL) is not None, "placed, its pods Pending for ever"
    with pytest.raises(PoolConflict):
        apply_configuration(template({"affinity": AFFINITY}), configured("gpu"), pool=POOL)
    conflict = pool_conflict(spec, configured("gpu"), POOL)
    assert conflict is not None
    assert conflict.field == "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
    assert "accelerator In ['v100']" in str(conflict) and "nodeSelector[accelerator]" in str(conflict)
    assert "nodeSelector[accelerator]" in conflict.brief
    # the cpu configuration selects no accelerator: the affinity narrows the pool, no conflict
    assert pool_conflict(spec, configured("cpu"), POOL) is None


def test_the_templates_own_selector_counts_too() -> None:
    spec = template({"affinity": AFFINITY, "nodeSelector": {"accelerator": "t4"}})["spec"]
    conflict = pool_conflict(spec, configured("cpu"), POOL, where="spec.template.spec")
    assert conflict is not None and "spec.template.spec.nodeSelector[accelerator]" in str(conflict)
    # the configuration's selector overrides the template's (the rewrite merges it over): a100 is not v100 either
    agreeing = template({"affinity": AFFINITY, "nodeSelector": {"accelerator": "v100"}})["spec"]
    assert pool_conflict(agreeing, configured("cpu"), POOL) is None
    assert pool_conflict(agreeing, configured("gpu"), POOL) is not None
