"""review29 (fixed by the folder's lock, scheduler/cluster/private_folder.py): the credentials folder of a cellfit killed without exit handlers (SIGKILL, OOM) is
never swept where the next cellfit gets the same process id, which is what a container restart
gives: the image's ENTRYPOINT ["cellfit", "serve"] runs as pid 1, and the chart's /tmp is an
emptyDir (cellfit-tmp), which outlives a container restart. sweep_abandoned skips every folder
named with its own pid (scheduler/cluster/private_folder.py: ``int(owned["pid"]) == os.getpid()``),
so the predecessor's client key stays there for the pod's life, restart after restart."""

from __future__ import annotations

import os
from pathlib import Path

from scheduler.cluster.private_folder import LOCK, PREFIX, private_folder, remove


def test_a_predecessor_with_this_process_id_has_its_folder_swept(tmp_path: Path) -> None:
    # What the killed pid-1 predecessor left (made before this process started).
    left = tmp_path / f"{PREFIX}{os.getpid()}-abc123"
    left.mkdir(mode=0o700)
    (left / "client-key").write_text("PRIVATE KEY")
    locked = tmp_path / f"{PREFIX}{os.getpid()}-def456"  # and one it locked, its lock gone with it
    locked.mkdir(mode=0o700)
    (locked / LOCK).write_text("")
    mine = private_folder(parent=tmp_path)
    try:
        assert not left.exists(), "the killed predecessor's client key is still on disk"
        assert not locked.exists()
    finally:
        remove(mine)
