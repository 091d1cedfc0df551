"""One router module per resource (here, or a domain package's ``router``), named in full; each exports
``router``. Routers listed here are mounted under ``/{version}/org/{org}/{name}``; order matters where
static segments must win over parameters (``/instance/type`` and ``/instance/batch`` before
``/instance/{instanceId}``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import import_module
from typing import Any

from fastapi import APIRouter
from starlette.convertors import Convertor, register_url_convertor

from nico.api.front import FrontRoute

TENANT_ROUTER_MODULES: tuple[str, ...] = (
    # Hot paths first: routes are matched in order, router by router, and every router before the
    # one that matches is scanned on each request. ``instance_type`` must precede ``instance`` so
    # that ``/instance/type`` is not taken for an instance id.
    "nico.api.routers.instance_type",
    "nico.instance.router",
    "nico.logical_partition.router",
    "nico.api.routers.nvlink_interface",
    "nico.api.routers.vpc",
    "nico.api.routers.subnet",
    "nico.api.routers.stats",  # before machine: /machine/gpu/stats is not a machine id
    "nico.inventory.router",
    "nico.api.routers.site",
    "nico.api.routers.allocation",
    "nico.api.routers.tenant",
    "nico.api.routers.provider",
    "nico.api.routers.metadata",
    "nico.api.routers.topology",
    "nico.api.routers.export",
)


def tenant_routers() -> list[APIRouter]:
    return [import_module(name).router for name in TENANT_ROUTER_MODULES]


class CanonicalUuid(Convertor[str]):
    """A path segment that is a UUID in its canonical form (any case), kept as text: what the hot
    routes match, so that every other segment (``/instance/type``, a malformed id) reaches the routers
    and their answers, as before."""

    regex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    pattern = re.compile(regex)

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        if not self.pattern.fullmatch(value):
            raise ValueError(f"not a canonical UUID: {value}")
        return value


register_url_convertor("canonical_uuid", CanonicalUuid())

HotRoute = tuple[str, Callable[..., Any], list[str]]


def hot_routes(prefix: str) -> list[FrontRoute]:
    """The hottest operations, served at the front of the app (:mod:`nico.api.front`) from each module's
    ``HOT_ROUTES`` (path, endpoint, methods) under ``prefix``. FastAPI matches an included router by
    asking it, and it each of its routes in turn, on every request, and solves each dependency at a
    cost above its check. The routers still declare these operations, document them and answer
    whatever the hot paths do not match; the endpoint is the same function either way."""
    return [
        FrontRoute(prefix + path, endpoint, methods)
        for name in TENANT_ROUTER_MODULES
        for path, endpoint, methods in getattr(import_module(name), "HOT_ROUTES", ())
    ]
