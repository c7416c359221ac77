"""The private folder each ``cellfit serve`` writes its kubeconfig's embedded credentials to
(client key, CA): removed when the process exits, and, since a SIGKILL or an out-of-memory kill
runs no exit handler, removed by the next process on this machine once its owner is gone, so
that no private key outlives the process that needed it.

Whether the owner is gone is told by a lock, not by its process id: the owner holds an exclusive
``flock`` on the folder's lock file for its life, and the kernel lets it go when the process
ends however it ends. A process id says nothing across pid namespaces (two containers sharing a
temporary directory), nor of a restarted container's pid 1, whose predecessor was pid 1 too.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "cellfit-kubeconfig-"
LOCK = ".owner.lock"
# The owner's process id in the name (for a person reading /tmp; a folder written before the
# lock was, without it, is judged by that id).
_OWNED = re.compile(re.escape(PREFIX) + r"(?P<pid>[0-9]+)-")
_HELD: list[int] = []  # the locks of this process's folders, open for its life


def private_folder(*, parent: Path | None = None) -> Path:
    """A new folder (mode 0700) under ``parent`` (the temporary directory by default), locked
    as this process's for its life and removed at exit; folders of this kind whose owner is
    gone are removed first."""
    where = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    sweep_abandoned(parent=where)
    # Made and locked under a name no sweep reads, then renamed (atomically): no sweeper ever
    # sees the folder without its lock held.
    staging = Path(tempfile.mkdtemp(prefix=f".{PREFIX}", dir=where))
    descriptor = os.open(staging / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
    _HELD.append(descriptor)
    folder = where / f"{PREFIX}{os.getpid()}-{staging.name.removeprefix(f'.{PREFIX}')}"
    staging.rename(folder)
    atexit.register(remove, folder)
    return folder


def remove(folder: Path) -> None:
    """Remove ``folder`` and what it holds; one already gone is not an error."""
    shutil.rmtree(folder, ignore_errors=True)


def sweep_abandoned(*, parent: Path) -> None:
    """Remove the folders under ``parent`` whose owner is gone (killed without its exit
    handler). Folders of another user, of an owner that runs, or named otherwise stay."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    uid = os.getuid()
    for entry in entries:
        owned = _OWNED.match(entry.name)
        if owned is None:
            continue
        try:
            if entry.is_symlink() or not entry.is_dir() or entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        if _owner_gone(entry, pid=owned["pid"]):
            remove(entry)
            log.info("removed the credentials folder of a cellfit process that is gone", extra={"folder": str(entry)})


def _owner_gone(folder: Path, *, pid: str) -> bool:
    try:
        descriptor = os.open(folder / LOCK, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return _written_before_locks_by_a_gone_process(pid)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: its owner runs (in this pid namespace or another)
        return False
    finally:
        os.close(descriptor)  # the lock, if taken, goes with it
    return True


def _written_before_locks_by_a_gone_process(pid: str) -> bool:
    """A folder without a lock file, one an earlier cellfit made before it locked its folders:
    judged by the process id in its name."""
    try:
        number = int(pid)
        if number == os.getpid():
            return True  # this process locks every folder it makes: a predecessor's (a pid 1 restarted)
        os.kill(number, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):  # another user's process; no such id
        return False
    return False
