/* Overview page: totals, the queue table (the chart is shared, in render.js). */
"use strict";
(function () {
  const WQ = window.WQ;
  if (!WQ) return;
  const { h } = WQ;
  let workers = { online: 0, busy: 0, slots: 0 };
  let totals = null;

  function cards() {
    if (!totals) return;
    WQ.fill("[data-section=totals]", [
      WQ.card(totals.pending, "pending"), WQ.card(totals.delayed, "delayed"), WQ.card(totals.active, "in process"),
      WQ.card(totals.failed, "failed"), WQ.card(totals.completed, "completed"), WQ.card(totals.paused, "paused queues"),
      WQ.card(workers.online, "workers online", "/queues/workers/"), WQ.card(workers.busy + "/" + workers.slots, "slots busy"),
    ]);
  }
  WQ.renderers.totals = (t) => { totals = t; cards(); };
  WQ.renderers.workers = (w) => { workers = w; cards(); };
  WQ.renderers.queues = (queues) => WQ.rows("tbody[data-section=queues]", queues, 8, (q) =>
    h("tr", { "data-queue": q.name }, h("td", {}, h("a", { href: WQ.queueUrl(q.name) }, q.name)),
      ...[q.pending, q.delayed, q.active, q.failed, q.completed, q.failures].map((n) => h("td", { class: "num" }, n)),
      h("td", {}, WQ.badge(q.paused))));
})();
