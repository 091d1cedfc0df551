"""Fabric observation for the reconciler: where each domain's manager is, the manager's event streams,
and the state of its asynchronous operations.

Where: NMX-C serves each domain from an endpoint of its own, registered for one of the domain's
chassis and checked once with Hello (a wrong registry row must not let nico change someone else's
rack), or discovered by asking every known endpoint which domain it serves; NMX-M serves every domain
from one site-wide URL. Events: one stream per domain whose manager pushes them, opened again with
backoff when it ends. Operations: NMX-M changes that outlived their call, polled to a terminal state.
What a backend offers is read from its declared :class:`~nico.fabric.backend.Capabilities`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable, Sequence

from nico.fabric.backend import (
    DomainTarget,
    EndpointNotConfigured,
    FabricBackend,
    PartitionEvent,
    PartitionEvents,
)

log = logging.getLogger(__name__)

HELLO_RETRY_SECONDS = 30.0  # an endpoint whose discovery Hello failed is asked again after this long

EventHandler = Callable[[PartitionEvent], None]
StreamEnded = Callable[[uuid.UUID], None]


class Endpoints:
    """Which NMX-C endpoint serves each domain: the chassis registry as stored, what each endpoint's
    Hello named, and the domains found by discovery."""

    def __init__(self, backend: FabricBackend, configured: Sequence[str]) -> None:
        self.backend = backend
        self.registry: dict[str, str] = {}  # chassis serial -> endpoint, as stored
        self.verified: dict[str, uuid.UUID] = {}  # endpoint -> domain its Hello named
        # Discovery: endpoints to ask which domain they serve (configured, plus every registered one),
        # and what they answered, keyed by the domain uuid the fabric reports.
        self.discovery: list[str] = list(configured)
        self.discovered: dict[uuid.UUID, str] = {}
        self._hello_failed: dict[str, float] = {}  # endpoint -> when its last discovery Hello failed

    def forget(self) -> None:
        """Ask every endpoint again which domain it serves (one moved to another domain, or a
        discovered one re-provisioned, is noticed at the next lookup)."""
        self.verified.clear()
        self.discovered.clear()

    async def target(self, domain: uuid.UUID, chassis_serials: Iterable[str]) -> DomainTarget:
        """Where the domain's manager is: the endpoint registered for one of its chassis, checked
        with Hello to really serve this domain, else the one discovery found for it."""
        if not self.backend.capabilities.per_endpoint:
            return DomainTarget(domain)
        serials = sorted(chassis_serials)
        endpoint = next((self.registry[s] for s in serials if s in self.registry), None)
        refused: EndpointNotConfigured | None = None
        if endpoint is not None and self.verified.get(endpoint) != domain:
            hello = await self.backend.hello(DomainTarget(domain, endpoint))
            self._heard(endpoint, hello.domain_uuid)
            if hello.domain_uuid != domain:
                # Another domain of the chassis (a minipod rack): its own endpoint may be discovered.
                refused = EndpointNotConfigured(
                    f"endpoint {endpoint} serves domain {hello.domain_uuid}, not {domain}", endpoint=endpoint
                )
                endpoint = None
        if endpoint is None:
            endpoint = self.discovered.get(domain) or (await self.discover()).get(domain)
        if endpoint is None:
            if refused is not None:
                raise refused
            listed = ", ".join(serials) or "(none)"
            raise EndpointNotConfigured(f"no NMX-C endpoint registered for chassis {listed} or discovered")
        return DomainTarget(domain, endpoint)

    def _heard(self, endpoint: str, domain: uuid.UUID) -> None:
        """An endpoint's Hello named ``domain``: remember it both ways (an endpoint serves one domain)."""
        before = self.verified.get(endpoint)
        if before is not None and self.discovered.get(before) == endpoint:
            del self.discovered[before]
        self.verified[endpoint] = domain
        self.discovered[domain] = endpoint
        self._hello_failed.pop(endpoint, None)

    async def discover(self) -> dict[uuid.UUID, str]:
        """Ask each known NMX-C endpoint that has not said yet which domain it serves (Hello): the
        configured ``nmxc_endpoints`` and every endpoint registered for a chassis, so that several
        domains behind one chassis (a minipod rack, one endpoint per domain) are all found, keyed by
        the domain uuid the fabric reports. An endpoint whose Hello failed is asked again after
        ``HELLO_RETRY_SECONDS``. Returns domain -> endpoint."""
        now = time.monotonic()
        asking = [
            endpoint
            for endpoint in dict.fromkeys([*self.discovery, *sorted(set(self.registry.values()))])
            if endpoint not in self.verified
            and now - self._hello_failed.get(endpoint, -math.inf) >= HELLO_RETRY_SECONDS
        ]
        answers = await asyncio.gather(
            *(self.backend.hello(DomainTarget(uuid.UUID(int=0), e)) for e in asking), return_exceptions=True
        )
        for endpoint, answer in zip(asking, answers, strict=True):
            if isinstance(answer, Exception):
                self._hello_failed[endpoint] = now
                log.info("NMX-C endpoint %s did not answer its discovery Hello: %s", endpoint, answer)
            elif not isinstance(answer, BaseException):
                self._heard(endpoint, answer.domain_uuid)
        return self.discovered


class EventStreams:
    """One event stream per domain, to the endpoint that serves it now: every event goes to
    ``on_event``; when a stream ends or fails, ``on_end`` hears of it and the stream is opened again
    with backoff."""

    def __init__(self, events: PartitionEvents, on_event: EventHandler, on_end: StreamEnded) -> None:
        self.events = events
        self.on_event = on_event
        self.on_end = on_end
        self._streams: dict[uuid.UUID, tuple[str | None, asyncio.Task[None]]] = {}

    def follow(self, target: DomainTarget) -> None:
        """Listen to the domain at ``target`` (a stream to another endpoint is replaced)."""
        current = self._streams.get(target.domain_uuid)
        if current is not None and current[0] == target.endpoint and not current[1].done():
            return
        if current is not None:
            current[1].cancel()
        task = asyncio.create_task(self._watch(target), name=f"nvlink-events-{target.domain_uuid}")
        self._streams[target.domain_uuid] = (target.endpoint, task)

    def stop(self) -> list[asyncio.Task[None]]:
        """Cancel every stream; the tasks to wait for."""
        tasks = [task for _, task in self._streams.values()]
        self._streams.clear()
        for task in tasks:
            task.cancel()
        return tasks

    async def _watch(self, target: DomainTarget) -> None:
        backoff = 1.0
        while True:
            try:
                async for event in self.events.partition_events(target):
                    backoff = 1.0
                    self.on_event(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("partition events of %s stopped: %s", target.domain_uuid, exc)
            finally:
                self.on_end(target.domain_uuid)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)


class FabricObserver:
    """What the reconciler asks of the fabric besides partition calls: a domain's target (and, where
    the manager pushes events, a stream from it to ``on_event``), stored endpoints and credentials put
    to use, and the state of pending operations."""

    def __init__(
        self,
        backend: FabricBackend,
        configured_endpoints: Sequence[str] = (),
        *,
        on_event: EventHandler | None = None,
        on_end: StreamEnded | None = None,
    ) -> None:
        self.backend = backend
        self.endpoints = Endpoints(backend, configured_endpoints)
        self.on_event = on_event
        self.on_end = on_end
        self._streams: EventStreams | None = None

    def use_registry(
        self,
        endpoints: dict[str, str],
        credentials: tuple[str, str] | None,
        *,
        covers: Iterable[str] | None = None,
    ) -> None:
        """Where the managers are and how to sign in, as stored now (with no credentials stored, the
        backend keeps those it was built with). ``covers``: ``endpoints`` are the rows of these chassis
        only (the others' stay as known); None: the whole registry."""
        if covers is None:
            self.endpoints.registry = endpoints
        else:
            for serial in covers:
                self.endpoints.registry.pop(serial, None)
            self.endpoints.registry.update(endpoints)
        signing = self.backend.capabilities.credentials
        if signing is not None and credentials is not None:
            signing.use_credentials(credentials)

    async def target(self, domain: uuid.UUID, chassis_serials: Iterable[str]) -> DomainTarget:
        """Where the domain's manager is (:meth:`Endpoints.target`); its events are followed from then on."""
        target = await self.endpoints.target(domain, chassis_serials)
        streams = self._event_streams()
        if streams is not None:
            streams.follow(target)
        return target

    def _event_streams(self) -> EventStreams | None:
        if self._streams is None and self.on_event is not None:
            events = self.backend.capabilities.events
            if events is not None:
                self._streams = EventStreams(events, self.on_event, self.on_end or (lambda _: None))
        return self._streams

    async def operation_states(self, operation_ids: Iterable[str]) -> tuple[dict[str, str], bool]:
        """Terminal states of the given asynchronous operations, and whether any still runs (a backend
        without asynchronous operations has none)."""
        resolved: dict[str, str] = {}
        running = False
        operations = self.backend.capabilities.operations
        if operations is None:
            return resolved, running
        for operation_id in operation_ids:
            found = await operations.operation_state(operation_id)
            if found in ("pending", "in-progress"):
                running = True
            else:
                resolved[operation_id] = found
        return resolved, running

    def stop(self) -> list[asyncio.Task[None]]:
        """Stop following events; the stream tasks to wait for."""
        return self._streams.stop() if self._streams is not None else []
