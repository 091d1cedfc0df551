"""One router module per resource; each exports ``router``. Routers listed here are mounted under
``/{version}/org/{org}/{name}``; order matters where static segments must win over parameters
(``/instance/type`` and ``/instance/batch`` before ``/instance/{instanceId}``)."""

from __future__ import annotations

from importlib import import_module

from fastapi import APIRouter

TENANT_ROUTER_MODULES: tuple[str, ...] = (
    "tenant",
    "provider",
    "metadata",
    "site",
    "instance_type",
    "allocation",
    "subnet",
    "machine",
    "partition",
    "nvlink_interface",
    "vpc",
    "instance",
    "topology",
)


def tenant_routers() -> list[APIRouter]:
    return [import_module(f"nico.api.routers.{name}").router for name in TENANT_ROUTER_MODULES]
