/* Queue page: counts, in process (elapsed time ticks in live.js), pending page, delayed,
 * failed, locks and the grouped failure history. */
"use strict";
(function () {
  const WQ = window.WQ;
  if (!WQ) return;
  const { h } = WQ;
  const cancel = (t) => WQ.can("cancel_task") ? WQ.taskAction(t.id, "cancel", "Cancel") : "";

  WQ.renderers.counts = (c) => {
    WQ.fill("[data-section=counts]", [
      WQ.card(c.pending, "pending"), WQ.card(c.waiting, "waiting for a lock"), WQ.card(c.delayed, "delayed"),
      WQ.card(c.active, "in process"), WQ.card(c.failed, "failed"), WQ.card(c.completed, "completed"),
      WQ.card(c.failures, "failed attempts"), WQ.card(c.enqueued, "enqueued"),
    ]);
    WQ.fill("[data-section=state]", [WQ.badge(c.paused)]);
    for (const el of WQ.root.querySelectorAll("[data-when]")) el.hidden = (el.dataset.when === "paused") !== c.paused;
  };
  const total = (name, n) => { for (const el of WQ.root.querySelectorAll(`[data-count=${name}]`)) el.textContent = n; };

  WQ.renderers.active = (a) => {
    total("active", a.total);
    WQ.rows("tbody[data-section=active]", a.tasks, 7, (t) => h("tr", { "data-id": t.id },
      h("td", {}, WQ.taskLink(t.id)), h("td", { class: "wq-worker" }, t.worker), h("td", {}, t.started),
      h("td", { class: "num", "data-since": t.started_ms }), h("td", { class: "num" }, t.attempt),
      h("td", { class: "wq-payload" }, t.payload),
      h("td", {}, t.cancelling ? h("span", { class: "wq-badge" }, "cancelling") : cancel(t))));
  };

  WQ.renderers.pending = (p) => {
    total("pending", p.total);
    const rows = p.tasks.map((t, i) => h("tr", { "data-id": t.id }, h("td", { class: "num" }, p.offset + i + 1),
      h("td", {}, WQ.taskLink(t.id)), h("td", {}, t.created), h("td", { class: "num" }, t.attempt),
      h("td", { class: "wq-payload" }, t.payload), h("td", {}, cancel(t))));
    const link = (page, text) => [h("a", { href: "?page=" + page }, text), " "];
    const pager = h("p", { class: "wq-pager" }, `Page ${p.page} of ${p.pages} `,
      p.page > 1 ? [link(1, "« first"), link(p.page - 1, "‹ previous")] : "",
      p.page < p.pages ? [link(p.page + 1, "next ›"), link(p.pages, "last »")] : "");
    const table = h("table", { class: "wq-table" },
      h("thead", {}, h("tr", {}, ["#", "Task", "Created (UTC)", "Attempt", "Payload", ""].map((c, i) =>
        h("th", { class: i === 0 || i === 3 ? "num" : "" }, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colSpan: 6, class: "wq-empty" }, "No pending task."))));
    WQ.root.querySelector("[data-section=pending]").replaceChildren(table, pager);
  };

  WQ.renderers.delayed = (d) => {
    total("delayed", d.total);
    WQ.rows("tbody[data-section=delayed]", d.tasks, 6, (t) => h("tr", { "data-id": t.id },
      h("td", {}, WQ.taskLink(t.id)), h("td", {}, t.due), h("td", { class: "num", "data-until": t.due_ms }),
      h("td", { class: "num" }, t.attempt), h("td", { class: "wq-payload" }, t.payload), h("td", {}, cancel(t))));
  };

  WQ.renderers.failed = (f) => {
    total("failed", f.total);
    WQ.rows("tbody[data-section=failed]", f.tasks, 6, (t) => h("tr", { "data-id": t.id },
      h("td", {}, WQ.taskLink(t.id)), h("td", {}, t.failed), h("td", { class: "wq-error" }, t.error),
      h("td", { class: "num" }, t.attempt), h("td", { class: "wq-payload" }, t.payload),
      h("td", { class: "wq-nowrap" }, WQ.can("retry_task") ? WQ.taskAction(t.id, "retry", "Retry") : "", " ",
        WQ.can("delete_task") ? WQ.taskAction(t.id, "delete", "Delete", "wq-danger") : "")));
  };

  WQ.renderers.locks = (locks) => WQ.rows("tbody[data-section=locks]", locks, 4, (l) => h("tr", {},
    h("td", {}, l.lock), h("td", {}, l.holder ? WQ.taskLink(l.holder) : "(free)"), h("td", {}, l.worker || ""),
    h("td", { class: "num" }, l.waiting)));

  WQ.renderers.failure_groups = (groups) =>
    WQ.root.querySelector("[data-section=failure_groups]").replaceChildren(...WQ.failureGroups(groups));
})();
