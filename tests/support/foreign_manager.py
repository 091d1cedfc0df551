"""Another fabric manager (NICo, Base Command Manager, an operator's script) making a partition of its
own on a simulated fabric, over the wire as it would: raw NMX-C gRPC stubs, or NMX-M's REST API with
its asynchronous operations. Nothing of nico's clients is used."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import grpc
import httpx

from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.nmxc import nmx_c_pb2_grpc as pb_grpc


async def nmxc_take(endpoint: str, name: str, gpu_uids: Iterable[int]) -> int:
    """Move ``gpu_uids`` (all in the domain default) into a new partition ``name`` through the NMX-C
    endpoint (``http://host:port``); its partition id."""
    uids = sorted(gpu_uids)
    async with grpc.aio.insecure_channel(endpoint.removeprefix("http://")) as channel:
        stub = pb_grpc.NMX_ControllerStub(channel)  # type: ignore[no-untyped-call]
        removed = await stub.RemoveGpusFromPartition(
            pb.UpdatePartitionRequest(
                context=pb.Context(context="bcm"),
                partition_id=pb.PartitionId(partition_id=DEFAULT_PARTITION_ID),
                gpu_uid=uids,
            ),
            timeout=5,
        )
        assert removed.server_header.return_code == pb.NMX_ST_SUCCESS, removed
        created = await stub.CreatePartition(
            pb.CreatePartitionRequest(
                context=pb.Context(context="bcm"),
                name=name,
                gpu_resource_id=[pb.GpuResourceId(gpu_uid=uid) for uid in uids],
            ),
            timeout=5,
        )
        assert created.server_header.return_code == pb.NMX_ST_SUCCESS, created
        return int(created.partition_id.partition_id)


async def nmxm_take(url: str, auth: tuple[str, str], name: str, gpu_uids: Iterable[int]) -> int:
    """The same through NMX-M: the default partition's members set without the GPUs, then the new
    partition created, each operation waited for; its partition id."""
    wanted = set(gpu_uids)
    async with httpx.AsyncClient(base_url=url, auth=auth, timeout=5.0) as client:
        gpus = (await client.get("/nmx/v1/gpus")).raise_for_status().json()
        ids = {g["DeviceUID"]: g["ID"] for g in gpus}
        members = sorted(ids[uid] for uid in wanted)
        partitions = (await client.get("/nmx/v1/partitions")).raise_for_status().json()
        default = next(
            p
            for p in partitions
            if p["PartitionID"] == DEFAULT_PARTITION_ID and set(members) <= set(p["Members"])
        )
        rest = sorted(set(default["Members"]) - set(members))
        put = await client.put(f"/nmx/v1/partitions/{default['ID']}", json={"Members": rest})
        await _done(client, put.raise_for_status().json()["operationId"])
        post = await client.post("/nmx/v1/partitions", json={"Name": name, "Members": members})
        await _done(client, post.raise_for_status().json()["operationId"])
        partitions = (await client.get("/nmx/v1/partitions")).raise_for_status().json()
        return int(next(p["PartitionID"] for p in partitions if p["Name"] == name))


async def _done(client: httpx.AsyncClient, operation_id: str, deadline: float = 10.0) -> None:
    """Wait for an NMX-M operation to complete (within ``deadline`` seconds)."""
    until = time.monotonic() + deadline
    while True:
        op = (await client.get(f"/nmx/v1/operations/{operation_id}")).raise_for_status().json()
        if op["Status"] == "completed":
            return
        assert op["Status"] not in ("failed", "cancelled"), op
        assert time.monotonic() < until, f"operation {operation_id} not done: {op}"
        await asyncio.sleep(0.01)


async def nmxc_release(endpoint: str, partition_id: int) -> None:
    """Delete the manager's partition through NMX-C (its GPUs are left in no partition)."""
    async with grpc.aio.insecure_channel(endpoint.removeprefix("http://")) as channel:
        stub = pb_grpc.NMX_ControllerStub(channel)  # type: ignore[no-untyped-call]
        deleted = await stub.DeletePartition(
            pb.DeletePartitionRequest(
                context=pb.Context(context="bcm"), partition_id=pb.PartitionId(partition_id=partition_id)
            ),
            timeout=5,
        )
        assert deleted.server_header.return_code == pb.NMX_ST_SUCCESS, deleted


async def nmxm_release(url: str, auth: tuple[str, str], partition_id: int) -> None:
    """Delete the manager's partition through NMX-M, waiting for the operation."""
    async with httpx.AsyncClient(base_url=url, auth=auth, timeout=5.0) as client:
        partitions = (await client.get("/nmx/v1/partitions")).raise_for_status().json()
        entity = next(p["ID"] for p in partitions if p["PartitionID"] == partition_id)
        deleted = await client.delete(f"/nmx/v1/partitions/{entity}")
        await _done(client, deleted.raise_for_status().json()["operationId"])
