"""Live reload in the real process: ``cellfit serve --config`` on a file laid out as a mounted
ConfigMap; a rewrite with new virtual clusters shows in /v1/inspect/virtual-clusters within a
few seconds, without a restart; an invalid rewrite is logged naming the field and ignored."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
import yaml

from tests.integration.test_metrics_listener import ROOT
from tests.support.ports import free_port
from tests.support.configmap import MountedConfigMap

TOPOLOGY = {
    "cellTypes": {
        "A100-PAIR": {"childType": "A100", "childCount": 2},
        "A100-NODE": {"childType": "A100-PAIR", "childCount": 4, "isNodeLevel": True},
    },
    "physicalCells": [{"cellType": "A100-NODE", "nodeName": name} for name in ("gpu-a", "gpu-b", "gpu-c")],
}
RELOAD_SECONDS = 0.2


def config(*, port: int, vision: int, speech: int) -> str:
    return yaml.safe_dump(
        {
            "server": {"port": port, "configReloadSeconds": RELOAD_SECONDS},
            "logging": {"format": "json"},
            "cells": {
                "topology": TOPOLOGY,
                "virtualClusters": {
                    "vision": [{"cellType": "A100-NODE", "count": vision}],
                    "speech": [{"cellType": "A100-PAIR", "count": speech}],
                },
            },
        }
    )


class Served:
    def __init__(self, process: subprocess.Popen[bytes], log_file: Path, url: str) -> None:
        self.process = process
        self.log_file = log_file
        self.url = url

    def quotas(self) -> dict[str, int]:
        answer = httpx.get(f"{self.url}/v1/inspect/virtual-clusters", timeout=5).json()
        return {vc["name"]: vc["cells"][0]["quota"] for vc in answer["virtualClusters"]}

    def logs(self) -> list[dict[str, Any]]:
        lines = self.log_file.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def reloads(self, result: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        prefix = f'cellfit_config_reloads_total{{result="{result}"}} '
        return float(next(line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)))


# A reload parses the file in a child process (a fresh interpreter importing the settings'
# models): ~0.5 s on a quiet machine, several seconds on a loaded one (it missed 5 s once with
# the suite and three e2e clusters on 2 cores). The bound is for liveness, not speed.
def eventually(check: Callable[[], bool], *, what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.0f}s: {what}")
        time.sleep(0.05)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, MountedConfigMap, int]]:
    port = free_port()
    mounted = MountedConfigMap(tmp_path / "config")
    mounted.write(config(port=port, vision=2, speech=2))
    log_file = tmp_path / "cellfit.log"
    with log_file.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "serve", "--standalone", "--config", str(mounted.path)],
            cwd=ROOT, stdout=output, stderr=subprocess.STDOUT,
        )
    served = Served(process, log_file, f"http://127.0.0.1:{port}")
    try:
        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"cellfit serve exited with {process.returncode}:\n{log_file.read_text()}")
            try:
                return httpx.get(f"{served.url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        eventually(ready, what="cellfit serve answering /readyz", within=60)
        yield served, mounted, port
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log_file.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_new_virtual_clusters_apply_without_a_restart_and_an_invalid_file_is_ignored(served):
    cellfit, mounted, port = served
    assert cellfit.quotas() == {"speech": 2, "vision": 2}

    mounted.write(config(port=port, vision=1, speech=6))
    eventually(lambda: cellfit.quotas() == {"speech": 6, "vision": 1}, what="the new quotas in /v1/inspect")
    applied = [entry for entry in cellfit.logs() if entry["msg"].startswith("configuration reloaded")]
    assert [entry["level"] for entry in applied] == ["info"]
    assert applied[0]["virtual_clusters"] == {"speech": "2 A100-PAIR -> 6 A100-PAIR", "vision": "2 A100-NODE -> 1 A100-NODE"}
    assert cellfit.reloads("applied") == 1

    mounted.write(config(port=port, vision=1, speech=6).replace("count: 1", "count: -1"))
    eventually(lambda: cellfit.reloads("invalid") == 1, what="the invalid file counted")
    time.sleep(5 * RELOAD_SECONDS)  # more checks of the same broken file: still one warning
    (warning,) = [entry for entry in cellfit.logs() if "invalid" in entry["msg"]]
    assert warning["level"] == "warning"
    assert "cells.virtualClusters.vision[0].count: Input should be greater than or equal to 0" in warning["reason"]
    assert cellfit.quotas() == {"speech": 6, "vision": 1}  # still the last valid configuration
    assert cellfit.process.poll() is None
