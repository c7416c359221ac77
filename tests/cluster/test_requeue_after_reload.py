"""A live reload that changes the virtual clusters makes kube-scheduler retry the pods it parked
(scheduler/cluster/nudge.py, VictimRequeue, wired by scheduler/extender/runtime.py): the pods
naming a VC the reload adds were refused before it, and no cluster event wakes them, so without
a requeue signal they wait for kube-scheduler's 5-minute flush (3.5 minutes seen live).

A real HivedEngine, ConfigReloader over a file updated as the kubelet updates a mounted
ConfigMap, and the replica's requeue as the runtime wires it, told by the reloader's on_applied
as server.py wires it; the API is a recording double. (The whole runtime, and the other ways the
cells change, in test_requeue_on_cells_change.py.)"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml

from scheduler.cells import HivedEngine
from scheduler.cluster.cache import ClusterCache
from scheduler.config import Settings, parse_settings
from scheduler.core.pods import PodStore
from scheduler.extender.config_changes import Reload
from scheduler.extender.configuration import ConfigReloader
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.runtime import _victim_requeue
from tests.cells.helpers import rack_cluster
from tests.support.configmap import MountedConfigMap
from tests.unit.test_victim_requeue import SignalRecordingApi

NLP = {"nlp": [{"cellType": "V100-NODE", "count": 1}]}
SPEECH = {"speech": [{"cellType": "V100-NODE", "count": 1}]}
VISION = {"vision": [{"cellType": "V100-NODE", "count": 3}]}


def config_text(vcs: dict[str, Any], **sections: Any) -> str:
    return yaml.safe_dump({"cells": rack_cluster(vcs=vcs), **sections})


class Replica:
    """One replica's engine, reloader and requeue (not started: each test drives it)."""

    def __init__(self, tmp_path: Path) -> None:
        self.mounted = MountedConfigMap(tmp_path / "config")
        self.mounted.write(config_text({**VISION, **NLP}))
        startup: Settings = parse_settings(config_text({**VISION, **NLP}))
        self.engine = HivedEngine.from_config(startup.cells, prefix="cells")
        self.lock = threading.RLock()
        self.metrics = ExtenderMetrics()
        self.applied: list[tuple[str, ...]] = []
        self.reloader = ConfigReloader(path=str(self.mounted.path), running=startup, cells=self.engine, lock=self.lock,
                                       metrics=self.metrics, on_applied=self._applied)
        self.api = SignalRecordingApi(nodes=[])
        cache = ClusterCache(api=self.api, engine=self.engine, lock=self.lock, gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                             pods=PodStore(), jobs=None)
        # periodSeconds at its most: the signal comes from the reload, not from a look every period.
        settings = startup.model_copy(update={"nudge": startup.nudge.model_copy(update={"period_seconds": 600.0,
                                                                                       "min_interval_seconds": 1.0})})
        requeue = _victim_requeue(settings, self.api, cache, self.metrics, cells=self.engine, lock=self.lock)
        assert requeue is not None
        self.requeue = requeue

    def _applied(self, reload: Reload) -> None:
        self.applied.append(reload.applied)
        self.requeue.cells_may_have_changed()

    def reload(self, text: str) -> str | None:
        self.mounted.write(text)
        outcome = self.reloader.reload_if_changed()
        return outcome.result if outcome is not None else None

    def cells_signals(self) -> float | None:
        return self.metrics.registry.get_sample_value("cellfit_requeue_signals_total", {"reason": "cells-changed"})


def test_a_reload_that_changes_the_virtual_clusters_calls_for_one_signal(tmp_path: Path):
    replica = Replica(tmp_path)
    assert not replica.requeue.check_cells()  # startup's cells: nothing changed
    assert replica.reload(config_text({**VISION, **SPEECH})) == "applied"
    assert replica.requeue.check_cells()
    assert not replica.requeue.check_cells()  # one signal per change


def test_a_reload_that_leaves_the_virtual_clusters_as_they_were_calls_for_none(tmp_path: Path):
    replica = Replica(tmp_path)
    assert replica.reload(config_text({**VISION, **NLP}, logging={"level": "DEBUG"})) == "needs_restart"
    assert not replica.requeue.check_cells()
    assert replica.reload("cells: [not, a, mapping]\n") == "invalid"
    assert not replica.requeue.check_cells()
    assert replica.applied == []  # neither applied anything: the hook is not called


def test_a_reload_of_a_booking_limit_alone_is_applied_but_calls_for_no_signal(tmp_path: Path):
    # The hook hears it (it applied something), the requeue looks, and the VCs and cells are as
    # they were: kube-scheduler has nothing new to retry.
    replica = Replica(tmp_path)
    limited = yaml.safe_dump({"cells": {**rack_cluster(vcs={**VISION, **NLP}), "unseenPodGraceSeconds": 30}})
    assert replica.reload(limited) == "applied"
    assert replica.applied == [("cells",)]
    assert not replica.requeue.check_cells()


def test_the_hook_hears_each_reload_that_applied_new_virtual_clusters(tmp_path: Path):
    replica = Replica(tmp_path)
    assert replica.reload(config_text({**VISION, **SPEECH})) == "applied"
    assert replica.reload(config_text({**VISION, **SPEECH})) is None  # the same content again
    assert replica.reload(config_text({**VISION, **NLP})) == "applied"
    assert replica.applied == [("cells",), ("cells",)]


def test_the_replica_sends_the_signal_after_the_reload(tmp_path: Path):
    replica = Replica(tmp_path)
    replica.requeue.start()
    try:
        assert replica.reload(config_text({**VISION, **SPEECH})) == "applied"
        for _ in range(200):  # told by the reload; waited for, not timed
            if replica.cells_signals():
                break
            threading.Event().wait(0.05)
        assert replica.cells_signals() == 1
        assert [call for call, _ in replica.api.calls] == ["create", "delete"]
    finally:
        replica.requeue.stop()
