"""The README's walkthrough, run with bash exactly as written against ``nico demo`` (a subprocess on a
free port), then a second run of the demo that finds the state the first one left."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.demo_process import DemoProcess
from tests.support.net import free_port

pytestmark = pytest.mark.e2e
README = Path(__file__).resolve().parents[2] / "README.md"
WALKTHROUGH = re.compile(r"<!-- walkthrough:start -->\s*```sh\n(.*?)```\s*<!-- walkthrough:end -->", re.S)
DEADLINE = 30.0
POLL = 0.05
GRPC_CORE_LINE = re.compile(r"^[IW]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]", re.M)
WAIT_FOR_19 = ("--min", "19", "--timeout", "1")


def walkthrough() -> str:
    found = WALKTHROUGH.search(README.read_text())
    assert found, "README.md has no walkthrough between the markers"
    return found.group(1)


def metric(text: str, name: str, **labels: str) -> float | None:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = f"{name}{{{wanted}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def run_walkthrough(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The README's block as a user pastes it: bash without any option of ours."""
    return subprocess.run(["bash", "-c", walkthrough()], env=env, capture_output=True, text=True, timeout=180)


def nico(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nico.cli", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_readme_walkthrough_runs_as_written_and_a_second_demo_run_reuses_the_state(
    tmp_path: Path,
) -> None:
    script = walkthrough()
    assert "topologyOptimized" in script and '"count": 18' in script
    demo = DemoProcess(tmp_path / "data").start()
    try:
        # A second demo on the same data directory is refused, naming the process that holds it.
        second = nico("demo", "--port", str(free_port()), env=demo.env)
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"is in use by nico demo (pid {demo.pid})" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr and "may use" not in second.stdout

        # A wrong token: the walkthrough stops at its first call and shows the server's answer.
        refused = run_walkthrough({**demo.env, "NICO_URL": demo.url, "NICO_TOKEN": "not-a-token"})
        assert refused.returncode != 0
        assert "failed: " in refused.stderr and "401" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr and "KeyError" not in refused.stderr, refused.stderr
        assert refused.stderr.count("failed: ") == 1, refused.stderr
        # nico wait-ready gives up at once on a refusal, and when nothing listens.
        unauthorised = nico("wait-ready", "--org", "demo", "--url", demo.url, "--token", "x", env=demo.env)
        assert unauthorised.returncode == 1 and "401" in unauthorised.stderr, unauthorised.stderr
        nothing = nico(
            "wait-ready",
            "--org",
            "demo",
            "--url",
            f"http://127.0.0.1:{free_port()}",
            "--token",
            "x",
            env=demo.env,
        )
        assert nothing.returncode == 1 and "cannot reach" in nothing.stderr, nothing.stderr

        ran = run_walkthrough({**demo.env, "NICO_URL": demo.url})
        assert ran.returncode == 0, f"walkthrough failed:\n{ran.stdout}\n{ran.stderr}\n{demo.output()}"
        assert "18 instances Pending" in ran.stdout  # the batch answers at once
        assert "18/18 instances Ready" in ran.stdout
        assert "'Ready')" in ran.stdout  # the interfaces, with their domain and GUID
        assert re.search(
            r'nmxc_changes_applied_total\{operation="create",status="completed"\} 1\.0', ran.stdout
        ), ran.stdout
    finally:
        status = demo.stop()
    assert status == 0, demo.output()
    assert "Traceback" not in demo.output()
    # gRPC core's INFO and WARNING lines ("I1124 01:25:45.053946 30630 fork_posix.cc:71] ...") stay quiet:
    # the CLI sets GRPC_VERBOSITY=ERROR before grpc loads.
    assert not GRPC_CORE_LINE.search("".join(demo.stderr)), demo.output()
    snapshot = json.loads((tmp_path / "data" / "demo-fabric-nmxc.json").read_text())
    named = [
        p for d in snapshot["domains"].values() for p in d["partitions"] if p["name"].startswith("nico-")
    ]
    assert len(named) == 1 and len(named[0]["gpus"]) == 72  # one rack, every GPU in the partition

    again = DemoProcess(tmp_path / "data").start()
    try:
        headers = {"Authorization": f"Bearer {again.token}"}
        with httpx.Client(base_url=again.url, headers=headers) as client:
            listed = client.get("/v2/org/demo/nico/instance", params={"pageSize": 100})
            assert listed.status_code == 200
            assert [i["status"] for i in listed.json()] == ["Ready"] * 18
            # The reconciler's first full pass finds the fabric as it was left: nothing to redo.
            deadline = time.monotonic() + DEADLINE
            while True:
                text = client.get("/metrics").text
                if metric(text, "nico_nvlink_partition_monitor_num_physical_partitions") == 1.0:
                    break
                assert time.monotonic() < deadline, text
                time.sleep(POLL)
            for operation in ("create", "update", "remove"):
                assert (
                    metric(
                        text,
                        "nico_nvlink_partition_monitor_nmxc_changes_applied_total",
                        operation=operation,
                        status="completed",
                    )
                    == 0.0
                ), text
        # nico wait-ready gives up at its timeout with exit status 1 (18 exist, 19 are awaited) and
        # says that fewer than --min exist.
        waited = subprocess.run(
            [
                sys.executable,
                "-m",
                "nico.cli",
                "wait-ready",
                "--org",
                "demo",
                "--url",
                again.url,
                *WAIT_FOR_19,
            ],
            env=again.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert waited.returncode == 1, waited.stderr
        assert "timeout: 18 instances exist, fewer than --min 19 (18 Ready)" in waited.stderr, waited.stderr
    finally:
        assert again.stop() == 0, again.output()


def walkthrough_after_exports(
    demo: DemoProcess, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The walkthrough after the banner's ``export`` lines, in ``env``: it succeeds, all instances Ready."""
    exports = [line.strip() for line in demo.stdout if line.strip().startswith("export ")]
    assert exports, demo.output()
    ran = subprocess.run(
        ["bash", "-c", "\n".join([*exports, walkthrough()])],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, f"walkthrough failed:\n{ran.stdout}\n{ran.stderr}\n{demo.output()}"
    assert "18/18 instances Ready" in ran.stdout
    return ran


@pytest.mark.parametrize(
    "args",
    [("--backend", "nmxm", "--racks", "1"), ("--org", "acme", "--racks", "1")],
    ids=["nmxm", "another-org"],
)
def test_the_readme_walkthrough_runs_with_the_banners_exports(tmp_path: Path, args: tuple[str, ...]) -> None:
    """The walkthrough after the banner's ``export`` line, in a shell with none of the demo's variables."""
    demo = DemoProcess(tmp_path / "data", *args).start()
    try:
        env = {k: v for k, v in demo.env.items() if not k.startswith("NICO_")}
        ran = walkthrough_after_exports(demo, env)
        assert "created a new signing key" not in ran.stderr
        kind = "nmxm" if "nmxm" in args else "nmxc"
        assert re.search(
            rf'nico_nvlink_partition_monitor_{kind}_changes_applied_total\{{operation="create",'
            r'status="completed"\} 1\.0',
            ran.stdout,
        ), ran.stdout
    finally:
        assert demo.stop() == 0, demo.output()


def test_the_demo_simulates_nmxm_when_asked(tmp_path: Path) -> None:
    demo = DemoProcess(tmp_path / "data", "--backend", "nmxm", "--racks", "1").start()
    try:
        assert "1 NVL72 racks, 18 machines" in demo.output()
        base = "/v2/org/demo/nico"
        with httpx.Client(base_url=demo.url, headers={"Authorization": f"Bearer {demo.token}"}) as client:
            site = client.get(f"{base}/site").json()[0]["id"]
            itype = client.get(f"{base}/instance/type", params={"siteId": site}).json()[0]["id"]
            lp = client.post(
                f"{base}/nvlink-logical-partition", json={"name": "nmxm-lp", "siteId": site}
            ).json()
            vpc = client.post(
                f"{base}/vpc", json={"name": "nmxm-vpc", "siteId": site, "nvLinkLogicalPartitionId": lp["id"]}
            ).json()
            subnet = client.post(f"{base}/subnet", json={"name": "nmxm-subnet", "vpcId": vpc["id"]}).json()
            created = client.post(
                f"{base}/instance",
                json={
                    "name": "nmxm-instance",
                    "instanceTypeId": itype,
                    "vpcId": vpc["id"],
                    "ipxeScript": "#!ipxe",
                    "interfaces": [{"subnetId": subnet["id"]}],
                },
            )

            assert created.status_code == 201, created.text
            deadline = time.monotonic() + DEADLINE
            while client.get(f"{base}/instance/{created.json()['id']}").json()["status"] != "Ready":
                assert time.monotonic() < deadline, demo.output()
                time.sleep(POLL)
            text = client.get("/metrics").text
            assert (
                metric(
                    text,
                    "nico_nvlink_partition_monitor_nmxm_changes_applied_total",
                    operation="create",
                    status="completed",
                )
                == 1.0
            )
    finally:
        assert demo.stop() == 0, demo.output()
    assert (tmp_path / "data" / "demo-fabric-nmxm.json").exists()


def checkout_nico(directory: Path) -> Path:
    """A ``nico`` executable, as a virtualenv's console script is, that runs this checkout's code with
    this interpreter: the demo started as it learns its own path, like one started from a virtualenv."""
    directory.mkdir()
    script = directory / "nico"
    checkout = str(Path(__file__).resolve().parents[2])
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {checkout!r})\n"
        "from nico.cli import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return script


def test_the_walkthrough_runs_twice_in_a_shell_with_only_what_the_demo_printed(tmp_path: Path) -> None:
    """A second terminal without the virtualenv: PATH holds only the system's directories (curl,
    python3), the rest comes from the banner's lines. The block runs, then runs again as it is (its
    names carry the run), each run filling one more rack."""
    nico_bin = checkout_nico(tmp_path / "venv-bin")
    demo = DemoProcess(tmp_path / "data", "--racks", "2", command=(str(nico_bin),)).start()
    try:
        assert f"export PATH={nico_bin.parent}:" in demo.output(), demo.output()
        bare = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
        assert subprocess.run(["bash", "-c", "command -v nico"], env=bare).returncode != 0
        first = walkthrough_after_exports(demo, bare)
        ended = int(time.time())
        while int(time.time()) == ended:  # the block names its objects after the second it starts in
            time.sleep(POLL)
        second = walkthrough_after_exports(demo, bare)
        assert "already exists" not in first.stderr + second.stderr
        with httpx.Client(base_url=demo.url, headers={"Authorization": f"Bearer {demo.token}"}) as client:
            partitions = client.get("/v2/org/demo/nico/nvlink-logical-partition").json()
            instances = client.get("/v2/org/demo/nico/instance", params={"pageSize": 100}).json()
        assert len({p["name"] for p in partitions}) == 2, partitions
        assert [i["status"] for i in instances] == ["Ready"] * 36
    finally:
        assert demo.stop() == 0, demo.output()
