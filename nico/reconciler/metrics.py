"""The ``nico_nvlink_partition_monitor_*`` series of the reference (spec/nvlink-core.md §3.1 for NMX-C,
§3.2 for NMX-M) with the same names, types and labels, plus nico's own where the reference is blind:
pending instances, per-domain errors, stranded free capacity.

Counters and histograms are cumulative. Gauges describe the latest passes and, as in the reference,
disappear when no pass has finished for ``monitor_run_interval + 60 s`` — a stuck reconciler shows
as missing series, never as stale numbers.

The database figures (physical partitions, pending instances, free and stranded machines) are kept
per domain: every pass refreshes the domains it touched (:meth:`ReconcilerMetrics.domain_figures`) and
the totals move by the difference, so a targeted pass keeps every gauge current at a cost that does
not grow with the site; the full pass replaces them all (:meth:`ReconcilerMetrics.all_figures`).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter as Tally
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from nico.reconciler.health_metrics import HealthMetrics
from nico.reconciler.operations import CHANGE_KINDS
from nico.reconciler.partition_count import PartitionCount
from nico.reconciler.quota_metrics import QuotaGauges

PREFIX = "nico_nvlink_partition_monitor_"
BUCKETS = (0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000)
OPERATIONS = ("create", "update", "remove", "remove_default_partition")
ERROR_LABEL_LENGTH = 32

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # the reference has no *_created


@dataclass(frozen=True)
class DomainFigures:
    """One domain's share of the database gauges."""

    physical_partitions: int = 0
    pending_instances: int = 0
    free_machines: int = 0
    stranded_free_machines: int = 0  # its free machines when it also has used or unready ones, else 0
    reserved_machines: int = 0  # free machines a logical partition's reservation holds (not free)


@dataclass
class Snapshot:
    """What the gauges show: per-domain figures from the last pass over each domain, their totals, and
    the global ones (logical partitions from the latest pass; GPU inventory audits from the last deep
    pass)."""

    updated_at: float = 0.0
    machine_status_updates: int = 0
    logical_partitions: int = 0
    physical_partitions: int = 0
    stale_partitions_deleted: int = 0
    info_mismatches: int = 0
    pending_instances: int = 0
    free_machines: int = 0
    stranded_free_machines: int = 0
    reserved_machines: int = 0
    partitions: dict[uuid.UUID, int] = field(default_factory=dict)
    gpus: dict[uuid.UUID, int] = field(default_factory=dict)
    errors: dict[uuid.UUID, str] = field(default_factory=dict)
    failures: dict[uuid.UUID, int] = field(default_factory=dict)
    blocked: dict[uuid.UUID, int] = field(default_factory=dict)
    without_home: dict[uuid.UUID, int] = field(default_factory=dict)
    planned: dict[uuid.UUID, dict[str, int]] = field(default_factory=dict)  # kind -> operations left
    foreign: dict[uuid.UUID, int] = field(default_factory=dict)  # GPUs in foreign partitions
    figures: dict[uuid.UUID, DomainFigures] = field(default_factory=dict)

    def set_figures(self, domain: uuid.UUID, figures: DomainFigures | None) -> None:
        """Replace (None: drop) one domain's figures; the totals move by the difference."""
        old = self.figures.pop(domain, DomainFigures())
        new = figures or DomainFigures()
        if figures is not None:
            self.figures[domain] = figures
        self.physical_partitions += new.physical_partitions - old.physical_partitions
        self.pending_instances += new.pending_instances - old.pending_instances
        self.free_machines += new.free_machines - old.free_machines
        self.stranded_free_machines += new.stranded_free_machines - old.stranded_free_machines
        self.reserved_machines += new.reserved_machines - old.reserved_machines


class ReconcilerMetrics(Collector):
    """The reconciler's instruments for one backend kind (``nmxc`` or ``nmxm``)."""

    def __init__(self, registry: CollectorRegistry, kind: str, hold_seconds: float) -> None:
        self.kind = kind
        self.hold_seconds = hold_seconds
        self.snapshot = Snapshot()
        self.partition_count = PartitionCount()  # when snapshot.logical_partitions is to be read again
        manager = "NMX-C" if kind == "nmxc" else "NMX-M"
        self.iteration_latency = Histogram(
            PREFIX + "iteration_latency_milliseconds",
            "Time consumed for one monitor iteration",
            buckets=BUCKETS,
            registry=registry,
        )
        self.op_latency = Histogram(
            PREFIX + f"{kind}_op_latency_milliseconds",
            f"Time consumed for one {manager} operation",
            ["operation", "status"],
            buckets=BUCKETS,
            registry=registry,
        )
        self.apply_latency = Histogram(
            PREFIX + "nvlink_config_apply_latency_milliseconds",
            "Time since nvlink config was requested for this instance",
            buckets=BUCKETS,
            registry=registry,
        )
        self.changes = Counter(
            PREFIX + f"{kind}_changes_applied",
            f"Number of changes requested to {manager}",
            ["operation", "status"],
            registry=registry,
        )
        statuses = ("completed", "failed", "timedout") + (("cancelled",) if kind == "nmxm" else ())
        for operation in OPERATIONS:
            for status in statuses:
                self.changes.labels(operation, status)
        self.tray_replacements = Counter(
            "nico_nvlink_tray_replacements",
            "Compute trays found swapped (new GPU GUIDs at a machine's place) and recorded",
            registry=registry,
        )
        registry.register(self)
        self.health = HealthMetrics(hold_seconds).register(registry)  # nico.reconciler.health_metrics
        self.quotas = QuotaGauges(hold_seconds).register(registry)  # nico.reconciler.quota_metrics

    def operation_done(self, operation: str, status: str, seconds: float) -> None:
        self.changes.labels(operation, status).inc()
        self.op_latency.labels(operation, status).observe(seconds * 1000.0)

    def domain_result(
        self, domain: uuid.UUID, *, error: str | None, partitions: int | None, blocked: int
    ) -> None:
        snap = self.snapshot
        if error is None:
            snap.errors.pop(domain, None)
            snap.failures.pop(domain, None)
        else:
            snap.errors[domain] = error
            snap.failures[domain] = snap.failures.get(domain, 0) + 1
        if partitions is not None:
            snap.partitions[domain] = partitions
        if blocked:
            snap.blocked[domain] = blocked
        else:
            snap.blocked.pop(domain, None)
        snap.updated_at = time.monotonic()

    def gpus_without_home(self, domain: uuid.UUID, count: int) -> None:
        """GPUs of ``domain`` in neither a tenant partition nor their home, after its latest pass."""
        self.snapshot.without_home[domain] = count

    def planned(self, domain: uuid.UUID, counts: dict[str, int], *, foreign_gpus: int) -> None:
        """What the next pass over ``domain`` would send (operations by kind), and its GPUs in
        partitions nico did not make, after its latest pass."""
        self.snapshot.planned[domain] = counts
        self.snapshot.foreign[domain] = foreign_gpus

    def domain_figures(
        self,
        figures: dict[uuid.UUID, DomainFigures],
        *,
        asked: set[uuid.UUID],
        logical_partitions: int | None = None,
    ) -> None:
        """Fresh figures of the ``asked`` domains (one without figures no longer exists)."""
        snap = self.snapshot
        for domain in asked:
            snap.set_figures(domain, figures.get(domain))
        if logical_partitions is not None:
            snap.logical_partitions = logical_partitions
        snap.updated_at = time.monotonic()

    def all_figures(self, figures: dict[uuid.UUID, DomainFigures], *, logical_partitions: int) -> None:
        """Figures of every domain (a full pass): domains not listed are gone."""
        self.domain_figures(
            figures, asked=set(figures) | set(self.snapshot.figures), logical_partitions=logical_partitions
        )

    def forget_domains(self, keep: set[uuid.UUID]) -> None:
        """Drop figures of domains that no longer exist."""
        self.health.forget_domains(keep)
        snap = self.snapshot
        tables: tuple[dict[uuid.UUID, Any], ...] = (
            snap.partitions,
            snap.gpus,
            snap.errors,
            snap.failures,
            snap.blocked,
            snap.without_home,
            snap.planned,
            snap.foreign,
        )
        for table in tables:
            for domain in [d for d in table if d not in keep]:
                del table[domain]
        for domain in [d for d in snap.figures if d not in keep]:
            snap.set_figures(domain, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self.snapshot
        if not snap.updated_at or time.monotonic() - snap.updated_at > self.hold_seconds:
            return
        yield from _reference_gauges(snap, self.kind)
        yield from _domain_gauges(snap)
        yield from _capacity_gauges(snap)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _reference_gauges(snap: Snapshot, kind: str) -> Iterator[GaugeMetricFamily]:
    """The reference's gauges (spec/nvlink-core.md §3.1)."""
    manager = "NMX-C" if kind == "nmxc" else "NMX-M"
    yield _gauge(
        PREFIX + "machine_status_updates_count",
        "Number of machines nvlink_status_observation got updated",
        snap.machine_status_updates,
    )
    yield _gauge(
        PREFIX + "num_logical_partitions",
        "Number of logical partitions that were monitored",
        snap.logical_partitions,
    )
    yield _gauge(
        PREFIX + "num_physical_partitions",
        "Number of physical partitions that were monitored",
        snap.physical_partitions,
    )
    errors = GaugeMetricFamily(
        PREFIX + f"{kind}_connect_error_count",
        f"The errors encountered while checking {manager}",
        labels=["error"],
    )
    for label, count in sorted(Tally(e[:ERROR_LABEL_LENGTH] for e in snap.errors.values()).items()):
        errors.add_metric([label], count)
    yield errors
    yield _gauge(
        PREFIX + f"{kind}_partition_count",
        f"Number of partitions {manager} is reporting",
        sum(snap.partitions.values()),
    )
    yield _gauge(
        PREFIX + f"{kind}_gpu_count", f"Number of GPUs {manager} is reporting", sum(snap.gpus.values())
    )
    yield _gauge(
        PREFIX + "nvlink_info_mismatches",
        f"Number of NVLink GPU partition ID mismatches between DB and {manager}",
        snap.info_mismatches,
    )
    yield _gauge(
        PREFIX + "stale_partitions_deleted",
        f"Number of stale partitions deleted from DB (not found in {manager})",
        snap.stale_partitions_deleted,
    )


def _domain_gauges(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
    """nico's own gauges of where each domain stands."""
    yield _gauge(
        "nico_nvlink_pending_instances",
        "Instances whose NVLink configuration is not yet confirmed on the fabric",
        snap.pending_instances,
    )
    domain_errors = GaugeMetricFamily(
        "nico_nvlink_domain_errors",
        "Consecutive failed passes of an NVLink domain (only domains in error)",
        labels=["domain", "error"],
    )
    for domain, count in sorted(snap.failures.items()):
        domain_errors.add_metric([str(domain), snap.errors.get(domain, "")[:ERROR_LABEL_LENGTH]], count)
    yield domain_errors
    blocked = GaugeMetricFamily(
        "nico_nvlink_blocked_partitions",
        "Logical partitions that cannot be placed in a domain (name held by a foreign partition)",
        labels=["domain"],
    )
    for domain, count in sorted(snap.blocked.items()):
        blocked.add_metric([str(domain)], count)
    yield blocked
    homeless = GaugeMetricFamily(
        "nico_nvlink_gpus_without_home",
        "GPUs in neither a tenant partition nor their home partition after the latest pass",
        labels=["domain"],
    )
    for domain, count in sorted(snap.without_home.items()):
        homeless.add_metric([str(domain)], count)
    yield homeless
    yield from _live_site_gauges(snap)


def _live_site_gauges(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
    """What the next passes would change, and the GPUs partitions nico did not make hold."""
    planned = GaugeMetricFamily(
        "nico_nvlink_planned_changes",
        "Fabric operations the next pass would send, after each domain's latest pass (in observe mode: "
        "what active mode would do)",
        labels=["kind"],
    )
    for kind in CHANGE_KINDS:
        planned.add_metric([kind], sum(counts.get(kind, 0) for counts in snap.planned.values()))
    yield planned
    foreign = GaugeMetricFamily(
        "nico_nvlink_foreign_gpus",
        "GPUs in partitions nico did not make (kept whole unless foreign_partitions = evict)",
        labels=["domain"],
    )
    for domain, count in sorted(snap.foreign.items()):
        foreign.add_metric([str(domain)], count)
    yield foreign


def _capacity_gauges(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
    """Free and stranded capacity."""
    yield _gauge(
        "nico_nvlink_free_machines",
        "Ready NVLink machines without an instance that no reservation holds",
        snap.free_machines,
    )
    yield _gauge(
        "nico_nvlink_stranded_free_machines",
        "Free NVLink machines in domains that are partly used (cannot host a whole-domain job)",
        snap.stranded_free_machines,
    )
    ratio = snap.stranded_free_machines / snap.free_machines if snap.free_machines else 0.0
    yield _gauge(
        "nico_nvlink_fragmentation_ratio", "Share of free NVLink machines that are stranded (0..1)", ratio
    )
    yield _gauge(
        "nico_nvlink_reserved_machines",
        "Ready NVLink machines without an instance that a logical partition's reservation holds "
        "(counted neither free nor stranded)",
        snap.reserved_machines,
    )
    free = GaugeMetricFamily(
        "nico_nvlink_domain_free_machines",
        "Ready NVLink machines without an instance, per domain",
        labels=["domain"],
    )
    stranded = GaugeMetricFamily(
        "nico_nvlink_domain_stranded_free_machines",
        "Free machines of a domain that is partly used (they cannot host a whole-domain job)",
        labels=["domain"],
    )
    for domain, figures in sorted(snap.figures.items()):
        free.add_metric([str(domain)], figures.free_machines)
        stranded.add_metric([str(domain)], figures.stranded_free_machines)
    yield free
    yield stranded
