"""``kubectl cellfit ... | head``: the reader goes before the answer is written, and the plugin
exits quietly, as kubectl does (live, ``why ... | head`` ended with a BrokenPipeError traceback).

The program runs as kubectl runs it, its stdout a pipe whose reading end is already closed, so
every write fails (what ``head`` leaves once it has its lines), against the API server of
tests/kubectl/test_cli.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.kubectl.cli import BROKEN_PIPE_EXIT
from tests.kubectl.test_cli import ROOT, ApiServer, apiserver, config, inspect_url  # noqa: F401 - fixtures
from tests.kubectl.test_why import event, pod_json

__all__ = ["apiserver", "config", "inspect_url"]


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    read, write = os.pipe()
    os.close(read)  # no reader: each write gets EPIPE
    try:
        return subprocess.run([sys.executable, "-m", "scheduler.kubectl.cli", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, env={**os.environ}, timeout=300)
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [("vcs",), ("cells", "-o", "json"), ("why", "pod/waiter")])
def test_a_reader_gone_ends_the_plugin_quietly(config: Path, apiserver: ApiServer, args: tuple[str, ...]) -> None:
    apiserver.routes["/api/v1/namespaces/ml/pods/waiter"] = (200, pod_json("waiter"))
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [event("FailedScheduling", "0/1 nodes are available: "
                                                                               "1 Insufficient cpu.", warning=True, name="waiter")]})
    done = run_into_closed_pipe(*args)
    assert done.stderr == ""
    assert done.returncode == BROKEN_PIPE_EXIT == 141
