"""``nico admin machine force-delete``: decommission a machine (:mod:`nico.inventory.decommission`)."""

from __future__ import annotations

from typing import Annotated

import typer

from nico.cli.bootstrap import with_session
from nico.cli.output import console


def register(machine_app: typer.Typer) -> None:
    """Add ``force-delete`` to the ``admin machine`` group."""
    machine_app.command("force-delete")(force_delete)


def force_delete(
    machine_id: Annotated[str, typer.Argument(metavar="ID", help="The machine to decommission.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Decommission a machine: its instance is released, its GPUs leave every partition, the machine
    leaves capacity and its allocation. The database changes now; the fabric follows on the
    reconciler's next pass that reaches the machine's domain. Asking again is harmless."""
    from nico.inventory.decommission import force_delete_machine

    if not yes:
        typer.confirm(
            f"Force-delete machine {machine_id}? Its instance (if any) is released for good", abort=True
        )
    done = with_session(lambda session: force_delete_machine(session, machine_id))
    if not done.found:
        console.print(
            f"machine {machine_id} does not exist (already removed?): nothing to do", highlight=False
        )
        return
    if done.instance_id is not None:
        print(f"instance {done.instance_id} released")
    if done.waits_for_fabric:
        print(
            f"machine {machine_id} decommissioned: it is removed once the reconciler has its GPUs out of "
            "every partition"
        )
    else:
        print(f"machine {machine_id} removed")
