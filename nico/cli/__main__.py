"""``python -m nico.cli``: the ``nico`` command."""

from nico.cli import main

main()
