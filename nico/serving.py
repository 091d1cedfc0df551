"""uvicorn inside an event loop that another program owns (``nico demo``, ``nico sim``, tests)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn


class EmbeddedServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the embedding program owns Ctrl-C and SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
