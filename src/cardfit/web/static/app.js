// cardfit web page: a form whose values live in the URL hash, sent to the JSON API, drawn as tables and SVG.
"use strict";

const $ = (id) => document.getElementById(id);
const FIELDS = ["model", "quant", "context", "batch", "runtime", "release", "kv_dtype", "gpu", "gpus", "api", "tokens_per_s",
  "params", "layers", "kv_heads", "head_dim", "hidden", "vocab", "speculative", "speculative_topk",
  "speculative_draft_tokens", "kv_offload_gb"];
const PLAN_FIELDS = ["model", "quant", "context", "batch", "runtime", "kv_dtype", "gpu", "gpus", "api",
  "params", "layers", "kv_heads", "head_dim", "hidden", "vocab", "speculative", "speculative_topk",
  "speculative_draft_tokens", "kv_offload_gb"];
const FLOATS = new Set(["params", "tokens_per_s", "kv_offload_gb"]);
const INTS = new Set(["context", "batch", "gpus", "layers", "kv_heads", "head_dim", "hidden", "vocab",
  "speculative_topk", "speculative_draft_tokens"]);
// the "Serve a load" inputs: page id -> `cardfit deploy` option (its defaults come from the API's schema)
const DEPLOY_FIELDS = { "d-users": "users", "d-rate": "requests_per_s", "d-input": "input_tokens",
  "d-output": "output_tokens", "d-ttft": "ttft_ms", "d-tpot": "tpot_ms", "d-runtime": "runtime",
  "d-prefix": "shared_prefix_tokens", "d-prefix-groups": "prefix_groups", "d-turns": "turns", "d-sessions": "sessions", "d-cards": "cards" };
const TARGET_WORDS = { ttft_ms: "TTFT p90", tpot_ms: "TPOT" };  // deploy's `failing.target`, as the CLI says it
const SVGNS = "http://www.w3.org/2000/svg";
const TOP = 12;  // cards in the chart and, until "show more", in the table
let endpoints = new Set();
let apiCatalog = [];
let seq = 0;
let uploaded = null;  // the parsed config.json of an upload: sent with each request until a model is typed
let deploySeq = 0;
let deployShownFor = null;  // the request body of the deployment on screen (null: none shown)

// ---- formatting (the CLI's units: GB = 1e9 bytes) ------------------------------------------------------
const gb = (b) => (b === null || b === undefined) ? "—" : (b / 1e9).toFixed(2).replace(/^-(0\.00)$/, "$1") + " GB";
const num = (x, d = 0) => (x === null || x === undefined) ? "—" :
  Number(x).toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
const usd = (x) => (x === null || x === undefined) ? "—" : "$" + num(x, 0);

// ---- the API -------------------------------------------------------------------------------------------
async function api(path, body) {
  const opts = body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body) };
  const r = await fetch(path, opts);
  const data = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
  if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
  return data;
}

function values() {
  const v = {};
  for (const f of FIELDS) {
    const raw = $(f).value.trim();
    if (raw === "") continue;
    v[f] = FLOATS.has(f) ? Number(raw) : INTS.has(f) ? Math.round(Number(raw)) : raw;
  }
  return v;
}

function planBody(v) {
  const body = {};
  for (const f of PLAN_FIELDS) if (v[f] !== undefined) body[f] = v[f];
  if (body.runtime && v.release) body.runtime += "@" + v.release;  // --runtime NAME@RELEASE
  const shape = ["params", "layers", "kv_heads", "head_dim", "hidden", "vocab"];
  if (body.model) { uploaded = null; for (const f of shape) delete body[f]; }
  else if (uploaded) { body.config_json = uploaded; for (const f of shape) delete body[f]; }
  return body;
}

// ---- URL hash <-> form ---------------------------------------------------------------------------------
function toHash(v) { return "#" + new URLSearchParams(v).toString(); }
function fromHash() {  // every field from the link: one it does not name goes back to its default (empty)
  const p = new URLSearchParams(location.hash.slice(1));
  for (const f of FIELDS) $(f).value = p.get(f) ?? "";
  if (["params", "layers"].some((f) => p.has(f))) $("shape-box").open = true;
  uploaded = null;
  $("config-note").textContent = "";
}

// what is left on a card, in words: free bytes when it fits, the shortfall otherwise
function room(c) {
  if (c.free_bytes >= 0) return `${gb(c.free_bytes)} free`;
  const short = gb(-c.free_bytes);
  if (c.verdict === "offload") {
    const share = c.gpu_layer_fraction === null || c.gpu_layer_fraction === undefined ? "" :
      `${Math.round(100 * c.gpu_layer_fraction)}% of the layers on the GPU, `;
    return `${share}about ${short} in system RAM`;
  }
  return `${short} short`;
}

// ---- drawing helpers -----------------------------------------------------------------------------------
function el(name, attrs = {}, text) {
  const e = document.createElementNS(SVGNS, name);
  for (const [k, val] of Object.entries(attrs)) e.setAttribute(k, val);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svg(w, h) { return el("svg", { viewBox: `0 0 ${w} ${h}`, role: "img" }); }
function niceMax(x) { return ticks(x).at(-1); }
function ticks(x, n = 4) {  // round steps (1, 2, 2.5, 5 × 10^k) from 0 to at least x
  if (!(x > 0)) return [0, 1];
  const raw = x / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((st) => st >= raw);
  const out = [];
  for (let v = 0; v < x + step * 1e-9; v += step) out.push(v);
  if (out.at(-1) < x) out.push(out.at(-1) + step);
  return out;
}
// Labels that must not collide: each takes the first of its candidate spots whose box (estimated from the
// text at the charts' 11 px font) is clear of the labels already placed and inside the chart.
function placer(W, H) {
  const boxes = [];
  const box = (x, y, text, anchor) => {
    const w = 6.4 * text.length + 2, x0 = anchor === "end" ? x - w : anchor === "middle" ? x - w / 2 : x;
    return { x0, x1: x0 + w, y0: y - 10, y1: y + 3 };
  };
  const clear = (b) => b.x0 >= 0 && b.x1 <= W && b.y0 >= 0 && b.y1 <= H &&
    boxes.every((o) => b.x1 <= o.x0 || o.x1 <= b.x0 || b.y1 <= o.y0 || o.y1 <= b.y0);
  return {
    keep(x, y, text, anchor = "start") { boxes.push(box(x, y, text, anchor)); },
    place(spots, text, anchor = "start") {  // spots: [[x, y], …]; null when none is clear
      for (const [x, y] of spots) {
        const b = box(x, y, text, anchor);
        if (clear(b)) { boxes.push(b); return [x, y]; }
      }
      return null;
    },
  };
}
function td(text, cls) { const c = document.createElement("td"); c.textContent = text; if (cls) c.className = cls; return c; }

// ---- memory: stacked bar per card against its capacity ---------------------------------------------------
function drawMemory(plan) {
  const m = plan.memory, cards = plan.gpus.slice(0, TOP);
  const parts = [["weights", m.weights_bytes], ["kv", m.kv_cache_bytes], ["overhead", m.overhead_bytes],
    ["activation", m.activation_bytes], ...(m.draft_bytes ? [["draft", m.draft_bytes]] : [])];  // --speculative
  const label = (c) => `${c.count > 1 ? c.count + "× " : ""}${c.gpu}`;
  // room for the longest card name (about 7 px a character at the chart's font size), never clipped
  const left = Math.max(150, 12 + 7 * Math.max(...cards.map((c) => label(c).length)));
  const W = 610 + left, right = 190, row = 22, top = 8, H = top + cards.length * row + 28;
  // usable_bytes is the whole set's (all `count` cards), as in `cardfit plan --json`
  const max = niceMax(Math.max(...cards.map((c) => Math.max(c.need_bytes, c.usable_bytes))));
  const x = (b) => left + (W - left - right) * b / max;
  const s = svg(W, H);
  for (const b of ticks(max / 1e9).map((g) => g * 1e9)) {
    const X = x(b);
    s.append(el("line", { x1: X, x2: X, y1: top, y2: H - 22, class: "grid" }),
      el("text", { x: X, y: H - 8, "text-anchor": "middle", fill: "#6b7385" }, num(b / 1e9) + " GB"));
  }
  cards.forEach((c, i) => {
    const y = top + i * row;
    s.append(el("text", { x: left - 6, y: y + 14, "text-anchor": "end", class: "card-name" }, label(c)));
    if (c.context === m.context && c.need_bytes === m.total_bytes) {
      let at = 0;
      for (const [k, b] of parts) {
        s.append(el("rect", { x: x(at), y: y + 4, width: Math.max(0, x(at + b) - x(at)), height: row - 8, class: "seg-" + k }));
        at += b;
      }
    } else {
      s.append(el("rect", { x: x(0), y: y + 4, width: x(c.need_bytes) - x(0), height: row - 8, class: "seg-need" }));
    }
    const cap = c.usable_bytes;
    s.append(el("text", { x: Math.max(x(cap), x(c.need_bytes)) + 6, y: y + 14, fill: "#6b7385" },
      `${gb(c.need_bytes)} of ${gb(cap)}` + (c.context !== m.context ? ` · at ${num(c.context)} tokens` : "")));
    s.append(el("rect", { x: x(0), y: y + 2, width: x(cap) - x(0), height: row - 4, class: "cap" }));
    const t = el("title", {}, `${c.gpu}: need ${gb(c.need_bytes)} at ${num(c.context)} tokens, usable ${gb(cap)} — ${c.verdict}`);
    s.lastChild.append(t);
  });
  $("memory-chart").replaceChildren(s);
}

function showMemory(plan) {
  const m = plan.memory;
  for (const [id, b] of [["mem-weights", m.weights_bytes], ["mem-kv", m.kv_cache_bytes],
    ["mem-overhead", m.overhead_bytes], ["mem-activation", m.activation_bytes], ["mem-total", m.total_bytes]]) {
    $(id).textContent = gb(b);
    $(id).dataset.bytes = b;
  }
  drawMemory(plan);
  $("memory-section").hidden = false;
}

function showCards(plan) {
  const body = $("cards").tBodies[0];
  body.replaceChildren(...plan.gpus.map((c, i) => {
    const tr = document.createElement("tr");
    tr.dataset.gpu = c.gpu_id;
    const free = td(gb(c.free_bytes), "free");
    free.dataset.bytes = c.free_bytes;
    const need = td(gb(c.need_bytes), "need");
    need.dataset.bytes = c.need_bytes;
    const usable = td(gb(c.usable_bytes), "usable");
    usable.dataset.bytes = c.usable_bytes;
    tr.append(td(String(i + 1)), td(c.gpu, "gpu"), td(String(c.count), "count"), usable, need, free,
      td(c.verdict, "verdict v-" + c.verdict), td(usd(c.monthly_usd), "monthly"),
      td(c.decode_tokens_per_s === null ? "—" : num(c.decode_tokens_per_s, 1), "tps"));
    if (c.reason) tr.title = c.reason;
    if (i >= TOP) tr.className = "more";
    return tr;
  }));
  const more = plan.gpus.length - TOP;
  $("show-all").hidden = more <= 0;
  $("show-all").textContent = $("cards").classList.contains("all") ? "show the first " + TOP : `show ${more} more`;
  $("cards-section").hidden = false;
}

function showSummary(plan) {
  const m = plan.model, i = plan.inputs, best = plan.gpus[0], s = plan.speed;
  const box = $("summary");
  box.replaceChildren();
  const b = document.createElement("b");
  b.id = "summary-model";
  b.textContent = m.name + (m.ollama_tag ? ` (${m.ollama_tag})` : "");
  const line = document.createElement("span");
  line.id = "summary-inputs";
  line.textContent = ` · ${i.quant} · ${i.runtime} · context ${num(i.context)} (${i.context_source}) · ` +
    `${i.batch} sequence${i.batch === 1 ? "" : "s"} · KV ${i.kv_dtype}`;
  const best_ = document.createElement("div");
  best_.id = "summary-best";
  best_.textContent = `Best: ${best.count}× ${best.gpu} — ${best.verdict}, ${room(best)}` +
    (s.decode_ceiling_tokens_per_s ? ` · decode ceiling ${num(s.decode_ceiling_tokens_per_s, 1)} tokens/s per stream` +
      (s.decode_tokens_per_s ? `, about ${num(s.decode_tokens_per_s, 1)} realistic` : "") : "");
  box.append(b, line, best_);
  for (const note of plan.notes || []) {
    const n = document.createElement("div");
    n.className = "dim";
    n.textContent = "note: " + note;
    box.append(n);
  }
}

// ---- speed vs concurrency --------------------------------------------------------------------------------
function speedLevels(r) {
  const rows = r.rows || [];
  return rows.filter((p) => p.aggregate_tokens_per_s !== null && p.aggregate_tokens_per_s !== undefined);
}

function drawSpeed(r) {
  const pts = speedLevels(r);
  if (!pts.length) { $("speed-section").hidden = true; return; }
  const W = 760, H = 270, L = 60, R = 20, T = 26, B = 34;
  const maxC = Math.max(...pts.map((p) => p.concurrency)), maxY = niceMax(Math.max(...pts.map((p) => p.aggregate_tokens_per_s)));
  const lx = (c) => L + (W - L - R) * (maxC > 1 ? Math.log2(c) / Math.log2(maxC) : 0);
  const ly = (v) => H - B - (H - T - B) * v / maxY;
  const s = svg(W, H);
  for (const v of ticks(maxY)) {
    s.append(el("line", { x1: L, x2: W - R, y1: ly(v), y2: ly(v), class: "grid" }),
      el("text", { x: L - 6, y: ly(v) + 4, "text-anchor": "end", fill: "#6b7385" }, num(v)));
  }
  for (const p of pts) s.append(el("text", { x: lx(p.concurrency), y: H - B + 16, "text-anchor": "middle", fill: "#6b7385" }, String(p.concurrency)));
  s.append(el("text", { x: (L + W) / 2, y: H - 4, "text-anchor": "middle", fill: "#6b7385" }, "concurrent sequences"));
  const path = (k) => pts.map((p, i) => `${i ? "L" : "M"}${lx(p.concurrency).toFixed(1)},${ly(p[k]).toFixed(1)}`).join("");
  s.append(el("path", { d: path("aggregate_tokens_per_s"), class: "line-agg" }),
    el("path", { d: path("per_user_tokens_per_s"), class: "line-user" }),
    el("text", { x: L, y: 12, fill: "#3b6fd8" }, "aggregate tokens/s"),
    el("text", { x: L + 150, y: 12, fill: "#e08a2c" }, "per user tokens/s"));
  for (const p of pts) {  // a dot per level: one level alone is no line
    s.append(el("circle", { cx: lx(p.concurrency), cy: ly(p.aggregate_tokens_per_s), r: 3, class: "pt-agg" }),
      el("circle", { cx: lx(p.concurrency), cy: ly(p.per_user_tokens_per_s), r: 3, class: "pt-user" }));
  }
  $("speed-chart").replaceChildren(s);
  $("speed-gpu").textContent = r.gpu ? `on ${r.gpu}` : "";
  $("speed-section").hidden = false;
}

// ---- cost vs monthly volume --------------------------------------------------------------------------------
// One shape for both sources: the plan's cost block (what `cardfit plan` prints) and /api/breakeven (what
// `cardfit breakeven --gpu G --gpus N --tokens-per-s T` prints for a measured tokens/s).
function costFromPlan(plan) {
  const k = (plan.cost.cards || [])[0];
  if (!k) return null;
  const byId = Object.fromEntries((plan.cost.apis || []).map((a) => [a.id, a]));
  return { monthly_usd: k.monthly_usd, hourly_usd: k.hourly_usd, hours_per_month: plan.cost.hours_per_month,
    capacity_millions_per_month: k.capacity_millions_per_month, cost_per_million_usd: k.cost_per_million_usd,
    duty: plan.cost.duty, tokens_per_s: k.tokens_per_s, basis: (plan.cost.tokens_per_s_basis || "").split(" (")[0],
    rent_gpu: `${k.count}× ${k.gpu}`,
    apis: k.breakeven.map((b) => ({ ...b, name: (byId[b.api] || {}).name || b.api,
      price_per_million_usd: (byId[b.api] || {}).price_per_million_usd })) };
}

function costLine(b) {  // the words of the CLI's cost line
  return `Cost on ${b.rent_gpu}: $${num(b.monthly_usd, 0)}/month ($${num(b.hourly_usd, 2)}/h over ` +
    `${num(b.hours_per_month)} h); at ${num(b.tokens_per_s, 1)} tokens/s (${b.basis}) ` +
    `$${num(b.cost_per_million_usd, 2)} per M at ${Math.round(100 * (b.duty ?? 1))}% duty`;
}

function dutyText(a) {
  if (a.required_duty === null || a.required_duty === undefined) return "—";
  return a.required_duty > 1 ? "over 100%: cannot break even even at full use" : (100 * a.required_duty).toFixed(1) + "%";
}

function drawCost(b) {
  const apis = b.apis || [];
  const cap = b.capacity_millions_per_month, rent = b.monthly_usd;
  const cross = (a) => a.crossing ? a.crossing.millions_per_month : a.breakeven_millions_per_month;
  const near = apis.map(cross).filter((c) => c > 0 && isFinite(c) && c <= 3 * (cap || c));
  const xs = ticks(1.15 * Math.max(cap || 0, ...near)), maxX = xs.at(-1);
  const ys = ticks(rent * 2), maxY = ys.at(-1);
  const L = Math.max(64, 14 + 6.4 * Math.max(...ys.map((v) => usd(v).length))), W = 696 + L, R = 20, B = 38;
  // the legend has a band of its own above the plot, as many rows as the API names need
  const items = apis.map((a, i) => ({ i, text: `${a.name} $${a.price_per_million_usd}/M` }));
  const rows = [[]];
  let at = 0;
  for (const it of items) {
    const w = 20 + 6.4 * it.text.length + 16;
    if (at + w > W - L - R && rows.at(-1).length) { rows.push([]); at = 0; }
    rows.at(-1).push({ ...it, x: L + at });
    at += w;
  }
  const T = 12 + 15 * (items.length ? rows.length : 0), H = 272 + T;
  const x = (m) => L + (W - L - R) * m / maxX, y = (v) => H - B - (H - T - B) * Math.min(v, maxY) / maxY;
  const s = svg(W, H), labels = placer(W, H);
  rows.forEach((row, r) => row.forEach((it) => {
    s.append(el("rect", { x: it.x, y: 4 + 15 * r + 5, width: 14, height: 3, class: `swatch line-api${it.i % 4}` }),
      el("text", { x: it.x + 20, y: 4 + 15 * r + 10 }, it.text));
    labels.keep(it.x, 4 + 15 * r + 10, "xx" + it.text);
  }));
  for (const v of ys) {
    s.append(el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }),
      el("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", fill: "#6b7385" }, usd(v)));
    labels.keep(L - 6, y(v) + 4, usd(v), "end");
  }
  for (const m of xs) {
    s.append(el("text", { x: x(m), y: H - B + 18, "text-anchor": "middle", fill: "#6b7385" }, num(m) + " M"));
    labels.keep(x(m), H - B + 18, num(m) + " M", "middle");
  }
  s.append(el("text", { x: (L + W) / 2, y: H - 4, "text-anchor": "middle", fill: "#6b7385" }, "output tokens per month (millions)"));
  const label = (spots, text, attrs = {}) => {  // spots: [x, y, anchor]; left out when none is clear
    for (const [sx, sy, anchor] of spots) {
      if (labels.place([[sx, sy]], text, anchor)) {
        s.append(el("text", { x: sx, y: sy, "text-anchor": anchor, ...attrs }, text));
        return;
      }
    }
  };
  const rentEnd = cap ? Math.min(cap, maxX) : maxX;
  s.append(el("path", { d: `M${x(0)},${y(rent)}L${x(rentEnd)},${y(rent)}`, class: "line-rent" }));
  const rentText = `rent ${usd(rent)}/month`;
  label([[x(rentEnd) - 4, y(rent) - 6, "end"], [x(0) + 6, y(rent) - 6, "start"], [x(rentEnd) - 4, y(rent) + 14, "end"],
    [x(0) + 6, y(rent) + 14, "start"]], rentText);
  if (cap && cap <= maxX) {
    s.append(el("line", { x1: x(cap), x2: x(cap), y1: T, y2: H - B, class: "axis", "stroke-dasharray": "2 3" }));
    const capText = `capacity ${num(cap)} M`;
    label([[x(cap) + 4, H - B - 6, "start"], [x(cap) - 4, H - B - 6, "end"], [x(cap) + 4, H - B - 22, "start"],
      [x(cap) - 4, H - B - 22, "end"]], capText, { fill: "#6b7385" });
  }
  apis.forEach((a, i) => {
    const p = a.price_per_million_usd, endX = Math.min(maxX, maxY / p);
    s.append(el("path", { d: `M${x(0)},${y(0)}L${x(endX)},${y(p * endX)}`, class: `line-api line-api${i % 4}` }));
  });
  apis.forEach((a) => {  // the crossings last, over the lines; a label with no clear spot is in the table below
    const be = cross(a);
    if (!(be <= maxX)) return;
    s.append(el("circle", { cx: x(be), cy: y(rent), r: 4, class: "cross" }));
    const X = x(be), Y = y(rent), text = `${num(be, 1)} M`;
    label([[X + 6, Y + 16, "start"], [X + 6, Y - 8, "start"], [X - 6, Y + 16, "end"], [X - 6, Y - 8, "end"],
      [X + 6, Y + 30, "start"], [X + 6, Y - 22, "start"], [X - 6, Y + 30, "end"], [X - 6, Y - 22, "end"]], text);
  });
  $("cost-chart").replaceChildren(s);
  $("apis").tBodies[0].replaceChildren(...apis.map((a) => {
    const tr = document.createElement("tr");
    tr.append(td(a.name), td("$" + a.price_per_million_usd), td(num(a.breakeven_millions_per_month, 1), "breakeven"),
      td(dutyText(a), "duty"), td(a.breaks_even ? "breaks even" : "never", a.breaks_even ? "v-fits" : "v-no"));
    return tr;
  }));
  $("cost-note").textContent = costLine(b);
  $("cost-section").hidden = false;
}

// An API as `cardfit apis` lists it: its input, cached-input and output prices per million tokens and the
// date of the price (the same rows as `apis --json` and GET /api/apis)
function apiText(a) {
  const cached = a.cached_input_usd_per_m === null || a.cached_input_usd_per_m === undefined
    ? "" : ` · cached $${a.cached_input_usd_per_m}`;
  return `${a.name} (in $${a.input_usd_per_m}${cached} · out $${a.output_usd_per_m} per M${a.date ? ", " + a.date : ""})`;
}

// ---- one update -----------------------------------------------------------------------------------------
async function update() {
  const v = values();
  history.replaceState(null, "", toHash(v));
  staleDeploy();
  $("share-link").href = location.href;
  if (!v.model && !v.params) return;
  const mine = ++seq;
  $("status").className = "status";
  $("status").textContent = "Working…";
  try {
    const plan = await api("/api/plan", planBody(v));
    if (mine !== seq) return;
    showSummary(plan); showMemory(plan); showCards(plan);
    $("status").textContent = "";
    $("results").dataset.ready = String(mine);
    await extras(v, plan, mine);
  } catch (e) {
    if (mine !== seq) return;
    $("status").className = "status error";
    $("status").textContent = "Error: " + e.message;
    $("summary").replaceChildren();  // no stale numbers next to an error
    for (const id of ["memory-section", "cards-section", "speed-section", "cost-section"]) $(id).hidden = true;
    $("results").dataset.ready = "error-" + mine;
  }
}

async function extras(v, plan, mine) {
  const first = plan.gpus[0];
  const { api: _api, ...body } = planBody(v);  // `cardfit speed` takes no --api
  if (endpoints.has("/api/speed") && first.verdict !== "no") {
    try {
      const r = await api("/api/speed", { ...body, gpu: first.gpu_id, gpus: first.count });
      if (mine !== seq) return;
      drawSpeed(r);
    } catch (e) { $("speed-section").hidden = true; }
  }
  const own = costFromPlan(plan);
  if (v.tokens_per_s && endpoints.has("/api/breakeven") && first.monthly_usd) {
    // a measured tokens/s: `cardfit breakeven --gpu G --gpus N --tokens-per-s T [--api A]`
    const req = { gpu: first.gpu_id, gpus: first.count, tokens_per_s: v.tokens_per_s };
    if (v.api) req.api = [v.api];
    try {
      const b = await api("/api/breakeven", req);
      if (mine !== seq) return;
      drawCost({ ...b, tokens_per_s: b.throughput.tokens_per_s, basis: "measured",
        rent_gpu: `${b.rent.count}× ${first.gpu}` });
    } catch (e) { $("cost-section").hidden = true; }
  } else if (own) {
    drawCost(own);  // the plan's own cost line, as `cardfit plan` prints it
  } else {
    $("cost-section").hidden = true;
  }
}

// ---- serve a load: POST /api/deploy, the cheapest deployment meeting the targets --------------------------
// A field left empty is not sent: `cardfit deploy` applies its own default, shown as the field's placeholder.
function deployBody() {
  const body = planBody(values());
  for (const f of ["quant", "context", "batch", "kv_dtype", "api", "runtime", "gpu", "gpus"]) delete body[f];
  const n = (id) => $(id).value.trim() === "" ? undefined : Number($(id).value);
  if (n("d-rate") > 0) body.requests_per_s = n("d-rate"); else if (n("d-users") !== undefined) body.users = n("d-users");
  for (const id of ["d-input", "d-output", "d-prefix", "d-prefix-groups", "d-turns"]) if (n(id) !== undefined) body[DEPLOY_FIELDS[id]] = Math.round(n(id));
  for (const id of ["d-ttft", "d-tpot", "d-sessions"]) if (n(id) !== undefined) body[DEPLOY_FIELDS[id]] = n(id);
  if (n("d-cards") !== undefined) body.cards = Math.round(n("d-cards"));  // --cards N: exactly N cards
  const release = $("d-release").value.trim();
  if ($("d-runtime").value) body.runtime = $("d-runtime").value + (release ? "@" + release : "");
  if ($("gpu").value.trim()) body.gpu = [$("gpu").value.trim()];
  return body;
}

function deployDefaults(spec) {  // placeholders: the defaults the API's schema publishes for `cardfit deploy`
  const ref = ((((spec.paths["/api/deploy"] || {}).post || {}).requestBody || {}).content || {})["application/json"];
  const name = ref && ref.schema && ref.schema.$ref ? ref.schema.$ref.split("/").at(-1) : null;
  const props = name ? ((spec.components.schemas[name] || {}).properties || {}) : {};
  for (const [id, key] of Object.entries(DEPLOY_FIELDS)) {
    const d = (props[key] || {}).default;
    if (d !== undefined && d !== null && $(id).tagName === "INPUT") $(id).placeholder = `default ${num(d)}`;
  }
}

function clearDeploy() {  // no deployment on screen: a pasted link, or inputs that no longer match it
  deploySeq++;
  deployShownFor = null;
  $("deploy-section").hidden = true;
  for (const id of ["deploy-load", "deploy-status", "deploy-best", "deploy-command"]) $(id).textContent = "";
  $("deploy-chart").replaceChildren();
  $("deploy-details").replaceChildren();
  $("deploy-pareto").tBodies[0].replaceChildren();
}

function staleDeploy() {
  if (deployShownFor !== null && JSON.stringify(deployBody()) !== deployShownFor) clearDeploy();
}

function resetDeployForm() {
  for (const id of [...Object.keys(DEPLOY_FIELDS), "d-release"]) $(id).value = "";
}

function poolWorker(p) {  // one worker of a disaggregated pool, as the CLI's deploy_cmd.py _worker
  if ((p.ep || 1) > 1) return ` of attention DP ${p.dp} · EP ${p.ep}`;
  return p.tp > 1 ? ` of TP ${p.tp}` : "";
}

function shape(d) {
  if (d.disaggregated) {  // prefill and decode workers (core/disagg.py), each pool its own split
    const pre = d.disaggregated.prefill, dec = d.disaggregated.decode;
    const workers = (n, role) => `${n} ${role} worker${n === 1 ? "" : "s"}`;
    if (poolWorker(pre) !== poolWorker(dec)) {
      return `${d.count}× ${d.gpu} (${workers(pre.replicas, "prefill")}${poolWorker(pre)} + ` +
        `${workers(dec.replicas, "decode")}${poolWorker(dec)})`;
    }
    // one split both pools: its name once, "TP 4" or "attention DP 4 · EP 4" (not "TP 4" for the latter)
    const each = poolWorker(dec) ? `, ${poolWorker(dec).replace(/^ of /, "")} each` : "";
    return `${d.count}× ${d.gpu} (${pre.replicas} prefill + ${dec.replicas} decode workers${each})`;
  }
  const parts = [];
  const ep = d.ep || 1, group = ep > 1 ? d.tp / (d.dp || 1) : d.tp;  // one attention group's TP ranks
  if (group > 1) parts.push(`TP ${group}`);
  if (ep > 1) parts.push(`attention DP ${d.dp} · EP ${ep}`);
  if (d.pp > 1) parts.push(d.tp > 1 || d.nodes > d.replicas ? `PP ${d.pp}` : `layers over ${d.pp}`);
  if (d.replicas > 1) parts.push(`${d.replicas} replicas`);
  return `${d.count}× ${d.gpu}` + (parts.length ? ` (${parts.join(" × ")})` : "");
}

// prefill and decode pools (core/disagg.py): "4 prefill workers of 8× H200 SXM (TP 8)", "1 prefill worker of
// 4× H200 SXM (attention DP 4 · EP 4)"
function pool(name, p) {
  const split = poolWorker(p).replace(/^ of /, "");
  return `${num(p.replicas)} ${name} worker${p.replicas === 1 ? "" : "s"} of ${p.count}× ${p.gpu}` +
    (split ? ` (${split})` : "");
}

// The lines under the deployment: what the CLI prints beside it (speculative decoding, its pools, attention
// DP and experts) and the prefill/decode comparison with its reason, whichever won (--json carries it).
function deployDetails(r, d) {
  const lines = [];
  if (d && d.speculative) {
    const sp = d.speculative;
    // a tree (topk and draft_tokens in its JSON) by its shape, as the CLI says it (services/speculative.py drafted)
    const what = sp.topk !== undefined ? `a tree of ${sp.tokens} draft steps at top-${sp.topk}, ` +
      `${sp.draft_tokens} tokens verified a step,` : `${sp.tokens} tokens drafted a step`;
    lines.push(["speculative", `speculative decoding: ${sp.method}, ${what} at ` +
      `acceptance ${sp.acceptance} (${sp.tokens_per_step} tokens a step)`]);
  }
  if (d && d.ep > 1) {
    lines.push(["moe", `each replica: attention data-parallel over ${d.dp} groups of TP ${d.tp / d.dp}, ` +
      `experts expert-parallel over ${d.ep} cards`]);
  }
  if (d && d.disaggregated) {
    lines.push(["pools", `pools: ${pool("prefill", d.disaggregated.prefill)} + ` +
      `${pool("decode", d.disaggregated.decode)}, each started by its own command below`]);
  }
  const pd = r.disaggregation;
  if (pd) {
    const apart = pd.winner === "disaggregated", x = pd.deployment;  // x: the cheapest P/D one (or null)
    const other = !apart && x && x.disaggregated ? ` (its pools: ${pool("prefill", x.disaggregated.prefill)} + ` +
      `${pool("decode", x.disaggregated.decode)}, ${usd(x.monthly_usd)}/month)` : "";
    lines.push(["disaggregation", `Prefill and decode ${apart ? "apart" : "together"}: ${pd.why}${other}`]);
  }
  $("deploy-details").replaceChildren(...lines.map(([key, text]) => {
    const li = document.createElement("li");
    li.dataset.key = key;
    li.textContent = text;
    return li;
  }));
}

function drawPareto(rows, best) {
  const xs = rows.map((r) => r.per_user_tokens_per_s), ys = rows.map((r) => r.monthly_usd || 0);
  const xt = ticks(Math.max(...xs)), yt = ticks(Math.max(...ys));
  // room on the left for the widest rent label ("$4,000,000"), never clipped
  const L = Math.max(64, 14 + 6.4 * Math.max(...yt.map((v) => usd(v).length)));
  const W = 576 + L, H = 256, B = 36, T = 26, R = 16, box = $("deploy-chart");
  const s = svg(W, H);
  const X = (v) => L + (W - L - R) * v / xt.at(-1), Y = (v) => H - B - (H - B - T) * v / yt.at(-1);
  for (const v of yt) { s.append(el("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), class: "grid" }));
    s.append(el("text", { x: L - 6, y: Y(v) + 4, "text-anchor": "end" }, usd(v))); }
  for (const v of xt) s.append(el("text", { x: X(v), y: H - B + 16, "text-anchor": "middle" }, num(v)));
  s.append(el("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, "tokens/s per user"));
  s.append(el("text", { x: L, y: 12 }, "$/month"));  // above the plot, clear of the top tick
  for (const r of rows) {
    const c = el("circle", { cx: X(r.per_user_tokens_per_s), cy: Y(r.monthly_usd || 0), r: 5,
      class: "dot" + (best && r.command === best.command ? " best" : "") });
    c.append(el("title", {}, `${shape(r)} ${r.runtime} ${r.quant}: TTFT ${num(r.ttft_ms)} ms`));
    s.append(c);
  }
  box.replaceChildren(s);
}

function failingText(f) {  // why nothing meets the targets, in words (the CLI's line)
  const what = TARGET_WORDS[f.target];
  if (!what) return `Nothing meets the targets: ${f.text || f.target || ""}`;
  return `Nothing meets the targets: ${what} fails first` +
    (f.ratio ? ` (${num(f.achieved, 1)} ms against ${num(f.limit)} ms, ${num(f.ratio, 2)}×)` : "") +
    (f.text ? `: ${f.text}` : "");
}

async function deploy() {
  const body = deployBody();
  const mine = ++deploySeq;
  deployShownFor = JSON.stringify(body);  // changed inputs clear it (staleDeploy), the answer too when it comes
  $("deploy-section").hidden = false;
  $("deploy-status").className = "status"; $("deploy-status").textContent = "Searching…";
  try {
    const r = await api("/api/deploy", body);
    if (mine !== deploySeq) return;
    const w = r.workload, b = r.best;
    const load = w.users !== null ? `${num(w.users)} users` + (w.cards_found_users ? ` (the most ${w.cards} cards serve)` : "") :
      w.requests_per_s !== null ? `${w.requests_per_s} requests/s` : `no load: the most users ${w.cards} cards serve`;
    $("deploy-load").textContent = load + (w.cards ? ` · exactly ${w.cards} cards` : "") +
      ` · ${num(w.input_tokens)} + ${num(w.output_tokens)} tokens · TTFT ≤ ${num(w.ttft_ms)} ms · TPOT ≤ ${num(w.tpot_ms)} ms` +
      (w.turns > 1 ? ` · ${num(w.turns)} turns (mean prompt ${num(w.prompt_tokens_mean)})` : "") +
      (w.turns > 1 && w.sessions ? ` · ${num(w.sessions)} sessions open` : "") +
      (w.shared_prefix_tokens ? ` · ${num(w.shared_prefix_tokens)} shared prefix tokens` +
        (w.prefix_groups > 1 ? ` in ${num(w.prefix_groups)} groups` : "") : "");
    const d = b || r.closest;
    if (b) {
      $("deploy-best").textContent = `Cheapest that meets every target: ${shape(b)} · ${b.runtime} · ${b.quant} · ` +
        `KV ${b.kv_dtype} · ${usd(b.monthly_usd)}/month · $${num(b.cost_per_million_usd, 3)} per M tokens · ` +
        `TTFT ${num(b.ttft_ms)} ms · TPOT ${num(b.tpot_ms, 1)} ms · headroom ${num(r.headroom, 2)}×` +
        (b.prefix_hit_rate ? ` · prefix cache ${num(b.prefix_hit_rate * 100)}% of the prompt` : "") +
        (b.kv_offload_gb ? ` · ${num(b.kv_offload_gb)} GB host KV tier` : "");
    } else {
      $("deploy-best").textContent = failingText(r.failing || {}) +
        (d ? `; closest: ${shape(d)} · ${d.runtime} · ${d.quant}` : "");
    }
    deployDetails(r, d);
    $("deploy-command").textContent = d ? d.command : "";
    const rows = r.pareto.filter((x) => x.monthly_usd !== null);
    if (rows.length) drawPareto(rows, b); else $("deploy-chart").replaceChildren();
    $("deploy-pareto").tBodies[0].replaceChildren(...r.pareto.map((x) => {
      const tr = document.createElement("tr");
      tr.append(td(shape(x)), td(x.runtime), td(x.quant), td(x.kv_dtype), td(usd(x.monthly_usd)),
        td(x.cost_per_million_usd === null ? "—" : "$" + num(x.cost_per_million_usd, 3)),
        td(x.ttft_ms === null ? "∞" : num(x.ttft_ms)), td(x.tpot_ms === null ? "∞" : num(x.tpot_ms, 1)),
        td(num(x.per_user_tokens_per_s, 1)));
      return tr;
    }));
    $("deploy-status").textContent = "";
  } catch (e) {
    if (mine !== deploySeq) return;
    for (const id of ["deploy-load", "deploy-best", "deploy-command"]) $(id).textContent = "";
    $("deploy-chart").replaceChildren();
    $("deploy-details").replaceChildren();
    $("deploy-pareto").tBodies[0].replaceChildren();
    $("deploy-status").className = "status error"; $("deploy-status").textContent = "Error: " + e.message;
  }
}

// ---- several models on one machine (cardfit stack): the file's text, placed card by card ------------------
let stackSeq = 0;
function html(name, attrs = {}, text) {  // an HTML element (el() makes SVG ones)
  const e = document.createElement(name);
  for (const [k, val] of Object.entries(attrs)) e.setAttribute(k, val);
  if (text !== undefined) e.textContent = text;
  return e;
}
async function planStack() {
  const mine = ++stackSeq;
  $("stack-section").hidden = false;
  $("stack-status").className = "status"; $("stack-status").textContent = "Placing…";
  try {
    const r = await api("/api/stack", { text: $("stack-text").value, format: $("stack-format").value,
                                        bundle: $("stack-bundle-format").value });
    if (mine !== stackSeq) return;
    $("stack-verdict").textContent = r.verdict;
    $("stack-cards").replaceChildren(...r.devices.map((d, i) => {
      const box = html("div");
      box.append(html("p", {}, `card ${i}: ${d.gpu} · ${gb(d.usable_bytes)} usable · ${gb(d.free_bytes)} free · ${d.verdict}`));
      const t = html("table", { class: "numbers" });
      const head = html("tr");
      for (const h of ["model", "role", "runtime", "quant", "context", "GB", "tokens/s", "port"]) head.append(html("th", {}, h));
      t.createTHead().append(head); t.createTBody();
      for (const e of d.entries) {
        const tr = document.createElement("tr");
        tr.append(td(e.model), td(e.role + (e.resident ? "" : " (swap)")), td(e.runtime), td(e.quant), td(num(e.context)),
          td(gb(e.bytes)), td(e.tokens_per_s === null ? "" : num(e.tokens_per_s) + (["embed", "rerank"].includes(e.role) ? " read" : "")),
          td(e.port === null ? "" : String(e.port)));
        t.tBodies[0].append(tr);
      }
      box.append(t);
      return box;
    }), ...r.unplaced.map((u) => html("p", { class: "status error" }, `not placed: ${u.model} (${u.role}, ${u.runtime}) ${gb(u.bytes)}: ${u.reason}`)));
    $("stack-changes").replaceChildren(...r.changes.map((c) => html("li", {},
      (c.model ? c.model + ": " : "") + c.change + (c.monthly_usd ? ` (+${usd(c.monthly_usd)}/month)` : "") +
      (c.fits ? "" : " (helps; not enough alone)"))));
    $("stack-bundle").textContent = r.bundle.text;
    $("stack-status").textContent = r.notes.join(" · ");
  } catch (e) {
    if (mine !== stackSeq) return;
    for (const id of ["stack-cards", "stack-changes"]) $(id).replaceChildren();
    $("stack-verdict").textContent = ""; $("stack-bundle").textContent = "";
    $("stack-status").className = "status error"; $("stack-status").textContent = "Error: " + e.message;
  }
}

let timer = null;
function soon() { clearTimeout(timer); timer = setTimeout(update, 250); }

// ---- uploads: parsed by the server in memory ----------------------------------------------------------------
async function readConfig(file) {
  if (file.size > 1024 * 1024) { fail("config.json is larger than 1 MB"); return; }
  try {
    const r = await api("/api/read/config", await file.text());
    const shape = r.shape || r;
    for (const f of ["params", "layers", "kv_heads", "head_dim", "hidden", "vocab"]) $(f).value = shape[f] ?? "";
    $("model").value = "";
    uploaded = r.config || null;
    $("config-note").textContent = `${r.model.name}: ${num(r.model.params / 1e9, 2)}B parameters, ` +
      `${r.model.attention}, planned from the uploaded config.json` + (r.notes.length ? " — " + r.notes.join("; ") : "");
    update();
  } catch (e) { fail(e.message); }
}

async function readLog() {
  try {
    const r = await api("/api/read/log", $("log").value);
    const t = r.tokens_per_s ?? r.eval_rate_tokens_per_s;
    if (t) { $("tokens_per_s").value = t; update(); } else fail("no tokens/s found in that log");
  } catch (e) { fail(e.message); }
}

function fail(msg) { $("status").className = "status error"; $("status").textContent = "Error: " + msg; }

function fillList(id, names) {
  $(id).replaceChildren(...names.map((n) => { const o = document.createElement("option"); o.value = n; return o; }));
}

async function init() {
  const [models, gpus, quants, runtimes, spec] = await Promise.all(
    ["/api/models", "/api/gpus", "/api/quants", "/api/runtimes", "/openapi.json"].map((p) => api(p)));
  endpoints = new Set(Object.keys(spec.paths));
  fillList("models-list", models.models.flatMap((m) => [...m.ollama, m.hf || m.id]));
  fillList("gpus-list", gpus.gpus.map((g) => g.name));
  fillList("quants-list", [...quants.gguf_mixes.map((q) => q.name), ...quants.types.filter((q) => q.scope !== "kv").map((q) => q.name)]);
  for (const r of runtimes.runtimes) $("runtime").append(new Option(r.name, r.id));
  for (const r of runtimes.runtimes.filter((x) => x.serves)) $("d-runtime").append(new Option(r.name, r.id));
  if (endpoints.has("/api/apis")) {
    apiCatalog = (await api("/api/apis")).apis;
    for (const a of apiCatalog) $("api").append(new Option(apiText(a), a.id));
  }
  deployDefaults(spec);
  $("config-label").hidden = !endpoints.has("/api/read/config");
  $("log-box").hidden = !endpoints.has("/api/read/log");
  fromHash();
  for (const f of FIELDS) $(f).addEventListener(["runtime", "kv_dtype", "api"].includes(f) ? "change" : "input", soon);
  $("config-file").addEventListener("change", (e) => e.target.files[0] && readConfig(e.target.files[0]));
  $("read-log").addEventListener("click", readLog);
  $("show-all").addEventListener("click", () => {
    const all = $("cards").classList.toggle("all");
    $("show-all").textContent = all ? "show the first " + TOP : `show ${$("cards").tBodies[0].rows.length - TOP} more`;
  });
  $("inputs").addEventListener("submit", (e) => { e.preventDefault(); update(); });
  $("serve-form").addEventListener("submit", (e) => { e.preventDefault(); deploy(); });
  $("serve-form").addEventListener("input", staleDeploy);
  $("serve-form").addEventListener("change", staleDeploy);
  $("stack-form").hidden = !endpoints.has("/api/stack");
  $("stack-form").addEventListener("submit", (e) => { e.preventDefault(); planStack(); });
  // a pasted link is a new question: every field from it (or its default), and no answer to the old one
  window.addEventListener("hashchange", () => {
    fromHash(); resetDeployForm(); $("log").value = ""; clearDeploy(); update();
  });
  document.body.dataset.loaded = "1";
  update();
}

init().catch((e) => fail(e.message));
