"""``e2e/cluster/add-gpu-nodes.sh --gpus 0`` makes CPU-only fake nodes (user29: the README's
"CPU-only and GPU fake nodes"). Before, such a node carried ``nvidia.com/gpu: "0"`` and GPU
feature discovery's labels (``nvidia.com/gpu.present=true``, an A100 product, count 0), so a pod
selecting GPU nodes by those labels landed on it. Re-running the script turns a GPU node
CPU-only and back, labels and resource both."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).resolve().parent / "cluster" / "add-gpu-nodes.sh"
PREFIX = "u29cpu"
GPU_LABELS = {"nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count"}


def add(control_plane: Any, gpus: int) -> str:
    proc = subprocess.run([str(SCRIPT), "1", "--prefix", PREFIX, "--gpus", str(gpus), "--rack", PREFIX],
                          env=control_plane.process_env(), capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc.stdout


def node(control_plane: Any) -> dict[str, Any]:
    found: dict[str, Any] = control_plane.kubectl_json("get", "node", f"{PREFIX}-0")
    return found


def test_gpus_zero_makes_a_cpu_only_node_and_a_rerun_switches_it(control_plane: Any) -> None:
    try:
        said = add(control_plane, 0)
        assert "CPU-only, no GPUs" in said
        cpu = node(control_plane)
        assert not GPU_LABELS & set(cpu["metadata"]["labels"]), cpu["metadata"]["labels"]
        for field in ("allocatable", "capacity"):
            assert "nvidia.com/gpu" not in cpu["status"][field] and cpu["status"][field]["cpu"] == "64", cpu["status"]
        add(control_plane, 2)
        gpu = node(control_plane)
        assert gpu["metadata"]["labels"]["nvidia.com/gpu.count"] == "2"
        assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "2"
        add(control_plane, 0)
        again = node(control_plane)
        assert not GPU_LABELS & set(again["metadata"]["labels"])
        assert "nvidia.com/gpu" not in again["status"]["allocatable"]
    finally:
        control_plane.kubectl("delete", "node", f"{PREFIX}-0", "--ignore-not-found")
