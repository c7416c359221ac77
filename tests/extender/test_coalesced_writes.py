"""The listeners' transport wrapper: an answer's head and body, written apart by uvicorn, leave
in one write at the end of the event loop's turn; closing, half-closing and aborting keep their
order with the writes before them."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.extender.listeners import _CoalescedWrites


class RecordingTransport:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.calls.append(("write", data))

    def write_eof(self) -> None:
        self.calls.append(("write_eof", None))

    def close(self) -> None:
        self.closing = True
        self.calls.append(("close", None))

    def abort(self) -> None:
        self.closing = True
        self.calls.append(("abort", None))

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1234) if name == "peername" else None


def run(scenario: Any) -> list[tuple[str, Any]]:
    async def main() -> list[tuple[str, Any]]:
        transport = RecordingTransport()
        wrapped = _CoalescedWrites(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        await scenario(wrapped)
        await asyncio.sleep(0)
        return transport.calls

    return asyncio.run(main())


def test_head_and_body_of_one_turn_leave_as_one_write() -> None:
    async def answer(transport: _CoalescedWrites) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        transport.write(b"{}")
        assert transport.get_write_buffer_size() == 40  # what waits counts as buffered
        await asyncio.sleep(0)  # the turn ends
        transport.write(memoryview(b"next"))

    assert run(answer) == [("write", b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"), ("write", b"next")]


def test_close_and_half_close_send_what_was_written_first() -> None:
    async def close(transport: _CoalescedWrites) -> None:
        transport.write(b"a")
        transport.write_eof()
        transport.write(b"late")
        transport.close()

    assert run(close) == [("write", b"a"), ("write_eof", None), ("write", b"late"), ("close", None)]


def test_abort_drops_what_waits_and_other_calls_reach_the_transport() -> None:
    async def abort(transport: _CoalescedWrites) -> None:
        assert transport.get_extra_info("peername") == ("127.0.0.1", 1234)
        transport.write(b"dropped")
        transport.abort()

    assert run(abort) == [("abort", None)]
