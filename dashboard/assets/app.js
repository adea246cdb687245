// The slidegate dashboard's page: a table of resources (with what shadow
// rules would have blocked), the guard's events as a timeline, the health of
// its cluster, the shed and adaptive
// rules with what they have learnt, the top keys of the resources with
// per-key rules, a chart per resource and the rules in force, kept live by the server's event stream
// (api/events). Every URL is relative, so the page works under any prefix.
// No build step: plain JavaScript, with uPlot (vendored) for the charts.
"use strict";

(function () {
  const MAX_CHARTS = 24; // charts drawn at once; the filter picks others
  const MAX_EVENTS = 128; // the guard's events kept, as the server keeps them (slidegate.KeptEvents)

  const COLORS = {
    allowed: "#1c7ed6",
    blocked: "#f59f00",
    failed: "#e03131",
    p50: "#0ca678",
    p99: "#7048e8",
  };

  // What the page knows: filled by a "snapshot" event, then kept up to date
  // by "sample" events.
  const state = {
    history: 300,
    topKeys: 10, // keys shown in each list of a resource's top keys
    editing: false,
    time: 0,
    inbound: null, // {name, stats, hist}
    resources: new Map(), // name → {name, breaker, stats, hist, keys}
    breakers: [],
    overload: [], // the shed and adaptive rules in force, with what they have learnt
    retries: [], // the retry budgets (WithRetryBudget), with what they have counted
    events: [], // the guard's events, oldest first, at most MAX_EVENTS: {seq, time, kind, warn, text}
    droppedEvents: 0, // events the guard's listeners were not told
    cluster: null, // the cluster's health: {state, failures, fallbacks, error}; null without a cluster
    rules: {}, // every rule named
    sortKey: "name",
    sortDir: 1,
    filter: "",
  };

  const $ = (id) => document.getElementById(id);

  // el makes an element with properties (and dataset, className) and children.
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === "dataset") Object.assign(e.dataset, v);
      else e[k] = v;
    }
    for (const c of children) {
      if (c == null) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  // ---- numbers ----

  function fmtRate(v) {
    if (v == null || Number.isNaN(v)) return "–";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    if (a >= 100) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    return v.toFixed(2);
  }

  // fmtDur formats seconds.
  function fmtDur(s) {
    if (s == null || Number.isNaN(s)) return "–";
    if (s === 0) return "0";
    const a = Math.abs(s);
    if (a < 1e-3) return (s * 1e6).toFixed(a < 1e-5 ? 1 : 0) + " µs";
    if (a < 1) return (s * 1e3).toFixed(a < 1e-2 ? 2 : a < 0.1 ? 1 : 0) + " ms";
    return s.toFixed(2) + " s";
  }

  function fmtTime(unix) {
    return new Date(unix * 1000).toLocaleTimeString([], { hour12: false });
  }

  // ---- state ----

  const COLUMNS = ["t", "allowed_rate", "blocked_rate", "failed_rate", "in_flight", "p50", "p99", "breaker", "would_block_rate"];

  function emptyHist() {
    const h = {};
    for (const c of COLUMNS) h[c] = [];
    return h;
  }

  // An entry whose history is partial has only the newest points of it: the
  // snapshot's share (the server bounds the points a snapshot carries), and
  // those since. Its chart asks for the rest (fetchHistory).
  function fromSnapshotResource(r) {
    return { name: r.name, breaker: r.breaker || "", stats: r.stats, hist: r.history || emptyHist(), partial: !!r.partial, keys: r.keys || null };
  }

  function applySnapshot(s) {
    state.history = s.history;
    state.topKeys = s.top_keys;
    state.editing = s.editing;
    state.time = s.time;
    state.inbound = fromSnapshotResource(s.inbound);
    state.resources = new Map(s.resources.map((r) => [r.name, fromSnapshotResource(r)]));
    state.breakers = s.breakers || [];
    state.overload = s.overload || [];
    state.retries = s.retries || [];
    state.events = (s.events || []).slice(-MAX_EVENTS);
    state.droppedEvents = s.dropped_events || 0;
    state.cluster = s.cluster || null;
    setRules(s.rules || {});
    render();
  }

  function applyPoint(entry, r) {
    entry.stats = r.stats;
    entry.breaker = r.breaker || "";
    entry.keys = r.keys || null;
    const p = r.point;
    if (!p) return;
    const h = entry.hist;
    const n = h.t.length;
    if (n > 0 && p.t <= h.t[n - 1]) return; // already have it
    for (const c of COLUMNS) h[c].push(p[c] === undefined ? (c === "breaker" ? "" : 0) : p[c]);
    while (h.t.length > state.history) for (const c of COLUMNS) h[c].shift();
  }

  // mergeHist returns the points of older that come before the first of
  // newer, then those of newer, at most state.history of them.
  function mergeHist(older, newer) {
    const first = newer.t.length ? newer.t[0] : Infinity;
    let n = 0;
    while (n < older.t.length && older.t[n] < first) n++;
    const h = {};
    for (const c of COLUMNS) h[c] = (older[c] || []).slice(0, n).concat(newer[c]);
    const excess = h.t.length - state.history;
    if (excess > 0) for (const c of COLUMNS) h[c] = h[c].slice(excess);
    return h;
  }

  // fetchHistory asks for the whole history of a partial entry, and puts it
  // before the points the entry has. A fetch that does not succeed is tried
  // again, not before ten seconds.
  const fetching = new Set(); // names
  async function fetchHistory(e) {
    if (fetching.has(e.name) || Date.now() < (e.retryAt || 0)) return;
    fetching.add(e.name);
    try {
      const resp = await fetch("api/history?resource=" + encodeURIComponent(e.name));
      if (!resp.ok) {
        e.retryAt = Date.now() + 10000;
        return;
      }
      const r = await resp.json();
      if (state.resources.get(e.name) !== e || !r.history) return; // gone, or replaced by a snapshot since
      e.hist = mergeHist(r.history, e.hist);
      e.partial = false;
      render();
    } catch (err) {
      e.retryAt = Date.now() + 10000;
    } finally {
      fetching.delete(e.name);
    }
  }

  function applySample(ev) {
    state.time = ev.time;
    applyPoint(state.inbound, ev.inbound);
    const next = new Map();
    for (const r of ev.resources) {
      const entry = state.resources.get(r.name) || { name: r.name, breaker: "", stats: r.stats, hist: emptyHist() };
      applyPoint(entry, r);
      next.set(r.name, entry);
    }
    state.resources = next; // resources missing from the event are gone
    state.breakers = ev.breakers || [];
    state.overload = ev.overload || [];
    state.retries = ev.retries || [];
    addEvents(ev.events || []);
    state.droppedEvents = ev.dropped_events || 0;
    state.cluster = ev.cluster || null;
    if (ev.rules) setRules(ev.rules);
    render();
  }

  // addEvents appends the events newer than those the page has (a stream
  // that caught up from a snapshot may be sent one again), keeping the
  // newest MAX_EVENTS.
  function addEvents(list) {
    const have = state.events.length ? state.events[state.events.length - 1].seq : 0;
    const fresh = list.filter((e) => e.seq > have);
    if (!fresh.length) return;
    state.events = state.events.concat(fresh).slice(-MAX_EVENTS);
  }

  function last(entry, col) {
    const a = entry.hist[col];
    return a.length ? a[a.length - 1] : null;
  }

  // ---- the resources table ----

  const BREAKER_RANK = { "": 0, closed: 1, "half-open": 2, open: 3 };

  const sortValue = {
    name: (e) => e.name,
    allowed: (e) => last(e, "allowed_rate") ?? -1,
    blocked: (e) => last(e, "blocked_rate") ?? -1,
    failed: (e) => last(e, "failed_rate") ?? -1,
    inflight: (e) => e.stats.in_flight,
    p50: (e) => e.stats.p50,
    p99: (e) => e.stats.p99,
    breaker: (e) => BREAKER_RANK[e.breaker] || 0,
  };

  function visibleResources() {
    const f = state.filter;
    const key = sortValue[state.sortKey];
    const dir = state.sortDir;
    const list = [...state.resources.values()].filter((e) => !f || e.name.toLowerCase().includes(f));
    list.sort((a, b) => {
      const x = key(a), y = key(b);
      const c = typeof x === "string" ? x.localeCompare(y) : x - y;
      return c !== 0 ? c * dir : a.name.localeCompare(b.name);
    });
    return list;
  }

  function badge(s) {
    if (!s) return el("span", { className: "badge badge-none" }, "none");
    return el("span", { className: "badge badge-" + s }, s);
  }

  // wouldBlockTag says, for a resource (or the inbound traffic) that shadow
  // rules would have blocked requests of, how many per second since the
  // last sample; nothing for one they never would have. Those requests were
  // allowed: they are among allowed/s, not blocked/s.
  function wouldBlockTag(e) {
    const total = e.stats.totals.would_block || 0;
    if (total <= 0) return null;
    return el("span", {
      className: "tag tag-would-block",
      title: "Requests that shadow rules would have blocked and let through, per second; " + total + " since the start",
    }, "would block " + fmtRate(last(e, "would_block_rate") ?? 0) + "/s");
  }

  function renderTable(list) {
    const tbody = $("resources").tBodies[0];
    const rows = list.map((e) =>
      el("tr", { dataset: { resource: e.name } },
        el("td", { className: "name", title: e.name }, e.name),
        el("td", { className: "num allowed" }, fmtRate(last(e, "allowed_rate"))),
        el("td", { className: "num blocked" + (last(e, "blocked_rate") > 0 ? " warn" : "") }, fmtRate(last(e, "blocked_rate")), wouldBlockTag(e)),
        el("td", { className: "num failed" + (last(e, "failed_rate") > 0 ? " bad" : "") }, fmtRate(last(e, "failed_rate"))),
        el("td", { className: "num inflight" }, String(e.stats.in_flight)),
        el("td", { className: "num p50" }, e.stats.p50 ? fmtDur(e.stats.p50) : "–"),
        el("td", { className: "num p99" }, e.stats.p99 ? fmtDur(e.stats.p99) : "–"),
        el("td", { className: "breaker" }, badge(e.breaker))));
    tbody.replaceChildren(...rows);
    $("resources-empty").hidden = state.resources.size > 0 && list.length > 0;
    $("resources-empty").textContent = state.resources.size === 0 ? "No resources yet." : "No resource matches the filter.";
    for (const th of $("resources").tHead.rows[0].cells) {
      th.classList.toggle("sorted-asc", th.dataset.key === state.sortKey && state.sortDir > 0);
      th.classList.toggle("sorted-desc", th.dataset.key === state.sortKey && state.sortDir < 0);
      th.setAttribute("aria-sort", th.dataset.key === state.sortKey ? (state.sortDir > 0 ? "ascending" : "descending") : "none");
    }
  }

  // ---- the overload rules ----

  // fmtCPU formats a CPU usage, a share; -1 is no reading.
  function fmtCPU(v) {
    if (v == null || v < 0) return "–";
    return (v * 100).toFixed(0) + "%";
  }

  function renderOverload() {
    const list = state.overload;
    $("overload-panel").hidden = list.length === 0;
    const rows = list.map((o) => {
      const shed = o.type === "shed";
      return el("tr", { dataset: { resource: o.resource, rule: o.rule } },
        el("td", { className: "rule" }, o.rule),
        el("td", { className: "name", title: o.resource }, o.resource),
        el("td", { className: "type" }, o.type),
        el("td", { className: "num limit" }, o.limit < 0 ? "none" : String(o.limit)),
        el("td", { className: "num learnt" }, !shed ? "–" : o.learnt < 0 ? "learning" : String(o.learnt)),
        el("td", { className: "num inflight" }, String(o.in_flight)),
        el("td", { className: "num cpu" }, shed ? fmtCPU(o.cpu) : "–"),
        el("td", { className: "shedding" }, shed ? badge(o.shedding ? "shedding" : "idle") : "–"),
        el("td", { className: "num baseline" }, shed || !o.baseline ? "–" : fmtDur(o.baseline)));
    });
    $("overload").tBodies[0].replaceChildren(...rows);
  }

  // ---- the guard's events ----

  // fmtAgo says how long ago, in seconds, something happened: to the
  // nearest second (times are Unix seconds with milliseconds, whose
  // difference is not exact), then in whole minutes, hours and days.
  function fmtAgo(s) {
    const r = Math.round(s);
    if (r < 1) return "now";
    if (r < 60) return r + " s ago";
    if (r < 3600) return Math.floor(r / 60) + " min ago";
    if (r < 86400) return Math.floor(r / 3600) + " h ago";
    return Math.floor(r / 86400) + " d ago";
  }

  // renderEvents lists the events newest first, each at its time relative
  // to the latest sample (both on the guard's clock), those that tell of
  // trouble (a breaker opening, rules refused, …) in the warning colour.
  // An event's text is the server's, at most 512 bytes, shown as text.
  function renderEvents() {
    const list = state.events;
    const rows = [];
    for (let i = list.length - 1; i >= 0; i--) {
      const e = list[i];
      rows.push(el("tr", { className: e.warn ? "warn" : "", dataset: { seq: e.seq, kind: e.kind } },
        el("td", { className: "ago", title: fmtTime(e.time) }, fmtAgo(state.time - e.time)),
        el("td", { className: "kind" }, el("span", { className: "badge badge-event" + (e.warn ? " badge-event-warn" : "") }, e.kind.replace(/_/g, " "))),
        el("td", { className: "text", title: e.text }, e.text)));
    }
    $("events").tBodies[0].replaceChildren(...rows);
    $("events-empty").hidden = list.length > 0;
    const dropped = state.droppedEvents;
    $("events-note").textContent = "newest first, the latest " + MAX_EVENTS +
      (dropped > 0 ? ` · ${dropped} not told to listeners that fell behind` : "");
  }

  // ---- the cluster ----

  // renderCluster shows the health of the guard's cluster in the header,
  // and nothing for a guard without one.
  function renderCluster() {
    const box = $("cluster");
    const c = state.cluster;
    box.hidden = !c;
    if (!c) return box.replaceChildren();
    const tip = c.state === "healthy" ? "The cluster decides the cluster-wide limits" :
      c.state === "misconfigured" ? "An error that retrying will not fix: " + (c.error || "") :
        "The cluster-wide limits use their fallback";
    box.title = tip + `. ${c.failures} calls failed or timed out; ${c.fallbacks} decisions made by the fallback.`;
    box.replaceChildren(
      el("dt", {}, "cluster"),
      el("dd", {}, el("span", { className: "badge badge-cluster-" + c.state }, c.state),
        el("span", { className: "cluster-counts" }, ` ${c.failures} failures · ${c.fallbacks} fallbacks`),
        c.error ? el("span", { className: "cluster-error" }, " " + c.error) : null));
  }

  // ---- the retry budgets ----

  // A budget's name is the program's, but is shown as text all the same.
  function renderRetries() {
    const list = state.retries;
    $("retry-panel").hidden = list.length === 0;
    const rows = list.map((r) =>
      el("tr", { dataset: { budget: r.budget } },
        el("td", { className: "name", title: r.budget }, r.budget),
        el("td", { className: "num requests" }, String(r.requests)),
        el("td", { className: "num retries" }, String(r.retries)),
        el("td", { className: "num blocked" }, String(r.blocked)),
        el("td", { className: "num notretried" }, String(r.not_retried))));
    $("retries").tBodies[0].replaceChildren(...rows);
  }

  // ---- the top keys ----

  // A key is text a client sent: it is only ever set as text (el appends
  // strings as text nodes), never parsed as markup.
  function keyCell(key) {
    if (key === "") return el("td", { className: "key no-key", title: "The requests that carry no key" }, "(no key)");
    return el("td", { className: "key", title: key }, key);
  }

  const byText = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

  function fmtInterval(s) {
    if (s >= 3600 && s % 3600 === 0) return s / 3600 + " h";
    if (s >= 60 && s % 60 === 0) return s / 60 + " min";
    return s + " s";
  }

  // keyedInRules returns the resources whose keys the guard tracks: those
  // with a per-key QPS rule of their own (not a cluster's).
  function keyedInRules() {
    const names = new Set();
    for (const f of state.rules.flow || []) {
      if (f.per_key && !f.cluster && (f.type || "qps") === "qps") names.add(f.resource);
    }
    return names;
  }

  // keyList is one list of a resource's keys: by what first says, most first.
  function keyList(title, keys, first, second, heads, tips, empty) {
    const rows = keys.map((k) =>
      el("tr", { dataset: { key: k.key } }, keyCell(k.key),
        el("td", { className: "num " + first }, String(k[first])),
        el("td", { className: "num " + second }, String(k[second]))));
    return el("div", { className: "keys-list " + first },
      el("h4", {}, title),
      rows.length ? el("table", { className: "grid compact" },
        el("thead", {}, el("tr", {},
          el("th", { scope: "col" }, "Key"),
          el("th", { scope: "col", className: "num", title: tips[first] }, heads[first]),
          el("th", { scope: "col", className: "num", title: tips[second] }, heads[second]))),
        el("tbody", {}, ...rows)) : el("p", { className: "empty" }, empty));
  }

  function renderKeys() {
    const list = [...state.resources.values()].filter((e) => e.keys).sort((a, b) => byText(a.name, b.name));
    const unshown = [...keyedInRules()].filter((name) => { const e = state.resources.get(name); return e && !e.keys; }).length;
    $("keys-panel").hidden = state.topKeys === 0 || (list.length === 0 && unshown === 0);
    const n = state.topKeys;
    const heads = { allowed: "Allowed", blocked: "Blocked" };
    const cards = list.map((e) => {
      const iv = fmtInterval(e.keys.interval);
      const tips = {
        allowed: "Requests of the key allowed in the last " + iv,
        blocked: "Requests of the key that the per-key rules blocked, in this " + iv + " and the one before",
      };
      const top = e.keys.top;
      const busiest = [...top].sort((a, b) => b.allowed - a.allowed || b.blocked - a.blocked || byText(a.key, b.key)).slice(0, n);
      const blocked = top.filter((k) => k.blocked > 0)
        .sort((a, b) => b.blocked - a.blocked || b.allowed - a.allowed || byText(a.key, b.key)).slice(0, n);
      return el("article", { className: "keys-card", dataset: { resource: e.name } },
        el("header", {}, el("h3", { title: e.name }, e.name), el("span", { className: "note" }, "per key, last " + iv)),
        el("div", { className: "keys-lists" },
          keyList("Busiest", busiest, "allowed", "blocked", heads, tips, "No key over half its limit."),
          keyList("Most blocked", blocked, "blocked", "allowed", heads, tips, "No key blocked.")));
    });
    $("keys").replaceChildren(...cards);
    $("keys-note").textContent = "keys over half their limit" +
      (unshown > 0 ? ` · ${unshown} more resource${unshown === 1 ? "" : "s"} with per-key rules not shown: a sample carries the keys of the most blocked ${list.length}` : "");
  }

  // ---- the charts ----

  const charts = new Map(); // name → {card, rates, latency}

  function chartWidth(card) {
    return Math.max(200, card.clientWidth - 24);
  }

  // Tick labels: short, with no trailing zeros.
  const trim = (v) => String(parseFloat(v.toPrecision(3)));
  function fmtRateTick(v) {
    const a = Math.abs(v);
    if (a >= 1e6) return trim(v / 1e6) + "M";
    if (a >= 1e3) return trim(v / 1e3) + "k";
    return trim(v);
  }
  function fmtDurTick(s) {
    const a = Math.abs(s);
    if (a === 0) return "0";
    if (a < 1e-3) return trim(s * 1e6) + " µs";
    if (a < 1) return trim(s * 1e3) + " ms";
    return trim(s) + " s";
  }
  const pad = (n) => String(n).padStart(2, "0");
  function fmtClock(unix, seconds) {
    const d = new Date(unix * 1000);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + (seconds ? ":" + pad(d.getSeconds()) : "");
  }

  function axis(values, size) {
    return {
      stroke: "#5c6370",
      grid: { stroke: "#eceef1", width: 1 },
      ticks: { stroke: "#eceef1", width: 1, size: 4 },
      font: "11px system-ui, sans-serif",
      size,
      values,
    };
  }
  const timeAxis = (show) => Object.assign(axis((u, splits) => {
    const step = splits.length > 1 ? splits[1] - splits[0] : 1;
    return splits.map((v) => fmtClock(v, step < 60));
  }, 26), { show, space: 70 });

  function line(label, color, fmt, fill) {
    return { label, stroke: color, width: 1.5, fill, points: { show: false }, value: (u, v) => fmt(v) };
  }

  // The same padding for both charts of a card, so that their time axes
  // line up (uPlot pads for the tick labels of the axes it shows).
  const PADDING = [8, 28, null, 0];
  const PADDING_NO_AXIS = [8, 28, 8, 0]; // room for the lowest tick label

  const zeroBased = (u, lo, hi) => [0, hi > 0 ? hi * 1.1 : 1];

  // showLatest makes the legend show the newest values while the cursor is
  // not on the chart.
  function showLatest(u) {
    const n = u.data[0].length;
    if (n > 0 && (u.cursor.left == null || u.cursor.left < 0)) u.setLegend({ idx: n - 1 });
  }

  function breakerSlot(e) {
    return e.breaker ? badge(e.breaker) : "";
  }

  function makeChart(e) {
    const slot = el("span", { className: "badge-slot" }, breakerSlot(e));
    const card = el("article", { className: "chart-card", dataset: { resource: e.name } },
      el("header", {}, el("h3", { title: e.name }, e.name), slot));
    const ratesEl = el("div", { className: "chart chart-rates" });
    const latEl = el("div", { className: "chart chart-latency" });
    card.append(ratesEl, latEl);
    $("charts").append(card);
    const width = chartWidth(card);
    const x = { label: "time", value: (u, v) => (v == null ? "–" : fmtClock(v, true)) };
    const cursor = { sync: { key: "slidegate" }, points: { size: 5 } };
    const hooks = { setCursor: [showLatest] };
    const rates = new uPlot({
      width, height: 150, cursor, hooks, padding: PADDING,
      scales: { x: { time: true }, y: { range: zeroBased } },
      series: [x,
        line("allowed/s", COLORS.allowed, fmtRate, "rgba(28,126,214,0.08)"),
        line("blocked/s", COLORS.blocked, fmtRate),
        line("failed/s", COLORS.failed, fmtRate)],
      axes: [timeAxis(true), axis((u, vals) => vals.map(fmtRateTick), 56)],
    }, ratesData(e), ratesEl);
    const latency = new uPlot({
      width, height: 100, cursor, hooks, padding: PADDING_NO_AXIS,
      scales: { x: { time: true }, y: { range: zeroBased } },
      series: [x, line("P50", COLORS.p50, fmtDur), line("P99", COLORS.p99, fmtDur, "rgba(112,72,232,0.06)")],
      axes: [timeAxis(false), axis((u, vals) => vals.map(fmtDurTick), 56)],
    }, latencyData(e), latEl);
    showLatest(rates);
    showLatest(latency);
    return { card, slot, rates, latency };
  }

  const ratesData = (e) => [e.hist.t, e.hist.allowed_rate, e.hist.blocked_rate, e.hist.failed_rate];
  const latencyData = (e) => [e.hist.t, e.hist.p50, e.hist.p99];

  function renderCharts(list) {
    const shown = list.slice(0, MAX_CHARTS);
    const keep = new Set(shown.map((e) => e.name));
    for (const [name, c] of charts) {
      if (!keep.has(name)) {
        c.rates.destroy();
        c.latency.destroy();
        c.card.remove();
        charts.delete(name);
      }
    }
    const box = $("charts");
    for (const e of shown) {
      if (e.partial) fetchHistory(e);
      let c = charts.get(e.name);
      if (!c) {
        c = makeChart(e);
        charts.set(e.name, c);
      } else {
        c.rates.setData(ratesData(e));
        c.latency.setData(latencyData(e));
        showLatest(c.rates);
        showLatest(c.latency);
        c.slot.replaceChildren(breakerSlot(e));
      }
      c.card.dataset.points = e.hist.t.length; // what the chart draws: its history, whole once fetched
      box.append(c.card); // keeps the table's order
    }
    const hidden = list.length - shown.length;
    $("charts-note").textContent = hidden > 0 ? `${hidden} more: narrow the filter to see them` :
      `last ${state.history} samples · allowed/s, blocked/s, failed/s above; P50 and P99 below`;
  }

  function resizeCharts() {
    for (const c of charts.values()) {
      const width = chartWidth(c.card);
      c.rates.setSize({ width, height: 150 });
      c.latency.setSize({ width, height: 100 });
    }
  }

  // ---- the header ----

  function renderInbound() {
    const e = state.inbound;
    const dl = $("inbound");
    if (!e) return dl.replaceChildren();
    const item = (k, tip, v, cls) => el("div", { className: "kv", title: tip }, el("dt", {}, k), el("dd", { className: cls || "" }, v));
    dl.replaceChildren(...[
      item("inbound allowed/s", "Inbound requests allowed per second", fmtRate(last(e, "allowed_rate"))),
      item("blocked/s", "Inbound requests blocked per second", fmtRate(last(e, "blocked_rate")), last(e, "blocked_rate") > 0 ? "warn" : ""),
      e.stats.totals.would_block > 0 ? item("would block", "Inbound requests that shadow rules would have blocked and let through, per second; " +
        e.stats.totals.would_block + " since the start", fmtRate(last(e, "would_block_rate") ?? 0) + "/s", "would-block") : null,
      item("failed/s", "Inbound requests that failed per second", fmtRate(last(e, "failed_rate")), last(e, "failed_rate") > 0 ? "bad" : ""),
      item("in flight", "Inbound requests allowed and not yet ended", String(e.stats.in_flight)),
      item("P99", "99th percentile of the inbound response times, last 5 to 10 s", e.stats.p99 ? fmtDur(e.stats.p99) : "–"),
      item("updated", "Time of the latest sample", state.time ? fmtTime(state.time) : "–")].filter((x) => x));
  }

  // ---- the rules ----

  let rulesText = ""; // the rules in force, as the editor shows them
  let editorDirty = false;

  function setRules(rules) {
    state.rules = rules;
    rulesText = JSON.stringify(rules, null, 2);
    if (!editorDirty) $("rules-json").value = rulesText;
  }

  function table(head, rows) {
    return el("table", { className: "grid compact" },
      el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((c) => el("td", {}, c))))));
  }

  // The Limit and Per cells of a flow rule: a shed rule has no limit of its
  // own, and an adaptive rule's Limit is only where it starts (0: the
  // default); both hold requests in flight. What they have learnt is in the
  // overload table.
  function flowLimit(f) {
    switch (f.type) {
      case "shed": return "learnt";
      case "adaptive": return f.limit ? "from " + f.limit : "learnt";
    }
    return String(f.limit);
  }

  function flowPer(f) {
    switch (f.type || "qps") {
      case "concurrency": case "shed": case "adaptive": return "at once";
    }
    return f.interval || "1s";
  }

  function describeFlow(f) {
    const extra = [];
    if (f.type === "shed") {
      extra.push(f.cpu_threshold === -1 ? "no CPU signal: holds twice its bound" :
        f.cpu_threshold ? "sheds at CPU ≥ " + (f.cpu_threshold * 100).toFixed(0) + "%" : "sheds at the default CPU threshold");
    }
    if (f.type === "adaptive") {
      extra.push(f.algorithm || "gradient");
      if (f.min_limit) extra.push("at least " + f.min_limit);
      if (f.max_limit) extra.push("at most " + f.max_limit);
    }
    if (f.type === "throttle" && f.max_wait) extra.push("max wait " + f.max_wait);
    if (f.warm_up) extra.push("warm-up " + f.warm_up);
    if (f.borrow) extra.push("borrow " + f.borrow);
    if (f.ref_resource) extra.push("by " + f.ref_resource);
    if (f.per_key) extra.push("per key");
    if (f.overrides) {
      const n = Object.keys(f.overrides).length;
      extra.push(n + (n === 1 ? " override" : " overrides"));
    }
    if (f.cluster) extra.push("cluster");
    return extra.join(", ");
  }

  function describeBreaker(b) {
    switch (b.strategy) {
      case "error_ratio": return "failed ≥ " + (b.threshold * 100).toFixed(0) + "%";
      case "error_count": return "failed ≥ " + b.count;
      case "slow_ratio": return "slower than " + b.max_rt + " ≥ " + (b.threshold * 100).toFixed(0) + "%";
      case "sre": return "K = " + (b.k || 2);
    }
    return "";
  }

  // ruleName is a rule's cell in the rules tables: its name (the server
  // names every rule), and a "shadow" tag if it is in shadow (on its own,
  // or with every rule).
  function ruleName(r) {
    const name = r.name || "";
    if (!r.shadow && !state.rules.shadow) return name;
    return el("span", {}, name, " ", el("span", {
      className: "tag tag-shadow",
      title: "In shadow: the rule decides and counts as if enforced, and blocks nothing; what it would have blocked is let through, counted as would block",
    }, "shadow"));
  }

  let renderedRules = null;

  function renderRules() {
    const key = rulesText + JSON.stringify(state.breakers);
    if (key === renderedRules) return;
    renderedRules = key;
    const flow = state.rules.flow || [];
    const brs = state.rules.breakers || [];
    // A rule's name is unique among its resource's rules only.
    const ruleKey = (resource, name) => resource + "\u0000" + name;
    const status = new Map(state.breakers.map((b) => [ruleKey(b.resource, b.rule), b]));
    const parts = [];
    if (flow.length) {
      parts.push(el("h3", {}, "Flow"), table(["Rule", "Resource", "Type", "Limit", "Per", ""],
        flow.map((f) => [ruleName(f), f.resource, f.type || "qps", flowLimit(f), flowPer(f), describeFlow(f)])));
    }
    if (brs.length) {
      parts.push(el("h3", {}, "Breakers"), table(["Rule", "Resource", "Strategy", "Opens when", "State", "Last interval", "Retry after"],
        brs.map((b) => {
          const s = status.get(ruleKey(b.resource, b.name));
          return [ruleName(b), b.resource, b.strategy, describeBreaker(b), badge(s ? s.state : ""),
            s ? `${s.requests} req, ${s.failed} failed` + (s.blocked ? `, ${s.blocked} blocked` : "") : "–",
            s && s.retry_after ? fmtDur(s.retry_after) : "–"];
        })));
    }
    if (!parts.length) parts.push(el("p", { className: "empty" }, "No rules: every request is allowed."));
    else if (state.rules.shadow) parts.unshift(el("p", { className: "note rules-shadow" }, "Every rule is in shadow: they block nothing, and count what they would block."));
    $("rules").replaceChildren(...parts);
  }

  function renderEditor() {
    $("editor").hidden = !state.editing;
  }

  async function saveRules() {
    const status = $("save-status");
    const problems = $("problems");
    problems.replaceChildren();
    status.className = "";
    status.textContent = "Saving…";
    let resp;
    try {
      resp = await fetch("api/rules", {
        method: "PUT",
        headers: { "Content-Type": "application/json", Authorization: "Bearer " + $("token").value },
        body: $("rules-json").value,
      });
    } catch (err) {
      status.className = "bad";
      status.textContent = "Not saved: " + err.message;
      return;
    }
    const body = await resp.json().catch(() => ({}));
    if (resp.ok) {
      editorDirty = false;
      setRules(body);
      renderRules();
      status.className = "good";
      status.textContent = "Saved: these rules are in force.";
      return;
    }
    status.className = "bad";
    status.textContent = "Not saved (" + resp.status + "): " + (body.error || resp.statusText);
    for (const p of body.problems || []) problems.append(el("li", {}, p.message));
  }

  // ---- everything ----

  function render() {
    const list = visibleResources();
    renderInbound();
    renderCluster();
    renderTable(list);
    renderEvents();
    renderOverload();
    renderRetries();
    renderKeys();
    renderCharts(list);
    renderRules();
    renderEditor();
  }

  function setStatus(s, text) {
    $("status").dataset.state = s;
    $("status-text").textContent = text;
  }

  // connect opens the event stream. EventSource reconnects by itself after a
  // network error, or when the server ends the stream (it does every
  // minute), and goes on from the last event it got (Last-Event-ID); after
  // an HTTP error it gives up, and so we start again.
  let source = null;
  let slow = 0; // the timer that says a reconnection is taking a while
  function connect() {
    source = new EventSource("api/events");
    source.onopen = () => {
      clearTimeout(slow);
      setStatus("live", "live");
    };
    source.addEventListener("snapshot", (m) => {
      applySnapshot(JSON.parse(m.data));
      setStatus("live", "live");
    });
    source.addEventListener("sample", (m) => applySample(JSON.parse(m.data)));
    source.onerror = () => {
      clearTimeout(slow);
      if (source.readyState === EventSource.CLOSED) {
        setStatus("down", "disconnected, retrying…");
        setTimeout(connect, 3000);
      } else {
        // Back within a second or so, as every minute: say nothing of it.
        slow = setTimeout(() => setStatus("connecting", "reconnecting…"), 3000);
      }
    };
  }

  function init() {
    for (const th of $("resources").tHead.rows[0].cells) {
      th.tabIndex = 0;
      const sortBy = () => {
        const k = th.dataset.key;
        if (state.sortKey === k) state.sortDir = -state.sortDir;
        else {
          state.sortKey = k;
          state.sortDir = k === "name" ? 1 : -1; // numbers: largest first
        }
        render();
      };
      th.addEventListener("click", sortBy);
      th.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sortBy(); } });
    }
    $("filter").addEventListener("input", (ev) => {
      state.filter = ev.target.value.trim().toLowerCase();
      render();
    });
    $("rules-json").addEventListener("input", () => { editorDirty = $("rules-json").value !== rulesText; });
    $("save").addEventListener("click", saveRules);
    $("revert").addEventListener("click", () => {
      editorDirty = false;
      $("rules-json").value = rulesText;
      $("problems").replaceChildren();
      $("save-status").textContent = "";
    });
    let resizeTimer = 0;
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(resizeCharts, 100);
    });
    connect();
  }

  init();
})();
