// The NVLink topology page: reads org and token from the URL fragment (#org=...&token=..., which never
// reaches a server log) or the form. It opens on the site overview: GET <api>/nvlink-topology/overview,
// every page of it, drawn as one small cell per NVLink domain (free, yours, another tenant's, held,
// split partitions, unhealthy GPUs, errors); a cell links to its domain (#...&domain=<uuid>), drawn from
// GET <api>/nvlink-topology?nvLinkDomainId=<uuid> as its chassis of trays of GPUs. Both poll every 2 s
// (longer when a read takes long).
// Stable data-* attributes (data-domain, data-state, data-partition, data-status, data-observed,
// data-health, data-error, data-pending, and the cells' counts) say what is drawn. The first overview
// and domain drawn after a load are marked ("nico:overview-drawn", "nico:domain-drawn") for benchmarks.
"use strict";

const POLL_MS = 2000;
const PAGE_SIZE = 100; // the API's largest page
const apiTemplate = document.body.dataset.api; // "/v2/org/{org}/nico"
const $ = (selector) => document.querySelector(selector);
let timer = null;
let generation = 0;

function credentials() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { org: params.get("org") || "", token: params.get("token") || "", domain: params.get("domain") || "" };
}

function linkTo(domain) {
  // The current fragment with domain set (or dropped: back to the overview).
  const params = new URLSearchParams(location.hash.slice(1));
  if (domain) params.set("domain", domain);
  else params.delete("domain");
  return `#${params.toString()}`;
}

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === null || value === undefined) continue;
    if (key === "text") node.textContent = value;
    else if (key === "style") node.style.cssText = value;
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

function colors(partitions) {
  // Evenly spread hues in legend order (the API sorts partitions by name).
  const map = new Map();
  partitions.forEach((p, i) => map.set(p.id, `hsl(${Math.round((i * 360) / Math.max(partitions.length, 1) + 200) % 360} 62% 48%)`));
  return map;
}

function status(text, problem = false) {
  const node = $("#status");
  node.textContent = text;
  if (problem) node.dataset.problem = "true";
  else delete node.dataset.problem;
}

function gpuTitle(serial, tray, gpu) {
  const sick = gpu.health && gpu.health !== "HEALTHY" ? ` · NVLink ${gpu.health}` : "";
  const where = `${serial} tray ${tray.trayIndex} GPU ${gpu.deviceInstance}${sick}`;
  if (gpu.state === "free") return `${where}: free`;
  if (gpu.state === "other") return `${where}: in use by another tenant`;
  if (gpu.state === "held") return `${where}: held (its tray has GPUs in a partition another fabric manager made)`;
  const parts = [where, `instance ${gpu.instanceName}`];
  if (gpu.nvLinkLogicalPartitionId) {
    parts.push(`partition ${gpu.nvLinkLogicalPartitionName}`, gpu.status);
    parts.push(gpu.observed ? "seen on the fabric" : "not seen on the fabric yet");
  } else {
    parts.push("in no partition");
  }
  return parts.join(" · ");
}

function drawGpu(serial, tray, gpu, palette) {
  const color = gpu.nvLinkLogicalPartitionId ? palette.get(gpu.nvLinkLogicalPartitionId) : null;
  return el("span", {
    class: "gpu",
    "data-state": gpu.state,
    "data-partition": gpu.nvLinkLogicalPartitionId,
    "data-status": gpu.status,
    "data-observed": gpu.state === "mine" && gpu.nvLinkLogicalPartitionId ? String(gpu.observed) : null,
    "data-device": String(gpu.deviceInstance),
    "data-health": gpu.health && gpu.health !== "HEALTHY" ? gpu.health : null,
    style: color ? `--color: ${color}` : null,
    title: gpuTitle(serial, tray, gpu),
  });
}

function drawDomain(domain, palette) {
  const gpuCount = domain.chassis.reduce((n, c) => n + c.trays.reduce((m, t) => m + t.gpus.length, 0), 0);
  const facts = el("p", { class: "facts" },
    `${domain.siteName} · ${domain.chassis.length === 2 ? "NVL36x2" : "NVL72"} · ${gpuCount} GPUs`);
  if (domain.pending) facts.append(" · ", el("span", { class: "pending", text: `${domain.pending} Pending` }));
  const section = el("section", {
    class: "domain",
    "data-domain": domain.id,
    "data-error": String(Boolean(domain.error)),
    "data-pending": String(domain.pending),
    "data-without-home": String(domain.gpusWithoutHome || 0),
    "data-foreign": String(domain.foreignGpus || 0),
  },
  el("h2", {}, "NVLink domain ", el("small", { text: domain.id })),
  facts);
  if (domain.error) {
    section.append(el("p", { class: "problem", role: "alert",
      text: `reconciler error, ${domain.consecutiveFailures} failed pass(es): ${domain.error}` }));
  }
  if (domain.gpusWithoutHome) {
    section.append(el("p", { class: "problem", role: "alert",
      text: `${domain.gpusWithoutHome} GPU(s) in neither a tenant partition nor their home partition; the reconciler is putting them back` }));
  }
  if (domain.foreignGpus) {
    section.append(el("p", { class: "facts",
      text: `${domain.foreignGpus} GPU(s) in partitions another fabric manager made; nico keeps them whole and does not place their trays` }));
  }
  const row = el("div", { class: "chassis-row" });
  for (const chassis of domain.chassis) {
    const box = el("div", { class: "chassis", "data-chassis": chassis.chassisSerial },
      el("h3", { text: chassis.chassisSerial }));
    for (const tray of chassis.trays) {
      box.append(el("div", { class: "tray", "data-tray": String(tray.trayIndex) },
        el("b", { text: String(tray.trayIndex) }),
        ...tray.gpus.map((gpu) => drawGpu(chassis.chassisSerial, tray, gpu, palette))));
    }
    row.append(box);
  }
  section.append(row);
  return section;
}

function draw(topology) {
  const palette = colors(topology.nvLinkLogicalPartitions);
  const counts = new Map();
  for (const d of topology.domains) for (const c of d.chassis) for (const t of c.trays) for (const g of t.gpus) {
    if (g.nvLinkLogicalPartitionId) counts.set(g.nvLinkLogicalPartitionId, (counts.get(g.nvLinkLogicalPartitionId) || 0) + 1);
  }
  $("#partitions").replaceChildren(...topology.nvLinkLogicalPartitions.map((p) =>
    el("span", { class: "partition", "data-partition": p.id, title: p.id },
      el("i", { class: "swatch", style: `--color: ${palette.get(p.id)}` }),
      `${p.name} (${counts.get(p.id) || 0} GPUs)`,
      ...(p.split ? [el("strong", { class: "split", title: "its GPUs in different NVLink domains cannot share memory",
        text: `split over ${p.nvLinkDomainIds.length} NVLink domains` })] : []))));
  const domains = topology.domains.map((d) => drawDomain(d, palette));
  $("#domains").replaceChildren(...(domains.length ? domains
    : [el("p", { class: "empty", text: "No NVLink domains at this org's sites (no allocation yet?)." })]));
}

function cellTitle(cell) {
  const lines = [`NVLink domain ${cell.id}`,
    `${cell.siteName} · ${cell.gpus} GPUs: ${cell.free} free, ${cell.mine} yours, ${cell.other} another tenant's` +
      (cell.held ? `, ${cell.held} held` : "")];
  if (cell.pending) lines.push(`${cell.pending} of yours Pending`);
  if (cell.nvLinkLogicalPartitions) {
    lines.push(`${cell.nvLinkLogicalPartitions} of your partitions` +
      (cell.splitNvLinkLogicalPartitions ? `, ${cell.splitNvLinkLogicalPartitions} split over NVLink domains` : ""));
  }
  if (cell.unhealthy) lines.push(`${cell.unhealthy} GPU(s) with NVLink not healthy`);
  if (cell.foreignGpus) lines.push(`${cell.foreignGpus} GPU(s) in partitions another fabric manager made`);
  if (cell.gpusWithoutHome) lines.push(`${cell.gpusWithoutHome} GPU(s) out of their home partition`);
  if (cell.error) lines.push(`reconciler error, ${cell.consecutiveFailures} failed pass(es): ${cell.error}`);
  return lines.join("\n");
}

function drawCell(cell) {
  // A stacked bar from the bottom: yours, another tenant's, held; the rest is free.
  const share = (n) => (cell.gpus ? (100 * n) / cell.gpus : 0);
  const mine = share(cell.mine);
  const other = mine + share(cell.other);
  const held = other + share(cell.held);
  return el("a", {
    class: "cell",
    href: linkTo(cell.id),
    "data-domain": cell.id,
    "data-gpus": String(cell.gpus),
    "data-free": String(cell.free),
    "data-mine": String(cell.mine),
    "data-other": String(cell.other),
    "data-held": String(cell.held),
    "data-pending": String(cell.pending),
    "data-unhealthy": String(cell.unhealthy),
    "data-split": String(cell.splitNvLinkLogicalPartitions),
    "data-foreign": String(cell.foreignGpus),
    "data-error": String(Boolean(cell.error || cell.gpusWithoutHome)),
    style: `--m: ${mine.toFixed(1)}%; --o: ${other.toFixed(1)}%; --h: ${held.toFixed(1)}%`,
    title: cellTitle(cell),
  });
}

function drawOverview(cells) {
  const sites = new Map();
  for (const cell of cells) {
    if (!sites.has(cell.siteId)) sites.set(cell.siteId, { name: cell.siteName, cells: [] });
    sites.get(cell.siteId).cells.push(cell);
  }
  const sum = (key) => cells.reduce((n, c) => n + c[key], 0);
  const failing = cells.filter((c) => c.error).length;
  const facts = el("p", { class: "facts" },
    `${cells.length} NVLink domains · ${sum("gpus")} GPUs: ${sum("free")} free, ${sum("mine")} yours, ` +
    `${sum("other")} another tenant's, ${sum("held")} held`);
  if (sum("unhealthy")) facts.append(" · ", el("span", { class: "sick", text: `${sum("unhealthy")} NVLink not healthy` }));
  if (sum("pending")) facts.append(" · ", el("span", { class: "pending", text: `${sum("pending")} Pending` }));
  if (failing) facts.append(" · ", el("span", { class: "failing", text: `${failing} domain(s) failing` }));
  const drawn = [...sites.entries()].map(([id, site]) => el("section", { class: "site", "data-site": id },
    el("h2", { text: site.name }, el("small", { text: ` ${site.cells.length} NVLink domains` })),
    el("div", { class: "cells" }, ...site.cells.map(drawCell))));
  $("#overview").replaceChildren(...(cells.length ? [facts, ...drawn]
    : [el("p", { class: "empty", text: "No NVLink domains at this org's sites (no allocation yet?)." })]));
}

class Refused extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function get(path, token) {
  const response = await fetch(path, { headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
  if (response.status === 401 || response.status === 403) {
    const body = await response.json().catch(() => ({}));
    throw new Refused(response.status, body.message || "not allowed");
  }
  if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
  return response;
}

async function overview(base, token) {
  // Every page of the overview: the first says how many there are, the rest are read side by side.
  const url = (page) => `${base}/nvlink-topology/overview?pageSize=${PAGE_SIZE}&pageNumber=${page}`;
  const first = await get(url(1), token);
  const total = JSON.parse(first.headers.get("X-Pagination") || "{}").total || 0;
  const rest = [];
  for (let page = 2; (page - 1) * PAGE_SIZE < total; page += 1) rest.push(get(url(page), token).then((r) => r.json()));
  return [await first.json(), ...(await Promise.all(rest))].flat();
}

function mark(name) {
  // Once per load, after the frame that shows the drawing (the callback runs before that frame's
  // paint, the timeout after it).
  if (performance.getEntriesByName(name, "mark").length) return;
  requestAnimationFrame(() => setTimeout(() => {
    if (!performance.getEntriesByName(name, "mark").length) performance.mark(name);
  }));
}

async function poll(run) {
  const began = performance.now();
  const { org, token, domain } = credentials();
  const base = apiTemplate.replace("{org}", encodeURIComponent(org));
  try {
    if (domain) {
      const response = await get(`${base}/nvlink-topology?nvLinkDomainId=${encodeURIComponent(domain)}`, token);
      const topology = await response.json();
      if (run !== generation) return;
      draw(topology);
      mark("nico:domain-drawn");
    } else {
      const cells = await overview(base, token);
      if (run !== generation) return;
      drawOverview(cells);
      mark("nico:overview-drawn");
    }
    status(`org ${org} · updated ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    if (run !== generation) return;
    if (error instanceof Refused) {
      status(`${error.status}: ${error.message}; check the org and token`, true);
      $("#login").hidden = false;
      return;
    }
    status(`cannot reach nico: ${error.message}; retrying`, true);
  }
  // A large site's overview takes many pages: wait at least twice as long as they took, so an open
  // page never keeps the API busy more than a third of the time.
  timer = setTimeout(() => poll(run), Math.max(POLL_MS, 2 * (performance.now() - began)));
}

function start() {
  clearTimeout(timer);
  generation += 1;
  const { org, token, domain } = credentials();
  const form = $("#login");
  form.org.value = org;
  document.body.dataset.view = domain ? "domain" : "overview";
  $("#back").href = linkTo(null);
  if (!domain) $("#domains").replaceChildren();
  if (!org || !token) {
    form.hidden = false;
    status("enter a tenant org and a token (nico token --org ORG)");
    return;
  }
  form.hidden = true;
  poll(generation);
}

$("#login").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  location.hash = new URLSearchParams({ org: form.org.value.trim(), token: form.token.value.trim() }).toString();
});
window.addEventListener("hashchange", start);
start();
