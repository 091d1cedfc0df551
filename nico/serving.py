"""uvicorn inside an event loop that another program owns (``nico demo``, ``nico sim``, tests), the
stop signal such a program waits on, and the app factory behind ``nico serve --workers N``."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any

import uvicorn

if TYPE_CHECKING:
    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry

    from nico.config import Settings


class EmbeddedServer(uvicorn.Server):
    """uvicorn without its own signal handlers (the embedding program owns Ctrl-C and SIGTERM) and with
    a main loop that wakes once a second, not ten times: uvicorn's loop sleeps 0.1 s between ticks
    whose only work, on an idle server, is the ``date`` header once a second; those wake-ups were all
    the CPU an idle API spent (1.5 ms a second). A stop (``should_exit``) wakes it at once."""

    TICK = 1.0  # seconds between ticks: each does what uvicorn does once a second (date header)

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit_asked = asyncio.Event()
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._exit_asked.is_set()

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        if value:
            self._exit_asked.set()
        else:
            self._exit_asked.clear()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        # uvicorn's ticks count tenths of a second (its once-a-second work runs when counter % 10 == 0)
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.TICK):  # not wait_for: see Reconciler._loop
                    await self._exit_asked.wait()


DATABASE_URL_VARIABLE = "NICO_SERVE_DATABASE_URL"  # parent -> workers: the URL it resolved and migrated


def app_factory() -> FastAPI:
    """The API of one ``nico serve --workers N`` worker (uvicorn imports ``nico.serving:app_factory``
    in each worker process): settings from the same environment and config file as the parent, the
    database the parent resolved (and migrated), no reconciler (the parent runs the only one)."""
    from nico.api.app import build_context, create_app
    from nico.config import load_settings

    collect_less()
    settings = load_settings()
    url = os.environ.get(DATABASE_URL_VARIABLE) or None
    return create_app(settings, context=build_context(settings, url), owns_context=True)


def serve_workers(settings: Settings, url: str, workers: int, *, reconciler: bool, metrics_port: int) -> None:
    """uvicorn's process manager with ``workers`` API processes; the reconciler, when on, runs once,
    in this process (a thread with its own event loop and /metrics on ``metrics_port``)."""
    from nico.api.access_log import logging_config
    from nico.api.http_limits import limited_protocol

    os.environ[DATABASE_URL_VARIABLE] = url
    stop = threading.Event()
    thread = threading.Thread(
        target=_reconcile, args=(settings, url, metrics_port, stop), name="reconciler", daemon=True
    )
    if reconciler:
        thread.start()
    try:
        uvicorn.run(
            "nico.serving:app_factory",
            factory=True,
            host=settings.api.host,
            port=settings.api.port,
            workers=workers,
            log_level=settings.log_level.lower(),
            log_config=logging_config(),
            http=limited_protocol(settings),
        )
    finally:
        # uvicorn took SIGTERM / Ctrl-C and stopped the workers: the reconciler stops as it would alone.
        stop.set()
        if reconciler:
            thread.join(timeout=10.0)


async def reconcile_forever(settings: Settings, url: str, registry: CollectorRegistry) -> None:
    """The reconciler on its own engine (disposed when it stops), metrics in ``registry``."""
    from nico.db.engine import make_engine
    from nico.reconciler.runtime import pool_size, run_reconciler

    engine = make_engine(url, pool_size=pool_size(settings))
    try:
        await run_reconciler(settings, engine, registry)
    finally:
        await engine.dispose()


def _reconcile(settings: Settings, url: str, metrics_port: int, stop: threading.Event) -> None:
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    if metrics_port:
        start_http_server(metrics_port, addr=settings.api.host, registry=registry)

    async def until_stopped() -> None:
        loop, stopped = asyncio.get_running_loop(), asyncio.Event()

        def relay() -> None:  # the thread's Event, seen by this loop (a daemon: never holds the exit)
            stop.wait()
            with contextlib.suppress(RuntimeError):  # the loop ended first (the reconciler failed)
                loop.call_soon_threadsafe(stopped.set)

        threading.Thread(target=relay, name="reconciler-stop", daemon=True).start()
        await run_until(reconcile_forever(settings, url, registry), stopped)

    asyncio.run(until_stopped())


async def run_until(
    work: Coroutine[Any, Any, None], stop: asyncio.Event, on_stop: Callable[[], None] | None = None
) -> None:
    """Run ``work`` until it ends or ``stop`` is set; then ask it to end (``on_stop``, else by
    cancelling it) and wait for it to wind down (the reconciler lets its passes in flight finish)."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            if on_stop is not None and stop.is_set():
                on_stop()
            else:
                task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def hold_stop_signals() -> None:
    """Keep SIGINT and SIGTERM pending (not lost) until an event loop's handlers take them
    (:func:`stop_requested` lets them through): a stop arriving while the loop is being built would
    otherwise interrupt it half-made. Call it before starting threads, which inherit the mask."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def stop_like_ctrl_c() -> None:
    """SIGTERM (how Kubernetes and systemd stop a process) raises KeyboardInterrupt, as Ctrl-C does,
    until an event loop takes both over (:func:`stop_requested`): a stop during start-up ends
    cleanly instead of killing the process where it stands."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


# The collector's thresholds for nico's long-running processes (generation 0 collected every 50,000
# allocations, not CPython's 700; the older ones after 20 of the younger, not 10). A full pass allocates
# a few objects per GPU, and at the default every few hundred allocations started a collection that,
# every hundredth time, walked every object the process keeps (the reconciler's state of every
# domain): 13% of a 2,000-rack first pass's CPU, 30% of a deep pass's, a third of a restart's.
# Reference counting frees all but cycles at once; the cycles wait a little longer.
SERVICE_COLLECTOR_THRESHOLDS = (50_000, 20, 20)


def collect_less() -> None:
    """Set :data:`SERVICE_COLLECTOR_THRESHOLDS` for this process (``nico serve`` and its workers,
    ``nico reconcile``)."""
    gc.set_threshold(*SERVICE_COLLECTOR_THRESHOLDS)


def event_loop() -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop a nico process runs: the one uvicorn runs by default (``loop="auto"``: uvloop
    when installed, as uvicorn[standard] brings it; asyncio's otherwise). A request's or a pass's CPU
    is largely the loop's own work (waking on each socket, each database round trip). The Config asked
    configures no logging (``log_config=None``): one with uvicorn's defaults set the access log back to
    INFO after ``nico serve`` had set it to the configured level, so ``log_level = "WARNING"`` still
    wrote a line per request."""
    return uvicorn.Config(app="nico", log_config=None).get_loop_factory() or asyncio.new_event_loop


async def serve_until_stopped(config: uvicorn.Config) -> None:
    """uvicorn until Ctrl-C or SIGTERM, then its graceful shutdown (the app's lifespan stops the
    reconciler, which lets its pass in flight finish). Unlike ``uvicorn.run``, the signal is not
    raised again afterwards, so a stop requested this way exits 0."""
    server = EmbeddedServer(config)
    with stop_requested() as stop:
        await run_until(server.serve(), stop, on_stop=lambda: setattr(server, "should_exit", True))


@contextlib.contextmanager
def stop_requested() -> Iterator[asyncio.Event]:
    """An event set by Ctrl-C or SIGTERM, installed before the servers start so that a signal
    arriving during start-up still ends in a clean stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a stop held back until now arrives here
    try:
        yield stop
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
