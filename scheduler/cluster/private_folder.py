"""The private folder each ``cellfit serve`` writes its kubeconfig's embedded credentials to
(client key, CA): removed when the process exits, and, since a SIGKILL or an out-of-memory kill
runs no exit handler, removed by the next process on this machine once its owner is gone, so
that no private key outlives the process that needed it.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "cellfit-kubeconfig-"
# The owner's process id in the name: a folder is swept only once that process is gone.
_OWNED = re.compile(re.escape(PREFIX) + r"(?P<pid>[0-9]+)-")


def private_folder(*, parent: Path | None = None) -> Path:
    """A new folder (mode 0700) under ``parent`` (the temporary directory by default), removed
    at exit; folders of this kind left by processes that no longer run are removed first."""
    where = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    sweep_abandoned(parent=where)
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=where))
    atexit.register(remove, folder)
    return folder


def remove(folder: Path) -> None:
    """Remove ``folder`` and what it holds; one already gone is not an error."""
    shutil.rmtree(folder, ignore_errors=True)


def sweep_abandoned(*, parent: Path) -> None:
    """Remove the folders under ``parent`` whose owner process no longer runs (killed without
    its exit handler). Folders of another user, of a live process, or named otherwise stay."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    uid = os.getuid()
    for entry in entries:
        owned = _OWNED.match(entry.name)
        if owned is None or int(owned["pid"]) == os.getpid():
            continue
        try:
            if entry.is_symlink() or not entry.is_dir() or entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        if _running(int(owned["pid"])):
            continue
        remove(entry)
        log.info("removed the credentials folder of a cellfit process that is gone", extra={"folder": str(entry)})


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process of that id: it runs
        return True
    return True
