"""A live reload refuses a configuration naming its fields as the file writes them, as startup
does for the same file: a virtual cluster written as the bare list of its cells has its cells at
``vc-a[0]``, not ``vc-a.cells[0]`` (the reload's parse, in a child process, sent its settings
back as plain data, where every VC is ``{cells: [...]}``)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cells import HivedEngine
from scheduler.config import parse_settings
from scheduler.errors import ConfigError
from scheduler.extender.configuration import ConfigReloader
from scheduler.extender.isolated_parse import parse_settings_isolated
from scheduler.extender.metrics import ExtenderMetrics
from tests.cells.helpers import node

NODES = [node(f"n{i}", labels={"nvidia.com/gpu.product": "A100"}) for i in range(3)]
RUNNING = str(yaml.safe_dump({"cells": {}}))  # the cells discovered from NODES, the implicit default VC


def text(vcs: dict[str, Any]) -> str:
    return str(yaml.safe_dump({"cells": {"virtualClusters": vcs}}))


def engine() -> HivedEngine:
    return HivedEngine.from_config(parse_settings(RUNNING).cells, nodes=NODES, prefix="cells")


def in_process(config: str) -> str:
    """The engine's refusal of the file's cells as the file is parsed in this process (at startup)."""
    with pytest.raises(ConfigError) as refused:
        engine().reconfigure(parse_settings(config).cells, prefix="cells")
    return str(refused.value)


def at_reload(tmp_path: Path, config: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(RUNNING)
    reloader = ConfigReloader(path=str(path), running=parse_settings(RUNNING), cells=engine(),
                              lock=threading.RLock(), metrics=ExtenderMetrics())
    path.write_text(config)
    reload = reloader.reload_if_changed()
    assert reload is not None and reload.result == "invalid"
    return reload.reason


@pytest.mark.parametrize(("vc", "written"), [
    ([{"cellType": "H100-NODE", "count": 1}], "cells.virtualClusters.vc-a[0].cellType"),
    ({"cells": [{"cellType": "H100-NODE", "count": 1}]}, "cells.virtualClusters.vc-a.cells[0].cellType"),
])
def test_a_reload_names_the_field_as_startup_does(tmp_path: Path, vc: Any, written: str) -> None:
    config = text({"vc-a": vc})
    reason = at_reload(tmp_path, config)
    assert reason.startswith(f"{written}: unknown cell type 'H100-NODE'")
    assert reason == in_process(config)


def test_the_running_cells_refusal_is_logged_naming_the_file_as_a_parse_error_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """user25 #7: an over-committed or unknown-cell-type reload was logged without the file's path,
    which every parse error carries."""
    caplog.set_level(logging.WARNING, logger="scheduler.extender.configuration")
    reason = at_reload(tmp_path, text({"vc-a": [{"cellType": "H100-NODE", "count": 1}]}))
    (logged,) = [record.reason for record in caplog.records]  # type: ignore[attr-defined]
    assert logged == f"{tmp_path / 'config.yaml'}: {reason}"


def test_the_reloads_parse_keeps_how_each_vc_was_written() -> None:
    config = text({"bare": [{"cellType": "A", "count": 1}], "mapped": {"cells": [{"cellType": "A", "count": 2}]}})
    reparsed = parse_settings_isolated(config, source="config.yaml").cells.virtual_clusters
    assert reparsed["bare"].cells_path("bare", 0) == "bare[0]"
    assert reparsed["mapped"].cells_path("mapped", 0) == "mapped.cells[0]"
    assert reparsed == parse_settings(config).cells.virtual_clusters


def test_under_the_cell_exchange_a_refusal_names_the_field_as_the_file_writes_it() -> None:
    """The cell exchange's reload applies the exchanges under way on top of the file's VCs
    (cells.exchange.quota.reconfiguration), whose specs it makes anew: user25 #7 read
    ``cells.virtualClusters.vc-c.cells[0].cellType`` for a VC the file wrote as a bare list."""
    from scheduler.cells.exchange.quota import reconfiguration

    config = text({"vc-a": [{"cellType": "H100-NODE", "count": 1}]})
    base = parse_settings(config).cells
    remade = {vc: type(spec).model_validate({"cells": [c.model_dump(by_alias=True) for c in spec.cells]})
              for vc, spec in base.virtual_clusters.items()}  # as the exchange's planning makes them
    with pytest.raises(ConfigError) as refused:
        engine().reconfigure(reconfiguration(base, remade), prefix="cells")
    assert str(refused.value).startswith("cells.virtualClusters.vc-a[0].cellType: unknown cell type 'H100-NODE'")
