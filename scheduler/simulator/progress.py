"""A one-line progress bar on stderr for long simulations. On a terminal it redraws in place;
elsewhere (CI logs, pipes) it prints a line per finished run, so logs stay short."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(self, *, stream: TextIO | None = None, enabled: bool = True, width: int = 30) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = enabled
        self._width = width
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._started = time.monotonic()
        self._last_runs = -1
        self._drawn = False

    def __call__(self, runs_done: int, runs_total: int, jobs_done: int, jobs_total: int, label: str) -> None:
        if not self._enabled:
            return
        fraction = runs_done / runs_total if runs_total else 1.0
        if jobs_total and runs_total:
            fraction += jobs_done / jobs_total / runs_total
        fraction = min(fraction, 1.0)
        elapsed = time.monotonic() - self._started
        if self._tty:
            filled = int(round(fraction * self._width))
            bar = "#" * filled + "." * (self._width - filled)
            self._stream.write(
                f"\r[{bar}] {100 * fraction:5.1f}%  run {min(runs_done + 1, runs_total)}/{runs_total}  "
                f"{label[:40]:<40} {elapsed:6.0f}s"
            )
            self._stream.flush()
            self._drawn = True
        elif runs_done != self._last_runs and not jobs_total:
            self._stream.write(f"[{runs_done}/{runs_total}] {label} ({elapsed:.0f}s)\n")
            self._stream.flush()
        self._last_runs = runs_done if not jobs_total else self._last_runs

    def close(self) -> None:
        if self._enabled and self._tty and self._drawn:
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = False
