"""user26 #9: ``cellfit check-config FILE | head -1`` ended with a BrokenPipeError traceback:
``head`` goes once it has its line, and check-config's second line met a closed pipe. cellfit's
own commands exit quietly then, as ``kubectl cellfit`` does (status 141, as a process killed by
SIGPIPE; scheduler/kubectl/cli.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.kubectl.cli import BROKEN_PIPE_EXIT

ROOT = Path(__file__).resolve().parents[2]


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    read, write = os.pipe()
    os.close(read)  # no reader: each write gets EPIPE
    try:
        return subprocess.run([sys.executable, "-m", "scheduler.cli", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, timeout=300)
    finally:
        os.close(write)


@pytest.mark.parametrize("command", ["check-config", "default-config"])
def test_a_reader_gone_ends_cellfits_command_quietly(tmp_path: Path, command: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(subprocess.run([sys.executable, "-m", "scheduler.cli", "default-config"], capture_output=True, text=True,
                                     cwd=ROOT, check=True, timeout=300).stdout)
    done = run_into_closed_pipe(*([command, str(config)] if command == "check-config" else [command]))
    assert done.stderr == ""
    assert done.returncode == BROKEN_PIPE_EXIT == 141
