"""``/metadata``: version and build time, for any authenticated caller."""

from __future__ import annotations

import os

from fastapi import APIRouter
from starlette.responses import Response

import nico
from nico.api.deps import PrincipalDep
from nico.api.rendering import json_response
from nico.api.schemas.org import Metadata

router = APIRouter(tags=["metadata"])


@router.get("/metadata", operation_id="get-metadata", response_model=Metadata, summary="Service metadata")
async def get_metadata(org: str, principal: PrincipalDep) -> Response:
    return json_response(
        Metadata(version=nico.__version__, build_time=os.environ.get("NICO_BUILD_TIME", "unknown"))
    )
