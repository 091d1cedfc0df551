"""Loopback ports for servers the tests start."""

from __future__ import annotations

import random
import socket
from contextlib import ExitStack


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that are all free right now.

    A server told "serve from this port upward" binds ``base + k`` itself, so the
    ports after the first must be free too; one ``free_port()`` says nothing about
    its neighbours, which the kernel hands out as ephemeral ports to the suite's
    own outgoing connections. The run is drawn below the ephemeral range, where
    no outgoing connection lands, and is checked by binding every port of it.
    """
    ceiling = _ephemeral_floor() - count
    for _ in range(200):
        base = random.randrange(20000, ceiling)
        try:
            with ExitStack() as held:
                for port in range(base, base + count):
                    s = held.enter_context(socket.socket())
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no {count} consecutive free loopback ports below {ceiling + count}")
