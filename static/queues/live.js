/* The dashboard's live link: one websocket per page, updates applied by section renderers,
 * a "disconnected" banner while the link is down, reconnection with backoff, and a resync
 * from the fresh snapshot the server sends on every (re)connection. Plain JS, no build step. */
"use strict";
(function () {
  const root = document.getElementById("wq-dashboard");
  if (!root) return;
  const banner = document.getElementById("wq-banner");
  const status = document.getElementById("wq-status");
  const flash = document.getElementById("wq-flash");
  const actions = new Set((root.dataset.actions || "").split(/\s+/).filter(Boolean));
  let clockOffset = 0; // server ms minus browser ms
  let socket = null;
  let attempts = 0;
  let stopped = false;

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k.startsWith("data-")) el.setAttribute(k, v);
      else el[k] = v;
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function actionForm(url, label, cls) {
    return h("form", { method: "post", action: url, class: "wq-action" },
      h("input", { type: "hidden", name: "csrfmiddlewaretoken", value: root.dataset.csrf }),
      h("input", { type: "hidden", name: "next", value: root.dataset.path }),
      h("button", { type: "submit", class: "button " + (cls || ""), "data-action": label.toLowerCase() }, label));
  }

  function duration(ms) {
    const s = Math.max(0, ms) / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    const m = Math.floor(s / 60), r = Math.floor(s % 60);
    if (m < 60) return m + "m " + String(r).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h " + String(m % 60).padStart(2, "0") + "m";
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

  const WQ = (window.WQ = { h, actionForm, duration, renderers: {}, can: (a) => actions.has(a), root });

  function apply(data) {
    if (typeof data.now_ms === "number") clockOffset = data.now_ms - Date.now();
    for (const [section, value] of Object.entries(data)) {
      const render = WQ.renderers[section];
      if (render) render(value, data);
    }
    tick();
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
    socket.onopen = () => { attempts = 0; setLive(true, "live"); };
    socket.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      if (msg.type === "update") apply(msg.data);
      else if (msg.type === "status") {
        if (msg.redis === "down") setLive(false, "Redis unavailable");
        else setLive(true, "live");
      }
    };
    socket.onclose = (ev) => {
      setLive(false, "disconnected");
      if (ev.code === 4403) banner.textContent = "Disconnected: your session no longer allows this page. Log in again.";
      if (ev.code === 4404 || ev.code === 4400) { stopped = true; banner.textContent = "This page no longer exists."; }
      if (stopped) return;
      attempts += 1;
      const delay = Math.min(15000, 500 * 2 ** Math.min(attempts - 1, 5)) * (0.75 + Math.random() / 2);
      setTimeout(connect, delay);
    };
  }

  function showFlash(text, ok) {
    flash.textContent = text;
    flash.className = "wq-flash " + (ok ? "wq-ok" : "wq-err");
    flash.hidden = false;
  }

  // Action forms post with fetch and report in the flash area; the live update shows the result.
  root.addEventListener("submit", async (ev) => {
    const form = ev.target;
    if (form.method.toLowerCase() !== "post") return;
    ev.preventDefault();
    const button = form.querySelector("button");
    if (button) button.disabled = true;
    try {
      const resp = await fetch(form.action, {
        method: "POST", body: new FormData(form), credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRFToken": root.dataset.csrf },
      });
      let body = {};
      try { body = await resp.json(); } catch (e) { body = { message: "The action failed (" + resp.status + ")." }; }
      showFlash(body.message || (resp.ok ? "Done." : "Refused (" + resp.status + ")."), resp.ok && body.ok !== false);
      if (resp.ok && socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ resync: true }));
    } catch (e) {
      showFlash("The action could not be sent: " + e, false);
    } finally {
      if (button) button.disabled = false;
    }
  });

  document.addEventListener("DOMContentLoaded", () => {
    const initial = document.getElementById("wq-snapshot");
    if (initial) {
      const snap = JSON.parse(initial.textContent);
      if (snap && typeof snap.now_ms === "number") clockOffset = snap.now_ms - Date.now();
      if (snap && snap.throughput && WQ.renderers.throughput) WQ.renderers.throughput(snap.throughput, snap);
    }
    tick();
    setInterval(tick, 1000); // client-side clock only: no request
    connect();
  });
})();
