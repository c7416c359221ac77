"""What the service tells its operator about a request: the Prometheus counter and the log
records. Bad input must leave both behind ("a clear error, a log line, a metric"), so tests read
them the way an operator would: the counter from ``/metrics``, the records as logging saw them."""

from __future__ import annotations

import logging

import httpx
from prometheus_client.parser import text_string_to_metric_families


def scraped(client: httpx.Client, name: str, **labels: str) -> float:
    """The sample ``name{labels}`` (exactly those labels) as ``/metrics`` shows it now; 0 when
    it is not there (a counter child never incremented)."""
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def requests_total(client: httpx.Client, verb: str) -> dict[str, float]:
    """``cellfit_extender_requests_total`` of ``verb`` by result: every result at once, so a
    test also proves that nothing was counted under another one."""
    return {
        result: scraped(client, "cellfit_extender_requests_total", verb=verb, result=result)
        for result in ("ok", "rejected", "error")
    }


def records_about(records: list[logging.LogRecord], verb: str, *, level: int = logging.WARNING) -> list[logging.LogRecord]:
    """The records at ``level`` that name ``verb``: the service's carry a ``verb`` field, the
    dispatcher's (HTTP 400, 413) the request ``path``, which ends in the verb."""
    return [
        record
        for record in records
        if record.levelno == level
        and (getattr(record, "verb", None) == verb or str(getattr(record, "path", "")).endswith(f"/{verb}"))
    ]
