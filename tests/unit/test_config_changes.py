"""Live reload's decision, without files or threads: a new configuration's virtual clusters
apply to the running HiveD engine (a shrink never evicts, it drains as pods finish); a topology
change, any other section, or a VC change the engine refuses leaves everything as it was."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from scheduler.cells import HivedEngine
from scheduler.config import Settings, parse_settings
from scheduler.extender.config_changes import guarantee_changes, plan_reload, reload_settings
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule, snapshot
from scheduler.kube.names import filter_offered

NODES = node_names()  # 2 racks of 4 8-GPU nodes


def vcs(a: int, b: int) -> dict[str, Any]:
    return {"a": [{"cellType": "V100-NODE", "count": a}], "b": [{"cellType": "V100-NODE", "count": b}]}


def settings(*, a: int = 4, b: int = 4, racks: int = 2, **sections: Any) -> Settings:
    return parse_settings(yaml.safe_dump({"cells": rack_cluster(racks=racks, vcs=vcs(a, b)), **sections}))


def engine_for(running: Settings) -> HivedEngine:
    return HivedEngine.from_config(running.cells, prefix="cells")


def quota(engine: HivedEngine, vc: str) -> dict[str, int]:
    found = engine.inspect_virtual_cluster(vc)
    assert found is not None
    return {key: found["cells"][0][key] for key in ("quota", "bound", "draining")}


def test_a_grown_vc_takes_effect_at_once():
    running = settings(a=4, b=2)
    engine = engine_for(running)
    for i in range(2):
        assert schedule(engine, pod(f"b{i}", 8, "b"), NODES) is not None
    assert not filter_offered(engine, pod("b2", 8, "b"), NODES).feasible  # b's quota is 2 nodes

    new = settings(a=4, b=4)
    reload = reload_settings(running, new, cells=engine)

    assert reload.result == "applied" and reload.applied == ("cells",) and not reload.restart
    assert reload.running == new  # the baseline the next file is compared with
    assert reload.quotas == {"b": "2 V100-NODE -> 4 V100-NODE"}
    assert quota(engine, "b")["quota"] == 4
    for i in range(2, 4):
        assert schedule(engine, pod(f"b{i}", 8, "b"), NODES) is not None


def test_a_shrunk_vc_keeps_its_running_pods_and_drains_as_they_finish():
    running = settings(a=4, b=4)
    engine = engine_for(running)
    pods = [schedule(engine, pod(f"a{i}", 8, "a"), NODES) for i in range(3)]
    assert all(p is not None for p in pods)
    before = snapshot(engine)

    reload = reload_settings(running, settings(a=1, b=7), cells=engine)

    assert reload.result == "applied"
    assert reload.quotas == {"a": "4 V100-NODE -> 1 V100-NODE", "b": "4 V100-NODE -> 7 V100-NODE"}
    assert snapshot(engine)["gpus"] == before["gpus"]  # nobody evicted, nothing moved
    assert quota(engine, "a") == {"quota": 1, "bound": 3, "draining": 2}
    assert not filter_offered(engine, pod("a-new", 1, "a"), NODES).feasible  # over its new quota
    for i in range(5):  # b grows into what a does not hold
        assert schedule(engine, pod(f"b{i}", 8, "b"), NODES) is not None
    assert not filter_offered(engine, pod("b5", 8, "b"), NODES).feasible
    engine.delete_pod(pods[0].uid)  # a's pods finish: its cells drain to b
    assert quota(engine, "a") == {"quota": 1, "bound": 2, "draining": 1}
    assert schedule(engine, pod("b5", 8, "b"), NODES) is not None
    engine.delete_pod(pods[1].uid)
    assert quota(engine, "a") == {"quota": 1, "bound": 1, "draining": 0}
    assert schedule(engine, pod("b6", 8, "b"), NODES) is not None


def test_a_topology_change_needs_a_restart_and_changes_nothing():
    running = settings()
    engine = engine_for(running)
    schedule(engine, pod("a0", 8, "a"), NODES)
    before = snapshot(engine)

    reload = reload_settings(running, settings(a=8, b=4, racks=3), cells=engine)

    assert reload.result == "needs_restart"
    assert reload.restart == {"cells": "topology changed: needs a restart"}
    assert reload.running == running and not reload.applied and not reload.quotas
    assert snapshot(engine) == before and quota(engine, "a")["quota"] == 4


@pytest.mark.parametrize(
    ("sections", "said"),
    [
        ({"server": {"port": 9999}}, {"server": "server.port changed: needs a restart"}),
        ({"policy": {"rackLabel": None}, "preemption": {"maxPreemptions": 3}},
         {"policy": "policy.rackLabel changed: needs a restart", "preemption": "preemption.maxPreemptions changed: needs a restart"}),
        ({"cluster": {"mode": "standalone"}, "logging": {"level": "DEBUG"}},
         {"cluster": "cluster.mode changed: needs a restart", "logging": "logging.level changed: needs a restart"}),
        ({"admission": {"port": 9444}}, {"admission": "admission.port changed: needs a restart"}),
        ({"preemption": {"maxPreemptions": 3, "gracePeriodWeight": 2.0}},
         {"preemption": "preemption.gracePeriodWeight, preemption.maxPreemptions changed: needs a restart"}),
    ],
)
def test_other_sections_need_a_restart_and_are_not_applied(sections, said):
    """The restart names each setting that changed as the file writes it (user25: a changed
    preemption.gracePeriodWeight was logged as the key 'preemption' alone)."""
    running = settings()
    reload = reload_settings(running, settings(**sections), cells=engine_for(running))
    assert reload.result == "needs_restart"
    assert dict(reload.restart) == said
    assert reload.running == running


def test_vcs_apply_while_the_rest_of_the_same_file_waits_for_a_restart():
    running = settings()
    engine = engine_for(running)
    reload = reload_settings(running, settings(a=2, b=6, server={"port": 9999}), cells=engine)
    assert reload.result == "needs_restart" and list(reload.restart) == ["server"] and reload.applied == ("cells",)
    assert quota(engine, "a")["quota"] == 2
    # Running: the new VCs, the old server (the port it listens on is still the old one).
    assert reload.running.cells == settings(a=2, b=6).cells and reload.running.server == running.server


def test_a_vc_change_the_engine_refuses_is_invalid_and_changes_nothing():
    running = settings()
    engine = engine_for(running)
    before = snapshot(engine)
    # Over-committed: parse_settings refuses it; a Settings built around that check is what
    # the engine's own check is for (a discovered topology is only known to the engine).
    infeasible = Settings.model_validate({"cells": rack_cluster(vcs=vcs(5, 4))})

    reload = reload_settings(running, infeasible, cells=engine)

    assert reload.result == "invalid"
    assert "cells.virtualClusters: over-committed at level 'V100-NODE'" in reload.reason
    assert reload.running == running and not reload.applied and snapshot(engine) == before


def test_nothing_changed_is_no_reload():
    running = settings()
    reload = reload_settings(running, settings(), cells=engine_for(running))
    assert reload.result is None and reload.running == running and not reload.restart


def test_without_a_hived_engine_a_cells_change_needs_a_restart():
    running = settings()
    plan = plan_reload(running, settings(a=2), live_cells=False)
    assert plan.cells is None and list(plan.restart) == ["cells"] and "resource-fit" in plan.restart["cells"]
    assert reload_settings(running, settings(a=2), cells=None).result == "needs_restart"


def test_discovered_cells_get_configured_vcs_live_but_not_back_the_implicit_default():
    running = parse_settings("")
    engine = HivedEngine.from_nodes([node(f"n{i}", labels={"nvidia.com/gpu.product": "A100"}) for i in range(3)])
    assert quota(engine, "default")["quota"] == 3
    configured = parse_settings(
        yaml.safe_dump({"cells": {"virtualClusters": {"x": [{"cellType": "A100-8GPU-NODE", "count": 2}]}}})
    )

    reload = reload_settings(running, configured, cells=engine)

    assert reload.result == "applied"
    assert reload.quotas == {"default": "3 A100-8GPU-NODE -> none", "x": "none -> 2 A100-8GPU-NODE"}
    back = reload_settings(configured, running, cells=engine)
    assert back.result == "needs_restart" and "implicit default VC" in back.restart["cells"]
    assert quota(engine, "x")["quota"] == 2


def test_guarantee_changes_name_added_removed_and_changed_vcs():
    assert guarantee_changes({"a": "1 X", "b": "2 X", "c": "1 Y"}, {"a": "1 X", "b": "3 X", "d": "pinned p"}) == {
        "b": "2 X -> 3 X",
        "c": "1 Y -> none",
        "d": "none -> pinned p",
    }


def test_every_reload_result_is_exported() -> None:
    """The counter's label values, kept in metrics.py, are exactly the planner's results."""
    from typing import get_args

    from scheduler.extender.config_changes import ReloadResult
    from scheduler.extender.metrics import CONFIG_RELOAD_RESULTS

    assert set(CONFIG_RELOAD_RESULTS) == set(get_args(ReloadResult))
