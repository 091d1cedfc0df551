"""The API's access log: uvicorn's line for every request, written for less.

``INFO:     127.0.0.1:40112 - "GET /v2/org/acme/nico/instance/<id> HTTP/1.1" 200 OK``, the line and
the logger (``uvicorn.access``, to standard output) uvicorn's own configuration gives, with a
formatter that writes it from the record's arguments: uvicorn's copies the record, looks the status
phrase up in ``http.HTTPStatus`` and goes through ``%``-formatting on every request (25 us a line
against 12). Coloured output (a terminal) and anything but uvicorn's request line are left to
uvicorn's formatter.
"""

from __future__ import annotations

import copy
import http
import logging
from typing import Any

from uvicorn.config import LOGGING_CONFIG as UVICORN_LOGGING
from uvicorn.logging import AccessFormatter

# "200 OK", as uvicorn writes a status ("599 " for one it does not know).
_STATUS = {status.value: f"{status.value} {status.phrase}" for status in http.HTTPStatus}


class RequestLineFormatter(AccessFormatter):
    """uvicorn's access line, written in one f-string (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        args = record.args
        if self.use_colors or record.exc_info or record.stack_info or not isinstance(args, tuple):
            return super().format(record)
        if len(args) != 5:  # not a request line (uvicorn writes no other to this logger)
            return super().format(record)
        client, method, path, version, status = args
        phrase = _STATUS.get(status) if isinstance(status, int) else None
        level = record.levelname
        return (
            f'{level}:{" " * (8 - len(level))} {client} - "{method} {path} HTTP/{version}" '
            f"{phrase or f'{status} '}"
        )


def logging_config() -> dict[str, Any]:
    """uvicorn's logging configuration (``uvicorn.Config(log_config=...)``), its access lines written by
    :class:`RequestLineFormatter`."""
    config = copy.deepcopy(UVICORN_LOGGING)
    config["formatters"]["access"]["()"] = f"{__name__}.{RequestLineFormatter.__name__}"
    return config
