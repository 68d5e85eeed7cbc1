/* Task page: the task's fields, state and failures, kept live. */
"use strict";
(function () {
  const WQ = window.WQ;
  if (!WQ) return;
  const { h } = WQ;
  const dash = (v) => (v === null || v === undefined || v === "" ? "–" : v);

  WQ.renderers.task = (t) => {
    const box = WQ.root.querySelector("[data-section=task]");
    if (!t) {
      box.replaceChildren(h("p", { class: "wq-gone" },
        "This task is gone: it finished, was cancelled or was deleted (finished tasks are not kept)."));
      return;
    }
    const tools = h("div", { class: "wq-toolbar" },
      !["failed", "completed"].includes(t.state) && !t.cancelling && WQ.can("cancel_task") ? WQ.taskAction(t.id, "cancel", "Cancel") : "",
      t.state === "failed" && WQ.can("retry_task") ? WQ.taskAction(t.id, "retry", "Retry") : "",
      t.state !== "active" && WQ.can("delete_task") ? WQ.taskAction(t.id, "delete", "Delete", "wq-danger") : "");
    const row = (label, ...value) => h("tr", {}, h("th", {}, label), h("td", {}, ...value));
    const fields = h("table", { class: "wq-table wq-fields" },
      row("State", h("span", { class: "wq-badge wq-state-" + t.state, "data-field": "state" }, t.state),
        t.cancelling ? [" ", h("span", { class: "wq-badge" }, "cancelling")] : ""),
      row("Attempts", t.attempt, t.retries !== null ? ` (retries allowed: ${t.retries})` : ""),
      row("Worker", dash(t.worker)), row("Created (UTC)", dash(t.created)),
      row("Started (UTC)", dash(t.started), t.started_ms && t.state === "active"
        ? [" (", h("span", { "data-since": t.started_ms }), " ago)"] : ""),
      row("Due (UTC)", dash(t.due)), row("Failed at (UTC)", dash(t.failed)), row("Finished (UTC)", dash(t.finished)),
      row("Timeout", t.timeout ? t.timeout + " s" : "–"), row("Lock", dash(t.lock)), row("Unique key", dash(t.unique_key)),
      row("Callback", dash(t.callback)), row("Error", h("span", { class: "wq-error" }, dash(t.error))));
    const parts = [tools, fields,
      h("h2", {}, `Payload (${t.payload_size} characters${t.is_bytes ? ", bytes shown as text" : ""})`),
      h("pre", { class: "wq-payload-full" }, t.payload)];
    if (t.truncated) parts.push(h("p", {}, h("a", { href: "?full=1", class: "wq-show-all" }, `Show all ${t.payload_size} characters`)));
    if (t.traceback) parts.push(h("h2", {}, "Last traceback"), h("pre", { class: "wq-tb" }, t.traceback));
    box.replaceChildren(...parts);
  };

  WQ.renderers.failures = (failures) =>
    WQ.root.querySelector("[data-section=failures]").replaceChildren(WQ.failureList(failures, false, WQ.openKeys()));
})();
