"""The ``nico`` command line (typer + rich): one module per command group, each calling services.

``app`` assembles the root app; ``bootstrap`` gives every command its settings, logging and a
database transaction; ``output`` prints results, listings and one-line failures. Commands reach the
database only through services and :mod:`nico.db.oneshot` (``tests/foundation/test_cli_shape.py``).
"""

from __future__ import annotations

import os

# gRPC core reads its log level once, when it is first loaded: set before anything below imports grpc,
# or `nico demo` and `nico sim` end with core INFO lines ("... fork_posix.cc ... skipping fork()
# handlers") on stderr. A value the user exported wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from nico.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
