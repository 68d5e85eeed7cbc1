/* Workers page: the live worker table. */
"use strict";
(function () {
  const WQ = window.WQ;
  if (!WQ) return;
  const { h } = WQ;
  WQ.renderers.workers = (workers) => WQ.rows("tbody[data-section=workers]", workers, 10, (w) =>
    h("tr", { "data-worker": w.name }, h("td", {}, w.name), h("td", {}, w.host), h("td", { class: "num" }, w.pid),
      h("td", {}, w.queues.flatMap((q, i) => [i ? ", " : "", h("a", { href: WQ.queueUrl(q) }, q)])),
      ...[w.concurrency, w.active, w.processed, w.failed, w.heartbeat_age + " s"].map((n) => h("td", { class: "num" }, n)),
      h("td", {}, w.started)));
})();
