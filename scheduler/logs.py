"""Structured logging: one JSON object per line (or readable text), with the context a reader
needs passed as ``extra={...}`` (pod, node, verb, reason) rather than formatted into prose.

What clients send must not decide how much is written: the records a bad request causes (a
refused body, an invalid request line, a refused connection) pass :class:`RepeatLimiter`, at
most a burst and then a few a minute of each kind, the next one that passes saying how many
were held back; and context values are cut at :data:`MAX_VALUE_CHARS` (a reason can quote what
the client sent).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import OrderedDict
from typing import Any, Callable, Mapping, TextIO

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
# uvicorn adds ``color_message``, an ANSI-coloured copy of the message, for its own formatter.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "color_message"}


# A context string longer than this is cut, saying how much was left out.
MAX_VALUE_CHARS = 2000

# Loggers that write a record per request a client can make fail, with the lowest level
# RepeatLimiter limits per kind: everything else cellfit logs is caused by the cluster or by
# itself. The service's INFO records (a decision per pod) stay whole; its WARNINGs (a request
# it could not carry out) do not.
REQUEST_LOGGERS: Mapping[str, int] = {
    "scheduler.extender.dispatch": logging.NOTSET,  # refused verb bodies
    "scheduler.extender.service": logging.WARNING,  # verbs not carried out (the Error field)
    "scheduler.extender.app": logging.NOTSET,  # refused admission reviews
    "scheduler.extender.admission": logging.NOTSET,
    "scheduler.extender.validating": logging.NOTSET,  # problems found (counted in metrics too)
    "scheduler.extender.listeners": logging.NOTSET,  # refused connections and heads, slow requests, TLS
    "uvicorn.error": logging.NOTSET,  # uvicorn's own warnings about requests
}


def context_of(record: logging.LogRecord) -> dict[str, Any]:
    return {key: _cut(value) for key, value in vars(record).items() if key not in _STANDARD}


def _cut(value: Any) -> Any:
    """``value``, or its first characters when longer; a list or mapping longer written out (a
    client can make one long: a problem per annotation key) is cut as its JSON text."""
    text = value if isinstance(value, str) else json.dumps(value, default=str) if isinstance(value, (list, tuple, dict)) else None
    if text is None or len(text) <= MAX_VALUE_CHARS:
        return value
    return f"{text[:MAX_VALUE_CHARS]}... ({len(text) - MAX_VALUE_CHARS} more characters cut)"


class RepeatLimiter(logging.Filter):
    """Lets records of ``loggers`` (name -> the lowest level limited) through at most ``burst``
    at once and ``per_minute`` a minute after that, per kind (logger, level, message before its
    arguments): a token bucket each.
    The record that passes after others of its kind were held back carries ``suppressed``, how
    many. Kinds are code locations, a bounded set; the most recent ``max_kinds`` are kept."""

    def __init__(
        self,
        *,
        loggers: Mapping[str, int] = REQUEST_LOGGERS,
        burst: int = 10,
        per_minute: float = 6.0,
        clock: Callable[[], float] = time.monotonic,
        max_kinds: int = 1024,
    ) -> None:
        super().__init__()
        if burst < 1 or per_minute <= 0:
            raise ValueError(f"burst must be >= 1 and per_minute > 0, got {burst} and {per_minute}")
        self._loggers = dict(loggers)
        self._burst = float(burst)
        self._per_second = per_minute / 60.0
        self._clock = clock
        self._max_kinds = max_kinds
        # kind -> [tokens, time of the last refill, records held back since the last one passed]
        self._kinds: OrderedDict[tuple[str, int, str], list[float]] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        floor = self._loggers.get(record.name)
        if floor is None or record.levelno < floor:
            return True
        now = self._clock()
        kind = (record.name, record.levelno, str(record.msg)[:200])
        state = self._kinds.get(kind)
        if state is None:
            state = self._kinds[kind] = [self._burst, now, 0]
            if len(self._kinds) > self._max_kinds:
                self._kinds.popitem(last=False)
        else:
            self._kinds.move_to_end(kind)
            state[0] = min(self._burst, state[0] + (now - state[1]) * self._per_second)
            state[1] = now
        if state[0] < 1:
            state[2] += 1
            return False
        state[0] -= 1
        if state[2]:
            record.suppressed = int(state[2])  # shown with the record's context
            state[2] = 0
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(context_of(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        context = " ".join(f"{key}={_one_line(value)}" for key, value in context_of(record).items())
        line = f"{self.formatTime(record)} {record.levelname:<7} {record.name}: {_one_line(record.getMessage())}"
        if context:
            line = f"{line} [{context}]"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def _one_line(value: Any) -> Any:
    """A text with a line break or another control character quoted and escaped (JSON's way):
    a value a client chose never writes what reads as a record of its own."""
    if isinstance(value, str) and any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return json.dumps(value)
    return value


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to ``sys.stderr`` as it is when a record is written, not as it was when logging
    was configured: a caller that swaps ``sys.stderr`` for a while and closes its own afterwards
    (pytest's capsys around a test calling ``cellfit serve``) must not leave every later record,
    from any thread, failing with "I/O operation on closed file". A stream given with
    :meth:`setStream` is held, as a StreamHandler's is."""

    def __init__(self) -> None:
        self._chosen: TextIO | None = None
        super().__init__()

    @property
    def stream(self) -> TextIO:
        return sys.stderr if self._chosen is None else self._chosen

    @stream.setter
    def stream(self, chosen: TextIO) -> None:
        # StreamHandler's __init__ assigns the sys.stderr of the moment: that one is not held.
        self._chosen = None if chosen is sys.stderr else chosen


def configure_logging(*, level: str, fmt: str) -> None:
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RepeatLimiter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # uvicorn's access log would add a line per kube-scheduler call: thousands a second.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
