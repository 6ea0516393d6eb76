/* trajaudit report: renders the runs embedded as JSON (no network, no library).
   Data: #report-meta (title, columns), #runs-data (one summary per run), #d<N> (run N's detail, parsed
   when the run is opened). Trace text only ever reaches the page through textContent. */
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var PAGE = 100;
  var meta = JSON.parse(document.getElementById("report-meta").textContent);
  var runs = JSON.parse(document.getElementById("runs-data").textContent);
  var hasGold = runs.some(function (r) { return r.gold; });
  var state = {q: "", cat: "", agent: "", basis: "", cmin: 0, cmax: 1, file: "", rule: "", deep: false,
               sort: "pos", dir: 1, page: 0, open: -1};
  var shown = [];
  var hay = null;

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] === null || attrs[k] === undefined) continue;
        if (k === "text") el.textContent = attrs[k];
        else if (k === "cls") el.className = attrs[k];
        else if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), attrs[k]);
        else el.setAttribute(k, attrs[k]);
      }
    }
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function add(el, c) {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { add(el, x); }); return; }
    el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  function s(tag, attrs) {
    var el = document.createElementNS(SVGNS, tag);
    for (var k in attrs) {
      if (!Object.prototype.hasOwnProperty.call(attrs, k)) continue;
      if (k === "text") el.textContent = attrs[k]; else el.setAttribute(k, attrs[k]);
    }
    return el;
  }
  function key(r) { return r.key; }
  function byId(id) { return document.getElementById(id); }
  function pct(x) { return (100 * x).toFixed(0) + "%"; }
  function one(text, n) { text = String(text || "").replace(/\s+/g, " ").trim(); return text.length > n ? text.slice(0, n - 1) + "…" : text; }

  // run keys for deep links: the id, or id~k for the k-th repeat of an id (ids recur across data sets)
  (function () {
    var seen = {};
    runs.forEach(function (r, i) {
      r.pos = i;
      var n = seen[r.id] = (seen[r.id] || 0) + 1;
      r.key = n === 1 ? r.id : r.id + "~" + n;
    });
  })();

  // ---- filters -------------------------------------------------------------------------------------
  function fillSelect(id, values, label) {
    var sel = byId(id);
    var counts = {};
    values.forEach(function (v) { if (v !== "") counts[v] = (counts[v] || 0) + 1; });
    var names = Object.keys(counts).sort(function (a, b) { return counts[b] - counts[a] || (a < b ? -1 : 1); });
    sel.appendChild(h("option", {value: "", text: label}));
    names.forEach(function (v) { sel.appendChild(h("option", {value: v, text: v + " (" + counts[v] + ")"})); });
  }
  function buildHay() {
    hay = runs.map(function (r) {
      return [r.id, r.task, r.cat, r.agent, r.file, r.rat, r.prev, (r.rules || []).join(" "), r.basis]
        .join("\n").toLowerCase();
    });
  }
  // full text of the runs' steps (the detail blocks), read once when "in steps too" is ticked
  var deep = null, deepLoading = false;
  function loadDeep(done) {
    if (deep) { done(); return; }
    if (deepLoading) return;
    deepLoading = true;
    byId("count").textContent = "reading every run's steps…";
    var texts = new Array(runs.length), pending = [], n = meta.chunk || 64;
    for (var i = 0; i < runs.length; i++) {
      var el = byId("d" + i);
      if (el) texts[i] = el.textContent.toLowerCase();
    }
    for (var k = 0; k * n < runs.length; k++) {
      if (texts[k * n] !== undefined || !byId("c" + k)) continue;
      (function (k) {
        pending.push(new Promise(function (ok) { withDetail(runs[k * n], function () { ok(); }); }).then(function () {
          return chunks[k].then(function (list) {
            list.forEach(function (d, j) { texts[k * n + j] = JSON.stringify(d).toLowerCase(); });
          });
        }));
      })(k);
    }
    Promise.all(pending).then(function () { deep = texts; deepLoading = false; done(); });
  }
  function matches(r) {
    if (state.cat && r.cat !== state.cat) return false;
    if (state.agent && (r.agent || "—") !== state.agent) return false;
    if (state.basis && r.basis !== state.basis) return false;
    if (r.conf < state.cmin - 1e-9 || r.conf > state.cmax + 1e-9) return false;
    if (state.file && (r.file || "").toLowerCase().indexOf(state.file) < 0) return false;
    if (state.rule && (r.rules || []).indexOf(state.rule) < 0) return false;
    if (state.q) {
      if (!hay) buildHay();
      var text = hay[r.pos], more = state.deep && deep ? deep[r.pos] || "" : "";
      var words = state.q.split(/\s+/);
      for (var i = 0; i < words.length; i++) {
        if (words[i] && text.indexOf(words[i]) < 0 && more.indexOf(words[i]) < 0) return false;
      }
    }
    return true;
  }
  var SORTS = {
    pos: function (r) { return r.pos; }, id: function (r) { return r.id; },
    step: function (r) { return r.step === null ? -1 : r.step; }, cat: function (r) { return r.cat; },
    agent: function (r) { return r.agent || ""; }, conf: function (r) { return r.conf; },
    basis: function (r) { return ["finding", "weak", "fallback"].indexOf(r.basis); },
    nviol: function (r) { return r.nviol; }, file: function (r) { return r.file + "\u0000" + (r.rec || 0); },
    task: function (r) { return r.task; },
    gold: function (r) { return r.gold && r.gold.step !== null ? r.gold.step : -1; },
    dist: function (r) { return r.dist === null || r.dist === undefined ? 1e9 : r.dist; }
  };
  function apply() {
    shown = runs.filter(matches);
    var f = SORTS[state.sort] || SORTS.pos, dir = state.dir;
    shown.sort(function (a, b) {
      var x = f(a), y = f(b);
      if (x < y) return -dir;
      if (x > y) return dir;
      return a.pos - b.pos;
    });
    state.page = Math.min(state.page, Math.max(0, Math.ceil(shown.length / PAGE) - 1));
    renderTable();
    renderCharts();
  }

  // ---- the runs table -----------------------------------------------------------------------------
  var COLS = [["id", "run", "7%"], ["step", "step", "4.5%", "num"], ["cat", "category", "19%"], ["agent", "agent", "13%"],
              ["conf", "confidence", "8%"], ["basis", "basis", "9%"], ["nviol", "violations", "6.5%", "num"]];
  if (hasGold) COLS.push(["gold", "gold step", "6%", "num"], ["dist", "Δ", "4%", "num"]);
  COLS.push(["task", "task", hasGold ? "16%" : "24%"], ["file", "file", "9%"]);

  function renderHead() {
    var tr = byId("runs").querySelector("thead tr");
    COLS.forEach(function (c) {
      var th = h("th", {"data-key": c[0], style: "width:" + c[2], cls: c[3] || null, title: "sort by " + c[1],
                        onclick: function () {
                          if (state.sort === c[0]) state.dir = -state.dir;
                          else { state.sort = c[0]; state.dir = (c[0] === "conf" || c[0] === "nviol") ? -1 : 1; }
                          state.page = 0; apply();
                        }}, c[1]);
      tr.appendChild(th);
    });
  }
  function cell(r, c) {
    switch (c) {
      case "id": return h("td", {title: r.id}, h("a", {href: "#run=" + encodeURIComponent(r.key)}, r.id));
      case "step": return h("td", {cls: "num"}, r.step === null ? "—" : String(r.step));
      case "cat": return h("td", {title: r.cat}, r.cat);
      case "agent": return h("td", {title: r.agent}, r.agent || "—");
      case "conf": return h("td", null, h("span", {cls: "confbar"}, h("i", {style: "width:" + pct(r.conf)})), r.conf.toFixed(2));
      case "basis": return h("td", null, h("span", {cls: "basis " + r.basis, title: BASIS_TEXT[r.basis]},
                                              r.basis === "fallback" ? "fallback guess" : r.basis));
      case "nviol": return h("td", {cls: "num", title: (r.rules || []).join(", ")}, String(r.nviol));
      case "gold": return h("td", {cls: "num"}, r.gold && r.gold.step !== null && r.gold.step !== undefined ? String(r.gold.step) : "—");
      case "dist": return h("td", {cls: "num " + (r.dist === 0 ? "dist0" : r.dist > 3 ? "distfar" : "")},
                            r.dist === null || r.dist === undefined ? "—" : String(r.dist));
      case "task": return h("td", {title: one(r.task, 400)}, one(r.task || r.prev, 160));
      default: return h("td", {title: r.file + (r.rec !== null && r.rec !== undefined ? " #" + r.rec : "")},
                        (r.file || "").split(/[\\/]/).pop() + (r.rec !== null && r.rec !== undefined ? " #" + r.rec : ""));
    }
  }
  function renderTable() {
    var tbody = byId("runs").querySelector("tbody");
    var rows = shown.slice(state.page * PAGE, (state.page + 1) * PAGE);
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) {
      var tr = h("tr", {"data-pos": r.pos, "data-key": r.key, cls: "basis-" + r.basis + (r.pos === state.open ? " open" : "")});
      COLS.forEach(function (c) { tr.appendChild(cell(r, c[0])); });
      frag.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(frag);
    byId("runs").querySelectorAll("th").forEach(function (th) {
      var k = th.getAttribute("data-key");
      if (k === state.sort) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    byId("count").textContent = shown.length === runs.length ? runs.length + " run(s)"
      : shown.length + " of " + runs.length + " run(s) match";
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    var pager = byId("pager");
    pager.textContent = "";
    if (pages > 1) {
      add(pager, [h("button", {type: "button", onclick: function () { state.page--; renderTable(); }, disabled: state.page === 0 ? "" : null}, "‹ previous"),
                  h("span", null, "page " + (state.page + 1) + " of " + pages),
                  h("button", {type: "button", onclick: function () { state.page++; renderTable(); }, disabled: state.page >= pages - 1 ? "" : null}, "next ›")]);
    }
  }

  // ---- charts (inline SVG) ------------------------------------------------------------------------
  function hbars(id, items, onPick, current) {
    var svg = byId(id);
    svg.textContent = "";
    var rowH = 17, labelW = 182, W = 360, max = 1;
    items.forEach(function (it) { max = Math.max(max, it[1]); });
    svg.setAttribute("viewBox", "0 0 " + W + " " + Math.max(rowH, items.length * rowH + 4));
    items.forEach(function (it, i) {
      var y = i * rowH + 2, w = Math.max(1, (W - labelW - 40) * it[1] / max);
      var g = s("g", {});
      var label = s("text", {x: labelW - 6, y: y + 12, "text-anchor": "end", text: one(it[0], 27)});
      var title = s("title", {text: it[0] + ": " + it[1]});
      var rect = s("rect", {x: labelW, y: y + 2, width: w, height: rowH - 5, rx: 2,
                            "class": "bar" + (it[2] ? " other" : "") + (current === it[0] ? " on" : "")});
      rect.appendChild(title);
      if (onPick && !it[2]) rect.addEventListener("click", function () { onPick(it[0]); });
      g.appendChild(label); g.appendChild(rect);
      g.appendChild(s("text", {x: labelW + w + 4, y: y + 12, "class": "axis", text: String(it[1])}));
      svg.appendChild(g);
    });
  }
  function vbars(id, counts, labels, caption) {
    var svg = byId(id);
    svg.textContent = "";
    var W = 340, H = 110, pad = 18, n = counts.length, max = 1;
    counts.forEach(function (c) { max = Math.max(max, c); });
    svg.setAttribute("viewBox", "0 0 " + W + " " + (H + 30));
    var bw = (W - 2 * pad) / n;
    counts.forEach(function (c, i) {
      var bh = (H - 16) * c / max;
      var rect = s("rect", {x: pad + i * bw + 1, y: H - bh, width: bw - 2, height: Math.max(bh, c ? 1 : 0), "class": "bar"});
      rect.appendChild(s("title", {text: labels[i] + ": " + c + " run(s)"}));
      svg.appendChild(rect);
      if (c) svg.appendChild(s("text", {x: pad + i * bw + bw / 2, y: H - bh - 3, "text-anchor": "middle", "class": "axis", text: String(c)}));
    });
    svg.appendChild(s("text", {x: pad, y: H + 13, "class": "axis", text: labels[0].split("–")[0]}));
    svg.appendChild(s("text", {x: W - pad, y: H + 13, "text-anchor": "end", "class": "axis", text: labels[n - 1].split("–").pop()}));
    svg.appendChild(s("text", {x: W / 2, y: H + 27, "text-anchor": "middle", "class": "axis", text: caption}));
  }
  function count(list, f) {
    var c = {};
    list.forEach(function (r) { var k = f(r); c[k] = (c[k] || 0) + 1; });
    return Object.keys(c).map(function (k) { return [k, c[k]]; }).sort(function (a, b) { return b[1] - a[1] || (a[0] < b[0] ? -1 : 1); });
  }
  function renderCharts() {
    var cats = count(shown, function (r) { return r.cat; });
    hbars("chart-cat", cats.slice(0, 14), function (v) { setFilter("cat", state.cat === v ? "" : v); }, state.cat);
    var agents = count(shown, function (r) { return r.agent || "—"; });
    var TOP = 8, top = agents.slice(0, TOP);
    if (agents.length > TOP) {
      var rest = agents.slice(TOP).reduce(function (a, x) { return a + x[1]; }, 0);
      top.push(["other (" + (agents.length - TOP) + " agents)", rest, true]);
    }
    hbars("chart-agent", top, function (v) { setFilter("agent", state.agent === v ? "" : v); }, state.agent);
    var conf = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0], labels = [];
    shown.forEach(function (r) { conf[Math.min(9, Math.floor(r.conf * 10))]++; });
    for (var i = 0; i < 10; i++) labels.push((i / 10).toFixed(1) + "–" + ((i + 1) / 10).toFixed(1));
    vbars("chart-conf", conf, labels, "confidence");
    var pos = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0], plabels = [];
    shown.forEach(function (r) {
      if (r.step === null || !r.nsteps) return;
      var f = r.nsteps > 1 ? r.step / (r.nsteps - 1) : 0;
      pos[Math.min(9, Math.floor(f * 10))]++;
    });
    for (var j = 0; j < 10; j++) plabels.push((j * 10) + "%–" + ((j + 1) * 10) + "%");
    plabels[0] = "first step–10%"; plabels[9] = "90%–last step";
    vbars("chart-pos", pos, plabels, "critical step's position in its run");
  }

  // ---- controls ------------------------------------------------------------------------------------
  var CONTROLS = {q: "q", cat: "f-cat", agent: "f-agent", basis: "f-basis", cmin: "f-cmin", cmax: "f-cmax", file: "f-file", rule: "f-rule"};
  function setFilter(name, value) {
    state[name] = value;
    byId(CONTROLS[name]).value = value;
    state.page = 0;
    apply();
  }
  function readControls() {
    state.q = byId("q").value.trim().toLowerCase();
    state.cat = byId("f-cat").value; state.agent = byId("f-agent").value; state.basis = byId("f-basis").value;
    var lo = parseFloat(byId("f-cmin").value), hi = parseFloat(byId("f-cmax").value);
    state.cmin = isNaN(lo) ? 0 : lo; state.cmax = isNaN(hi) ? 1 : hi;
    state.file = byId("f-file").value.trim().toLowerCase(); state.rule = byId("f-rule").value;
    state.deep = byId("f-deep").checked;
    state.page = 0;
    if (state.deep && state.q && !deep) { loadDeep(apply); return; }
    apply();
  }
  var timer = null;
  function later() { clearTimeout(timer); timer = setTimeout(readControls, 120); }

  // ---- the run view --------------------------------------------------------------------------------
  var BANNER = {
    fallback: "No rule or claim evidence pointed at a step; this is the judge's default choice. Read the timeline before trusting it.",
    weak: "Only weaker findings back this step; check the evidence and the timeline."
  };
  var BASIS_TEXT = {
    finding: "backed by a rule or claim finding at this step",
    weak: "weak evidence only: read the timeline before trusting it",
    fallback: "a fallback guess: no rule or claim evidence pointed at a step"
  };
  var chunks = {};
  function withDetail(r, done) {  // run r's detail: its own JSON block, or its compressed chunk
    var el = byId("d" + r.pos);
    if (el) { done(JSON.parse(el.textContent)); return; }
    var k = Math.floor(r.pos / (meta.chunk || 64)), c = byId("c" + k);
    if (!c) {  // the page is still being read: the detail blocks come after the runs table's data
      if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { withDetail(r, done); }, {once: true});
      return;
    }
    if (!chunks[k]) {
      var bin = atob(c.textContent.trim()), bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      chunks[k] = new Response(stream).text().then(JSON.parse);
    }
    chunks[k].then(function (list) { done(list[r.pos % (meta.chunk || 64)]); });
  }
  function stepLink(r, n, label) {
    return h("a", {href: "#run=" + encodeURIComponent(r.key) + "&step=" + n}, label || "step " + n);
  }
  function linkify(r, text) {  // "steps.N…" addresses in prose become links to the step
    var out = [], re = /\bsteps\.(\d+)((?:\.[\w\[\]:-]+)*)/g, m, last = 0;
    text = String(text || "");
    while ((m = re.exec(text)) !== null) {
      out.push(text.slice(last, m.index));
      out.push(h("a", {href: "#run=" + encodeURIComponent(r.key) + "&step=" + m[1]}, h("code", null, m[0])));
      last = re.lastIndex;
    }
    out.push(text.slice(last));
    return out;
  }
  function prettyJson(x) {
    if (typeof x === "string") {
      var t = x.trim();
      if ((t[0] === "{" && t[t.length - 1] === "}") || (t[0] === "[" && t[t.length - 1] === "]")) {
        try { return JSON.stringify(JSON.parse(t), null, 2); } catch (e) { return x; }
      }
      return x;
    }
    return JSON.stringify(x, null, 2);
  }
  function quoted(vals) {  // short values as chips on one line, long ones as quotes
    var chips = vals.filter(function (x) { return x.length <= 60; }), long = vals.filter(function (x) { return x.length > 60; });
    return [chips.length ? h("div", {cls: "chips"}, chips.map(function (x) { return h("code", {cls: "chip"}, x); })) : null,
            long.map(function (x) { return h("blockquote", null, x); })];
  }
  function notMet(v) {  // a pack's title states what the rule expects: a finding is that it was not met
    return v.exp ? "not met: " + v.title : v.title;
  }
  function violationItem(r, v, withStep) {
    return h("li", {cls: v.sev},
      h("b", null, notMet(v)), " ", h("span", {cls: "badge " + v.sev}, v.sev), " ", withStep ? stepLink(r, v.s) : null,
      v.n > 1 ? h("span", {cls: "muted small"}, " ×" + v.n) : null,
      h("div", null, linkify(r, v.msgs[0] || "")),
      quoted(v.vals),
      h("details", {cls: "more"}, h("summary", null, "details"), h("div", null, "rule ", h("code", null, v.r)),
        v.msgs.slice(1).map(function (x) { return h("div", null, linkify(r, x)); }),
        v.n > v.msgs.length ? h("div", null, v.n + " finding(s) in all") : null,
        v.expr.map(function (x) { return h("div", null, h("code", null, x)); })));
  }
  var SEV = {critical: 0, error: 1, warning: 2, info: 3};
  function evidenceList(r, d) {
    var ul = h("ul", {cls: "ev"});
    var crit = d.viol.filter(function (v) { return v.s === r.step; });
    crit.sort(function (a, b) { return (SEV[a.sev] === undefined ? 9 : SEV[a.sev]) - (SEV[b.sev] === undefined ? 9 : SEV[b.sev]) || b.n - a.n; });
    var other = d.viol.filter(function (v) { return v.s !== r.step; });
    crit.forEach(function (v) { ul.appendChild(violationItem(r, v, true)); });
    if (!crit.length) {
      ul.appendChild(h("li", {cls: "muted"}, meta.logs === false ? "rule violations are not part of this report (the runs were "
        + "scored, not audited here: `trajaudit audit --report` shows them)" : "no rule or claim violation at the critical step"));
    }
    if (other.length) {
      var more = h("ul", {cls: "ev"});
      other.forEach(function (v) { more.appendChild(violationItem(r, v, true)); });
      ul.appendChild(h("li", {cls: "plain"}, h("details", null, h("summary", null, other.length + " violation group(s) at other steps"), more)));
    }
    return ul;
  }
  function citedList(r, d) {  // the judge's evidence, grouped by step and label; values as chips
    var groups = [], at = {};
    d.ev.forEach(function (e) {
      var k = e.s + "|" + e.notes.join(", ");
      if (!at[k]) { at[k] = {s: e.s, addr: e.addr, notes: e.notes.join(", "), items: [], expr: []}; groups.push(at[k]); }
      at[k].items.push(e);
      e.expr.forEach(function (x) { if (at[k].expr.indexOf(x) < 0) at[k].expr.push(x); });
    });
    var ul = h("ul", {cls: "ev"});
    groups.forEach(function (g) {
      var chips = [], long = [];
      g.items.forEach(function (e) {
        if (!e.v) return;
        var label = e.v + (e.n > 1 ? " ×" + e.n : "");
        if (e.v.length <= 60) chips.push(e.s !== null ? h("a", {cls: "chip", href: "#run=" + encodeURIComponent(r.key) + "&step=" + e.s, title: e.addr}, label) : h("code", {cls: "chip", title: e.addr}, label));
        else long.push(h("blockquote", {title: e.addr}, label));
      });
      ul.appendChild(h("li", null,
        g.s !== null ? stepLink(r, g.s, g.items.length > 1 ? "step " + g.s : g.addr) : h("code", null, g.addr), " ",
        g.notes ? h("span", {cls: "muted"}, g.notes) : null,
        g.items.length > 1 ? h("span", {cls: "muted small"}, " (" + g.items.length + ")") : null,
        chips.length ? h("div", {cls: "chips"}, chips) : null, long,
        g.expr.length ? h("details", {cls: "more"}, h("summary", null, "details"),
                          g.expr.map(function (x) { return h("div", null, h("code", null, x)); })) : null));
    });
    return ul;
  }
  function timeline(r, d) {
    var byStep = {}, claims = {};
    d.viol.forEach(function (v) { (byStep[v.s] = byStep[v.s] || []).push(v); });
    d.claims.forEach(function (c) { (claims[c.s] = claims[c.s] || []).push(c); });
    var goldStep = d.gold ? d.gold.step : null;
    var marks = h("div", {cls: "marks", title: "the run's steps: critical (red), with violations (amber), gold (green outline)"});
    var list = h("div", {cls: "timeline"});
    d.steps.forEach(function (st) {
      var isCrit = st.i === r.step, viol = byStep[st.i] || [], cl = claims[st.i] || [];
      marks.appendChild(h("a", {href: "#run=" + encodeURIComponent(r.key) + "&step=" + st.i, title: "step " + st.i + (isCrit ? " (critical)" : "") + (viol.length ? ", " + viol.length + " violation(s)" : ""),
                                cls: (isCrit ? "critical " : "") + (viol.length ? "viol " : "") + (st.i === goldStep ? "gold" : "")}));
      var badges = [];
      if (isCrit) badges.push(h("span", {cls: "badge critical"}, "critical step"));
      if (st.i === goldStep) badges.push(h("span", {cls: "badge gold"}, "gold"));
      viol.forEach(function (v) {
        badges.push(h("span", {cls: "badge " + v.sev, title: v.msgs.join("\n")}, notMet(v) + (v.n > 1 ? " ×" + v.n : "")));
      });
      if (cl.length) badges.push(h("span", {cls: "badge claim", title: cl.map(function (c) { return c.status + ": " + c.v; }).join("\n")}, cl.length + " unsupported claim(s)"));
      if (st.err) badges.push(h("span", {cls: "badge error"}, "failed"));
      var who = st.a || (st.t ? st.t : st.k);
      var body = h("div", {cls: "step-body"});
      if (st.x) body.appendChild(h("pre", {cls: st.k === "tool" && /^\s*[\[{]/.test(st.x) ? "json" : null}, st.k === "tool" ? prettyJson(st.x) : st.x));
      if (st.more) body.appendChild(h("div", {cls: "muted small"}, "… " + st.more + " more characters not included in the report"));
      (st.calls || []).forEach(function (c) {
        body.appendChild(h("div", null, h("span", {cls: "call-name"}, "→ " + c.n), h("pre", {cls: "json"}, prettyJson(c.args))));
      });
      if (viol.length) {
        var vl = h("ul", {cls: "ev"});
        viol.forEach(function (v) { vl.appendChild(violationItem(r, v, false)); });
        body.appendChild(vl);
      }
      var det = h("details", {cls: "step kind-" + st.k + (isCrit ? " critical" : "") + (st.i === goldStep ? " gold" : ""), id: "rv-step-" + st.i},
        h("summary", null, h("span", {cls: "idx"}, String(st.i)), h("span", {cls: "kind"}, st.k),
          h("span", {cls: "who"}, who), st.calls ? h("span", {cls: "muted small"}, st.calls.map(function (c) { return c.n; }).join(", ")) : null,
          badges, h("span", {cls: "prev"}, one(st.x || (st.calls ? st.calls.map(function (c) { return c.n + "(" + JSON.stringify(c.args) + ")"; }).join("; ") : ""), 220))),
        body);
      if (isCrit) det.open = true;
      list.appendChild(det);
    });
    return [marks, list];
  }
  function openRun(pos, step) {
    var r = runs[pos];
    if (!r) return;
    state.open = pos;
    withDetail(r, function (d) { if (state.open === pos) showRun(r, d, step); });
  }
  function showRun(r, d, step) {
    var pos = r.pos;
    var view = byId("run-view"), body = byId("rv-body");
    byId("rv-title").textContent = "run " + r.id + (r.file ? " — " + r.file.split(/[\\/]/).pop() + (r.rec !== null && r.rec !== undefined ? " #" + r.rec : "") : "");
    body.textContent = "";
    if (r.basis !== "finding") {
      body.appendChild(h("div", {cls: "banner " + r.basis},
        h("b", null, r.basis === "fallback" ? "Fallback guess. " : "Weak evidence. "), BANNER[r.basis]));
    }
    var dl = h("dl", {cls: "diag"},
      h("dt", null, "critical step"), h("dd", null, r.step === null ? "none" : stepLink(r, r.step), " ",
                                         h("span", {cls: "basis " + r.basis}, r.basis === "fallback" ? "fallback guess" : r.basis)),
      h("dt", null, "category"), h("dd", null, r.cat, h("span", {cls: "muted"}, " (" + d.tax + ")")),
      h("dt", null, "agent"), h("dd", null, r.agent || "—"),
      h("dt", null, "confidence"), h("dd", null, r.conf.toFixed(2)),
      h("dt", null, "strategy"), h("dd", null, r.strat));
    if (d.gold) {
      add(dl, [h("dt", null, "gold"), h("dd", null, d.gold.step === null || d.gold.step === undefined ? "no gold step" : stepLink(r, d.gold.step, "step " + d.gold.step),
                                          d.gold.agent ? " · " + d.gold.agent : "", d.gold.cat ? " · " + d.gold.cat : "",
                                          r.dist !== null && r.dist !== undefined ? h("b", null, " · distance " + r.dist) : "")]);
    }
    add(dl, [h("dt", null, "file"), h("dd", null, h("code", null, r.file + (r.rec !== null && r.rec !== undefined ? " #" + r.rec : "")), " ", d.fmt ? h("span", {cls: "muted"}, d.fmt) : null)]);
    body.appendChild(dl);
    body.appendChild(h("h3", null, "Why"));
    body.appendChild(h("p", {cls: "rationale"}, linkify(r, r.rat)));
    if (d.rat && d.rat.replace(/\s+/g, " ").trim() !== r.rat) {
      body.appendChild(h("details", {cls: "more"}, h("summary", null, "full rationale"), h("p", null, linkify(r, d.rat))));
    }
    if (d.task) {
      body.appendChild(h("details", {cls: "more"}, h("summary", null, "task: " + one(d.task, 120)), h("pre", null, d.task)));
    }
    body.appendChild(h("h3", null, "Evidence"));
    body.appendChild(evidenceList(r, d));
    if (d.ev.length) { body.appendChild(h("h3", null, "Cited by the judge")); body.appendChild(citedList(r, d)); }
    if (d.cands.length > 1) {
      var ol = h("ol", {cls: "small"});
      d.cands.forEach(function (c) { ol.appendChild(h("li", null, stepLink(r, c.s), " · " + c.cat + " · score " + c.score.toFixed(2) + " · ", linkify(r, c.why))); });
      body.appendChild(h("details", {cls: "more"}, h("summary", null, d.cands.length + " candidate steps"), ol));
    }
    if (d.repair) { body.appendChild(h("h3", null, "Repair")); body.appendChild(h("p", null, d.repair)); }
    if (d.incomplete.length) body.appendChild(h("p", {cls: "small muted"}, "incomplete: ", d.incomplete.join("; ")));
    body.appendChild(h("h3", null, "Timeline (" + d.steps.length + " steps)"));
    add(body, timeline(r, d));
    view.hidden = false;
    document.querySelectorAll("#runs tbody tr.open").forEach(function (tr) { tr.classList.remove("open"); });
    var row = document.querySelector('#runs tbody tr[data-pos="' + pos + '"]');
    if (row) row.classList.add("open");
    var target = step === null || step === undefined ? r.step : step;
    focusStep(target, step !== null && step !== undefined);
  }
  function focusStep(n, flash) {
    var body = byId("rv-body");
    var el = n === null || n === undefined ? null : byId("rv-step-" + n);
    if (!el) { body.scrollTop = 0; return; }
    el.open = true;
    body.scrollTop = el.offsetTop - body.offsetTop - 40;
    if (flash) { el.classList.remove("flash"); void el.offsetWidth; el.classList.add("flash"); }
  }
  function closeRun() {
    byId("run-view").hidden = true;
    state.open = -1;
    document.querySelectorAll("#runs tbody tr.open").forEach(function (tr) { tr.classList.remove("open"); });
    if (location.hash) history.replaceState(null, "", location.pathname + location.search);
  }
  function fromHash() {
    var m = /^#(.*)$/.exec(location.hash || "");
    if (!m) return;
    var params = {};
    m[1].split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) { try { params[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1)); } catch (e) { /* a bad escape: ignored */ } }
    });
    if (params.run === undefined) return;
    var r = null;
    for (var i = 0; i < runs.length; i++) if (runs[i].key === params.run) { r = runs[i]; break; }
    if (!r) return;
    var step = params.step !== undefined && /^\d+$/.test(params.step) ? parseInt(params.step, 10) : null;
    if (state.open === r.pos && byId("rv-body").firstChild) focusStep(step === null ? r.step : step, step !== null);
    else openRun(r.pos, step);
  }
  function move(delta) {
    if (state.open < 0 || !shown.length) return;
    var i = -1;
    for (var k = 0; k < shown.length; k++) if (shown[k].pos === state.open) { i = k; break; }
    var next = shown[Math.max(0, Math.min(shown.length - 1, i + delta))];
    if (next) location.hash = "run=" + encodeURIComponent(next.key);
  }

  // ---- start ---------------------------------------------------------------------------------------
  fillSelect("f-cat", runs.map(function (r) { return r.cat; }), "all categories");
  fillSelect("f-agent", runs.map(function (r) { return r.agent || "—"; }), "all agents");
  var rules = [];
  runs.forEach(function (r) { (r.rules || []).forEach(function (x) { rules.push(x); }); });
  fillSelect("f-rule", rules, "any violated rule");
  renderHead();
  ["q", "f-file"].forEach(function (id) { byId(id).addEventListener("input", later); });
  ["f-cat", "f-agent", "f-basis", "f-rule", "f-cmin", "f-cmax", "f-deep"].forEach(function (id) { byId(id).addEventListener("change", readControls); });
  byId("filters").addEventListener("submit", function (e) { e.preventDefault(); readControls(); });
  byId("filters").addEventListener("reset", function () { setTimeout(readControls, 0); });
  byId("runs").querySelector("tbody").addEventListener("click", function (e) {
    if (e.target.closest("a")) return;  // the id link sets the hash itself
    var tr = e.target.closest("tr");
    if (tr) location.hash = "run=" + encodeURIComponent(tr.getAttribute("data-key"));
  });
  byId("rv-close").addEventListener("click", closeRun);
  byId("rv-prev").addEventListener("click", function () { move(-1); });
  byId("rv-next").addEventListener("click", function () { move(1); });
  document.addEventListener("keydown", function (e) {
    if (e.target && /^(INPUT|SELECT|TEXTAREA)$/.test(e.target.tagName)) return;
    if (e.key === "Escape") closeRun();
    else if (e.key === "j") move(1);
    else if (e.key === "k") move(-1);
  });
  window.addEventListener("hashchange", fromHash);
  apply();
  window.__trajaudit = {firstRender: performance.now(), runs: runs.length};
  fromHash();
})();
