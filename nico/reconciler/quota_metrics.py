"""The ``nico_tenant_quota_*`` gauges: what each tenant holds at each site beside its limits
(``[quotas]``), read from the database with the logical-partition count (after passes, at a bounded
rate, and on every full pass). Like the reconciler's other gauges they disappear when no pass has
refreshed them for ``monitor_run_interval + 60 s``."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncConnection

from nico.config import QuotaConfig
from nico.db.queries.tenant_limits import Usage, usage

PREFIX = "nico_tenant_quota_"
# After passes the usage is read at most this often (every tenant at every site: a figure that grows
# with the tenants, not with the domain a pass touched); a full pass always reads it.
REFRESH_EVERY = 5.0


class QuotaGauges(Collector):
    """Usage and limit per tenant (``org``) and site (``site``, its id)."""

    def __init__(self, hold_seconds: float) -> None:
        self.hold_seconds = hold_seconds
        self.limits = QuotaConfig()  # the settings' [quotas] (reconciler_metrics sets them)
        self.rows: list[Usage] = []
        self.updated_at = 0.0

    def register(self, registry: CollectorRegistry) -> QuotaGauges:
        registry.register(self)
        return self

    def fresh(self) -> bool:
        """Whether the usage was read less than REFRESH_EVERY ago."""
        return time.monotonic() - self.updated_at < REFRESH_EVERY

    async def refresh(self, conn: AsyncConnection, *, unless_fresh: bool = False) -> None:
        """Read every tenant's usage (``unless_fresh``: not when read less than REFRESH_EVERY ago)."""
        if unless_fresh and self.fresh():
            return
        self.rows = await usage(conn)
        self.updated_at = time.monotonic()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if not self.updated_at or time.monotonic() - self.updated_at > self.hold_seconds:
            return
        labels = ["org", "site"]
        families = {
            "logical_partitions": GaugeMetricFamily(
                PREFIX + "logical_partitions", "Logical partitions of the tenant at the site", labels=labels
            ),
            "logical_partitions_limit": GaugeMetricFamily(
                PREFIX + "logical_partitions_limit",
                "The tenant's quota of logical partitions at the site (quotas.logical_partitions)",
                labels=labels,
            ),
            "nvlink_changes_in_flight": GaugeMetricFamily(
                PREFIX + "nvlink_changes_in_flight",
                "Instances of the tenant at the site whose NVLink change the fabric has not settled",
                labels=labels,
            ),
            "nvlink_changes_in_flight_limit": GaugeMetricFamily(
                PREFIX + "nvlink_changes_in_flight_limit",
                "The tenant's quota of instances with NVLink changes in flight at the site "
                "(quotas.nvlink_changes_in_flight)",
                labels=labels,
            ),
        }
        for row in self.rows:
            values = [row.org, str(row.site_id)]
            families["logical_partitions"].add_metric(values, row.logical_partitions)
            families["logical_partitions_limit"].add_metric(values, self.limits.partitions_for(row.org))
            families["nvlink_changes_in_flight"].add_metric(values, row.nvlink_changes_in_flight)
            families["nvlink_changes_in_flight_limit"].add_metric(values, self.limits.changes_for(row.org))
        yield from families.values()
