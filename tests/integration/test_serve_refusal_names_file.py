"""``cellfit serve --config FILE`` names FILE in a refusal of the startup check against the cells
discovered from the cluster's Nodes, as it does every other refusal of the file
(``cellfit: invalid configuration: bad.yaml: ...``). Before, that one alone lacked it:
``cellfit: invalid configuration: cells.virtualClusters.vision[0].cellType: unknown cell type
'A100-NODE' (known: ...)``.

The cluster is an HTTP server answering the Node list as kube-apiserver does, reached through a
kubeconfig: the connection, the listing and the discovery are cellfit's own.

A VC naming a cell type the discovered cells lack no longer stops ``serve``: that VC is not
served and the others are (tests/integration/test_discovery_startup.py); a VC assignment the
discovered cells cannot hold still refuses the file, as here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from scheduler import cli
from tests.support import kube_objects as k
from tests.support.loopback_http import LoopbackServer, QuietHandler


class Nodes(QuietHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        found = self.path.partition("?")[0] == "/api/v1/nodes"
        body = json.dumps(k.node_list([k.node("gpu-a", gpus=8), k.node("gpu-b", gpus=8)]) if found else
                          {"kind": "Status", "code": 404, "reason": "NotFound", "message": self.path}).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    server = LoopbackServer(Nodes)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server.url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    yield path
    server.stop()


def test_vcs_the_discovered_cells_cannot_hold_are_refused_naming_the_file(
        tmp_path: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(f"policy: {{name: hived}}\ncluster: {{kubeconfig: {kubeconfig}}}\n"
                      "cells:\n  virtualClusters:\n    vision: [{cellType: NVIDIA-A100-SXM4-80GB-8GPU-NODE, count: 3}]\n")
    assert cli.main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cellfit: invalid configuration: {config}: cells.virtualClusters: over-committed at level "
                          "'NVIDIA-A100-SXM4-80GB-8GPU-NODE' "), err
