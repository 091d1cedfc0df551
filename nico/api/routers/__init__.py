"""One router module per resource; each exports ``router``. Routers listed here are mounted under
``/{version}/org/{org}/{name}``; order matters where static segments must win over parameters
(``/instance/type`` and ``/instance/batch`` before ``/instance/{instanceId}``)."""

from __future__ import annotations

from importlib import import_module

from fastapi import APIRouter

TENANT_ROUTER_MODULES: tuple[str, ...] = (
    # Hot paths first: routes are matched in order, router by router, and every router before the
    # one that matches is scanned on each request. ``instance_type`` must precede ``instance`` so
    # that ``/instance/type`` is not taken for an instance id.
    "instance_type",
    "instance",
    "instance_reads",
    "partition",
    "nvlink_interface",
    "vpc",
    "subnet",
    "stats",  # before machine: /machine/gpu/stats is not a machine id
    "machine",
    "site",
    "allocation",
    "tenant",
    "provider",
    "metadata",
    "topology",
    "export",
)


def tenant_routers() -> list[APIRouter]:
    return [import_module(f"nico.api.routers.{name}").router for name in TENANT_ROUTER_MODULES]
