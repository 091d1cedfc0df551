"""The access log ``nico serve`` writes: uvicorn's line, byte for byte, from the cheaper formatter; and
only at the level the settings ask for (a WARNING server writes no line per request)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import uvicorn
from uvicorn.config import LOGGING_CONFIG as UVICORN_LOGGING
from uvicorn.logging import AccessFormatter

from nico.api.access_log import RequestLineFormatter, logging_config
from nico.serving import event_loop

ACCESS_FMT = UVICORN_LOGGING["formatters"]["access"]["fmt"]


def record(level: int, *args: object, msg: str = '%s - "%s %s HTTP/%s" %d') -> logging.LogRecord:
    return logging.LogRecord("uvicorn.access", level, __file__, 1, msg, args, None)


@pytest.mark.parametrize("colours", [False, True])
@pytest.mark.parametrize(
    "line",
    [
        (logging.INFO, "127.0.0.1:40112", "GET", "/v2/org/acme/nico/instance/abc", "1.1", 200),
        (logging.INFO, "10.0.0.9:1", "POST", "/v2/org/acme/nico/instance?x=%20y", "1.1", 201),
        (logging.INFO, "[::1]:5", "DELETE", "/v2/org/acme/nico/instance/abc", "1.0", 404),
        (logging.WARNING, "127.0.0.1:2", "GET", "/readyz", "1.1", 503),
        (logging.INFO, "127.0.0.1:2", "GET", "/odd", "1.1", 599),  # no phrase: "599 "
    ],
)
def test_the_line_is_uvicorn_s(line: tuple[int, str, str, str, str, int], colours: bool) -> None:
    level, *args = line
    ours = RequestLineFormatter(fmt=ACCESS_FMT, use_colors=colours)
    theirs = AccessFormatter(fmt=ACCESS_FMT, use_colors=colours)
    assert ours.format(record(level, *args)) == theirs.format(record(level, *args))


def test_a_line_that_is_not_a_request_goes_to_uvicorn_s_formatter() -> None:
    """uvicorn's formatter answers any record it would (here: failing on a line of three arguments,
    as uvicorn's does), not a line made up from a record of another shape."""
    odd = record(logging.INFO, "127.0.0.1:2", "/ws", 101, msg='%s - "WebSocket %s" %d')
    with pytest.raises(ValueError):
        AccessFormatter(fmt=ACCESS_FMT, use_colors=False).format(odd)
    with pytest.raises(ValueError):
        RequestLineFormatter(fmt=ACCESS_FMT, use_colors=False).format(odd)


@pytest.fixture
def uvicorn_loggers() -> Iterator[None]:
    """The uvicorn loggers' levels, handlers and propagation, put back after the test."""
    names = ("uvicorn", "uvicorn.error", "uvicorn.access")
    kept = [
        (logging.getLogger(n), logging.getLogger(n).level, logging.getLogger(n).handlers[:]) for n in names
    ]
    yield
    for logger, level, handlers in kept:
        logger.setLevel(level)
        logger.handlers[:] = handlers


@pytest.mark.usefixtures("uvicorn_loggers")
@pytest.mark.parametrize(("level", "writes"), [("WARNING", False), ("INFO", True)])
def test_serve_writes_access_lines_only_at_info(level: str, writes: bool) -> None:
    """``nico serve``'s order: uvicorn configured at the settings' level, then the event loop asked for
    (which used to configure uvicorn's logging again, with its defaults: INFO)."""
    uvicorn.Config(app="nico", log_level=level.lower(), log_config=logging_config())
    event_loop()
    access = logging.getLogger("uvicorn.access")
    assert access.isEnabledFor(logging.INFO) is writes
    (handler,) = access.handlers
    assert isinstance(handler.formatter, RequestLineFormatter)
