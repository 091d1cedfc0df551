"""Tenant API benchmark: ``nico serve`` on embedded PostgreSQL, loaded by a separate process.

Measures, with one server and the same settings, at 1 and at 16 concurrent keep-alive clients:
(a) ``GET /healthz``, (b) ``GET /instance/{id}`` beside its baseline (b0), the same SQL on the same
pool served by a bare FastAPI app (``bare_instance_app.py``: nico's own GET statement, which writes the
response body, on a ``RawPool`` of the same size, with the checks any server of the endpoint must make:
the bearer token, cached until it expires, the caller's role, the instance's tenant; what it leaves
out is nico's framework: routers, dependencies, error envelopes, request guards),
(c) ``POST /nvlink-logical-partition``, (d) ``POST /instance/batch`` (count ``--batch`` (18),
topologyOptimized) on a site of ``--racks`` (200) racks of 18 machines with 4 GPUs each. Every
scenario runs ``--rounds`` times; (b) and (b0) take turns of one second within each round (the
machine is shared, the load drifts: both see the same drift). Prints the range of requests/s, p50
and p99, CPU per request of the server and of PostgreSQL, (b)/(b0) of each round and the load average.
Before each batch run every benchmark instance is removed in the database (the site starts empty
again); after it the benchmark counts double assignments (an instance left without a machine because
another took it, or a machine in two instances): it prints the total, which must be 0.

    python benchmarks/api_bench.py [--racks 200] [--seconds 5] [--rounds 2] [--scenarios abcd] [--batch 18]

Issue 15's batch figures: ``--scenarios d --racks 200`` (batches of 18), ``--scenarios d --racks 16
--batch 4`` (batches of 4 on 16 racks), ``--scenarios d --racks 2000 --rounds 1`` (one batch at
2,000 racks: the 1-client p50).

The load comes from ``wrk`` (C, one thread; Debian package ``wrk``), so the client costs the server
little of the machine's CPU.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_support import SECRET, UNLIMITED_QUOTAS, free_port, scratch_postgres, seed_site, server_env

CLIENTS = 16
ORG = "bench-org"


# ---------------------------------------------------------------- load generator: wrk

# wrk (Debian package ``wrk``) is the load generator: a C client on one thread, so the load costs the
# server little of the two cores it shares. The script numbers request bodies (``{n}``), counts status
# codes, stops after ``limit`` responses when given, and prints one JSON line with the figures.
_WRK_SCRIPT = """
local threads = {}
function setup(thread) table.insert(threads, thread); thread:set("tid", #threads) end
function init(args)
  n = 0; seen = 0; codes = {}; limit = tonumber(args[1]) or 0; tag = args[2] or ""
  wrk.method = METHOD; wrk.headers["Authorization"] = TOKEN
  if BODY then wrk.headers["Content-Type"] = "application/json" end
end
function request()
  n = n + 1
  local body = nil
  if BODY then body = BODY:gsub("{n}", tag .. tid .. "-" .. n) end
  return wrk.format(nil, nil, nil, body)
end
function response(status, headers, body)
  codes[tostring(status)] = (codes[tostring(status)] or 0) + 1
  seen = seen + 1
  if limit > 0 and seen >= limit then wrk.thread:stop() end
end
function done(summary, latency, requests)
  local parts = {}
  local all = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("codes")) do all[k] = (all[k] or 0) + v end
  end
  for k, v in pairs(all) do table.insert(parts, string.format('"%s": %d', k, v)) end
  io.write(string.format(
    'WRK {"requests": %d, "seconds": %f, "p50": %f, "p99": %f, "errors": %d, "codes": {%s}}\\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    table.concat(parts, ", ")))
end
"""


_RUNS = itertools.count()  # numbers each wrk run, so bodies stay unique across runs (names must be)


def _lua_string(value: str) -> str:
    return "[==[" + value + "]==]"


def run_wrk(
    url: str,
    token: str,
    *,
    connections: int,
    seconds: float,
    method: str = "GET",
    body: str | None = None,
    limit: int = 0,
) -> dict[str, Any]:
    """Load ``url`` from wrk with ``connections`` keep-alive connections for ``seconds`` (or until
    ``limit`` responses); requests/s, p50 and p99 in ms, status codes."""
    header = (
        f"METHOD = {_lua_string(method)}\nTOKEN = {_lua_string('Bearer ' + token)}\n"
        f"BODY = {_lua_string(body) if body is not None else 'nil'}\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(header + _WRK_SCRIPT)
    try:
        done = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                "--timeout",
                "30s",
                "-s",
                script.name,
                url,
                "--",
                str(limit),
                f"r{next(_RUNS)}-",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        os.unlink(script.name)
    line = next(x for x in done.stdout.splitlines() if x.startswith("WRK "))
    result: dict[str, Any] = json.loads(line[4:])
    result["rps"] = result["requests"] / result["seconds"]
    result["codes"] = {int(k): v for k, v in result["codes"].items()}
    return result


# ---------------------------------------------------------------- the servers


def cpu_seconds(server_pid: int, postmaster_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the nico server and by this benchmark's PostgreSQL (its postmaster
    and backends: other PostgreSQL servers on a shared machine are not counted)."""
    import psutil

    totals = {"server": 0.0, "postgres": 0.0}
    for name, pid in (("server", server_pid), ("postgres", postmaster_pid)):
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            totals[name] += times.user + times.system
    return totals


def wait_ready(port: int, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"nico serve exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if b" 200 " in conn.recv(64):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("nico serve did not become ready")


def wait_ready_path(
    port: int, process: subprocess.Popen[bytes], path: str, token: str, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    request = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(request.encode())
                if conn.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("the bare app did not become ready")


def http(port: int, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> Any:
    import httpx

    response = httpx.request(
        method, f"http://127.0.0.1:{port}{path}", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    response.raise_for_status()
    return response.json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--scenarios", default="abcd", help="which scenarios to run, e.g. ab")
    parser.add_argument("--rounds", type=int, default=2, help="repeat every scenario, baselines alongside")
    parser.add_argument("--batch", type=int, default=18, help="instances per batch in scenario d")
    args = parser.parse_args()

    from nico.api.auth import issue_dev_token
    from nico.config import load_settings
    from nico.db import migrate

    load_at_start = _load_average()
    data_dir, url = scratch_postgres("nico-bench-", "nico_bench")
    migrate.upgrade(url)
    ids = seed_site(url, args.racks, ORG)
    port = free_port()
    # A pool as large as the concurrency: overflow connections are closed on return, so a
    # smaller pool would open (fork a backend, re-plan statements) and close them all the time.
    env = server_env(url, data_dir, SECRET, NICO_DB_POOL_SIZE=str(CLIENTS), **UNLIMITED_QUOTAS)
    nico = str(Path(sys.executable).with_name("nico"))
    server = subprocess.Popen([nico, "serve", "--no-reconciler", "--port", str(port)], env=env)
    try:
        wait_ready(port, server)
        settings = load_settings(data_dir=data_dir, auth={"hs256_secret": SECRET})
        token = issue_dev_token(settings, org=ORG, roles=["TENANT_ADMIN"])
        base = f"/v2/org/{ORG}/nico"
        instance = http(
            port,
            "POST",
            f"{base}/instance",
            token,
            {
                "name": "bench-get",
                "instanceTypeId": ids["type"],
                "vpcId": ids["vpc"],
                "ipxeScript": "x",
                "interfaces": [{"subnetId": ids["subnet"]}],
            },
        )
        bare_port = free_port()
        bare = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("uvicorn")),
                "--app-dir",
                str(Path(__file__).parent),
                "bare_instance_app:app",
                "--port",
                str(bare_port),
                "--log-level",
                "warning",
            ],
            env=env,
        )
        try:
            wait_ready_path(bare_port, bare, f"{base}/instance/{instance['id']}", token)
            results = run_scenarios(
                args, port, bare_port, server.pid, bare.pid, token, base, ids, instance, url, data_dir
            )
        finally:
            bare.terminate()
            bare.wait(timeout=30)
    finally:
        server.terminate()
        server.wait(timeout=30)
    report(results)
    print(f"load average (1, 5, 15 min) at the start: {load_at_start}, at the end: {_load_average()}")


@dataclass
class Harness:
    """What every measurement of a run shares: the options, the token, this run's PostgreSQL (its
    postmaster's pid, for CPU) and the results by scenario name, one entry per round."""

    args: argparse.Namespace
    token: str
    postmaster: int
    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def measure(
        self, name: str, url: str, pid: int, clients: int, reset: Callable[[], None] | None = None, **kw: Any
    ) -> None:
        """A warm-up, then ``--seconds`` of load; CPU per request of the server ``pid`` and PostgreSQL."""
        warm = {**kw, "limit": clients} if "body" in kw else kw
        run_wrk(url, self.token, connections=clients, seconds=1, **warm)
        if reset is not None:
            reset()
        before = cpu_seconds(pid, self.postmaster)
        r = run_wrk(url, self.token, connections=clients, seconds=self.args.seconds, **kw)
        after = cpu_seconds(pid, self.postmaster)
        r["cpu_ms"] = {w: (after[w] - before[w]) * 1000 / max(r["requests"], 1) for w in after}
        self.results.setdefault(name, []).append(r)

    def measure_side_by_side(self, pair: list[tuple[str, str, int]], clients: int) -> None:
        """A figure and its baseline in turns of one second, ``--seconds`` turns each (who goes first
        alternates by round): on a shared machine the load drifts, and both then see the same drift.
        req/s and CPU are over all turns; p50 and p99 are the medians of the turns' own."""
        for _, url, _ in pair:
            run_wrk(url, self.token, connections=clients, seconds=1)
        turns: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in pair}
        cpu = {name: {"server": 0.0, "postgres": 0.0} for name, _, _ in pair}
        for _ in range(max(1, round(self.args.seconds))):
            for name, url, pid in pair:
                before = cpu_seconds(pid, self.postmaster)
                turns[name].append(run_wrk(url, self.token, connections=clients, seconds=1))
                after = cpu_seconds(pid, self.postmaster)
                for w in after:
                    cpu[name][w] += after[w] - before[w]
        for name, _, _ in pair:
            self.results.setdefault(name, []).append(_over_turns(turns[name], cpu[name]))


def _over_turns(done: list[dict[str, Any]], cpu: dict[str, float]) -> dict[str, Any]:
    """One figure from its turns: requests, req/s and CPU over all of them, p50 and p99 their medians."""
    requests = sum(t["requests"] for t in done)
    codes: dict[int, int] = {}
    for t in done:
        for code, n in t["codes"].items():
            codes[code] = codes.get(code, 0) + n
    return {
        "requests": requests,
        "seconds": sum(t["seconds"] for t in done),
        "rps": requests / sum(t["seconds"] for t in done),
        "p50": statistics.median(t["p50"] for t in done),
        "p99": statistics.median(t["p99"] for t in done),
        "codes": codes,
        "cpu_ms": {w: v * 1000 / max(requests, 1) for w, v in cpu.items()},
    }


def run_scenarios(
    args: argparse.Namespace,
    port: int,
    bare_port: int,
    server_pid: int,
    bare_pid: int,
    token: str,
    base: str,
    ids: dict[str, str],
    instance: dict[str, Any],
    database_url: str,
    data_dir: Path,
) -> dict[str, list[dict[str, Any]]]:
    """Every scenario ``--rounds`` times, a figure and its baseline back to back in each round."""
    nico_url, bare_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{bare_port}"
    get_path = f"{base}/instance/{instance['id']}"
    postmaster = int((data_dir / "postgres" / "postmaster.pid").read_text().split()[0])
    harness = Harness(args, token, postmaster)
    for round_number in range(args.rounds):
        for clients in (1, CLIENTS):
            if "a" in args.scenarios:
                harness.measure(f"(a) GET /healthz, {clients} cl", nico_url + "/healthz", server_pid, clients)
            if "b" in args.scenarios:
                pair = [
                    (f"(b0) bare app GET, {clients} cl", bare_url + get_path, bare_pid),
                    (f"(b) GET /instance/{{id}}, {clients} cl", nico_url + get_path, server_pid),
                ]
                harness.measure_side_by_side(pair if round_number % 2 == 0 else pair[::-1], clients)
        if "c" in args.scenarios:
            lp = json.dumps({"name": "lp-{n}", "siteId": ids["site"]})
            for clients in (1, CLIENTS):
                url = nico_url + f"{base}/nvlink-logical-partition"
                harness.measure(
                    f"(c) POST LP, {clients} cl", url, server_pid, clients, method="POST", body=lp
                )
        if "d" in args.scenarios:
            run_batches(
                harness, nico_url + f"{base}/instance/batch", server_pid, ids, database_url, instance["id"]
            )
    return harness.results


def run_batches(
    harness: Harness, url: str, server_pid: int, ids: dict[str, str], database_url: str, keep: str
) -> None:
    """Scenario (d) at 1 and :data:`CLIENTS` clients, each run from an empty site, then the double
    assignments counted."""
    args = harness.args
    batch = json.dumps(
        {
            "namePrefix": "b{n}",
            "count": args.batch,
            "instanceTypeId": ids["type"],
            "vpcId": ids["vpc"],
            "ipxeScript": "x",
            "interfaces": [{"subnetId": ids["subnet"]}],
            "topologyOptimized": True,
        }
    )
    # Batches fill the site: each run starts from an empty site and stops before it is full (a
    # request in flight per client after the limit).
    batches_per_run = ((args.racks * 18 - 1) // args.batch) - 2 * CLIENTS
    for clients, limit in ((1, min(batches_per_run, 40)), (CLIENTS, batches_per_run)):
        if limit <= 0:
            continue
        name = f"(d) POST batch x{args.batch}, {clients} cl"
        harness.measure(
            name,
            url,
            server_pid,
            clients,
            method="POST",
            body=batch,
            limit=limit,
            reset=lambda: empty_site(database_url, keep),
        )
        harness.results[name][-1]["double"] = double_assignments(database_url)


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def empty_site(url: str, keep: str) -> None:
    """Remove every instance but ``keep`` (the GET scenario's) in the database: their machines are
    free again (the machine's ON DELETE SET NULL)."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute("DELETE FROM instance WHERE id <> %s", (keep,))


def double_assignments(url: str) -> int:
    """Instances left without a machine (another instance took theirs) plus machines held by two
    instances (impossible while ``machine.instance_id`` is UNIQUE, counted anyway)."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM instance i WHERE NOT EXISTS ("
            "           SELECT 1 FROM machine m WHERE m.instance_id = i.id))"
            "     + (SELECT count(*) FROM (SELECT instance_id FROM machine WHERE instance_id IS NOT NULL"
            "                              GROUP BY instance_id HAVING count(*) > 1) twice)"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _range(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if len(values) == 1 or f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}}-{hi:{fmt}}"


def report(results: dict[str, list[dict[str, Any]]]) -> None:
    print(
        f"{'scenario (wrk, ranges over rounds)':34} {'req/s':>13} {'p50 ms':>13} {'p99 ms':>13}"
        f"  {'CPU ms/req server':>17} {'postgres':>9}  status codes"
    )
    for name, runs in results.items():
        codes: dict[int, int] = {}
        for r in runs:
            for code, n in r["codes"].items():
                codes[code] = codes.get(code, 0) + n
        print(
            f"{name:34} {_range([r['rps'] for r in runs], '.0f'):>13}"
            f" {_range([r['p50'] for r in runs], '.2f'):>13}"
            f" {_range([r['p99'] for r in runs], '.2f'):>13}"
            f"  {_range([r['cpu_ms']['server'] for r in runs], '.2f'):>17}"
            f" {_range([r['cpu_ms']['postgres'] for r in runs], '.2f'):>9}  {codes}"
        )
    for clients in (1, CLIENTS):
        b, b0 = (
            results.get(f"(b) GET /instance/{{id}}, {clients} cl"),
            results.get(f"(b0) bare app GET, {clients} cl"),
        )
        if b and b0:
            ratios = [x["rps"] / y["rps"] for x, y in zip(b, b0, strict=True)]
            print(
                f"(b)/(b0) req/s, {clients} client(s): {', '.join(f'{r:.2f}' for r in ratios)} by round"
                "   (aim >= 0.9)"
            )
            # The server CPU each request costs moves less with the machine's load than req/s does.
            cpu = [y["cpu_ms"]["server"] / x["cpu_ms"]["server"] for x, y in zip(b, b0, strict=True)]
            print(
                f"(b0)/(b) server CPU per request, {clients} client(s): "
                f"{', '.join(f'{r:.2f}' for r in cpu)} by round"
            )
    for name, runs in results.items():
        if name.startswith("(d)"):
            print(
                f"{name}: p50 {_range([r['p50'] for r in runs], '.1f')} ms   (aim <= 100 ms at 16 clients),"
                f" 5xx {sum(n for r in runs for c, n in r['codes'].items() if c >= 500)},"
                f" double assignments {sum(r['double'] for r in runs)}"
            )


if __name__ == "__main__":
    main()
