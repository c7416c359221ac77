"""review29 (fixed by the folder's lock, scheduler/cluster/private_folder.py): sweep_abandoned removes the credentials folder of a cellfit that still runs, when
that cellfit is in another pid namespace sharing the temporary directory (two containers of a
Pod sharing an emptyDir at /tmp, a container with the host's /tmp mounted, a CI job's
containers): the folder is named with the owner's pid as its own namespace numbers it, and
``os.kill(pid, 0)`` here finds no such process (scheduler/cluster/private_folder.py _running), so
the live process's client key and CA are deleted under it (its next connection's TLS set-up
reads them from there). Needs root and util-linux unshare (skipped otherwise)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.cluster.private_folder import PREFIX, private_folder, remove

INNER = """
import os, sys, time, subprocess
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from scheduler.cluster.private_folder import private_folder
folder = private_folder(parent=Path(sys.argv[1]))
(folder / "client-key").write_text("KEY")
print(folder, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_a_live_cellfit_in_another_pid_namespace_keeps_its_folder(tmp_path: Path) -> None:
    repository = str(Path(__file__).resolve().parents[2])
    for forks in (300, 1500, 4000):
        # pid 1 of the namespace is a shell that moves the pid counter past ``forks``, then runs
        # the cellfit stand-in as its child (pid 1 would be found running here)
        script = f'i=0; while [ $i -lt {forks} ]; do /bin/true; i=$((i+1)); done; "$0" -c "$1" "$2" "$3" "$4"'
        inner = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script, sys.executable, INNER, str(tmp_path),
                                  str(forks), repository], stdout=subprocess.PIPE, text=True)
        try:
            assert inner.stdout is not None
            folder = Path(inner.stdout.readline().strip())
            pid = int(folder.name.removeprefix(PREFIX).split("-")[0])
            try:
                os.kill(pid, 0)
                continue  # that number runs here too: try a larger one
            except ProcessLookupError:
                pass
            mine = private_folder(parent=tmp_path)  # the next cellfit, in this namespace
            remove(mine)
            assert (folder / "client-key").exists(), "a running cellfit's credentials were removed"
            return
        finally:
            inner.kill()
            inner.wait()
    pytest.skip("no pid of the inner namespace was free here")
