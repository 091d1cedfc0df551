"""Instance type bodies. ``InstanceTypeSummary`` is what constraints, machines and instances embed."""

from __future__ import annotations

import uuid

from nico.api.schemas.common import ResponseModel
from nico.db.models import InstanceType as InstanceTypeRow


class InstanceTypeSummary(ResponseModel):
    id: uuid.UUID
    name: str
    infrastructure_provider_id: uuid.UUID
    site_id: uuid.UUID
    status: str

    @classmethod
    def of(cls, row: InstanceTypeRow) -> InstanceTypeSummary:
        return cls(
            id=row.id,
            name=row.name,
            infrastructure_provider_id=row.infrastructure_provider_id,
            site_id=row.site_id,
            status=row.status,
        )
