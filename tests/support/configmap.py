"""A file laid out and updated the way the kubelet updates a mounted ConfigMap.

``<dir>/<key>`` is a symlink to ``..data/<key>``; ``..data`` is a symlink to a timestamped
directory holding the real file. An update writes a new timestamped directory, points a
temporary symlink at it, renames that over ``..data`` (atomic) and removes the old directory.
The path's own mtime is that of the symlink, which never changes: only the content tells.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path


class MountedConfigMap:
    def __init__(self, directory: Path, key: str = "cellfit.yaml") -> None:
        self.directory = directory
        self.key = key
        self.path = directory / key
        self._versions = itertools.count()
        self._current: Path | None = None
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, text: str) -> None:
        version = self.directory / f"..2024_01_01_00_00_00.{next(self._versions)}"
        version.mkdir()
        (version / self.key).write_text(text, encoding="utf-8")
        # Same mtime every time: a watcher comparing timestamps would miss the update.
        os.utime(version / self.key, ns=(0, 0))
        staged = self.directory / "..data_tmp"
        staged.symlink_to(version.name)
        os.replace(staged, self.directory / "..data")
        if not self.path.is_symlink():
            self.path.symlink_to(Path("..data") / self.key)
        if self._current is not None:
            shutil.rmtree(self._current)
        self._current = version
