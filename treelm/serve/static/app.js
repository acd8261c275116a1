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
    fig.append(el("figcaption", {}, `layer ${layer}, ${label}`));
    box.append(fig);
  }
  s.append(box);
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
  $("result").replaceChildren();
  showError(null);
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
