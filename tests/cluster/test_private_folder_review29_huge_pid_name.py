"""review29 (fixed by the folder's lock, scheduler/cluster/private_folder.py): a folder under the temporary directory named like a credentials folder with a
process id beyond the platform's pid_t (``cellfit-kubeconfig-99999999999999999999-x``, owned by
the same user) makes every later cellfit that loads a kubeconfig fail to start:
private_folder.sweep_abandoned calls os.kill(pid, 0), which raises OverflowError, caught by
neither _running nor sweep_abandoned (scheduler/cluster/private_folder.py:_running)."""

from __future__ import annotations

from pathlib import Path

from scheduler.cluster.private_folder import PREFIX, private_folder, remove


def test_a_folder_named_with_an_impossible_pid_does_not_stop_the_start(tmp_path: Path) -> None:
    (tmp_path / f"{PREFIX}99999999999999999999-x").mkdir()
    mine = private_folder(parent=tmp_path)
    remove(mine)
