// The NVLink topology page: reads org and token from the URL fragment (#org=...&token=..., which never
// reaches a server log) or the form, polls GET <api>/nvlink-topology every 2 s and draws each NVLink
// domain as its chassis of trays of GPUs. Stable data-* attributes (data-domain, data-state,
// data-partition, data-status, data-observed, data-health, data-error, data-pending) say what is drawn.
"use strict";

const POLL_MS = 2000;
const apiTemplate = document.body.dataset.api; // "/v2/org/{org}/nico"
const $ = (selector) => document.querySelector(selector);
let timer = null;
let generation = 0;

function credentials() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { org: params.get("org") || "", token: params.get("token") || "" };
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

async function poll(run) {
  const { org, token } = credentials();
  const url = apiTemplate.replace("{org}", encodeURIComponent(org)) + "/nvlink-topology";
  try {
    const response = await fetch(url, { headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
    if (run !== generation) return;
    if (response.status === 401 || response.status === 403) {
      const body = await response.json().catch(() => ({}));
      status(`${response.status}: ${body.message || "not allowed"}; check the org and token`, true);
      $("#login").hidden = false;
      return;
    }
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    draw(await response.json());
    status(`org ${org} · updated ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    if (run !== generation) return;
    status(`cannot reach nico: ${error.message}; retrying`, true);
  }
  timer = setTimeout(() => poll(run), POLL_MS);
}

function start() {
  clearTimeout(timer);
  generation += 1;
  const { org, token } = credentials();
  const form = $("#login");
  form.org.value = org;
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
