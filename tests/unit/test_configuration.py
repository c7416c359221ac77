"""ConfigReloader against a file updated the way the kubelet updates a mounted ConfigMap: new
content is acted on once (applied, or logged and counted and ignored), the same content never
again, and a file missing for an instant is not an error."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cells import HivedEngine
from scheduler.config import Settings, parse_settings
from scheduler.extender.configuration import ConfigReloader
from scheduler.extender.metrics import CONFIG_RELOAD_RESULTS, ExtenderMetrics
from tests.cells.helpers import rack_cluster
from tests.support.configmap import MountedConfigMap

LOGGER = "scheduler.extender.configuration"


def config_text(a: int, b: int, **sections: Any) -> str:
    vcs = {"a": [{"cellType": "V100-NODE", "count": a}], "b": [{"cellType": "V100-NODE", "count": b}]}
    return yaml.safe_dump({"cells": rack_cluster(vcs=vcs), **sections})


class Fixture:
    def __init__(self, tmp_path: Path) -> None:
        self.mounted = MountedConfigMap(tmp_path / "config")
        self.mounted.write(config_text(4, 4))
        self.startup: Settings = parse_settings(config_text(4, 4))
        self.engine = HivedEngine.from_config(self.startup.cells, prefix="cells")
        self.metrics = ExtenderMetrics()
        self.reloader = ConfigReloader(
            path=str(self.mounted.path),
            running=self.startup,
            cells=self.engine,
            lock=threading.RLock(),
            metrics=self.metrics,
        )

    def quota(self, vc: str) -> int:
        found = self.engine.inspect_virtual_cluster(vc)
        assert found is not None
        return int(found["cells"][0]["quota"])

    def counted(self) -> dict[str, float]:
        value = self.metrics.registry.get_sample_value
        return {result: value("cellfit_config_reloads_total", {"result": result}) for result in CONFIG_RELOAD_RESULTS}

    def in_effect(self) -> float | None:
        return self.metrics.registry.get_sample_value("cellfit_config_in_effect")


@pytest.fixture
def world(tmp_path: Path) -> Fixture:
    return Fixture(tmp_path)


def test_the_file_as_loaded_at_startup_changes_nothing(world: Fixture, caplog):
    assert world.in_effect() == 1
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        assert world.reloader.reload_if_changed() is not None  # first look: compared with startup
        assert world.reloader.reload_if_changed() is None  # same content: not even parsed
    assert world.counted() == {"applied": 0, "invalid": 0, "needs_restart": 0}
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]


def test_a_configmap_update_is_applied_and_logged(world: Fixture, caplog):
    world.reloader.reload_if_changed()
    world.mounted.write(config_text(2, 6))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        reload = world.reloader.reload_if_changed()
    assert reload is not None and reload.result == "applied"
    assert (world.quota("a"), world.quota("b")) == (2, 6)
    assert world.counted() == {"applied": 1, "invalid": 0, "needs_restart": 0}
    assert world.in_effect() == 1
    (record,) = caplog.records
    assert record.levelno == logging.INFO
    assert record.virtual_clusters == {"a": "4 V100-NODE -> 2 V100-NODE", "b": "4 V100-NODE -> 6 V100-NODE"}
    assert world.reloader.reload_if_changed() is None  # acted on once


def test_an_invalid_file_is_logged_once_naming_the_field_and_ignored(world: Fixture, caplog):
    world.mounted.write(config_text(2, 6).replace("count: 2", "count: -1"))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(3):
            world.reloader.reload_if_changed()
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "cells.virtualClusters.a[0].count: Input should be greater than or equal to 0 (got -1)" in record.reason
    assert str(world.mounted.path) in record.reason
    assert world.counted() == {"applied": 0, "invalid": 1, "needs_restart": 0}
    assert world.quota("a") == 4 and world.reloader.running == world.startup
    assert world.in_effect() == 0  # a restart would refuse this file: alert
    world.mounted.write(config_text(4, 4))  # put back: what runs is the file's again
    assert world.reloader.reload_if_changed().result is None and world.in_effect() == 1
    world.mounted.write(config_text(3, 5))  # fixed: applies against what runs
    assert world.reloader.reload_if_changed().quotas == {"a": "4 V100-NODE -> 3 V100-NODE", "b": "4 V100-NODE -> 5 V100-NODE"}
    assert world.in_effect() == 1


def test_changes_that_need_a_restart_are_named_and_not_applied(world: Fixture, caplog):
    world.mounted.write(config_text(4, 4, server={"port": 9999}, logging={"level": "DEBUG"}))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        reload = world.reloader.reload_if_changed()
    assert reload is not None and reload.result == "needs_restart"
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and record.keys == ["logging", "server"]
    assert "restart" in record.getMessage()
    assert world.counted() == {"applied": 0, "invalid": 0, "needs_restart": 1}
    assert world.reloader.running == world.startup and world.in_effect() == 0


def test_a_file_missing_for_a_moment_is_not_an_error(world: Fixture, tmp_path: Path, caplog):
    target = world.mounted.directory / "..data"
    hidden = tmp_path / "hidden"
    with caplog.at_level(logging.INFO, logger=LOGGER):
        target.rename(hidden)
        assert world.reloader.reload_if_changed() is None  # one check without the file: silent
        hidden.rename(target)
        assert world.reloader.reload_if_changed() is not None
    assert not caplog.records
    with caplog.at_level(logging.INFO, logger=LOGGER):
        target.rename(hidden)
        for _ in range(4):  # still gone at the next check: said once
            assert world.reloader.reload_if_changed() is None
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "cannot read" in record.reason
    assert world.counted() == {"applied": 0, "invalid": 0, "needs_restart": 0}
    assert world.quota("a") == 4


def test_watch_needs_a_positive_interval(world: Fixture):
    import asyncio

    with pytest.raises(ValueError, match="positive"):
        asyncio.run(world.reloader.watch(interval_seconds=0))


def test_the_first_look_parses_nothing_when_the_file_is_what_startup_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each parse runs in a child process (~0.4 s of CPU): before, every start paid one at the
    first look even for the file it had just read (e2e/bench_throughput.py counted it in
    cellfit's CPU per pod, 0.4 ms of ~2). ``cellfit serve`` hands the reloader what it read
    (ConfigFile.digest), as a changed file is still parsed at the first look."""
    from scheduler import cli
    from scheduler.extender import configuration

    parsed: list[str] = []
    real = configuration.parse_settings_isolated

    def counting(text: str, *, source: str) -> Settings:
        parsed.append(text)
        return real(text, source=source)

    monkeypatch.setattr(configuration, "parse_settings_isolated", counting)
    path = tmp_path / "cellfit.yaml"
    path.write_text(config_text(4, 4))
    settings, loaded = cli._serve_settings(cli._parser().parse_args(["serve", "--config", str(path)]))
    assert loaded is not None and loaded.digest is not None

    def reloader() -> ConfigReloader:
        assert loaded is not None
        return ConfigReloader(path=str(path), running=loaded.settings, cells=HivedEngine.from_config(settings.cells, prefix="cells"),
                              lock=threading.RLock(), metrics=ExtenderMetrics(), loaded_digest=loaded.digest)

    assert reloader().reload_if_changed() is None and parsed == []  # before: parsed in a child
    path.write_text(config_text(5, 3))  # changed between startup and the first look
    changed = reloader().reload_if_changed()
    assert changed is not None and changed.applied and len(parsed) == 1
