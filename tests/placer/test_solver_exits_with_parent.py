"""The AlloX solver process ends when the process that started it dies without shutting it down
(SIGKILL, the OOM killer): a ProcessPoolExecutor worker holds both ends of its call queue, reads
no end of file, and without ``exit_with_parent`` waits for a pass for ever (found as solver
processes left behind by test runs, reparented to init, ~100 MB each).

A real parent process starts the pool as the placer does (spawn, the initializer), prints its
worker's pid and kills itself; the test waits for the worker to be gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARENT = """
import multiprocessing, os, signal, sys
from concurrent.futures import ProcessPoolExecutor
from placer.solver_wire import exit_with_parent
if __name__ == "__main__":
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=exit_with_parent, initargs=(os.getpid(),))
    print(pool.submit(os.getpid).result(), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in state  # a zombie has ended; its new parent reaps it


def test_the_solver_process_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    # The worker inherits the parent's stdout: read its pid, then wait for the parent alone.
    parent = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    assert parent.wait(timeout=120) == -9
    parent.stdout.close()
    deadline = time.monotonic() + 30  # the watch looks every second; 30 s is a bound, not a measure
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = _alive(worker)
    if alive:
        os.kill(worker, 9)  # leave nothing behind, then fail
    assert not alive, f"solver process {worker} outlived its parent"
