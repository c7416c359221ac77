"""Keeps a running cellfit on its configuration file's current virtual clusters, without a restart.

In a cluster the file is a mounted ConfigMap. The kubelet updates it by writing a new
timestamped directory and re-pointing the ``..data`` symlink, so the path's mtime says little
(it may even go back in time) and for an instant the file may be missing: the file is therefore
compared by the hash of its content, and a file that cannot be read is skipped until the next
check. New content is parsed and validated exactly as at startup (``parse_settings``), in a
child process with a time and a memory limit (``isolated_parse``: a hostile or huge file never
holds the verbs up), and ``config_changes`` decides what applies live (the VCs) and what waits
for a restart; only applying the VCs takes the engine lock. Every outcome is logged once per new content (a broken file is not re-reported every
check) and counted in ``cellfit_config_reloads_total``; ``cellfit_config_in_effect`` says whether
the running configuration is the file's. The process always keeps running on the last
configuration that was valid.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Callable

from scheduler.cells import CellsConfig
from scheduler.cells.capabilities import CellReconfiguration
from scheduler.config import Settings, config_digest, read_config_text
from scheduler.errors import ConfigError
from scheduler.extender.config_changes import Reload, apply_reload, plan_reload
from scheduler.extender.isolated_parse import parse_settings_isolated
from scheduler.extender.metrics import ExtenderMetrics

log = logging.getLogger(__name__)


class ConfigReloader:
    """``running``: the settings the process runs on as read from ``path`` (before command-line
    overrides, which a file never changes). ``cells``: the HiveD engine whose VCs follow the file,
    None when the policy has none; it is only touched under ``lock`` (the engine lock the
    service and the watch cache share). ``on_applied``: told each reload that applied something
    live (its ``applied`` keys), once the engine lock is released."""

    def __init__(
        self,
        *,
        path: str,
        running: Settings,
        cells: CellReconfiguration | None,
        lock: threading.RLock,
        metrics: ExtenderMetrics,
        rebase: Callable[[CellsConfig], None] | None = None,
        on_applied: Callable[[Reload], None] | None = None,
        loaded_digest: bytes | None = None,
    ) -> None:
        self._path = path
        self._on_applied = on_applied
        # The cell exchange's (scheduler/cluster/exchange/quotas.py): the new VCs with the
        # exchanges under way applied on top.
        self._rebase = rebase
        self._running = running
        self._cells = cells
        self._lock = lock
        self._metrics = metrics
        # Digest of the content last acted on: at first, of the text startup parsed
        # (``loaded_digest``, config_digest's), so the first check parses only a file changed
        # since; None (not known): the first check parses it and compares it with ``running``.
        self._seen: bytes | None = loaded_digest
        self._unreadable_checks = 0  # consecutive checks that found no readable file

    @property
    def running(self) -> Settings:
        return self._running

    def reload_if_changed(self) -> Reload | None:
        """Read the file and act on it if its content is new; the outcome, or None when there
        was nothing new to act on (same content, or the file cannot be read right now)."""
        try:
            text = read_config_text(self._path)
        except ConfigError as error:
            self._note_unreadable(error)
            return None
        self._unreadable_checks = 0
        digest = config_digest(text)
        if digest == self._seen:
            return None
        try:
            new = parse_settings_isolated(text, source=self._path)
        except ConfigError as error:
            reload = Reload(result="invalid", running=self._running, reason=str(error))
        else:
            plan = plan_reload(self._running, new, live_cells=self._cells is not None)
            with self._lock:
                reload = apply_reload(self._running, plan, cells=self._cells, rebase=self._rebase)
        # Seen once read to an outcome: a parser that could not start (OSError) leaves the
        # content to be tried again at the next check.
        self._seen = digest
        self._running = reload.running
        self._report(reload)
        if reload.applied and self._on_applied is not None:
            self._on_applied(reload)
        return reload

    def _note_unreadable(self, error: ConfigError) -> None:
        # A ConfigMap update makes the file vanish for an instant: say so only when it is still
        # gone at the next check, and once until it is back.
        self._unreadable_checks += 1
        if self._unreadable_checks == 2:
            log.warning(
                "configuration file cannot be read; running on the last valid configuration",
                extra={"config_file": self._path, "reason": str(error)},
            )

    def _report(self, reload: Reload) -> None:
        # In effect: the running settings are the file's (applied, or unchanged in substance,
        # e.g. a broken file put back); not: invalid, refused, or waiting for a restart.
        self._metrics.config_in_effect.set(1 if reload.result in (None, "applied") and not reload.restart else 0)
        if reload.result is None:
            log.debug("configuration file rewritten; no setting changed", extra={"config_file": self._path})
            return
        self._metrics.config_reloads[reload.result].inc()
        if reload.result == "invalid":
            # A refusal of the running cells (over-committed, an unknown cell type) names the file
            # as a parse error does (user25 #7).
            said = reload.reason if reload.reason.startswith(f"{self._path}:") else f"{self._path}: {reload.reason}"
            log.warning(
                "new configuration not applied: invalid; running on the last valid configuration",
                extra={"config_file": self._path, "reason": said},
            )
        if reload.applied:
            log.info(
                "configuration reloaded: virtual clusters applied",
                extra={"config_file": self._path, "virtual_clusters": dict(reload.quotas)},
            )
        if reload.restart:
            log.warning(
                "configuration changes not applied: they need a restart",
                extra={"config_file": self._path, "keys": sorted(reload.restart), "reasons": dict(reload.restart)},
            )

    async def watch(self, *, interval_seconds: float) -> None:
        """Check every ``interval_seconds`` until cancelled. Each check runs in a worker thread:
        it reads a file and may wait for the engine lock, which the event loop must not."""
        if interval_seconds <= 0:
            raise ValueError(f"interval_seconds must be positive, got {interval_seconds}")
        while True:
            await asyncio.sleep(interval_seconds)
            try:
                await asyncio.to_thread(self.reload_if_changed)
            except Exception:  # a bug here must not end live reload for the process's lifetime
                log.exception("configuration reload failed", extra={"config_file": self._path})
