"""OpenAPI document: request bodies are parsed by hand (to keep the reference's check order), so
their schemas are declared here and merged into the generated document."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

_BODY_MODELS: dict[str, type[BaseModel]] = {}


def json_body(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` for a route whose JSON body is ``model``."""
    _BODY_MODELS[model.__name__] = model
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": required, "content": {"application/json": {"schema": ref}}}}


def build_openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=app.openapi_tags,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, model in sorted(_BODY_MODELS.items()):
        body = model.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
        for def_name, definition in body.pop("$defs", {}).items():
            components.setdefault(def_name, definition)
        components[name] = body
    schema.setdefault("components", {})["securitySchemes"] = {
        "bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    }
    schema["security"] = [{"bearerAuth": []}]
    app.openapi_schema = schema
    return schema


def document() -> dict[str, Any]:
    """The OpenAPI document of the app with default settings, built without touching a database."""
    from prometheus_client import CollectorRegistry

    from nico.api.app import create_app
    from nico.api.auth import TokenVerifier
    from nico.api.context import AppContext
    from nico.config import load_settings
    from nico.db.engine import make_engine, make_session_factory

    settings = load_settings(
        database_url="postgresql://openapi@127.0.0.1:1/unused", auth={"hs256_secret": "x" * 32}
    )
    engine = make_engine(settings.database_url or "", pool_size=1)  # never connected
    context = AppContext(
        settings, engine, make_session_factory(engine), TokenVerifier(settings), CollectorRegistry()
    )
    return build_openapi(create_app(settings, context=context))


def render_yaml() -> str:
    import yaml

    return yaml.safe_dump(document(), sort_keys=False, allow_unicode=True, width=110)
