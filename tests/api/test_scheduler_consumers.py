"""Real consumers of nico's scheduler exports, through the ``nico export`` command against a served API:
Debian's Slurm (``slurmctld`` 22.05, ``topology/tree``) loads the generated ``topology.conf`` and
``scontrol show topology`` lists one switch per NVLink domain with its nodes; ``nico export --watch``
prints a node's new ``kubectl label`` line when its interfaces become Ready."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.models import Machine
from tests.api.conftest import ORG, make_instances
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.net import free_port
from tests.support.placement import realise
from tests.support.replica import replica
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e
DEADLINE = 30.0


def nico(*args: str, token: str, url: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"NICO_URL": url, "NICO_TOKEN": token}
    return subprocess.run(
        [sys.executable, "-m", "nico.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )


async def site_with_instances(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession, count: int
) -> tuple[uuid.UUID, dict[str, uuid.UUID], dict[str, uuid.UUID]]:
    """``count`` instances named node-N; returns the partition, ids by name and domains by name."""
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    made = await make_instances(client, headers, world, partition.id, count)
    ids = {f"node-{n}": instance_id for n, instance_id in enumerate(made)}
    domains = {}
    for name, instance_id in ids.items():
        domain = await session.scalar(select(Machine.domain_uuid).where(Machine.instance_id == instance_id))
        assert domain is not None
        domains[name] = domain
    return partition.id, ids, domains


def slurm_conf(tmp: Path, nodes: list[str], topology: Path) -> Path:
    state = tmp / "state"
    state.mkdir()
    (tmp / "spool").mkdir()
    node_lines = "\n".join(f"NodeName={n} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN" for n in nodes)
    conf = tmp / "slurm.conf"
    conf.write_text(
        f"""ClusterName=nico
SlurmctldHost=localhost
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
StateSaveLocation={state}
SlurmdSpoolDir={tmp / "spool"}
SlurmctldPidFile={tmp / "slurmctld.pid"}
SlurmctldLogFile={tmp / "slurmctld.log"}
TopologyPlugin=topology/tree
{node_lines}
PartitionName=gpu Nodes=ALL Default=YES State=UP
"""
    )
    assert topology.parent == tmp  # slurmctld reads topology.conf beside slurm.conf
    return conf


def expand(hostlist: str, env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        ["scontrol", "show", "hostnames", hostlist], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


async def test_slurmctld_loads_the_topology(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
    database_url: str,
    tmp_path: Path,
) -> None:
    if shutil.which("slurmctld") is None or shutil.which("scontrol") is None:
        pytest.skip("slurmctld/scontrol not installed (Debian package slurm-wlm)")
    partition, ids, domains = await site_with_instances(client, headers, world, session, 6)
    await realise(session, ids["node-0"], partition, 1)
    await session.commit()
    topology = tmp_path / "topology.conf"
    async with replica(settings, database_url) as url:
        token = bearer(settings, ORG)["Authorization"].removeprefix("Bearer ")
        result = await asyncio.to_thread(
            nico,
            "export",
            "--org",
            ORG,
            "--format",
            "slurm-topology-conf",
            "-o",
            str(topology),
            token=token,
            url=url,
        )
        assert result.returncode == 0, result.stderr
    conf = slurm_conf(tmp_path, sorted(ids), topology)
    env = os.environ | {"SLURM_CONF": str(conf)}
    ctld = await asyncio.create_subprocess_exec(
        "slurmctld",
        "-D",
        "-f",
        str(conf),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        shown: list[str] = []

        async def topology_shown() -> bool:
            assert ctld.returncode is None, f"slurmctld exited: {tmp_path / 'slurmctld.log'}"
            probe = await asyncio.create_subprocess_exec(
                "scontrol",
                "show",
                "topology",
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, _ = await probe.communicate()
            if probe.returncode == 0 and b"SwitchName" in out:
                shown.append(out.decode())
                return True
            return False

        await wait_for(topology_shown, within=DEADLINE, what="scontrol show topology")
        shown_text = shown[-1]
        (tmp_path / "scontrol-show-topology.txt").write_text(shown_text)
        print(shown_text)
        switches = {}
        for line in shown_text.splitlines():
            name = re.search(r"SwitchName=(\S+)", line)
            nodes = re.search(r"Nodes=(\S+)", line)
            assert name is not None
            switches[name[1]] = set(expand(nodes[1], env)) if nodes else set()
        expected: dict[str, set[str]] = {}
        for name, domain in domains.items():
            expected.setdefault(f"nvl-{domain}", set()).add(name)
        assert {k: v for k, v in switches.items() if k != "nvlink-root"} == expected
        assert switches["nvlink-root"] == set(ids)
    finally:
        ctld.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(ctld.wait(), DEADLINE)
        except TimeoutError:
            ctld.kill()
            await ctld.wait()


async def test_watch_prints_label_changes(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
    database_url: str,
) -> None:
    partition, ids, _ = await site_with_instances(client, headers, world, session, 2)
    async with replica(settings, database_url) as url:
        token = bearer(settings, ORG)["Authorization"].removeprefix("Bearer ")
        env = os.environ | {"NICO_URL": url, "NICO_TOKEN": token}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "nico.cli",
            "export",
            "--org",
            ORG,
            "--format",
            "kubectl-labels",
            "--watch",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert proc.stdout is not None
        try:
            async with asyncio.timeout(DEADLINE):
                first = [(await proc.stdout.readline()).decode() for _ in range(2)]
            assert all("nvidia.com/gpu.clique-" in line for line in first)  # nothing Ready yet
            clique = await realise(session, ids["node-1"], partition, 21)
            await session.commit()
            async with asyncio.timeout(DEADLINE):
                changed = (await proc.stdout.readline()).decode()
            assert changed.startswith("kubectl label node node-1 --overwrite ")
            assert f"nvidia.com/gpu.clique={clique}" in changed
        finally:
            proc.terminate()
            await proc.wait()
