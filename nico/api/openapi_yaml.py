"""``openapi.yaml``: the OpenAPI document of the app with default settings, built without touching a
database (``nico openapi`` writes it; a test checks the committed file against it)."""

from __future__ import annotations

from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from nico.api.app import create_app
from nico.api.auth import TokenVerifier
from nico.api.context import AppContext
from nico.api.openapi import build_openapi
from nico.config import load_settings
from nico.db.engine import make_engine, make_session_factory


def document() -> dict[str, Any]:
    """The OpenAPI document of the app with default settings."""
    settings = load_settings(
        database_url="postgresql://openapi@127.0.0.1:1/unused", auth={"hs256_secret": "x" * 32}
    )
    engine = make_engine(settings.database_url or "", pool_size=1)  # never connected
    context = AppContext(
        settings, engine, make_session_factory(engine), TokenVerifier(settings), CollectorRegistry()
    )
    return build_openapi(create_app(settings, context=context))


def render_yaml() -> str:
    return yaml.safe_dump(document(), sort_keys=False, allow_unicode=True, width=110)
