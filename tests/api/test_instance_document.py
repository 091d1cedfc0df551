"""Where PostgreSQL writes an instance's response for speed, it writes what the ``Instance`` schema
writes for the same rows, byte for byte: ``GET /instance/{id}`` answers the body of
:mod:`nico.instance.document`, in every state the body shows, and a create answers the documents its
insert statement returns (``RETURNING``), not a read of the new instances."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api import messages
from nico.api.rendering import json_response, list_response
from nico.api.schemas.nvlink_interface import WireKeys
from nico.db.raw import commit
from nico.instance import creation
from nico.instance import service as instance
from nico.instance.schemas import Instance
from nico.instance.service import load
from nico.instance.views import InstanceSpec, Port
from nico.services.nvlink_interface import Binding
from tests.api.conftest import BASE, batch_body, instance_body
from tests.support import factories as f

ODD_TEXT = 'quote " backslash \\ newline \n tab \t bell \x07 del \x7f é ✓ \u2028 </script>'
# What a description the API accepts may hold of it (no control character but line breaks and tabs);
# userData and labels, and rows written past the API, carry all of ODD_TEXT.
ODD_DESCRIPTION = 'quote " backslash \\ newline \n tab \t é ✓ </script>'


@pytest.fixture
def restore_wire_keys() -> Iterator[None]:
    before = WireKeys.emit_deprecated_partition_key
    yield
    WireKeys.emit_deprecated_partition_key = before


async def both(app: FastAPI, instance_id: uuid.UUID) -> tuple[str | None, str]:
    """(PostgreSQL's body, the schema's body) of the instance, read now."""
    ctx = app.state.ctx
    async with ctx.raw.connection() as conn:
        document = await instance.get_document(
            conn, "tenant-org", instance_id, deprecated_partition_key=WireKeys.emit_deprecated_partition_key
        )
        view = await instance.get(conn, "tenant-org", instance_id)
    return document, Instance.of(view).model_dump_json()


async def create(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, **extra: object
) -> uuid.UUID:
    response = await client.post(f"{BASE}/instance", json=instance_body(world, **extra), headers=headers)
    assert response.status_code == 201, response.text
    return uuid.UUID(response.json()["id"])


@pytest.mark.usefixtures("restore_wire_keys")
async def test_the_document_postgresql_writes_is_the_schemas_byte_for_byte(
    app: FastAPI,
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    partition = (await f.logical_partition(session, world.tenant, world.site, name="lp-doc")).id
    await session.commit()
    plain = await create(client, headers, world, name="plain")
    rich = await create(
        client,
        headers,
        world,
        name="rich",
        description=ODD_DESCRIPTION,
        userData=ODD_TEXT,
        labels={"team": "ml", "z": ODD_TEXT, "a-much-longer-key": "", "é": "✓"},
        nvLinkInterfaces=[
            {"nvLinkLogicalPartitionId": str(partition), "deviceInstance": i} for i in (2, 0, 1, 3)
        ],
    )
    bare = await create(client, headers, world, name="bare", labels={})

    async def same(instance_id: uuid.UUID) -> str:
        document, schema = await both(app, instance_id)
        assert document == schema
        response = await client.get(f"{BASE}/instance/{instance_id}", headers=headers)
        assert response.status_code == 200 and response.text == schema
        assert response.headers["content-type"] == "application/json"
        return schema

    for instance_id in (plain, rich, bare):
        await same(instance_id)

    # Ready in one clique, a serial console, a GPU id, a history entry at a whole second, no fraction.
    domain = world.domains[0]
    await session.execute(
        text(
            "INSERT INTO physical_partition (id, logical_partition_id, domain_uuid, nmx_partition_id, "
            "fabric_ref, name) VALUES (:id, :lp, :domain, 4242, 'ref', 'pp')"
        ),
        {"id": uuid.uuid4(), "lp": partition, "domain": domain},
    )
    await session.execute(
        text(
            "UPDATE nvlink_interface SET status = 'Ready', domain_uuid = :domain, "
            "gpu_uid = 18446744073709551615 - device_instance WHERE instance_id = :id"
        ),
        {"domain": domain, "id": rich},
    )
    await session.execute(
        text("UPDATE site SET serial_console_hostname = 'console.example' WHERE id = :id"),
        {"id": world.site.id},
    )
    await session.execute(
        text(
            "INSERT INTO status_detail (instance_id, status, message, created, updated) "
            "VALUES (:instance, 'Ready', NULL, '2026-01-02T03:04:05Z', '2026-01-02T03:04:05.5Z')"
        ),
        {"instance": rich},
    )
    await session.execute(
        text("UPDATE instance SET status = 'Ready', created = '2026-01-02T03:04:05Z' WHERE id = :id"),
        {"id": rich},
    )
    await session.commit()
    body = await same(rich)
    assert '"nvLinkCliqueId":"' in body and '"serialConsoleUrl":"ssh://' in body  # the states were shown

    # One interface not Ready: no instance clique; two cliques: none either.
    await session.execute(
        text(
            "UPDATE nvlink_interface SET status = 'Pending' WHERE instance_id = :id AND device_instance = 3"
        ),
        {"id": rich},
    )
    await session.commit()
    assert '"nvLinkCliqueId":null,"sshKeyGroupIds"' in await same(rich)

    # Another session time zone: the offsets psycopg and pydantic would write.
    async with app.state.ctx.raw.connection() as conn:
        await conn.execute("SET TIME ZONE 'Asia/Kolkata'")
        try:
            document = await instance.get_document(conn, "tenant-org", rich, deprecated_partition_key=True)
            view = await instance.get(conn, "tenant-org", rich)
        finally:
            await conn.execute("RESET TIME ZONE")
    assert document is not None and "+05:30" in document and document == Instance.of(view).model_dump_json()

    # Without the deprecated key (the setting off).
    WireKeys.emit_deprecated_partition_key = False
    assert "nvLinklogicalPartitionId" not in await same(rich)


async def test_labels_only_python_can_write_are_answered_from_the_schema(
    app: FastAPI,
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    created = await create(client, headers, world, name="odd-labels")
    await session.execute(
        text("""UPDATE instance SET labels = '{"n": 1, "nested": {"a": [1, "b"]}}' WHERE id = :id"""),
        {"id": created},
    )
    await session.commit()
    document, schema = await both(app, created)
    assert document is None
    response = await client.get(f"{BASE}/instance/{created}", headers=headers)
    assert response.status_code == 200 and response.text == schema
    assert response.json()["labels"] == {"n": 1, "nested": {"a": [1, "b"]}}
    # Not even an object (nothing the API stores): the statement still answers, the schema decides.
    await session.execute(text("""UPDATE instance SET labels = '["x"]' WHERE id = :id"""), {"id": created})
    await session.commit()
    async with app.state.ctx.raw.connection() as conn:
        assert (
            await instance.get_document(conn, "tenant-org", created, deprecated_partition_key=True)
        ) is None


async def test_the_hoisted_route_answers_what_the_routers_answer(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    """Canonical ids take the route ahead of the routers; any other segment reaches them: the checks
    and their order are the same either way."""
    created = await create(client, headers, world, name="hoisted")
    upper = str(created).upper()
    got = await client.get(f"{BASE}/instance/{upper}", headers=headers)
    assert got.status_code == 200 and got.json()["id"] == str(created)
    # /instance/type is the instance types' list, not an instance id.
    types = await client.get(f"{BASE}/instance/type", headers=headers)
    assert types.status_code == 200 and isinstance(types.json(), list)
    # A malformed id: the operation's message (the routers' route).
    bad = await client.get(f"{BASE}/instance/not-an-id", headers=headers)
    assert bad.status_code == 400 and bad.json()["message"] == messages.INSTANCE_ID.format(value="not-an-id")
    # Order of the checks: the token first, then the role, then includeRelation, then the id.
    missing = uuid.uuid4()
    assert (await client.get(f"{BASE}/instance/{missing}")).status_code == 401
    provider = {"Authorization": headers["Authorization"]}
    assert (
        await client.get(f"/v2/org/other-org/nico/instance/{missing}", headers=provider)
    ).status_code == 403
    wrong = await client.get(f"{BASE}/instance/not-an-id?includeRelation=Nope", headers=headers)
    assert wrong.status_code == 400 and "includeRelation" in wrong.json()["message"]
    hoisted_wrong = await client.get(f"{BASE}/instance/{missing}?includeRelation=Nope", headers=headers)
    assert hoisted_wrong.status_code == 400 and "includeRelation" in hoisted_wrong.json()["message"]
    assert (await client.get(f"{BASE}/instance/{missing}", headers=headers)).status_code == 404
    # Only GET is hoisted: the other methods of the path answer as the routers do.
    assert (await client.head(f"{BASE}/instance/{created}", headers=headers)).status_code == 405
    related = await client.get(f"{BASE}/instance/{created}?includeRelation=Site", headers=headers)
    assert related.status_code == 200 and related.json()["site"]["id"] == str(world.site.id)


async def test_create_answers_what_a_read_of_the_new_instances_shows(
    app: FastAPI,
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    """A create builds its response from what its one insert statement returns, without reading the
    instances back: byte for byte what reading them afterwards renders (chronological history), for a
    single create, a batch, and an instance that is Ready at once (a machine without a domain: two
    history entries)."""
    partition = (await f.logical_partition(session, world.tenant, world.site, name="lp-create")).id
    loose = world.machines[-1]
    await session.execute(
        text(
            "UPDATE machine SET domain_uuid = NULL, chassis_serial = NULL, tray_index = NULL WHERE id = :id"
        ),
        {"id": loose.id},
    )
    world.tenant.targeted_instance_creation = True
    await session.commit()

    async def read(ids: list[uuid.UUID]) -> list[Instance]:
        async with app.state.ctx.sessions() as fresh:
            return [Instance.of(v) for v in await load(fresh, ids, chronological=True)]

    single = await client.post(
        f"{BASE}/instance",
        json=instance_body(
            world,
            name="answered",
            description=ODD_DESCRIPTION,
            userData=ODD_TEXT,
            labels={"team": "ml", "z": ODD_TEXT},
            nvLinkInterfaces=[
                {"nvLinkLogicalPartitionId": str(partition), "deviceInstance": i} for i in (2, 0, 1, 3)
            ],
        ),
        headers=headers,
    )
    assert single.status_code == 201, single.text
    (view,) = await read([uuid.UUID(single.json()["id"])])
    assert single.content == json_response(view, 201).body

    batch = await client.post(
        f"{BASE}/instance/batch",
        json=batch_body(
            world,
            count=3,
            labels={"k": "v"},
            nvLinkInterfaces=[
                {"nvLinkLogicalPartitionId": str(partition), "deviceInstance": i} for i in (1, 0)
            ],
        ),
        headers=headers,
    )
    assert batch.status_code == 201, batch.text
    views = await read([uuid.UUID(i["id"]) for i in batch.json()])
    assert batch.content == list_response(views, 201).body

    ready = await client.post(
        f"{BASE}/instance",
        json=instance_body(world, name="ready-at-once", instanceTypeId=None, machineId=loose.id),
        headers=headers,
    )
    assert ready.status_code == 201, ready.text
    assert [h["status"] for h in ready.json()["statusHistory"]] == ["Pending", "Ready"]
    (view,) = await read([uuid.UUID(ready.json()["id"])])
    assert ready.content == json_response(view, 201).body

    # And what the insert returned is what PostgreSQL writes for GET (one history entry: the same in
    # either order), byte for byte: the create's documents, the read's rows and GET's body are one shape.
    got = await client.get(f"{BASE}/instance/{single.json()['id']}", headers=headers)
    assert got.status_code == 200 and got.content == single.content
    for item in batch.json():
        got = await client.get(f"{BASE}/instance/{item['id']}", headers=headers)
        assert got.status_code == 200 and got.json() == item


async def test_the_rows_a_create_returns_are_the_rows_a_read_gives(
    app: FastAPI, world: f.NvlinkSite, session: AsyncSession
) -> None:
    """The views a create builds from its insert's ``RETURNING`` equal, field for field, the views a
    read of the same instances builds (chronological history): the schema renders both alike."""
    partition = (await f.logical_partition(session, world.tenant, world.site, name="lp-rows")).id
    await session.commit()
    spec = InstanceSpec(
        vpc_id=world.vpc.id,
        ports=[Port(world.subnet.id)],
        nvlink=[Binding(partition, i) for i in (3, 1)],
        description=ODD_TEXT,
        labels={"b": "2", "a": ODD_TEXT},
        created_by="someone",
    )
    async with app.state.ctx.sessions() as creating:
        created = await creation.create_batch(
            creating,
            "tenant-org",
            spec,
            name_prefix="rows",
            count=3,
            instance_type_id=world.instance_type.id,
            topology_optimized=False,
            in_flight_limit=app.state.ctx.settings.quotas.changes_for("tenant-org"),
        )
        await commit(creating)
    async with app.state.ctx.sessions() as reading:
        read = await load(reading, [v.id for v in created.views()], chronological=True)
    assert len(created.views()) == 3 and created.views() == read
    assert [len(v.nvlink_interfaces) for v in read] == [2, 2, 2]
