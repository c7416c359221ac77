"""Whether files changed since they were loaded, by a stat each: certificates, keys and CA
bundles that rotate under a running process (the webhook's serving pair, the API client's)."""

from __future__ import annotations

import os
from typing import Sequence

# (device, inode, size, mtime in ns) of a file, None when it cannot be read: the kubelet swaps a
# Secret's or a projected volume's files by re-pointing a symlink, which changes the inode even
# when size and mtime match.
FileStamp = tuple[int, int, int, int] | None


def file_stamps(paths: Sequence[str]) -> tuple[FileStamp, ...]:
    """Each file's stamp, in order: equal tuples, the same files."""
    found: list[FileStamp] = []
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            found.append(None)
            continue
        found.append((stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(found)
