"use strict";
// The dashboard of slidegate serve: polls dashboard.json every second and
// shows the rates between two polls. Every string from the server is set
// as text, never as markup.
(function () {
  const every = 1000;
  let last = null; // the previous poll: its time and counts by rule

  const $ = (id) => document.getElementById(id);
  const set = (id, text) => { $(id).textContent = text; };

  function rate(now, prev, dt) {
    if (prev === undefined || dt <= 0) return "–";
    const r = Math.max(0, now - prev) / dt;
    return r >= 100 ? r.toFixed(0) : r.toFixed(1);
  }

  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function show(d) {
    const dt = last ? (d.at - last.at) / 1000 : 0;
    const prev = last ? last.rules : new Map();
    const req = last ? last.requests : [];
    set("req-ok", rate(d.requests[0], req[0], dt));
    set("req-over", rate(d.requests[1], req[1], dt));
    set("req-invalid", rate(d.requests[2], req[2], dt));
    set("cfg-loaded", String(d.config[0]));
    set("cfg-refused", String(d.config[1]));
    $("cfg-refused").className = d.config[1] > 0 ? "down" : "";
    set("mem", bytes(d.keyMemory[0]));
    set("mem-limit", bytes(d.keyMemory[1]));
    const share = d.keyMemory[1] > 0 ? Math.min(100, 100 * d.keyMemory[0] / d.keyMemory[1]) : 0;
    $("mem-bar").style.width = share.toFixed(1) + "%";

    const r = d.redis;
    if (r) {
      set("redis", r.misconfigured ? "misconfigured" : r.healthy ? "up" : "down: the fallback decides");
      $("redis").className = r.healthy && !r.misconfigured ? "up" : "down";
      set("redis-counts", r.instances + " instances · " + r.roundTrips + " round trips · " +
        r.failures + " failures · " + r.fallbacks + " fallback decisions");
    }

    const rules = new Map();
    const body = document.createElement("tbody");
    body.id = "rules";
    for (const x of d.rules) {
      const key = x.domain + "\u0000" + x.rule;
      rules.set(key, x);
      const p = prev.get(key) || {};
      const tr = document.createElement("tr");
      tr.dataset.domain = x.domain;
      tr.dataset.rule = x.rule;
      cell(tr, x.domain);
      cell(tr, x.rule);
      cell(tr, rate(x.hits, p.hits, dt), "n hits");
      const over = rate(x.over, p.over, dt);
      cell(tr, over, "n over" + (over !== "–" && over !== "0.0" ? " hot" : ""));
      cell(tr, rate(x.near, p.near, dt), "n near");
      cell(tr, rate(x.shadow, p.shadow, dt), "n shadow");
      cell(tr, String(x.hits), "n total");
      body.appendChild(tr);
    }
    $("rules").replaceWith(body);
    set("rules-shown", d.rulesTotal > d.rules.length
      ? "(the " + d.rules.length + " of the most hits, of " + d.rulesTotal + ")"
      : "(" + d.rulesTotal + ")");
    last = { at: d.at, rules: rules, requests: d.requests };
  }

  async function poll() {
    try {
      const resp = await fetch("dashboard.json", { cache: "no-store" });
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      show(await resp.json());
      set("status", "live");
      $("status").className = "muted";
    } catch (e) {
      set("status", "not reached: " + e.message);
      $("status").className = "down";
    }
    setTimeout(poll, every);
  }
  poll();
})();
