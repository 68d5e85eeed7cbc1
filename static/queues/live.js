/* The dashboard's live link: one websocket per page. The server sends the HTML of the
 * sections that changed (rendered by the same templates as the page), which are swapped in
 * (a section whose HTML is what was swapped in last is left alone: a resync that changed
 * nothing redraws nothing); a "disconnected" banner shows while the link is down; it reconnects
 * with backoff (1 s doubling to 30 s; back to 1 s only after a link that stayed up 30 s, so a
 * server that closes every new link is not asked again and again) and gets a full resync on
 * every (re)connection. The server's own close codes say more in the banner: 4403 (log in
 * again; it keeps trying), 4404 (what the page shows no longer exists) and 4400 (a bad address)
 * stop it, and after 4429 (too many live pages for this user) it tries again once a minute
 * (TOO_MANY_RETRY_MS), not at the backoff's pace. Action forms are posted with fetch and
 * answered in the flash area. The only other thing drawn here: elapsed and due-in times,
 * ticking each second. Addresses come from the page (data-live, form actions), never from this
 * file. */
"use strict";
(function () {
  let root, banner, status, flash;
  let clockOffset = 0; // server ms minus browser ms
  let socket = null;
  let attempts = 0; // reconnections since the link was last up long enough (STABLE_MS)
  let openedAt = 0;
  let stopped = false;
  const STABLE_MS = 30000;
  const TOO_MANY_RETRY_MS = 60000; // after a 4429: the user has to close tabs first
  let downText = ""; // the banner's own text (the template's), for a close with no text of its own
  const applied = new Map(); // section name -> the HTML swapped in last

  function duration(ms) {
    const s = Math.max(0, ms) / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    const m = Math.floor(s / 60), r = Math.floor(s % 60);
    if (m < 60) return m + "m " + String(r).padStart(2, "0") + "s";
    const h = Math.floor(m / 60);
    if (h < 24) return h + "h " + String(m % 60).padStart(2, "0") + "m";
    return Math.floor(h / 24) + " d " + (h % 24) + " h"; // over a day: in days ("2 d 3 h")
  }

  function tick() {
    const now = Date.now() + clockOffset;
    for (const el of root.querySelectorAll("[data-since]")) {
      const t = Number(el.dataset.since);
      if (t) el.textContent = duration(now - t);
    }
    for (const el of root.querySelectorAll("[data-until]")) {
      const t = Number(el.dataset.until);
      if (t) el.textContent = t > now ? duration(t - now) : "due";
    }
  }

  // A section with nothing in it: its count says 0, or it says so (its .wq-empty) with no row.
  function isEmpty(el) {
    const count = el.querySelector("[data-count]");
    if (count) return count.textContent.trim() === "0";
    const rows = [...el.querySelectorAll("tbody tr")].filter((tr) => !tr.querySelector(".wq-empty"));
    return el.querySelector(".wq-empty") !== null && rows.length === 0;
  }

  // Swap in a section's new HTML, keeping open the <details> the reader unfolded.
  function replace(el, html) {
    const open = new Set([...el.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key));
    el.innerHTML = html;
    for (const d of el.querySelectorAll("details[data-key]")) if (open.has(d.dataset.key)) d.open = true;
  }

  // Updates are swapped in at the next frame: several arriving within one frame (a busy page,
  // a slow machine) cost one swap per section, and a hidden tab does no work until shown.
  let due = null;
  function apply(msg) {
    if (typeof msg.now_ms === "number") clockOffset = msg.now_ms - Date.now();
    if (due === null) {
      due = {};
      requestAnimationFrame(flush);
    }
    Object.assign(due, msg.sections || {});
    // Sections too large to send (the server's bound on a message): kept as they are, marked.
    const omitted = Object.keys(msg.omitted || {});
    for (const name of omitted) {
      applied.delete(name);
      for (const el of root.querySelectorAll(`[data-section="${name}"]`)) el.classList.add("wq-too-large");
    }
    if (omitted.length) showFlash("Part of this page is too large to update live: reload the page to see it.", false);
  }

  function flush() {
    const sections = due;
    due = null;
    for (const [name, html] of Object.entries(sections)) {
      if (applied.get(name) === html) continue;
      applied.set(name, html);
      for (const el of root.querySelectorAll(`[data-section="${name}"]`)) {
        replace(el, html);
        el.classList.remove("wq-too-large");
        const box = el.closest("[data-hide-empty]");
        if (box) box.hidden = isEmpty(el); // a section shows only while it has something
      }
    }
    markTab();
    tick();
  }

  // The queue page's tabs: one panel shows at a time. The links (?tab=delayed) work without this
  // script; with it, a click (or an address ending in #delayed / #wq-delayed) shows the panel in
  // place, and the tab bar, which the live link redraws, keeps marking the one shown.
  let currentTab = null;
  function markTab() {
    if (currentTab === null) return;
    for (const a of document.querySelectorAll(".wq-qtabs a[data-tab]")) {
      if (a.dataset.tab === currentTab) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
  }
  function showTab(name) {
    const panels = [...document.querySelectorAll("[data-tab-panel]")];
    if (!panels.some((p) => p.dataset.tabPanel === name)) return false;
    for (const p of panels) p.hidden = p.dataset.tabPanel !== name;
    currentTab = name;
    markTab();
    return true;
  }
  function setupTabs() {
    const bar = document.querySelector(".wq-qtabs");
    if (!bar) return;
    const marked = bar.querySelector("a[aria-current]");
    currentTab = marked ? marked.dataset.tab : null;
    bar.addEventListener("click", (ev) => {
      const a = ev.target.closest("a[data-tab]");
      if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
      if (!showTab(a.dataset.tab)) return;
      ev.preventDefault();
      const params = new URLSearchParams(location.search);
      params.set("tab", a.dataset.tab);
      history.replaceState(null, "", "?" + params.toString());
    });
    const fromHash = () => {
      const wanted = location.hash.replace(/^#(wq-)?/, "");
      if (wanted) showTab(wanted);
    };
    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  function setLive(live, text) {
    banner.hidden = live;
    root.classList.toggle("wq-stale", !live);
    status.textContent = text;
    status.className = "wq-status " + (live ? "wq-live" : "wq-down");
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + root.dataset.live);
    socket.onopen = () => { openedAt = Date.now(); setLive(true, "live"); };
    socket.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      if (msg.type === "update") apply(msg);
      else if (msg.type === "status") setLive(msg.redis !== "down", msg.redis === "down" ? "Redis unavailable" : "live");
    };
    socket.onclose = (ev) => {
      setLive(false, "disconnected");
      banner.textContent = downText; // what an earlier close may have said no longer holds
      if (ev.code === 4403) banner.textContent = "Disconnected: your session no longer allows this page. Log in again.";
      if (ev.code === 4400) { stopped = true; banner.textContent = "This page no longer exists."; }
      if (ev.code === 4404) {
        stopped = true;
        banner.textContent = "This page's task, batch, queue or worker no longer exists: live updates stopped.";
      }
      if (stopped) return;
      if (ev.code === 4429) {
        // Not a fault that passes by itself: asked again once a minute (in case tabs were closed).
        banner.textContent = "Too many live pages are open for your account: close some tabs, then reload this page " +
          "(it tries again every minute).";
        openedAt = 0;
        setTimeout(connect, TOO_MANY_RETRY_MS * (0.75 + Math.random() / 2));
        return;
      }
      if (openedAt && Date.now() - openedAt >= STABLE_MS) attempts = 0;
      openedAt = 0;
      attempts += 1;
      const delay = Math.min(30000, 1000 * 2 ** Math.min(attempts - 1, 5)) * (0.75 + Math.random() / 2);
      setTimeout(connect, delay);
    };
  }

  function showFlash(text, ok) {
    flash.textContent = text;
    flash.className = "wq-flash " + (ok ? "wq-ok" : "wq-err");
    flash.hidden = false;
  }

  async function submit(ev) {
    const form = ev.target;
    if ((form.getAttribute("method") || "").toLowerCase() !== "post") return;
    ev.preventDefault();
    // An action that asks first (a single Delete): no answer, nothing sent; yes is sent as confirm=yes.
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) return;
    const button = form.querySelector("button");
    if (button) button.disabled = true;
    // Forms sent by the socket carry no CSRF field: the page's token is added (and sent as a header).
    const body = new URLSearchParams(new FormData(form));
    const by = ev.submitter; // the button pressed (a bulk form has one per action)
    if (by && by.name && !body.has(by.name)) body.append(by.name, by.value);
    if (!body.has("csrfmiddlewaretoken")) body.append("csrfmiddlewaretoken", root.dataset.csrf);
    if (form.dataset.confirm && !body.has("confirm")) body.append("confirm", "yes");
    try {
      const resp = await fetch(form.getAttribute("action"), { // not form.action: a field may be named so
        method: "POST", body, credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": root.dataset.csrf },
      });
      let answer = {};
      try { answer = await resp.json(); } catch (e) { answer = { message: "The action failed (" + resp.status + ")." }; }
      showFlash(answer.message || (resp.ok ? "Done." : "Refused (" + resp.status + ")."), resp.ok && answer.ok !== false);
      if (resp.ok && answer.url) { location.href = answer.url; return; } // a bulk action's progress page
      if (resp.ok && socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ resync: true }));
    } catch (e) {
      showFlash("The action could not be sent: " + e, false);
    } finally {
      if (button) button.disabled = false;
    }
  }

  // Search results: "choose all on this page", and how many are chosen (announced politely).
  function chosenChanged() {
    const form = document.getElementById("wq-bulk");
    const out = document.getElementById("wq-chosen");
    if (!form || !out) return;
    const all = document.getElementById("wq-all");
    const n = form.querySelectorAll('input[name="ids"]:checked').length;
    out.textContent = all && all.checked ? "all matching tasks" : n + " chosen";
  }

  function setupSearch() {
    const page = document.getElementById("wq-select-page");
    const form = document.getElementById("wq-bulk");
    if (!form) return;
    if (page) page.addEventListener("change", () => {
      for (const box of form.querySelectorAll('input[name="ids"]')) box.checked = page.checked;
      chosenChanged();
    });
    form.addEventListener("change", chosenChanged);
    chosenChanged();
  }

  // A bulk action's page: its progress, read every 300 ms until it ends (done, failed or stopped).
  function followJob() {
    const box = document.getElementById("wq-job");
    if (!box) return;
    const bar = document.getElementById("wq-job-bar"), text = document.getElementById("wq-job-text");
    const verbs = { cancel: "cancelled", retry: "queued again", delete: "deleted" };
    async function poll() {
      let job;
      try {
        const resp = await fetch(box.dataset.job, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        job = await resp.json();
      } catch (e) { setTimeout(poll, 1000); return; }
      if (!job.ok) { text.textContent = job.message; return; }
      if (job.total) { bar.max = job.total; bar.value = job.done || 0; }
      const verb = verbs[job.action] || "done";
      text.dataset.phase = job.phase;
      if (job.phase === "finding") text.textContent = "Finding the tasks: " + job.found + " so far…";
      else if (job.phase === "acting") text.textContent = job.done + " of " + job.total + " done, " + job.changed + " " + verb + "…";
      else if (job.phase === "done") text.textContent = "Done: " + job.changed + " of " + job.total + " " + verb + ".";
      else if (job.phase === "stopped") text.textContent = "Stopped after " + job.changed + " of " + job.total + " " + verb + ": " + job.reason + ".";
      else text.textContent = "Failed: " + job.error;
      const stop = document.getElementById("wq-job-stop");
      if (stop && job.finished) stop.hidden = true;
      if (!job.finished) setTimeout(poll, 300);
    }
    poll();
  }

  document.addEventListener("DOMContentLoaded", () => {
    setupSearch();
    followJob();
    setupTabs();
    root = document.getElementById("wq-dashboard");
    if (!root) return;
    banner = document.getElementById("wq-banner");
    downText = banner.textContent.trim();
    status = document.getElementById("wq-status");
    flash = document.getElementById("wq-flash");
    if (root.dataset.nowMs) clockOffset = Number(root.dataset.nowMs) - Date.now();
    root.addEventListener("submit", submit);
    tick();
    setInterval(tick, 1000); // the browser's clock only: no request
    if (root.dataset.live) connect();
  });
})();
