"""The ``nico_nvlink_partition_monitor_*`` series: exact names, types and labels (spec §3.1/§3.2),
filled with real values, parsed with prometheus_client's own parser."""

from __future__ import annotations

import time
import uuid

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncSession

from nico.reconciler.metrics import PREFIX
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place

REFERENCE = {
    # name (as the parser reports the family) -> (type, label names)
    "iteration_latency_milliseconds": ("histogram", set()),
    "{kind}_op_latency_milliseconds": ("histogram", {"operation", "status"}),
    "nvlink_config_apply_latency_milliseconds": ("histogram", set()),
    "{kind}_changes_applied": ("counter", {"operation", "status"}),
    "machine_status_updates_count": ("gauge", set()),
    "num_logical_partitions": ("gauge", set()),
    "num_physical_partitions": ("gauge", set()),
    "{kind}_connect_error_count": ("gauge", {"error"}),
    "{kind}_partition_count": ("gauge", set()),
    "{kind}_gpu_count": ("gauge", set()),
    "nvlink_info_mismatches": ("gauge", set()),
    "stale_partitions_deleted": ("gauge", set()),
}


def families(registry: CollectorRegistry) -> dict[str, object]:
    text = generate_latest(registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(registry: CollectorRegistry, sample_name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name == sample_name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"no sample {sample_name} {labels}")


@pytest.mark.parametrize("kind", ["nmxc", "nmxm"])
def test_every_reference_series_has_its_name_type_and_labels(kind: str) -> None:
    from nico.reconciler.metrics import ReconcilerMetrics

    registry = CollectorRegistry()
    metrics = ReconcilerMetrics(registry, kind, hold_seconds=60)
    metrics.snapshot.updated_at = time.monotonic()
    metrics.snapshot.errors[uuid.uuid4()] = "Failed to reach NMX-C: connection refused and more"
    metrics.iteration_latency.observe(3)
    metrics.apply_latency.observe(3)
    metrics.operation_done("create", "completed", 0.004)
    found = families(registry)
    for pattern, (kind_of, labels) in REFERENCE.items():
        name = PREFIX + pattern.format(kind=kind)
        assert name in found, f"missing {name}"
        family = found[name]
        assert family.type == kind_of, (name, family.type)  # type: ignore[attr-defined]
        for sample in family.samples:  # type: ignore[attr-defined]
            assert set(sample.labels) - {"le"} == labels, (sample.name, sample.labels)
    changes = found[PREFIX + f"{kind}_changes_applied"]
    seeded = {(s.labels["operation"], s.labels["status"]) for s in changes.samples}  # type: ignore[attr-defined]
    operations = {"create", "update", "remove", "remove_default_partition"}
    statuses = {"completed", "failed", "timedout"} | ({"cancelled"} if kind == "nmxm" else set())
    assert seeded == {(o, s) for o in operations for s in statuses}
    errors = found[PREFIX + f"{kind}_connect_error_count"]
    assert [len(s.labels["error"]) for s in errors.samples] == [32]  # type: ignore[attr-defined]
    assert not any(name.endswith("_created") for name in found)


def test_gauges_disappear_when_no_pass_finished_recently() -> None:
    from nico.reconciler.metrics import ReconcilerMetrics

    registry = CollectorRegistry()
    metrics = ReconcilerMetrics(registry, "nmxc", hold_seconds=60)
    assert PREFIX + "num_logical_partitions" not in families(registry)  # no pass yet
    metrics.snapshot.updated_at = time.monotonic()
    assert PREFIX + "num_logical_partitions" in families(registry)
    metrics.snapshot.updated_at = time.monotonic() - 61
    assert PREFIX + "num_logical_partitions" not in families(registry)
    assert PREFIX + "iteration_latency_milliseconds" in families(registry)  # histograms stay


async def test_a_real_pass_fills_the_series(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0, d1 = site.domains
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    await f.logical_partition(session, site.nv.tenant, site.nv.site, name="unused")
    await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp))
    registry = CollectorRegistry()
    reconciler = make_reconciler(backend, registry=registry)
    site.fabric.set_faults(d1, down=True)

    await reconciler.full_pass()

    p = PREFIX
    assert value(registry, p + "num_logical_partitions") == 2
    assert value(registry, p + "num_physical_partitions") == 1
    assert value(registry, p + "nmxc_partition_count") == 2  # d0: default + the LP's; d1 unreachable
    assert value(registry, p + "nmxc_gpu_count") == 72
    assert value(registry, p + "nmxc_changes_applied_total", operation="create", status="completed") == 1
    assert value(registry, p + "nmxc_changes_applied_total", operation="update", status="completed") == 1
    assert (
        value(registry, p + "nmxc_op_latency_milliseconds_count", operation="create", status="completed") == 1
    )
    assert value(registry, p + "nvlink_config_apply_latency_milliseconds_count") == 1
    assert value(registry, p + "machine_status_updates_count") == 18  # every machine of d0 first observed
    assert value(registry, p + "nmxc_connect_error_count", error="Failed to reach NMX-C: endpoint ") == 1
    assert value(registry, "nico_nvlink_domain_errors", domain=str(d1)) >= 1
    assert value(registry, "nico_nvlink_pending_instances") == 0
    assert value(registry, "nico_nvlink_free_machines") == 35
    assert value(registry, "nico_nvlink_stranded_free_machines") == 17
    # Per domain: d0 has one machine used (its 17 free are stranded), d1 all 18 free and whole.
    assert value(registry, "nico_nvlink_domain_free_machines", domain=str(d0)) == 17
    assert value(registry, "nico_nvlink_domain_stranded_free_machines", domain=str(d0)) == 17
    assert value(registry, "nico_nvlink_domain_free_machines", domain=str(d1)) == 18
    assert value(registry, "nico_nvlink_domain_stranded_free_machines", domain=str(d1)) == 0
    assert value(registry, p + "iteration_latency_milliseconds_count") >= 1

    site.fabric.set_faults(d1, down=False)
    await reconciler.reconcile([d1])
    text = generate_latest(registry).decode()
    assert "connect_error_count{" not in text  # the error series is gone once the domain recovers
