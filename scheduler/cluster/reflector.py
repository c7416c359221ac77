"""List-then-watch for one kind of object, the way client-go's reflector does it:

1. list, remember the list's resourceVersion, hand the whole set to ``replace`` (which also
   drops objects that vanished while nobody watched), and mark the reflector synced. A
   reflector given ``list_from`` asks for the list's resourceVersion as client-go's does: "0"
   the first time (served from the API server's watch cache, no etcd read), the last version
   seen on every later list (served no older than it: a watch cache behind what was seen,
   another API server's, never takes the objects back in time), and none (a consistent read,
   the latest) once that version could not be served: a list answered 410 Gone, or a list or
   watch answered "Too large resource version" (that API server's watch cache is behind it);
2. watch from that resourceVersion (with bookmarks, so an idle watch still advances it) and
   hand each event to ``apply``/``delete``;
3. when the server ends the watch, watch again from the last resourceVersion seen; when it
   answers 410 Gone (the version was compacted away), go back to 1 (from that version: a list
   from the watch cache no older than it);
4. on any other failure, wait (exponential backoff, capped) and go back to 1 (a failure the
   owner tells its own way, ``told``, is logged at debug level only: an absent custom resource
   would otherwise warn every 30 s, forever). The backoff starts
   over once a watch delivers something, not on a list alone: a watch that fails as soon as it
   starts (refused, cut by a proxy, expired at the list's own version, which also waits, whether
   the 410 is the watch call's answer or the ERROR line that opens its stream) would otherwise
   have the whole kind listed again every half second, or as fast as the API server answers.

It runs on its own daemon thread; ``stop()`` ends it.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Generic, Iterator, Sequence, TypeVar

import msgspec

from scheduler.kube import wire

log = logging.getLogger(__name__)

T = TypeVar("T")

_BACKOFF_INITIAL_SECONDS = 0.5
_OBJECT_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})
_BACKOFF_MAX_SECONDS = 30.0


class Expired(Exception):
    """The watched resourceVersion is gone (HTTP 410): relist."""


class VersionTooLarge(Exception):
    """The API server does not hold the resourceVersion asked for yet (HTTP 504 "Too large
    resource version"): its watch cache is behind what this reflector saw (another API server
    behind the same address served that). The next list is a consistent read."""


TOO_LARGE_MESSAGE = "Too large resource version"


def too_large(status: wire.Status) -> bool:
    """Whether an API server's Status says the resourceVersion asked for is newer than it holds
    (kube-apiserver's message; client-go matches it too, for servers that send no cause)."""
    return status.code == 504 and TOO_LARGE_MESSAGE in status.message


class Reflector(Generic[T]):
    def __init__(
        self,
        *,
        kind: str,
        list_objects: Callable[[], tuple[str, Sequence[T]]] | None = None,
        watch_lines: Callable[[str], Iterator[bytes]],
        decode_object: Callable[[msgspec.Raw], T],
        version_of: Callable[[T], str],
        replace: Callable[[Sequence[T]], None],
        apply: Callable[[T], None],
        delete: Callable[[T], None],
        expired: type[Exception] = Expired,
        decode_event: Callable[[bytes], wire.ObjectEvent[T]] | None = None,
        list_from: Callable[[str], tuple[str, Sequence[T]]] | None = None,
        decode_deleted: Callable[[msgspec.Raw], T] | None = None,
        told: Callable[[Exception], bool] | None = None,
    ) -> None:
        """``decode_event``: an ADDED, MODIFIED or DELETED line decoded with its object in one
        pass (the usual event); ERROR and BOOKMARK lines, and lines it refuses, are decoded in
        two (the event, then ``decode_object``). ``decode_deleted``: without ``decode_event``,
        the object of a DELETED line read for what ``delete`` and ``version_of`` read of it
        alone (its name and version), not as ``decode_object`` reads the objects it keeps: a
        watch of pending pods sees every binding as a deletion. Lists come from ``list_objects`` (each the
        latest: a consistent read) or from ``list_from``, given the resourceVersion to list at
        ("0", a version seen, or "" for the latest: see the module's step 1); one of the two.
        ``told``: given a list's or watch's failure, whether its owner has told it (True: the
        retry is logged at debug level, not warned of)."""
        if (list_objects is None) == (list_from is None):
            raise ValueError(f"reflector {kind}: give list_objects or list_from, one of the two")
        self.kind = kind
        self._list = list_objects
        self._list_from = list_from
        self._watch = watch_lines
        self._decode = decode_object
        self._version_of = version_of
        self._replace = replace
        self._apply = apply
        self._delete = delete
        self._expired = expired
        self._decode_event = decode_event
        self._decode_deleted = decode_deleted or decode_object
        self._told = told
        self._stop = threading.Event()
        self.synced = threading.Event()
        self.relists = 0
        self._backoff = _BACKOFF_INITIAL_SECONDS
        self._watched_since_list = False  # a watch delivered something since the latest list
        self._seen_version = ""  # the latest resourceVersion listed or watched; "" before the first list
        self._seen_version_lost = False  # the API server could not serve it: the next list is the latest
        self._thread = threading.Thread(target=self._run, name=f"reflector-{kind}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                version = self._list_and_replace()
            except Exception as error:
                self._list_failed(error)
                continue
            try:
                while not self._stop.is_set():
                    version = self._watch_from(version)
            except Exception as error:
                self._watch_failed(error)

    def _list_failed(self, error: Exception) -> None:
        if isinstance(error, (Expired, self._expired, VersionTooLarge)):
            self._lose_seen_version(call="list")  # compacted away, or newer than this API server holds
        else:
            self._warn_retrying(error)
        self._back_off()

    def _watch_failed(self, error: Exception) -> None:
        if isinstance(error, (Expired, self._expired)):
            log.info("watch expired; relisting", extra={"kind": self.kind})
            if not self._watched_since_list:  # expired at the list's own version: no catching up
                self._back_off()
            return
        if isinstance(error, VersionTooLarge):
            self._lose_seen_version(call="watch")
        else:
            self._warn_retrying(error)
        self._back_off()

    def _lose_seen_version(self, *, call: str) -> None:
        """The API server does not serve the version seen: the next list asks for the latest."""
        self._seen_version_lost = True
        log.info("the resourceVersion seen is not served; listing the latest",
                 extra={"kind": self.kind, "call": call, "resource_version": self._seen_version})

    def _warn_retrying(self, error: Exception) -> None:
        # The API is down or answered nonsense: retry, never die.
        told = self._told is not None and self._told(error)
        log.log(
            logging.DEBUG if told else logging.WARNING,
            "list/watch failed; retrying",
            extra={"kind": self.kind, "reason": str(error) or type(error).__name__, "retry_seconds": self._backoff},
        )

    def _back_off(self) -> None:
        self._stop.wait(self._backoff)
        self._backoff = min(self._backoff * 2, _BACKOFF_MAX_SECONDS)

    def _relist_version(self) -> str:
        """The resourceVersion the next list asks for (client-go's relistResourceVersion)."""
        if self._seen_version_lost:
            return ""
        return self._seen_version or "0"

    def _listed(self) -> tuple[str, Sequence[T]]:
        if self._list_from is not None:
            return self._list_from(self._relist_version())
        assert self._list is not None  # one of the two, checked when built
        return self._list()

    def _list_and_replace(self) -> str:
        version, objects = self._listed()
        self._seen_version, self._seen_version_lost = version, False
        self._watched_since_list = False
        self._replace(objects)
        self.relists += 1
        if not self.synced.is_set():
            log.info("cache synced", extra={"kind": self.kind, "objects": len(objects), "resource_version": version})
        self.synced.set()
        return version

    def _watch_from(self, version: str) -> str:
        for line in self._watch(version):
            if self._stop.is_set():
                break
            version = self._seen_version = self._handle(line, version)
            # The list and the watch both work: the next failure starts the backoff over. Not
            # on an ERROR line (it raised): kube-apiserver answers a watch from a version its
            # cache no longer holds with a 200 stream whose one line is ERROR 410.
            self._watched_since_list = True
            self._backoff = _BACKOFF_INITIAL_SECONDS
        return version

    def _handle(self, line: bytes, version: str) -> str:
        """Apply one watch line; the version to watch from after it. Raises on an ERROR line."""
        typed = self._typed(line)
        if typed is not None:
            kind, obj = typed.type, typed.object
        else:
            event = wire.WATCH_EVENT_DECODER.decode(line)
            kind = event.type
            if kind == "ERROR":
                status = wire.STATUS_DECODER.decode(event.object)
                if status.code == 410:
                    raise Expired
                if too_large(status):
                    raise VersionTooLarge(status.message)
                raise RuntimeError(f"watch error {status.code}: {status.message}")
            if kind == "BOOKMARK":
                return wire.BOOKMARK_DECODER.decode(event.object).metadata.resourceVersion or version
            obj = (self._decode_deleted if kind == "DELETED" else self._decode)(event.object)
        if kind == "DELETED":
            self._delete(obj)
        else:
            self._apply(obj)
        return self._version_of(obj) or version

    def _typed(self, line: bytes) -> wire.ObjectEvent[T] | None:
        """The event with its object, decoded in one pass; None for ERROR and BOOKMARK (their
        objects are a Status and a stub, which the object's struct may read as an empty object)."""
        if self._decode_event is None:
            return None
        try:
            event = self._decode_event(line)
        except msgspec.ValidationError:
            return None
        return event if event.type in _OBJECT_EVENTS else None
