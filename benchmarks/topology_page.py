"""The topology page at the largest sites: ``nico serve --no-reconciler`` on a site of N NVL72 racks
(a quarter of the machines holding converged instances, seeded straight into the database), then

* the API's pages, each request timed on a keep-alive connection: every page of
  ``GET /nvlink-topology/overview`` (100 domains a page), pages of ``GET /nvlink-topology`` (20 and 100
  domains: first, middle, last) and one domain (``nvLinkDomainId``, the page's drill-in);
* the page in headless Chromium: from navigation start to the site overview drawn (every page of the
  overview read and one cell per domain on screen: the page's ``nico:overview-drawn`` mark), and to
  one domain's trays drawn (``nico:domain-drawn``), each over fresh loads;
* the lists beside them: the first, middle and last page of 100 of the tenant's instances, NVLink
  interfaces, logical partitions and VPCs and of the provider's machines, and the scheduler export
  (``/nvlink-topology/export``) of the tenant and of the provider: pages of 100 nodes of the node
  formats, and every format whole.

    python benchmarks/topology_page.py [--racks 200 2000] [--repeat 3] [--no-browser] [--keep DIR]

``--keep DIR`` keeps the embedded PostgreSQL and its seeded sites in DIR: a later run with the same DIR
measures the site seeded there (warm OS cache, no seeding), so two checkouts can be compared on one
site run by run.

Needs Chromium and chromedriver (Debian packages ``chromium``, ``chromium-driver``) and selenium (the
test extra). Uses ``NICO_DATABASE_URL`` (a server where the user may create databases) or an embedded
PostgreSQL in a temporary directory. Aims: every API page ≤ 100 ms, the overview drawn ≤ 2 s at 2,000
racks.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
from bench_support import (
    RACK_TRAYS,
    SECRET,
    database_server,
    free_port,
    fresh_database,
    headers_of,
    scratch_postgres,
    seed_converged,
    server_env,
)
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from nico.sim.fabric import SimFabric

TENANT = "bench-tenant"  # seed_converged's tenant
PROVIDER = "bench-provider"  # and its provider
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
)


def seed(url: str, racks: int) -> None:
    """The converged site, the tenant's right to see it (its site link), then what autovacuum does on a
    live site soon after such a change: the planner's statistics, and the visibility map. Rows just
    copied in are on pages not yet marked all-visible, so every index-only scan of the lists fetched
    each row from the table (the interface and machine pages at 2-4x their time on a vacuumed site),
    and autovacuum woke a minute after the seeding to vacuum 720,000 GPU rows while the pages were
    being measured (its CPU counted as PostgreSQL's per request)."""
    import psycopg

    from nico.db.engine import libpq_url

    seed_converged(url, SimFabric(racks=racks, seed=racks))
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tenant_site (tenant_id, site_id) "
            "SELECT tenant.id, site.id FROM tenant, site WHERE tenant.org = %s",
            (TENANT,),
        )
        conn.execute("VACUUM (ANALYZE)")


def timed(client: httpx.Client, path: str, **params: str | int) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = client.get(path, params=params)
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.text
    return elapsed, response


class Cpu:
    """CPU ms used by the nico server and by the benchmark's own PostgreSQL (postmaster and backends;
    none when ``NICO_DATABASE_URL`` names a server shared with others), between two readings."""

    def __init__(self, server_pid: int, postmaster_pid: int | None) -> None:
        self.pids = [server_pid] + ([postmaster_pid] if postmaster_pid else [])

    def now(self) -> float:
        total = 0.0
        for pid in self.pids:
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = proc.cpu_times()
                    total += times.user + times.system
        return total * 1000


def api_pages(client: httpx.Client, repeat: int, cpu: Cpu) -> tuple[list[str], str]:
    """The printed lines of the API's page times and CPU (ms), and one domain's id."""
    lines = []
    overview: list[float] = []
    first_domain = ""
    before = cpu.now()
    for _ in range(repeat):
        number, total = 1, 1
        while (number - 1) * 100 < total:
            ms, response = timed(client, "/nvlink-topology/overview", pageSize=100, pageNumber=number)
            total = json.loads(response.headers["X-Pagination"])["total"]
            first_domain = first_domain or response.json()[0]["id"]
            overview.append(ms)
            number += 1
    used = (cpu.now() - before) / len(overview)
    lines.append(figure(f"overview, {len(overview) // repeat} pages of 100 domains", overview, used))
    for size in (20, 100):
        last = (total + size - 1) // size
        pages = sorted({1, (last + 1) // 2, last})
        before = cpu.now()
        times = [
            timed(client, "/nvlink-topology", pageSize=size, pageNumber=p)[0]
            for _ in range(repeat)
            for p in pages
        ]
        used = (cpu.now() - before) / len(times)
        pages_read = ", ".join(map(str, pages))
        lines.append(figure(f"topology, {size} domains a page (pages {pages_read})", times, used))
    before = cpu.now()
    one = [timed(client, "/nvlink-topology", nvLinkDomainId=first_domain)[0] for _ in range(repeat)]
    lines.append(figure("topology, one domain (the drill-in)", one, (cpu.now() - before) / repeat))
    return lines, first_domain


LISTS = ("/instance", "/nvlink-interface", "/nvlink-logical-partition", "/vpc")
PROVIDER_LISTS = ("/machine",)
EXPORTS = ("kubernetes-labels", "slurm-topology-conf", "slurm-topology-yaml", "kueue-topology")
PAGED_EXPORTS = ("kubernetes-labels", "kubectl-labels")


def export_pages(client: httpx.Client, scope: str, fmt: str) -> list[int]:
    """The first, middle and last page of 100 nodes of an export."""
    _, response = timed(client, "/nvlink-topology/export", format=fmt, scope=scope, pageSize=100)
    last = max(1, (json.loads(response.headers["X-Pagination"])["total"] + 99) // 100)
    return sorted({1, (last + 1) // 2, last})


def list_pages(clients: dict[str, httpx.Client], repeat: int, cpu: Cpu) -> list[str]:
    """The printed lines of each list endpoint's first, middle and last page of 100 (the tenant's lists,
    the provider's machines), and of the exports at both scopes: the node formats' first, middle and last
    page of 100 nodes, and each format whole (one document)."""
    lines = []
    for who, paths in (("tenant", LISTS), ("provider", PROVIDER_LISTS)):
        for path in paths:
            _, response = timed(clients[who], path, pageSize=100)
            total = json.loads(response.headers["X-Pagination"])["total"]
            last = max(1, (total + 99) // 100)
            pages = sorted({1, (last + 1) // 2, last})
            before = cpu.now()
            times = [
                timed(clients[who], path, pageSize=100, pageNumber=p)[0] for _ in range(repeat) for p in pages
            ]
            used = (cpu.now() - before) / len(times)
            lines.append(
                figure(f"{who} {path}, {total:,} rows (pages {', '.join(map(str, pages))})", times, used)
            )
    for scope in ("tenant", "provider"):
        for fmt in PAGED_EXPORTS:
            pages = export_pages(clients[scope], scope, fmt)
            before = cpu.now()
            times = [
                timed(
                    clients[scope],
                    "/nvlink-topology/export",
                    format=fmt,
                    scope=scope,
                    pageSize=100,
                    pageNumber=p,
                )[0]
                for _ in range(repeat)
                for p in pages
            ]
            used = (cpu.now() - before) / len(times)
            shown = ", ".join(map(str, pages))
            lines.append(figure(f"{scope} export {fmt}, pages of 100 nodes ({shown})", times, used))
        for fmt in EXPORTS:
            before = cpu.now()
            answers = [
                timed(clients[scope], "/nvlink-topology/export", format=fmt, scope=scope)
                for _ in range(repeat)
            ]
            used = (cpu.now() - before) / repeat
            size = len(answers[0][1].content)
            lines.append(
                figure(f"{scope} export {fmt}, whole, {size / 1e6:.1f} MB", [t for t, _ in answers], used)
            )
    return lines


def figure(what: str, times: list[float], cpu: float | None = None) -> str:
    spent = f"  CPU {cpu:6.1f} ms a request" if cpu is not None else ""
    return f"  {what:<52} p50 {statistics.median(times):7.1f} ms  max {max(times):7.1f} ms{spent}"


def page_loads(page: str, mark: str, repeat: int) -> list[float]:
    """ms from navigation start to ``mark`` over ``repeat`` fresh loads of ``page``."""
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (*CHROMIUM_FLAGS, "--window-size=1360,1000", f"--user-data-dir={tempfile.mkdtemp()}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    read = (
        f"const m = performance.getEntriesByName('{mark}', 'mark'); return m.length ? m[0].startTime : null"
    )
    loads = []
    try:
        for _ in range(repeat + 1):  # the first load warms Chromium's caches and is not counted
            driver.get("about:blank")
            driver.get(page)
            deadline = time.monotonic() + 120
            while (drawn := driver.execute_script(read)) is None:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{mark} not reached in 120 s")
                time.sleep(0.05)
            loads.append(float(drawn))
    finally:
        driver.quit()
    return loads[1:]


def seeded_site(server: str, racks: int, keep: bool) -> str:
    """The URL of the site of ``racks`` racks: seeded now, or (``keep``) the one seeded by an earlier
    run on this server, migrated to this checkout's head."""
    import psycopg
    from sqlalchemy.engine import make_url

    from nico.db import migrate
    from nico.db.engine import libpq_url

    name = f"nico_topology_page_{racks}"
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    if keep:
        with psycopg.connect(libpq_url(server), autocommit=True) as conn:
            there = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if there:
            with psycopg.connect(libpq_url(url)) as conn:
                row = conn.execute("SELECT count(*) FROM machine").fetchone()
            if row and row[0] == racks * RACK_TRAYS:
                migrate.upgrade(url)
                print(f"{racks} racks ({racks * 72:,} GPUs): the site kept from an earlier run")
                return url
    url = fresh_database(server, name)
    started = time.monotonic()
    seed(url, racks)
    print(f"{racks} racks ({racks * 72:,} GPUs): seeded in {time.monotonic() - started:.1f} s")
    return url


def measure(server: str, postmaster: int | None, racks: int, repeat: int, browser: bool, keep: bool) -> None:
    url = seeded_site(server, racks, keep)
    print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="nico-topology-page-"))
    command = [sys.executable, "-m", "nico.cli", "serve", "--no-reconciler", "--port", str(port)]
    process = subprocess.Popen(command, env=server_env(url, data, SECRET))
    headers = headers_of(url, TENANT, "TENANT_ADMIN")
    provider = headers_of(url, PROVIDER, "PROVIDER_ADMIN")
    try:
        base = f"http://127.0.0.1:{port}"
        with (
            httpx.Client(base_url=f"{base}/v2/org/{TENANT}/nico", headers=headers, timeout=120) as client,
            httpx.Client(base_url=f"{base}/v2/org/{PROVIDER}/nico", headers=provider, timeout=120) as admin,
        ):
            wait_ready(client, process)
            cpu = Cpu(process.pid, postmaster)
            lines, domain = api_pages(client, repeat, cpu)
            print("\n".join(lines), flush=True)
            print("\n".join(list_pages({"tenant": client, "provider": admin}, repeat, cpu)), flush=True)
        if not browser:
            return
        page = f"{base}/#org={TENANT}&token={headers['Authorization'].removeprefix('Bearer ')}"
        overview = page_loads(page, "nico:overview-drawn", repeat)
        print(figure(f"page: overview drawn, {racks} cells ({repeat} loads)", overview))
        trays = page_loads(f"{page}&domain={domain}", "nico:domain-drawn", repeat)
        print(figure(f"page: one domain's trays drawn ({repeat} loads)", trays))
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_ready(client: httpx.Client, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"nico serve exited with {process.returncode}")
        try:
            if client.get("/nvlink-topology/overview", params={"pageSize": 1}).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("nico serve did not become ready")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true", help="the API's pages only, no Chromium")
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="an embedded PostgreSQL kept in DIR with its seeded sites"
    )
    args = parser.parse_args()
    postmaster = None
    if args.keep:
        from nico.db.embedded import start_embedded_postgres

        server = start_embedded_postgres(args.keep, "postgres")
        postmaster = int((args.keep / "postgres" / "postmaster.pid").read_text().split()[0])
    elif os.environ.get("NICO_DATABASE_URL"):
        server = database_server("nico-topology-page-pg-")
    else:
        data, server = scratch_postgres("nico-topology-page-pg-", "postgres")
        postmaster = int((data / "postgres" / "postmaster.pid").read_text().split()[0])
    for racks in args.racks:
        measure(server, postmaster, racks, args.repeat, not args.no_browser, args.keep is not None)


if __name__ == "__main__":
    main()
