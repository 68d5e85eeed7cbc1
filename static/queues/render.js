/* Shared pieces that the page scripts render sections with: cards, task links, action
 * buttons, failure groups and the throughput chart (inline SVG, no library). */
"use strict";
(function () {
  const WQ = window.WQ;
  if (!WQ) return;
  const { h } = WQ;
  const SVG = "http://www.w3.org/2000/svg";

  WQ.taskUrl = (id) => "/queues/task/" + encodeURIComponent(id) + "/";
  WQ.queueUrl = (name) => "/queues/q/" + encodeURIComponent(name) + "/";
  WQ.taskLink = (id) => h("a", { class: "wq-id", href: WQ.taskUrl(id) }, id);
  WQ.taskAction = (id, action, label, cls) => WQ.actionForm(WQ.taskUrl(id) + action + "/", label, cls);
  WQ.card = (n, label, href) => {
    const inner = [h("span", { class: "wq-n" }, n), h("span", {}, label)];
    return h("div", { class: "wq-card" }, href ? h("a", { href }, inner) : inner);
  };
  WQ.badge = (paused) => paused ? h("span", { class: "wq-badge wq-paused" }, "paused")
    : h("span", { class: "wq-badge wq-running" }, "running");
  WQ.fill = (selector, nodes) => {
    for (const el of WQ.root.querySelectorAll(selector)) el.replaceChildren(...nodes.map((n) => n.cloneNode(true)));
  };
  WQ.rows = (selector, items, cols, row) => {
    const body = WQ.root.querySelector(selector);
    if (!body) return;
    body.replaceChildren(...(items.length ? items.map(row)
      : [h("tr", {}, h("td", { colSpan: cols, class: "wq-empty" }, body.dataset.empty || "None."))]));
  };

  // Which <details> are open (by data-key), so a re-render keeps what the reader unfolded.
  WQ.openKeys = () => new Set([...WQ.root.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key));

  WQ.failureList = (failures, withId, open) => h("ul", { class: "wq-failures" }, failures.length ? failures.map((f) => {
    const key = "tb:" + f.id + "@" + f.failed + "#" + f.attempts;
    return h("li", {}, withId ? [WQ.taskLink(f.id), " at "] : "At ", f.failed, ", attempt ", f.attempts,
      f.worker ? ", worker " + f.worker : "",
      h("div", { class: "wq-error" }, f.error),
      h("details", { "data-key": key, open: open && open.has(key) }, h("summary", {}, "Traceback"),
        h("pre", { class: "wq-tb" }, f.traceback)));
  }) : [h("li", { class: "wq-empty" }, "None.")]);

  WQ.failureGroups = (groups) => {
    const open = WQ.openKeys();
    if (!groups.length) return [h("p", { class: "wq-empty" }, "No failure recorded.")];
    return groups.map((g) => h("details", { class: "wq-group", "data-key": g.key, open: open.has(g.key) },
      h("summary", {}, h("span", { class: "wq-count" }, g.count + "×"), " ", h("strong", {}, g.type), ": ",
        h("code", {}, g.shape), h("span", { class: "wq-seen" }, "first " + g.first_seen + ", last " + g.last_seen)),
      WQ.failureList(g.failures, true, open)));
  };

  function svg(tag, attrs) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    return el;
  }

  // Stacked bars per minute: completed (bottom) and failed (top).
  WQ.renderers.throughput = (t) => {
    const box = document.getElementById("wq-chart");
    if (!box || !t) return;
    const n = t.completed.length, W = 720, H = 160, pad = 28;
    const max = Math.max(1, ...t.completed.map((c, i) => c + t.failed[i]));
    const bw = (W - pad) / n;
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H + 18}`, class: "wq-svg", role: "img" });
    chart.append(svg("line", { x1: pad, y1: H, x2: W, y2: H, class: "wq-axis" }));
    const top = svg("text", { x: 0, y: 10, class: "wq-label" });
    top.textContent = String(max);
    chart.append(top);
    for (let i = 0; i < n; i++) {
      const c = t.completed[i], f = t.failed[i];
      const hc = (c / max) * (H - 4), hf = (f / max) * (H - 4);
      const x = pad + i * bw + 1;
      const minute = new Date(t.start_ms + i * 60000).toISOString().slice(11, 16);
      const g = svg("g", {});
      const title = svg("title", {});
      title.textContent = `${minute} UTC: ${c} completed, ${f} failed`;
      g.append(title);
      if (c) g.append(svg("rect", { x, y: H - hc, width: Math.max(1, bw - 2), height: hc, class: "wq-bar-ok" }));
      if (f) g.append(svg("rect", { x, y: H - hc - hf, width: Math.max(1, bw - 2), height: hf, class: "wq-bar-fail" }));
      g.append(svg("rect", { x, y: 0, width: bw, height: H, class: "wq-hit" }));
      chart.append(g);
      if (i % 15 === 0 || i === n - 1) {
        const label = svg("text", { x: i === n - 1 ? x + bw - 2 : x, y: H + 14, class: "wq-label",
          "text-anchor": i === n - 1 ? "end" : "start" });
        label.textContent = minute;
        chart.append(label);
      }
    }
    box.replaceChildren(chart);
  };
})();
