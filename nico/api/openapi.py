"""OpenAPI document: request bodies are parsed by hand (to keep the reference's check order), so
their schemas are declared here and merged into the generated document."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

from nico.api.rendering import DELETION_ACCEPTED

_BODY_MODELS: dict[str, type[BaseModel]] = {}


class ErrorEnvelope(BaseModel):
    """Every non-2xx answer (spec §1.2)."""

    source: str = Field(description="The API's name (setting `api.name`).")
    message: str = Field(description="The reference's text for the failure.")
    data: Any = Field(
        default=None,
        description="null, or for a rejected request a flat `{field: message}` map of the first failure per "
        "field (`__all__` for the request as a whole).",
    )


ERROR_TEXTS = {
    "400": "Malformed id, query parameter or body, or a rule of the operation broken",
    "401": "No or invalid bearer token",
    "403": "The token's roles do not allow this operation in this org",
    "404": "A resource in the path or the request does not exist (for the caller)",
    "409": "The request conflicts with the current state (name clash, capacity, a concurrent change)",
    "413": "Request body over 10 MB",
    "500": "Unexpected error",
    "503": "The database is unavailable, retry shortly",
}
ENVELOPE_REF = {"$ref": "#/components/schemas/ErrorEnvelope"}


def error_statuses(path: str, method: str, operation: dict[str, Any], tenant_prefix: str) -> list[str]:
    """The error statuses an operation can answer, derived from what it declares: every tenant route
    authenticates (401, 403), reads an org and ids (400, 404) and the database (500, 503); writes can
    conflict (409); a body can be too large (413)."""
    if not path.startswith(tenant_prefix):
        return ["503"] if path == "/readyz" else []
    statuses = ["400", "401", "403", "404", "500", "503"]
    if method in ("post", "patch", "put", "delete"):
        statuses.append("409")
    if "requestBody" in operation or method in ("post", "patch", "put"):
        statuses.append("413")
    return sorted(statuses)


def declare_errors(schema: dict[str, Any], tenant_prefix: str) -> None:
    """Every operation lists the error statuses it can answer, each with the envelope; FastAPI's 422
    (which nico never answers: validation failures are 400) is removed."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorEnvelope"] = ErrorEnvelope.model_json_schema()
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if not path.startswith(tenant_prefix):
                operation["security"] = []  # health, readiness and metrics need no token
            if method == "patch" and "requestBody" in operation:
                # binding reads an absent body as {} (binding.read_body): a PATCH without one changes nothing
                operation["requestBody"]["required"] = False
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            for status in error_statuses(path, method, operation, tenant_prefix):
                responses.setdefault(status, {"description": ERROR_TEXTS[status]})
            for status, response in responses.items():
                if status >= "400":  # a route's own extra statuses (412, say) carry the envelope too
                    response["content"] = {"application/json": {"schema": ENVELOPE_REF}}
            accepted = responses.get("202")
            if method == "delete" and accepted is not None:  # rendering.deletion_accepted: plain text
                accepted["content"] = {
                    "text/plain": {"schema": {"type": "string", "const": DELETION_ACCEPTED}}
                }


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
    declare_errors(schema, getattr(app.state, "tenant_prefix", "/v2/org/"))
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
