"""Admin commands of the reference's NVLink surface: ``nvl-partition`` (``nvp``),
``logical-partition`` (``lp``), ``instance update-nvlink-config`` and ``nmxc browse``.

Every listing takes ``--format table|json|yaml`` and prints exactly that format. Database work goes
through :mod:`nico.services.admin_nvlink`; ``nmxc browse`` talks to one NMX-C endpoint directly.
Registered on the ``admin`` app by :func:`register`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nico.cli.bootstrap import settings_or_exit, with_session
from nico.cli.options import org_option
from nico.cli.output import Format, FormatOption, console, emit, fail

if TYPE_CHECKING:
    from nico.config import NvLinkConfig
    from nico.fabric.backend import FabricComputeNode, FabricGpu, FabricPartition, FabricSwitchNode

nvl_partition_app = typer.Typer(
    help="Physical NVLink partitions (what nico made on the fabric).", no_args_is_help=True
)
logical_partition_app = typer.Typer(help="NVLink logical partitions of every tenant.", no_args_is_help=True)
instance_app = typer.Typer(help="Instances.", no_args_is_help=True)
nmxc_app = typer.Typer(help="Browse an NMX-C endpoint.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the NVLink admin commands (with the reference's aliases) to the ``admin`` app."""
    app.add_typer(nvl_partition_app, name="nvl-partition")
    app.add_typer(nvl_partition_app, name="nvp", hidden=True)
    app.add_typer(logical_partition_app, name="logical-partition")
    app.add_typer(logical_partition_app, name="lp", hidden=True)
    app.add_typer(instance_app, name="instance")
    app.add_typer(nmxc_app, name="nmxc")


def _uuid(name: str, value: str | None) -> uuid.UUID | None:
    """``value`` as a UUID; None or "" (the reference's default ID: all) is None."""
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise fail(f"{name} must be a UUID, not {value!r} (UUID Conversion failed.)", 2) from None


@dataclass(frozen=True)
class AdminOptions:
    """The ``admin`` group's own options, as the reference takes them before the command."""

    cloud_unsafe_op: str | None = None


# ------------------------------------------------------------------------------------- nvl-partition

PP_COLUMNS = ("id", "name", "logical_partition_id", "nmx_c_partition_id", "domain_uuid")


@nvl_partition_app.command("show")
def nvl_partition_show(
    partition_id: Annotated[str | None, typer.Argument(help="One physical partition (default: all).")] = None,
    tenant_org: Annotated[
        str | None,
        typer.Option("--org", "-t", "--tenant-org-id", help="Only this tenant org's partitions."),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", "-n", help="Only the partitions of this name.")
    ] = None,
    logical_partition_id: Annotated[str | None, typer.Option(help="Only this logical partition's.")] = None,
    domain_uuid: Annotated[str | None, typer.Option(help="Only this NVLink domain's.")] = None,
    output: FormatOption = Format.table,
) -> None:
    """List physical partitions: ID, NAME, LOGICAL PARTITION ID, NMX-C PARTITION ID, NVLINK DOMAIN UUID."""
    from nico.services import admin_nvlink

    pid = _uuid("PARTITION_ID", partition_id)
    lp = _uuid("--logical-partition-id", logical_partition_id)
    domain = _uuid("--domain-uuid", domain_uuid)
    rows = with_session(
        lambda s: admin_nvlink.physical_partitions(
            s, partition_id=pid, logical_partition_id=lp, domain_uuid=domain, org=tenant_org, name=name
        )
    )
    emit(rows[0] if pid is not None and output is not Format.table else rows, output, PP_COLUMNS)


# --------------------------------------------------------------------------------- logical-partition

LP_COLUMNS = ("id", "name", "org", "site_id", "status", "physical_partitions", "domains")


@logical_partition_app.command("show")
def logical_partition_show(
    partition_id: Annotated[str | None, typer.Argument(help="One logical partition (default: all).")] = None,
    name: Annotated[
        str | None, typer.Option("--name", "-n", help="Only the partitions of this name.")
    ] = None,
    org: Annotated[str | None, typer.Option(help="Only this tenant org's.")] = None,
    site_id: Annotated[str | None, typer.Option(help="Only this site's.")] = None,
    output: FormatOption = Format.table,
) -> None:
    """List logical partitions of every tenant with how many physical partitions each has and how many
    NVLink domains its GPUs are in (a partition in several is marked split: its GPUs in different
    domains cannot share memory)."""
    from nico.services import admin_nvlink

    pid = _uuid("PARTITION_ID", partition_id)
    site = _uuid("--site-id", site_id)
    rows = with_session(
        lambda s: admin_nvlink.logical_partitions(s, partition_id=pid, org=org, site_id=site, name=name)
    )
    if pid is not None and output is not Format.table:
        emit(rows[0], output)
        return
    emit(rows, output, LP_COLUMNS)


@logical_partition_app.command("create")
def logical_partition_create(
    org: Annotated[str, org_option("Tenant org that owns it.", "-t", "--tenant-organization-id")],
    name: Annotated[str, typer.Option("--name", "-n", help="Name, unique per tenant.")],
    site_id: Annotated[
        str | None,
        typer.Option(help="Site (NVLink partitioning enabled); default: the one such site the org uses."),
    ] = None,
    description: Annotated[str | None, typer.Option(help="Free text.")] = None,
    output: FormatOption = Format.table,
) -> None:
    """Create a logical partition for a tenant (the tenant API's checks apply)."""
    from nico.services import admin_nvlink

    site = _uuid("--site-id", site_id)
    quota = settings_or_exit().quotas.partitions_for(org)
    row = with_session(
        lambda s: admin_nvlink.create_logical_partition(
            s, org=org, name=name, site_id=site, description=description, quota=quota
        )
    )
    emit(row if output is not Format.table else [row], output, LP_COLUMNS)


@logical_partition_app.command("delete")
def logical_partition_delete(
    partition_id: Annotated[str | None, typer.Argument(help="Logical partition id.")] = None,
    by_option: Annotated[
        str | None,
        typer.Option(
            "--name",
            "-n",
            help="The logical partition's id (the reference's flag: despite its name, a UUID).",
        ),
    ] = None,
) -> None:
    """Delete a logical partition (refused while a VPC or instance uses it; on the fabric it is first
    marked Deleting and removed by the reconciler)."""
    from nico.services import admin_nvlink

    if (partition_id is None) == (by_option is None):
        raise fail("give the logical partition's id once: as PARTITION_ID or with -n/--name", 2)
    pid = _uuid("PARTITION_ID" if partition_id is not None else "-n/--name", partition_id or by_option)
    if pid is None:
        raise fail("the logical partition's id must not be empty", 2)
    outcome = with_session(lambda s: admin_nvlink.delete_logical_partition(s, pid))
    print(f"deleted {pid}" if outcome == "deleted" else f"{pid} is {outcome}: the reconciler removes it")


# ------------------------------------------------------------------------------------------ instance


@instance_app.command("update-nvlink-config")
@instance_app.command("update-nv-link-config", hidden=True)
def instance_update_nvlink_config(
    ctx: typer.Context,
    instance: Annotated[str, typer.Option("--instance", help="Instance id.")],
    config: Annotated[
        str,
        typer.Option(help='JSON: {"gpu_configs":[{"device_instance":0,"logical_partition_id":"<uuid>"}]}'),
    ],
    cloud_unsafe_op: Annotated[
        str | None,
        typer.Option(
            "--cloud-unsafe-op",
            help="Your user name: this changes a tenant's instance (as the reference asks; also accepted "
            "before the command: nico admin --cloud-unsafe-op NAME instance ...).",
        ),
    ] = None,
    output: FormatOption = Format.table,
) -> None:
    """Replace an instance's NVLink config (GPU -> logical partition bindings)."""
    from nico.services import admin_nvlink
    from nico.services.errors import ServiceError

    instance_id = _uuid("--instance", instance)
    if instance_id is None:
        raise fail("--instance must not be empty", 2)
    given = ctx.find_object(AdminOptions)
    user = cloud_unsafe_op or (given.cloud_unsafe_op if given is not None else None)
    if not user or not user.strip():
        raise fail("--cloud-unsafe-op needs your user name", 2)
    try:
        bindings = admin_nvlink.parse_nvlink_config(json.loads(config))
    except json.JSONDecodeError as exc:
        raise fail(f"--config is not JSON: {exc}", 2) from None
    except ServiceError as exc:
        raise fail(exc.message, 2) from None
    console.print(f"{user}: replacing the NVLink config of instance {instance_id}", highlight=False)
    rows = with_session(lambda s: admin_nvlink.update_instance_nvlink_config(s, instance_id, bindings))
    columns = list(rows[0]) if rows else ["id"]
    emit(rows, output, columns)


# --------------------------------------------------------------------------------------------- nmxc


@nmxc_app.command("browse")
def nmxc_browse(
    endpoint: Annotated[str | None, typer.Option(help="NMX-C URL (http:// or https://).")] = None,
    chassis_serial: Annotated[
        str | None, typer.Option(help="Look the endpoint up in the registry by chassis serial.")
    ] = None,
    output: FormatOption = Format.table,
) -> None:
    """Compute nodes, GPUs, switch trays and partitions of one NMX-C endpoint, with their health."""
    from nico.fabric.backend import FabricError

    if (endpoint is None) == (chassis_serial is None):
        raise fail("give exactly one of --endpoint and --chassis-serial", 2)
    settings = settings_or_exit()
    if chassis_serial is not None:
        from nico.services import fabric_registry

        serial = chassis_serial
        rows = with_session(lambda s: fabric_registry.list_endpoints(s, serial))
        if not rows:
            raise fail(f"no NMX-C endpoint registered for chassis {chassis_serial}")
        endpoint = rows[0].endpoint
    assert endpoint is not None
    try:
        found = asyncio.run(_browse(settings.nvlink_config, endpoint))
    except FabricError as exc:
        raise fail(f"NMX-C at {endpoint}: {exc.message}") from None
    emit(found, output)


async def _browse(config: NvLinkConfig, url: str) -> dict[str, Any]:
    """Everything one NMX-C endpoint reports, as ``nmxc browse`` prints it."""
    from nico.fabric.backend import DomainTarget
    from nico.fabric.nmxc.client import NmxcBackend

    backend = NmxcBackend(config)
    try:
        hello = await backend.hello(DomainTarget(uuid.UUID(int=0), url))
        target = DomainTarget(hello.domain_uuid, url)
        nodes, gpus, switches, partitions, health = await asyncio.gather(
            backend.list_compute_nodes(target),
            backend.list_gpus(target),
            backend.list_switch_nodes(target),
            backend.list_partitions(target),
            backend.domain_health(target),
        )
    finally:
        await backend.close()
    return {
        "endpoint": url,
        "domain_uuid": str(hello.domain_uuid),
        "controller_health": health.controller,
        "available_multicast_groups": health.available_multicast_groups,
        "compute_nodes": [_compute_node(n) for n in nodes],
        "gpus": [_gpu(g) for g in sorted(gpus, key=lambda g: (g.chassis_serial, g.tray_index, g.device_id))],
        "switch_nodes": [_switch_node(n) for n in switches],
        "partitions": [_partition(p) for p in sorted(partitions, key=lambda p: p.nmx_partition_id)],
    }


def _compute_node(n: FabricComputeNode) -> dict[str, Any]:
    return {
        "chassis_serial": n.chassis_serial,
        "tray_index": n.tray_index,
        "slot_id": n.slot_id,
        "num_gpus": n.num_gpus,
        "health": n.health,
        "partition_ids": sorted(n.partition_ids),
    }


def _gpu(g: FabricGpu) -> dict[str, Any]:
    return {
        "gpu_uid": g.gpu_uid,
        "chassis_serial": g.chassis_serial,
        "tray_index": g.tray_index,
        "slot_id": g.slot_id,
        "device_id": g.device_id,
        "health": g.health,
        "partition_id": g.nmx_partition_id,
    }


def _switch_node(n: FabricSwitchNode) -> dict[str, Any]:
    return {
        "chassis_serial": n.chassis_serial,
        "tray_index": n.tray_index,
        "slot_id": n.slot_id,
        "num_switches": n.num_switches,
        "health": n.health,
    }


def _partition(p: FabricPartition) -> dict[str, Any]:
    return {
        "partition_id": p.nmx_partition_id,
        "name": p.name,
        "num_gpus": len(p.gpu_uids),
        "health": p.health,
        "resiliency_mode": p.resiliency_mode,
        "multicast_groups_limit": p.multicast_groups_limit,
    }
