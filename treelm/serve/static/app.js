// The page of `treelm serve`: asks the JSON endpoints (docs/serve.md) and draws what they answer.
// Text from the server is put in with textContent only; nothing is loaded from elsewhere.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
let runs = [];

function el(tag, attrs = {}, text = null, ns = null) {
  const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  return e;
}
const svg = (tag, attrs = {}, text = null) => el(tag, attrs, text, SVG);

async function call(method, body) {
  const r = await fetch("/api/" + method, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

function showError(e) {
  $("error").textContent = e ? String(e.message || e) : "";
  $("error").hidden = !e;
}

function section(title) {
  const s = el("section");
  s.append(el("h2", {}, title));
  $("result").append(s);
  return s;
}

// ------------------------------------------------------------------ trees
// A tree is nested lists with token leaves. Leaves sit at the bottom, each node at the height of
// its tallest child + 1; a node joins its children with a bar (a dendrogram).
function treeSvg(tree, tokens, unknown, style, layer) {
  const gap = 14, charW = 7.4, step = 26, top = 10;
  const xs = [];
  let x = 10;
  for (const t of tokens) {
    const w = Math.max(18, t.length * charW);
    xs.push(x + w / 2);
    x += w + gap;
  }
  const width = x, edges = [];
  let leaf = 0, height = 0;
  // bottom-up with an explicit stack (deep trees do not recurse): a leaf takes the next x; a
  // node sits over the middle of its first and last child, one step above its tallest child
  if (Array.isArray(tree)) {
    const st = [{ node: tree, i: 0, kids: [] }];
    while (st.length) {
      const f = st[st.length - 1];
      if (f.i < f.node.length) {
        const c = f.node[f.i++];
        if (Array.isArray(c)) st.push({ node: c, i: 0, kids: [] });
        else f.kids.push({ x: xs[leaf++], h: 0 });
      } else {
        st.pop();
        const h = 1 + Math.max(...f.kids.map((k) => k.h));
        const me = { x: (f.kids[0].x + f.kids[f.kids.length - 1].x) / 2, h: h, kids: f.kids };
        edges.push(me);
        height = Math.max(height, h);
        if (st.length) st[st.length - 1].kids.push(me);
      }
    }
  }
  const yOf = (h) => top + (height - h) * step;
  const base = yOf(0);
  const s = svg("svg", { class: "tree", "data-style": style, "data-layer": String(layer),
                         width: String(width), height: String(base + 24),
                         viewBox: `0 0 ${width} ${base + 24}` });
  for (const n of edges) {
    const y = yOf(n.h);
    s.append(svg("path", { class: "edge join", d: `M${n.kids[0].x},${y} H${n.kids[n.kids.length - 1].x}` }));
    for (const k of n.kids) s.append(svg("path", { class: "edge stem", d: `M${k.x},${y} V${yOf(k.h)}` }));
  }
  tokens.forEach((t, i) => {
    const cls = unknown.includes(i) ? "leaf unk" : "leaf";
    const txt = svg("text", { class: cls, x: String(xs[i]), y: String(base + 16),
                              "text-anchor": "middle" }, t);
    if (unknown.includes(i)) txt.append(svg("title", {}, "outside the vocabulary: read as <unk>"));
    s.append(txt);
  });
  return s;
}

// One row per layer, one cell per token; colour = d_f scaled to the row's [min, max] (what each
// layer's tree reads: only the order within a row matters).
function heatmapSvg(view) {
  const cell = 46, rowH = 22, left = 64, head = 20;
  const n = view.tokens.length, L = view.layers.length;
  const s = svg("svg", { class: "heatmap", width: String(left + n * cell + 10),
                         height: String(head + L * rowH + 6) });
  view.tokens.forEach((t, j) => s.append(svg("text", {
    x: String(left + j * cell + cell / 2), y: "14", "text-anchor": "middle" },
    t.length > 6 ? t.slice(0, 5) + "…" : t)));
  view.layers.forEach((layer, r) => {
    const row = view.df[r];
    const lo = Math.min(...row), hi = Math.max(...row), span = hi - lo || 1;
    const y = head + r * rowH;
    s.append(svg("text", { x: "4", y: String(y + 15) }, `layer ${layer}`));
    row.forEach((v, j) => {
      const a = (v - lo) / span;
      const rect = svg("rect", { x: String(left + j * cell), y: String(y), width: String(cell - 2),
        height: String(rowH - 2), fill: `rgb(${Math.round(255 - 200 * a)},${Math.round(255 - 140 * a)},${Math.round(255 - 60 * a)})` });
      rect.append(svg("title", {}, `${view.tokens[j]}: d_f = ${v.toFixed(4)} (d_i = ${view.di[r][j].toFixed(4)})`));
      s.append(rect);
    });
  });
  return s;
}

function drawTrees(view, title) {
  const layer = Number($("layer").value) || view.default_layer;
  const s = section(title);
  const box = el("div", { class: "trees" });
  for (const [style, label] of [["official", "official rule: the highest-level word opens a constituent"],
                                ["split", "split rule: a span splits before its highest-level word"]]) {
    const fig = el("figure");
    fig.append(treeSvg(view.trees[style][String(layer)], view.tokens, view.unknown, style, layer));
    const own = style === view.default_rule ? " (the run's default rule)" : "";
    fig.append(el("figcaption", {}, `layer ${layer}, ${label}${own}`));
    box.append(fig);
  }
  s.append(box);
  // where the defaults come from: the run's choice on dev trees (trees.json), or none
  if (view.default_why) {
    s.append(el("figcaption", {}, `default: layer ${view.default_layer}, ${view.default_rule} ` +
                                  `rule, ${view.default_why}`));
  }
  const h = section("master-forget-gate levels d_f of each layer (hover for values)");
  h.append(heatmapSvg(view));
}

// ------------------------------------------------------------------ other tasks
function drawProbe(data, prefix) {
  const s = section(`most likely next symbols after “${prefix}”`);
  const t = el("table", { class: "probs" });
  for (const n of data.next) {
    const tr = el("tr");
    tr.append(el("td", {}, n.symbol));
    const td = el("td");
    const bar = el("span", { class: "bar" });
    bar.style.width = `${Math.max(1, 200 * n.prob)}px`;    // CSSOM: the page's CSP allows it
    td.append(bar);
    tr.append(td, el("td", {}, n.prob.toFixed(4)));
    t.append(tr);
  }
  s.append(t);
}

function drawAttention(att) {
  const cell = 30, left = 90, head = 80;
  const S = att.source.length, T = att.target.length;
  att.weights.forEach((w, l) => {
    const s = section(att.weights.length > 1 ? `attention, decoder layer ${l + 1}` : "attention");
    const g = svg("svg", { class: "attention", width: String(left + S * cell + 10),
                           height: String(head + T * cell + 10) });
    att.source.forEach((t, j) => g.append(svg("text", {
      transform: `translate(${left + j * cell + cell / 2 + 4},${head - 6}) rotate(-60)` }, t)));
    att.target.forEach((t, i) => g.append(svg("text", {
      x: String(left - 6), y: String(head + i * cell + cell / 2 + 4), "text-anchor": "end" }, t)));
    w.forEach((row, i) => row.forEach((v, j) => {
      const r = svg("rect", { x: String(left + j * cell), y: String(head + i * cell),
        width: String(cell - 1), height: String(cell - 1),
        fill: `rgb(${Math.round(255 - 215 * v)},${Math.round(255 - 160 * v)},${Math.round(255 - 80 * v)})` });
      r.append(svg("title", {}, `${att.target[i]} ← ${att.source[j]}: ${v.toFixed(3)}`));
      g.append(r);
    }));
    s.append(g);
  });
}

function drawSlots(data) {
  const s = section(data.intent ? `slots (intent: ${data.intent})` : "slots");
  const p = el("p");
  let i = 0;
  const starts = new Map(data.slots.map((x) => [x.start, x]));
  while (i < data.words.length) {
    const slot = starts.get(i);
    if (slot) {
      const span = el("span", { class: "slot" }, slot.text + " ");
      span.append(el("small", {}, slot.type));
      p.append(span, " ");
      i = slot.end;
    } else { p.append(data.words[i] + " "); i++; }
  }
  s.append(p);
  const t = el("table", { class: "probs" });
  data.words.forEach((w, k) => { const tr = el("tr"); tr.append(el("td", {}, w), el("td", {}, data.tags[k])); t.append(tr); });
  s.append(t);
}

// ------------------------------------------------------------------ training curves
// GET /api/runs/<name>/curves: the run's metrics.jsonl as curves against the tokens trained on.
// Asked every POLL_MS with the last answer's ETag: an unchanged log answers 304 (one stat on the
// server, no body), so the charts follow a run that trains without a reload.
const POLL_MS = 3000;
const COLORS = ["#1f6fb4", "#d1495b", "#2a9d5c", "#8e5cc4", "#e08a1e", "#6b4f3a"];
const SCORES = { ppl: "perplexity", bpc: "bits per character", loss: "loss (nats)",
                 bleu: "BLEU", chrf: "chrF", f1: "F1 (%)", accuracy: "accuracy (%)" };
let curves = { gen: 0, etag: null, timer: null, data: null };

// "1.2M", "400k", "950": token counts as axis labels
function fmtCount(n) {
  const a = Math.abs(n);
  if (a >= 1e6) return `${+(n / 1e6).toFixed(a >= 1e7 ? 0 : 2)}M`;
  if (a >= 1e3) return `${+(n / 1e3).toFixed(a >= 1e4 ? 0 : 1)}k`;
  return String(+n.toFixed(0));
}
const fmtValue = (v) => (Math.abs(v) >= 10 ? v.toFixed(1) : v.toPrecision(3));

// Evenly spaced ticks at 1, 2, 2.5 or 5 times a power of ten that cover [lo, hi].
function linearTicks(lo, hi, n = 5, minStep = 0) {
  if (!(hi > lo)) { const d = Math.abs(lo) * 0.1 || 1; lo -= d; hi += d; }
  const raw = (hi - lo) / n, mag = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(minStep, [1, 2, 2.5, 5, 10].map((m) => m * mag).find((x) => x >= raw * 0.999));
  const first = Math.floor(lo / step + 1e-9), last = Math.ceil(hi / step - 1e-9);
  const ticks = [];
  for (let k = first; k <= last; k++) ticks.push(+(k * step).toPrecision(12));
  // as many decimals as the step needs (2.5 needs one more than 2 or 5)
  const digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9) + (String(step).includes("25") ? 1 : 0));
  return { lo: ticks[0], hi: ticks[ticks.length - 1], ticks: ticks, label: (t) => t.toFixed(digits) };
}

// A log axis for a score spanning a wide range (perplexity: thousands at first, then ~100):
// ticks at 1, 2 and 5 times powers of ten, the axis from the tick below lo to the one above hi.
function logTicks(lo, hi) {
  const all = [];
  for (let e = Math.floor(Math.log10(lo)) - 1; e <= Math.ceil(Math.log10(hi)) + 1; e++)
    for (const m of [1, 2, 5]) all.push(+(m * 10 ** e).toPrecision(12));
  const below = all.filter((t) => t <= lo), above = all.filter((t) => t >= hi);
  const a = below[below.length - 1], b = above[0];
  return { lo: a, hi: b, ticks: all.filter((t) => t >= a && t <= b), log: true, label: String };
}

// One chart: an SVG with axes, grid, labelled ticks and a line per series (a dot per point where
// series.dots, each with a tooltip), and a legend under it that names each series and its last
// value. series: [{label, color, dash, thin, dots, points: [[tokens, value|null], ...]}].
function lineChart(name, title, yLabel, series, opts = {}) {
  const W = 372, H = 250, L = 58, R = 14, T = 26, B = 44;
  const fig = el("figure", { class: "chart", "data-chart": name });
  const s = svg("svg", { class: "chart", width: String(W), height: String(H), viewBox: `0 0 ${W} ${H}` });
  s.append(svg("text", { class: "title", x: String(L), y: "15" }, title));
  fig.append(s);
  const pts = series.flatMap((x) => x.points.filter((p) => p[1] !== null));
  if (!pts.length) {
    s.append(svg("text", { class: "empty", x: String(L), y: String(T + 40) }, "nothing logged yet"));
    return fig;
  }
  // tokens from 0 to the last logged: the right edge is where the run is now
  const xmax = Math.max(1, ...pts.map((p) => p[0]));
  const xs = { lo: 0, hi: xmax, ticks: linearTicks(0, xmax, 5, 1).ticks.filter((t) => t <= xmax) };
  const vals = pts.map((p) => p[1]);
  const ymin = Math.min(...vals), ymax = Math.max(...vals);
  const ys = opts.logWide && ymin > 0 && ymax / ymin >= 4 ? logTicks(ymin, ymax) : linearTicks(ymin, ymax);
  const f = ys.log ? Math.log10 : (v) => v;
  const X = (t) => L + (t - xs.lo) / (xs.hi - xs.lo) * (W - L - R);
  const Y = (v) => H - B - (f(v) - f(ys.lo)) / (f(ys.hi) - f(ys.lo)) * (H - T - B);
  for (const t of ys.ticks) {
    s.append(svg("line", { class: "grid", x1: String(L), x2: String(W - R), y1: String(Y(t)), y2: String(Y(t)) }));
    s.append(svg("text", { class: "tick", x: String(L - 5), y: String(Y(t) + 4), "text-anchor": "end" },
                 ys.label(t)));
  }
  for (const t of xs.ticks) {
    s.append(svg("line", { class: "axis", x1: String(X(t)), x2: String(X(t)), y1: String(H - B), y2: String(H - B + 4) }));
    s.append(svg("text", { class: "tick", x: String(X(t)), y: String(H - B + 16), "text-anchor": "middle" }, fmtCount(t)));
  }
  s.append(svg("path", { class: "axis", d: `M${L},${T} V${H - B} H${W - R}` }));
  s.append(svg("text", { class: "label", x: String((L + W - R) / 2), y: String(H - 6), "text-anchor": "middle" },
               "tokens trained on"));
  s.append(svg("text", { class: "label", transform: `translate(14,${(T + H - B) / 2}) rotate(-90)`,
                         "text-anchor": "middle" }, yLabel + (ys.log ? " (log scale)" : "")));
  const legend = el("ul", { class: "legend" });
  for (const x of series) {
    // a null (a value that was not finite) breaks the line
    let d = "", pen = "M", last = null;
    for (const [t, v] of x.points) {
      if (v === null) { pen = "M"; continue; }
      d += `${pen}${X(t).toFixed(1)},${Y(v).toFixed(1)} `;
      pen = "L";
      last = v;
    }
    const shown = x.points.filter((p) => p[1] !== null);
    const attrs = { class: x.thin ? "series thin" : "series", stroke: x.color, d: d.trim(),
                    "data-series": x.label, "data-points": String(shown.length) };
    if (x.dash) attrs["stroke-dasharray"] = x.dash;
    s.append(svg("path", attrs));
    // a dot (with its tooltip) per point, unless there are so many that dots hide the line
    if ((x.dots && shown.length <= 80) || shown.length === 1) {
      for (const [t, v] of shown) {
        const c = svg("circle", { class: "point", cx: X(t).toFixed(1), cy: Y(v).toFixed(1),
                                  r: shown.length > 25 ? "2" : "3",
                                  fill: x.color, "data-series": x.label, "data-tokens": String(t),
                                  "data-value": String(v) });
        c.append(svg("title", {}, `${x.label}: ${fmtValue(v)} at ${t.toLocaleString("en")} tokens`));
        s.append(c);
      }
    }
    const li = el("li", { "data-series": x.label });
    const sw = svg("svg", { width: "26", height: "10" });
    const line = svg("line", { x1: "1", x2: "25", y1: "5", y2: "5", stroke: x.color, "stroke-width": "2.5" });
    if (x.dash) line.setAttribute("stroke-dasharray", x.dash);
    sw.append(line);
    li.append(sw, x.label + (last === null ? "" : " "));
    if (last !== null) li.append(el("b", {}, fmtValue(last)));
    legend.append(li);
  }
  fig.append(legend);
  if (opts.note) fig.append(el("figcaption", {}, opts.note));
  return fig;
}

function drawCurves(data) {
  const charts = [];
  const head = data.headline;
  if (head) {
    charts.push(lineChart("headline", `validation ${SCORES[head] || head}`, SCORES[head] || head,
      [{ label: "validation", color: COLORS[0], dots: true, points: data.valid[head] }],
      { logWide: head === "ppl" }));
  }
  // tree F1: a colour per layer, a dash per rule (official solid, split dashed), in %
  const trees = [];
  for (const [rule, layers] of Object.entries(data.trees)) {
    for (const [layer, points] of Object.entries(layers)) {
      trees.push({ label: `${rule} L${layer}`, color: COLORS[(Number(layer) - 1) % COLORS.length],
                   dash: rule === "official" ? null : "6 4", dots: true,
                   points: points.map(([t, v]) => [t, v === null ? null : 100 * v]) });
    }
  }
  if (trees.length) charts.push(lineChart("trees", "tree F1 per layer and rule", "sentence F1 (%)", trees,
    { note: "on the train.eval_parse treebank; solid: official rule, dashed: split rule" }));
  // the training loss at every progress line: it moves between validations
  const loss = [];
  if (data.train.loss) loss.push({ label: "training", color: "#8a9bb0", thin: true, points: data.train.loss });
  if (data.valid.loss && head !== "loss") loss.push({ label: "validation", color: COLORS[0], dots: true, points: data.valid.loss });
  if (loss.length) charts.push(lineChart("loss", "loss", "loss (nats)", loss));
  $("charts").replaceChildren(...charts);
  curvesStatus(data);
}

// The line above the charts: how far the run got and whether it is still writing its log (asked
// again at every poll, so that "written N s ago" keeps counting while the log does not change).
function curvesStatus(data) {
  const head = data.headline, v = data.valid[head] || [];
  const parts = [];
  if (v.length) parts.push(`${v.length} validation${v.length > 1 ? "s" : ""}, the last at ${v[v.length - 1][0].toLocaleString("en")} tokens`);
  if (data.modified) {
    const when = new Date(data.modified * 1000);
    const age = (Date.now() - when.getTime()) / 1000;
    // no "done" yet: training, or stopped early (only the log's age tells them apart here)
    parts.push(data.done ? "training finished" : "not finished",
      age < 600 ? `metrics.jsonl written ${Math.max(0, Math.round(age))} s ago` :
        `metrics.jsonl last written ${when.toLocaleString()}`);
  } else parts.push("no metrics.jsonl in this run");
  $("curves-status").textContent = parts.join(" · ");
}

// One poll of the chosen run; reschedules itself until another run is chosen (gen changes).
async function pollCurves(gen) {
  const r = current();
  if (gen !== curves.gen || !r) return;
  $("curves").hidden = !r.supports.includes("curves");
  if ($("curves").hidden) return;
  try {
    const headers = curves.etag ? { "If-None-Match": curves.etag } : {};
    const resp = await fetch(`/api/runs/${encodeURIComponent(r.name)}/curves`, { headers: headers, cache: "no-store" });
    if (gen !== curves.gen) return;
    if (resp.status === 200) {
      const data = await resp.json();
      curves.etag = resp.headers.get("ETag");
      curves.data = data;
      drawCurves(data);
    } else if (resp.status === 304) {
      if (curves.data) curvesStatus(curves.data);
    } else {
      $("curves-status").textContent = (await resp.json()).error || resp.statusText;
    }
  } catch (e) {
    if (gen === curves.gen) $("curves-status").textContent = `cannot reach the server (${e.message || e})`;
  }
  if (gen === curves.gen) curves.timer = setTimeout(() => pollCurves(gen), POLL_MS);
}

function watchCurves() {
  clearTimeout(curves.timer);
  curves = { gen: curves.gen + 1, etag: null, timer: null, data: null };
  $("charts").replaceChildren();
  $("curves-status").textContent = "";
  pollCurves(curves.gen);
}

// ------------------------------------------------------------------ controls
function current() { return runs.find((r) => r.name === $("run").value); }

function setRun() {
  const r = current();
  if (!r) return;
  $("task").textContent = `${r.task} run · ${r.supports.join(", ") || "no method"}`;
  const layers = $("layer");
  layers.replaceChildren(...r.layers.map((k) => el("option", { value: String(k) }, String(k))));
  if (r.default_layer) layers.value = String(r.default_layer);
  $("layer-box").hidden = !r.supports.includes("parse");
  $("beam-box").hidden = !r.supports.includes("translate");
  $("lm-box").hidden = !r.supports.includes("generate");
  // a run with nothing to ask about a sentence (a logic or ListOps classifier) shows its curves
  $("form").hidden = !["parse", "probe", "tag", "translate"].some((m) => r.supports.includes(m));
  $("result").replaceChildren();
  showError(null);
  watchCurves();
}

async function show(ev) {
  if (ev) ev.preventDefault();
  const r = current(), sentence = $("sentence").value;
  $("result").replaceChildren();
  showError(null);
  $("result").setAttribute("aria-busy", "true");
  try {
    if (r.supports.includes("translate")) {
      const data = await call("translate", { run: r.name, sentence: sentence,
                                             beam: Number($("beam").value) || 5 });
      section("translation").append(el("p", { class: "translation" }, data.translation));
      drawAttention(data.attention);
      if (data.source_tree) drawTrees(data.source_tree, "source tree (the encoder's ON-LSTM levels)");
    } else if (r.supports.includes("tag")) {
      drawSlots(await call("tag", { run: r.name, sentence: sentence }));
    } else {
      if (r.supports.includes("parse")) drawTrees(await call("parse", { run: r.name, sentence: sentence }), "induced tree");
      if (r.supports.includes("probe")) drawProbe(await call("probe", { run: r.name, prefix: sentence, k: 10 }), sentence);
    }
  } catch (e) { showError(e); }
  $("result").setAttribute("aria-busy", "false");
}

async function sample() {
  const r = current(), prompt = $("sentence").value;
  showError(null);
  try {
    const data = await call("generate", { run: r.name, prompt: prompt,
      length: Number($("length").value), temperature: Number($("temperature").value),
      seed: Number($("seed").value) });
    const s = section("sampled continuation");
    const p = el("p", { class: "generated" });
    p.append(el("b", {}, prompt), data.text);
    s.append(p);
  } catch (e) { showError(e); }
}

async function init() {
  try {
    const r = await fetch("/api/runs");
    runs = (await r.json()).runs;
  } catch (e) { showError(e); return; }
  $("run").replaceChildren(...runs.map((r) => el("option", { value: r.name }, `${r.name} (${r.task})`)));
  $("run").addEventListener("change", setRun);
  $("layer").addEventListener("change", () => { if ($("sentence").value.trim()) show(); });
  $("form").addEventListener("submit", show);
  $("sample").addEventListener("click", sample);
  setRun();
  document.body.dataset.ready = "true";
}

init();
