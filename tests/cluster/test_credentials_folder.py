"""The folder a kubeconfig's embedded credentials (client key, CA) are written to leaves no
private key behind: a kubeconfig refused at load removes it at once, SIGTERM while
``cellfit serve`` starts (its API server unreachable) runs the exit handler that removes it, and
the folder of a process killed without one (SIGKILL) is removed by the next process to start."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
from kubernetes import client as k8s

from scheduler.cluster.credentials import KubeconfigCredentials
from scheduler.cluster.private_folder import LOCK, PREFIX, private_folder
from scheduler.errors import ConfigError
from tests.support.ports import free_port

UNREACHABLE = "https://127.0.0.1:1"  # nothing listens on port 1


def folders(where: Path) -> list[str]:
    return sorted(entry.name for entry in where.iterdir() if entry.name.startswith(PREFIX))


def kubeconfig(path: Path, *, user: dict[str, str]) -> Path:
    lines = [
        "apiVersion: v1", "kind: Config",
        "clusters: [{name: c, cluster: {server: '" + UNREACHABLE + "'}}]",
        "users: [{name: u, user: {" + ", ".join(f"{key}: '{value}'" for key, value in user.items()) + "}}]",
        "contexts: [{name: x, context: {cluster: c, user: u}}]",
        "current-context: x",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def temporary_directory(tmp_path: Path) -> Iterator[Path]:
    """The process's temporary directory moved to a folder of this test's own."""
    where = tmp_path / "tmp"
    where.mkdir()
    saved = tempfile.tempdir
    tempfile.tempdir = str(where)
    try:
        yield where
    finally:
        tempfile.tempdir = saved


def a_gone_process_id() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_folder_left_by_a_process_that_is_gone_is_removed_by_the_next(tmp_path: Path) -> None:
    gone = tmp_path / f"{PREFIX}{a_gone_process_id()}-abcd1234"
    gone.mkdir()
    (gone / "client.pem").write_text("a private key")
    alive = tmp_path / f"{PREFIX}{os.getppid()}-efgh5678"  # this test's parent process runs
    alive.mkdir()
    unowned = tmp_path / f"{PREFIX}0q1w2e3r"  # no process id in the name: not ours to judge
    unowned.mkdir()
    made = private_folder(parent=tmp_path)
    assert made.name.startswith(f"{PREFIX}{os.getpid()}-") and made.stat().st_mode & 0o777 == 0o700
    assert folders(tmp_path) == sorted([alive.name, unowned.name, made.name])


HOLDER = """
import fcntl, os, sys
descriptor = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(descriptor, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_folder_is_judged_by_its_lock_not_by_the_process_id_in_its_name(tmp_path: Path) -> None:
    """A process in another pid namespace (containers sharing /tmp) or a restarted pid 1 makes
    the id in the name mean nothing here: the owner's lock on the folder's lock file says."""
    folder = tmp_path / f"{PREFIX}{a_gone_process_id()}-held0001"
    folder.mkdir()
    (folder / LOCK).write_text("")
    (folder / "client.pem").write_text("a private key")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder / LOCK)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        made = private_folder(parent=tmp_path)
        assert folder.name in folders(tmp_path), "the folder of an owner that runs was removed"
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()
    again = private_folder(parent=tmp_path)  # the owner is gone, its lock with it
    assert folders(tmp_path) == sorted([made.name, again.name])


def test_a_kubeconfig_refused_at_load_leaves_no_folder(temporary_directory: Path, tmp_path: Path) -> None:
    certificate = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    key = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\n").decode()
    path = kubeconfig(tmp_path / "kubeconfig", user={"client-certificate-data": certificate, "client-key-data": key})
    with pytest.raises(ConfigError, match=r"client-certificate-data"):
        KubeconfigCredentials.load(k8s.Configuration(), files=(path,), context=None)
    assert folders(temporary_directory) == []


def test_a_kubeconfig_loaded_keeps_its_folder_until_the_process_exits(temporary_directory: Path, tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kubeconfig", user={"token": "abc"})
    follower = KubeconfigCredentials.load(k8s.Configuration(), files=(path,), context=None)
    assert follower is not None and len(folders(temporary_directory)) == 1


def test_sigterm_while_starting_removes_the_folder(tmp_path: Path) -> None:
    """``cellfit serve`` retries listing the Nodes while its API server is unreachable; a SIGTERM
    then (a pod deleted while it starts, a Ctrl-\\ of a terminal) exits as 143 with the folder
    removed, where Python's default action for SIGTERM would leave it."""
    where = tmp_path / "tmp"
    where.mkdir()
    path = kubeconfig(tmp_path / "kubeconfig", user={"token": "abc"})
    environment = dict(os.environ, TMPDIR=str(where))
    process = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", "serve", "--kubeconfig", str(path), "--port", str(free_port())],
        env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:  # the Nodes' listing failed: starting, the folder made
            if "listing nodes for cell discovery failed" in line:
                break
        else:
            pytest.fail(f"cellfit serve exited ({process.wait()}) before retrying the Nodes' listing")
        assert len(folders(where)) == 1
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert folders(where) == []
