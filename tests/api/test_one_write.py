"""A response's head goes out with its body in one write (``nico.api.one_write``), and never waits for
a body that is not coming: alone at the end of the event loop's turn, or before a close."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from nico.api.one_write import OneWriteHead


class Recorded:
    """A transport that records its writes and whether it was closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(data)

    def writelines(self, data: tuple[bytes, ...]) -> None:  # one write of several buffers
        self.write(b"".join(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def held(recorded: Recorded) -> OneWriteHead:
    return OneWriteHead(cast("asyncio.Transport", recorded), asyncio.get_running_loop())


async def test_head_and_body_in_one_write_then_every_write_at_once() -> None:
    recorded = Recorded()
    transport = held(recorded)
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    assert recorded.writes == []
    transport.write(b"{}")
    assert recorded.writes == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    transport.write(b"more")
    assert recorded.writes[-1] == b"more"
    await asyncio.sleep(0)  # the end of the turn sends nothing twice
    assert recorded.writes == [b"HTTP/1.1 200 OK\r\n\r\n{}", b"more"]
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)


async def test_a_head_without_a_body_goes_out_at_the_end_of_the_turn() -> None:
    recorded = Recorded()
    transport = held(recorded)
    transport.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")  # a HEAD request's answer
    await asyncio.sleep(0)
    assert recorded.writes == [b"HTTP/1.1 405 Method Not Allowed\r\n\r\n"]
    transport.write(b"first chunk")  # a stream's body, later
    assert recorded.writes[-1] == b"first chunk"


async def test_a_close_sends_the_head_first_and_a_gone_peer_gets_nothing() -> None:
    recorded = Recorded()
    transport = held(recorded)
    transport.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    transport.close()
    assert recorded.writes == [b"HTTP/1.1 204 No Content\r\n\r\n"] and transport.is_closing()
    await asyncio.sleep(0)
    assert len(recorded.writes) == 1
    gone = Recorded()
    late = held(gone)
    late.write(b"HTTP/1.1 200 OK\r\n\r\n")
    gone.closed = True  # the connection was lost before the end of the turn
    await asyncio.sleep(0)
    assert gone.writes == []
