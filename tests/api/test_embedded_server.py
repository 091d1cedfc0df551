"""The API's uvicorn server (``nico.serving.EmbeddedServer``) ticks once a second, not ten times, doing
uvicorn's once-a-second work (the date header) on every tick, and a stop wakes it at once."""

from __future__ import annotations

import asyncio

import pytest
import uvicorn

from nico.serving import EmbeddedServer

DEADLINE = 20.0


async def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("no request is made")


def _server(ticks: list[int], stop_after: int | None = None) -> EmbeddedServer:
    server = EmbeddedServer(uvicorn.Config(_app))

    async def on_tick(counter: int) -> bool:
        ticks.append(counter)
        return server.should_exit or (stop_after is not None and len(ticks) >= stop_after)

    server.on_tick = on_tick  # type: ignore[method-assign]
    return server


async def test_a_stop_wakes_the_main_loop_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EmbeddedServer, "TICK", 3600.0)  # a loop that waited for its tick would hang
    ticks: list[int] = []
    server = _server(ticks)
    looping = asyncio.create_task(server.main_loop())
    await asyncio.sleep(0)
    assert ticks == [0] and not looping.done()
    server.should_exit = True
    async with asyncio.timeout(DEADLINE):
        await looping
    assert ticks == [0, 10]


async def test_every_tick_does_uvicorn_s_once_a_second_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn refreshes the date header on ticks whose counter is a multiple of 10 (tenths of a
    second): a tick of a second must count ten."""
    monkeypatch.setattr(EmbeddedServer, "TICK", 0.001)
    ticks: list[int] = []
    async with asyncio.timeout(DEADLINE):
        await _server(ticks, stop_after=3).main_loop()
    assert ticks == [0, 10, 20]


def test_should_exit_reads_what_was_set() -> None:
    server = _server([])
    assert server.should_exit is False
    server.should_exit = True
    assert server.should_exit is True
