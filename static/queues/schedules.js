/* Schedules page: the live schedule table (the countdowns tick in live.js). URLs come from the
 * page's data attributes (reverse() on the server), never written here. */
"use strict";
(function () {
  const WQ = window.WQ;
  if (!WQ) return;
  const { h } = WQ;
  const box = document.getElementById("wq-schedules");
  if (!box) return;
  const url = (kind, value) => box.dataset["url" + kind].replace(kind === "Task" ? "__id__" : "__name__",
    encodeURIComponent(value));

  function state(s) {
    if (s.paused) return h("span", { class: "wq-badge wq-paused" }, "paused");
    if (!s.enabled) return h("span", { class: "wq-badge" }, "disabled");
    return h("span", { class: "wq-badge wq-running" }, "active");
  }

  function actions(s) {
    if (!WQ.can("manage_schedules")) return "";
    return [s.paused ? WQ.actionForm(url("Resume", s.name), "Resume") : WQ.actionForm(url("Pause", s.name), "Pause"),
      " ", WQ.actionForm(url("Trigger", s.name), "Trigger now")];
  }

  WQ.renderers.schedules = (rows) => WQ.rows("tbody[data-section=schedules]", rows, 10, (s) =>
    h("tr", { "data-schedule": s.name }, h("td", {}, s.name),
      h("td", {}, h("a", { href: url("Queue", s.queue) }, s.queue)),
      h("td", {}, s.words, s.cron ? [" ", h("code", {}, s.cron)] : ""),
      h("td", { class: "wq-next" }, s.next || "-"),
      h("td", { class: "num wq-countdown", "data-until": s.next_ms || null }),
      h("td", {}, s.last || "-", s.last_task_id ? [" ", h("a", { class: "wq-id", href: url("Task", s.last_task_id) },
        s.last_task_id)] : ""),
      h("td", { class: "wq-outcome" }, s.outcome), h("td", { class: "num" }, s.runs), h("td", { class: "wq-state" }, state(s)),
      h("td", { class: "wq-nowrap" }, actions(s))));
})();
