"""Request heads are bounded where their bytes arrive: the app served by uvicorn with nico's protocol
(``nico.api.http_limits``) on a loopback port, driven with raw sockets as an abusive client would."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest_asyncio
import uvicorn
from fastapi import FastAPI

from nico.api import http_limits
from nico.api.http_limits import limited_protocol
from nico.config import Settings
from nico.serving import EmbeddedServer
from tests.api.conftest import BASE
from tests.support import factories as f

DEADLINE = 20.0  # every wait below ends well before this, or the test fails
HEAD_TIMEOUT = 0.5


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    closed: bool  # the server closed the connection after it


@pytest_asyncio.fixture
async def port(app: FastAPI, settings: Settings) -> AsyncIterator[int]:
    api = settings.api.model_copy(update={"header_timeout_seconds": HEAD_TIMEOUT})
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        http=limited_protocol(settings.model_copy(update={"api": api})),
    )
    server = EmbeddedServer(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(DEADLINE):
        while not server.started:
            assert not serving.done()
            await asyncio.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    await serving
    sock.close()


async def read_answer(reader: asyncio.StreamReader) -> Answer:
    """One HTTP/1.1 response (content-length bodies only), and whether EOF follows it."""
    async with asyncio.timeout(DEADLINE):
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        fields = dict(line.split(": ", 1) for line in lines[1:] if line)
        body = await reader.readexactly(int(fields["content-length"]))
        closed = fields.get("connection") == "close" and await _at_eof(reader)
    parsed = json.loads(body) if fields.get("content-type", "").startswith("application/json") else body
    return Answer(int(lines[0].split()[1]), parsed, closed)


async def _at_eof(reader: asyncio.StreamReader) -> bool:
    try:
        return await reader.read() == b""
    except ConnectionResetError:  # closed with bytes of ours unread: the kernel answers a reset
        return True


async def exchange(port: int, request: bytes) -> Answer:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await read_answer(reader)
    finally:
        writer.close()


def envelope(message: str) -> dict[str, Any]:
    return {"source": "nico", "message": message, "data": None}


async def test_a_64_mb_header_is_answered_431_without_reading_it(port: int) -> None:
    """The server stops reading at the head limit: the client cannot even send the rest."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    chunk = b"a" * 65536
    sent = 0

    async def send() -> None:
        nonlocal sent
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        for _ in range(1024):  # 64 MB
            writer.write(chunk)
            await writer.drain()
            sent += len(chunk)

    sender = asyncio.create_task(send())
    answer = await read_answer(reader)
    try:
        async with asyncio.timeout(DEADLINE):
            await sender
    except (ConnectionError, OSError):
        pass  # the server closed the connection under the sender's feet
    writer.close()
    assert answer == Answer(431, envelope(http_limits.HEAD_TOO_LARGE), closed=True)
    assert sent < 16 * 1024 * 1024  # socket buffers at most, never the whole 64 MB


async def test_head_limits_answer_at_once(port: int) -> None:
    long_line = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: " + b"b" * 40_000 + b"\r\n\r\n"
    assert await exchange(port, long_line) == Answer(431, envelope(http_limits.LINE_TOO_LARGE), True)
    long_target = b"GET /healthz?q=" + b"c" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert await exchange(port, long_target) == Answer(414, envelope(http_limits.TARGET_TOO_LONG), True)
    many = "&".join(f"p{n}=1" for n in range(200)).encode()
    too_many = b"GET /healthz?" + many + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert await exchange(port, too_many) == Answer(400, envelope(http_limits.TOO_MANY_PARAMETERS), True)


async def test_a_slow_sender_is_cut_off(port: int) -> None:
    """A byte of header every 50 ms: 408 once the head has taken longer than the timeout, then EOF."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\n")

    async def trickle() -> None:
        for _ in range(int(DEADLINE / 0.05)):
            writer.write(b"X")
            await writer.drain()
            await asyncio.sleep(0.05)

    sender = asyncio.create_task(trickle())
    answer = await read_answer(reader)
    sender.cancel()
    writer.close()
    assert answer == Answer(408, envelope(http_limits.HEAD_TIMEOUT), closed=True)


async def test_a_silent_connection_is_closed(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    async with asyncio.timeout(DEADLINE):
        assert await reader.read() == b""
    writer.close()


async def test_requests_within_the_limits_are_served(port: int, db: str, headers: dict[str, str]) -> None:
    """Keep-alive, pipelining, a 20 KB header, and a head that arrives with 100 KB of body in one write
    (the body's bytes are not counted against the head)."""
    big_header = b"X-Fine: " + b"d" * 20_000 + b"\r\n"
    get = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + big_header + b"\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(get + get)  # pipelined
    assert (await read_answer(reader)).status == 200
    assert (await read_answer(reader)).status == 200
    writer.write(get)  # the same connection, kept alive
    assert (await read_answer(reader)).status == 200
    body = json.dumps({"name": "n" * 100_000, "siteId": "not-a-uuid"}).encode()
    auth = f"Authorization: {headers['Authorization']}\r\n".encode()
    post = (
        f"POST {BASE}/nvlink-logical-partition HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
    ).encode()
    writer.write(post + auth + b"\r\n" + body)
    answer = await read_answer(reader)
    writer.close()
    assert answer.status == 400 and set(answer.body["data"]) == {"name", "siteId"}


async def test_a_head_without_a_body_and_a_stream_s_head_arrive(
    port: int, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    """A response's head is held for its body (nico.api.one_write): a HEAD request's answer, which has
    none, and a stream's, whose first chunk comes later, still arrive."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(DEADLINE):
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 405 ")
        auth = f"Authorization: {headers['Authorization']}\r\n".encode()
        writer.write(f"GET {BASE}/nvlink-topology/events HTTP/1.1\r\nHost: x\r\n".encode() + auth + b"\r\n")
        async with asyncio.timeout(DEADLINE):
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readuntil(b"retry: 1000\n\n")  # the stream's first chunk
        assert head.startswith(b"HTTP/1.1 200 ") and b"text/event-stream" in head
    finally:
        writer.close()
