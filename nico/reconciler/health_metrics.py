"""NVLink health gauges (the reference's #2293): per NVLink domain and per health state, how many
GPUs, compute trays, switch trays and partitions the fabric manager reports, plus each domain's
multicast budget and what is left of it.

Like the reconciler's other gauges, a domain's figures are those of its last pass; they disappear when
no pass has finished for ``hold_seconds`` (a stuck reconciler shows as missing series, never as
stale numbers) and when the domain is gone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

PREFIX = "nico_nvlink_partition_monitor_"

# (series suffix, what it counts) in the order they are exported.
KINDS = (
    ("gpu", "GPUs"),
    ("compute_node", "compute trays"),
    ("switch_node", "NVLink switch trays"),
    ("partition", "partitions"),
)


@dataclass
class DomainFigures:
    at: float
    counts: dict[str, Mapping[str, int]]  # kind -> health state -> count
    multicast_budget: int | None = None
    multicast_available: int | None = None


class HealthMetrics(Collector):
    """The health gauges of every domain, as of each domain's last pass."""

    def __init__(self, hold_seconds: float) -> None:
        self.hold_seconds = hold_seconds
        self.domains: dict[uuid.UUID, DomainFigures] = {}

    def register(self, registry: CollectorRegistry) -> HealthMetrics:
        registry.register(self)
        return self

    def record(
        self,
        domain: uuid.UUID,
        *,
        gpus: Mapping[str, int],
        compute_nodes: Mapping[str, int],
        switch_nodes: Mapping[str, int],
        partitions: Mapping[str, int],
        multicast_budget: int | None = None,
        multicast_available: int | None = None,
    ) -> None:
        counts = {
            "gpu": gpus,
            "compute_node": compute_nodes,
            "switch_node": switch_nodes,
            "partition": partitions,
        }
        self.domains[domain] = DomainFigures(
            time.monotonic(), {k: dict(v) for k, v in counts.items()}, multicast_budget, multicast_available
        )

    def forget_domains(self, keep: set[uuid.UUID]) -> None:
        for domain in [d for d in self.domains if d not in keep]:
            del self.domains[domain]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = time.monotonic()
        fresh = {d: f for d, f in sorted(self.domains.items()) if now - f.at <= self.hold_seconds}
        for kind, what in KINDS:
            family = GaugeMetricFamily(
                PREFIX + f"{kind}_health_count",
                f"Number of {what} in each health state per NVLink domain, as the fabric manager reports",
                labels=["domain", "health"],
            )
            for domain, figures in fresh.items():
                for health, count in sorted(figures.counts.get(kind, {}).items()):
                    family.add_metric([str(domain), health], count)
            yield family
        budget = GaugeMetricFamily(
            "nico_nvlink_multicast_groups_budget",
            "Multicast groups an NVLink domain's partitions may reserve in all (max_multicast_groups)",
            labels=["domain"],
        )
        available = GaugeMetricFamily(
            "nico_nvlink_multicast_groups_available",
            "Multicast groups of an NVLink domain's budget that no partition reserves",
            labels=["domain"],
        )
        for domain, figures in fresh.items():
            if figures.multicast_budget is not None:
                budget.add_metric([str(domain)], figures.multicast_budget)
            if figures.multicast_available is not None:
                available.add_metric([str(domain)], figures.multicast_available)
        yield budget
        yield available
