"""What a domain's pass is handed (:class:`PassContext`), what it sees of the fabric before it plans
(:class:`Observed`) and what it hands back (:class:`DomainResult`, and a health read it leaves due:
:class:`HealthDue`). Shared by a single domain's pass (:mod:`nico.reconciler.domain_pass`), a part's
(:mod:`nico.reconciler.parts`) and the scheduler that runs them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncEngine

from nico.config import NvLinkConfig
from nico.fabric.backend import DomainTarget, FabricBackend, FabricPartition
from nico.fabric.observation import FabricObserver
from nico.reconciler.executor import AfterCall
from nico.reconciler.last_reads import HealthReads, ReadBacks
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.outages import Outages
from nico.reconciler.writeback import WriteBackReport

DomainStatus = Literal["ok", "busy", "error", "waiting", "gone"]


@dataclass
class DomainResult:
    domain: uuid.UUID
    status: DomainStatus
    operations: int = 0
    failed: int = 0
    retryable: bool = True
    error: str | None = None
    follow_up: bool = False  # the read-back still differs from the desire: look again soon
    report: WriteBackReport | None = None
    # The fabric partition id each completed change call touched and when it ended, one entry per call
    # (a partition the pass changed twice is here twice): the partition events those calls will bring
    # (``echoes.Echoes``).
    changed: tuple[tuple[int, float], ...] = ()
    health: HealthDue | None = None  # the domain's health is to be read now (``domain_pass.read_health``)
    # When (monotonic) the pass began to load the domain's state: every commit the reconciler had
    # been told of (NOTIFY) before then is in what the pass acted on.
    loaded_at: float | None = None
    # The instances (id, NVLink config version) whose change the pass carried out on the fabric (none
    # when it made no call): the scheduler spaces the passes of a domain whose passes keep moving one
    # to a new version (``flapping``).
    moved: frozenset[tuple[uuid.UUID, int]] = frozenset()


@dataclass(frozen=True)
class HealthDue:
    """A health read a pass leaves to be made after it: where, the partitions it read back, and the
    domain's multicast budget as the pass loaded it (None: never read; the health read asks the
    fabric)."""

    target: DomainTarget
    partitions: list[FabricPartition]
    budget: int | None = None


@dataclass(frozen=True)
class PassContext:
    """Everything a pass uses, handed in by whoever runs it."""

    engine: AsyncEngine  # the pass holds one connection: the domain's lock, its load and its writes
    backend: FabricBackend
    observer: FabricObserver  # where the domain's manager is, and its pending operations
    config: NvLinkConfig
    metrics: ReconcilerMetrics
    read_backs: ReadBacks
    health_reads: HealthReads
    after_call: AfterCall | None = None
    outages: Outages = field(default_factory=Outages)
    # The domain's health, when due, is read during the pass and stored with its write-back; otherwise
    # after it, on a connection of its own (the loop's passes: the domain is free again sooner).
    health_in_pass: bool = False

    @property
    def call_timeout(self) -> float:
        return self.config.fabric_call_timeout.total_seconds()


@dataclass
class Observed:
    """The fabric as a pass found it before planning."""

    target: DomainTarget
    resolved: dict[str, str]  # NMX-M operation id -> terminal state
    still_running: bool
    partitions: list[FabricPartition]
    cached: bool = False  # ``partitions`` is the last pass's read-back, not a listing made now
