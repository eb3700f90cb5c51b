/* Conveyor dashboard: live updates over /ws/events, region refresh, confirmations, charts.
 *
 * No build step, no dependencies. Pages are rendered by Django; this script
 * keeps them current: each element marked [data-region] (with an id) is
 * replaced by its fresh copy from a background fetch of the same URL when
 * events say something relevant changed (throttled), or on a timer for
 * things no event reports (node heartbeats, worker sessions, cron runs).
 */
(function () {
  "use strict";

  var $ = function (sel, root) { return (root || document).querySelector(sel); };
  var $$ = function (sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); };
  var body = document.body;
  var PAGE = body.dataset.page || "";
  var READ_ONLY = body.hasAttribute("data-read-only");

  // ---------------------------------------------------------------- time text

  function span(seconds) {
    var s = Math.floor(Math.abs(seconds));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60 ? " " + (s % 60) + "s" : "");
    if (s < 86400) { var m = Math.floor((s % 3600) / 60); return Math.floor(s / 3600) + "h" + (m ? " " + m + "m" : ""); }
    var h = Math.floor((s % 86400) / 3600);
    return Math.floor(s / 86400) + "d" + (h ? " " + h + "h" : "");
  }

  function relative(date) {
    var delta = (date.getTime() - Date.now()) / 1000;
    if (Math.abs(delta) < 1) return "now";
    return delta > 0 ? "in " + span(delta) : span(delta) + " ago";
  }

  function tickTimes(root) {
    $$("time[data-rel]", root).forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d)) el.textContent = relative(d);
    });
    $$("time[data-age]", root).forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d)) el.textContent = span(Math.max(0, (Date.now() - d.getTime()) / 1000));
    });
  }

  function hhmm(date, seconds) {
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    return pad(date.getUTCHours()) + ":" + pad(date.getUTCMinutes()) + (seconds ? ":" + pad(date.getUTCSeconds()) : "");
  }

  // ---------------------------------------------------------------- messages, confirmations

  function flash(text, level) {
    var box = $("#messages");
    if (!box) return;
    var div = document.createElement("div");
    div.className = "msg msg-" + (level || "info");
    div.setAttribute("role", level === "error" ? "alert" : "status");
    var spanEl = document.createElement("span");
    spanEl.textContent = text;
    var close = document.createElement("button");
    close.type = "button"; close.className = "msg-close"; close.setAttribute("aria-label", "Dismiss"); close.textContent = "×";
    div.appendChild(spanEl); div.appendChild(close);
    box.appendChild(div);
  }

  document.addEventListener("click", function (e) {
    var close = e.target.closest && e.target.closest(".msg-close");
    if (close) close.parentElement.remove();
  });

  var dialog = $("#confirm-dialog");
  var confirmedSubmit = false;
  // The form and button the open confirmation asks about (a live refresh may replace the button meanwhile).
  var asking = null;

  function selectedCount() { return $$('input[name="ids"]:checked').length; }

  // "{n}" is the number of ticked rows, "{s}" the plural ending it takes.
  function confirmText(text) {
    var n = selectedCount();
    return text.replace("{n}", String(n)).replace("{s}", n === 1 ? "" : "s");
  }

  function showAsking() {
    var form = asking.form, submitter = asking.submitter;
    $("#confirm-text").textContent = confirmText((submitter && submitter.dataset.confirm) || form.dataset.confirm);
    var ok = $("#confirm-ok");
    ok.textContent = (submitter && submitter.dataset.confirmLabel) || form.dataset.confirmLabel || "Confirm";
    // A count that fell to nothing meanwhile leaves nothing to confirm.
    ok.disabled = Boolean(submitter && submitter.disabled);
  }

  // After a live refresh the open confirmation asks about the fresh form and
  // button, in their words now (a count that changed, an action no longer allowed).
  function reask() {
    if (!asking) return;
    var form = asking.form, submitter = asking.submitter;
    if (document.contains(form) && (!submitter || document.contains(submitter))) return;
    if (!document.contains(form)) {
      var action = form.getAttribute("action");
      form = $$("form").filter(function (f) { return f.getAttribute("action") === action; })[0] || null;
    }
    if (form && submitter) {
      var key = focusKeyOf(submitter);
      submitter = key ? findByFocusKey(form, key) : $('[type="submit"]', form);
    }
    if (!form || (asking.submitter && !submitter)) { dialog.close("cancel"); return; }
    asking = { form: form, submitter: submitter };
    showAsking();
  }

  document.addEventListener("submit", function (e) {
    var text = (e.submitter && e.submitter.dataset.confirm) || e.target.dataset.confirm;
    if (!text || confirmedSubmit || !dialog || typeof dialog.showModal !== "function") return;
    e.preventDefault();
    asking = { form: e.target, submitter: e.submitter || null };
    showAsking();
    dialog.returnValue = "";
    dialog.showModal();
    dialog.addEventListener("close", function onClose() {
      dialog.removeEventListener("close", onClose);
      var form = asking.form, submitter = asking.submitter;
      asking = null;
      if (dialog.returnValue !== "ok") { (submitter || form).focus && (submitter || form).focus(); return; }
      confirmedSubmit = true;
      try {
        if (form.requestSubmit) form.requestSubmit(submitter || undefined); else form.submit();
      } finally { confirmedSubmit = false; }
    });
  });

  // ---------------------------------------------------------------- live events socket

  var Live = {
    listeners: [],
    socket: null,
    retry: 0,
    params: "",
    connectedAt: 0,
    on: function (fn) { this.listeners.push(fn); },
    setStatus: function (state, label) {
      var el = $("#live-status");
      if (!el) return;
      el.dataset.state = state;
      $(".label", el).textContent = label;
    },
    connect: function (params) {
      var self = this;
      if (params !== undefined) self.params = params;
      if (self.socket) { self.socket.onclose = null; self.socket.close(); self.socket = null; }
      var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + (body.dataset.eventsUrl || "/ws/events") + (self.params ? "?" + self.params : "");
      self.setStatus("connecting", "connecting");
      var ws;
      try { ws = new WebSocket(url); } catch (err) { self.later(); return; }
      self.socket = ws;
      ws.onopen = function () {
        self.retry = 0;
        self.connectedAt = Date.now();
        self.setStatus("live", "live");
        self.listeners.forEach(function (fn) { fn([], "open"); });
      };
      ws.onmessage = function (msg) {
        var data;
        try { data = JSON.parse(msg.data); } catch (err) { return; }
        var events = (data && data.events) || [];
        if (events.length) self.listeners.forEach(function (fn) { fn(events, "events"); });
      };
      ws.onclose = function () { self.socket = null; self.later(); };
    },
    later: function () {
      var self = this;
      self.setStatus("off", "reconnecting");
      var delay = Math.min(10000, 500 * Math.pow(2, self.retry++));
      setTimeout(function () { if (!self.socket) self.connect(); }, delay);
    }
  };

  window.addEventListener("pagehide", function () {
    if (Live.socket) { Live.socket.onclose = null; Live.socket.close(); }
  });

  // ---------------------------------------------------------------- live counters (rates)

  // Per-second buckets of event counts for the last few minutes, per queue.
  var Rates = {
    buckets: {},  // second -> {kind: n, "q:" + queue + ":" + kind: n}
    start: Date.now(),
    add: function (events) {
      var now = Math.floor(Date.now() / 1000);
      var b = this.buckets[now] || (this.buckets[now] = {});
      events.forEach(function (e) {
        var k = classify(e);
        if (!k) return;
        b[k] = (b[k] || 0) + 1;
        var qk = "q:" + e.queue + ":" + k;
        b[qk] = (b[qk] || 0) + 1;
      });
      var cutoff = now - 300;
      Object.keys(this.buckets).forEach(function (s) { if (+s < cutoff) delete Rates.buckets[s]; });
    },
    sum: function (key, seconds) {
      var now = Math.floor(Date.now() / 1000), total = 0;
      for (var s = now - seconds + 1; s <= now; s++) total += (this.buckets[s] && this.buckets[s][key]) || 0;
      return total;
    },
    perSecond: function (key, seconds) {
      var elapsed = Math.max(1, Math.min(seconds, Math.ceil((Date.now() - this.start) / 1000)));
      return this.sum(key, elapsed) / elapsed;
    },
    series: function (key, seconds) {
      var now = Math.floor(Date.now() / 1000), out = [];
      for (var s = now - seconds + 1; s <= now; s++) out.push((this.buckets[s] && this.buckets[s][key]) || 0);
      return out;
    },
    // Counts survive navigation between dashboard pages of one tab.
    save: function () {
      try { sessionStorage.setItem("conveyor.rates", JSON.stringify({ start: this.start, buckets: this.buckets })); } catch (err) { /* storage off */ }
    },
    restore: function () {
      var saved = null;
      try { saved = JSON.parse(sessionStorage.getItem("conveyor.rates") || "null"); } catch (err) { saved = null; }
      var cutoff = Math.floor(Date.now() / 1000) - 300;
      if (!saved || !saved.buckets) return;
      var keep = {};
      Object.keys(saved.buckets).forEach(function (s) { if (+s >= cutoff) keep[s] = saved.buckets[s]; });
      if (!Object.keys(keep).length) return;
      this.buckets = keep;
      this.start = Math.max(saved.start || Date.now(), cutoff * 1000);
    }
  };
  Rates.restore();
  window.addEventListener("pagehide", function () { Rates.save(); });

  function classify(e) {
    if (e.kind === "completed") return "completed";
    if (e.kind === "retried") return "failed";
    if (e.kind === "archived" && e.last_error !== "archived by operator" && e.last_error !== "task expired before dispatch") return "failed";
    if (e.kind === "enqueued" || e.kind === "scheduled") return "enqueued";
    return "";
  }

  function fmtRate(x) { return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2).replace(/0$/, ""); }

  // ---------------------------------------------------------------- region refresh

  var Refresh = {
    busy: false,
    again: false,
    last: 0,
    timer: null,
    minGap: 1000,
    gap: 1000,
    hooks: [],
    request: function () {
      var self = this;
      if (self.timer) return;
      var wait = Math.max(0, self.last + self.gap - Date.now());
      self.timer = setTimeout(function () { self.timer = null; self.run(); }, wait);
    },
    run: function () {
      var self = this;
      if (document.hidden) { self.again = true; return; }
      if (self.busy) { self.again = true; return; }
      self.busy = true;
      self.last = Date.now();
      fetch(location.href, { credentials: "same-origin", headers: { "X-Dashboard-Refresh": "1" }, cache: "no-store" })
        .then(function (r) {
          if (r.redirected && /\/login\//.test(r.url)) { flash("Your session ended; log in again to keep the page live.", "error"); return null; }
          if (r.status === 404 || r.headers.get("X-Conveyor-Gone")) { self.gone(); return null; }
          if (!r.ok) return null;
          return r.text();
        })
        .then(function (html) { if (html) self.swap(html); })
        .catch(function () { /* offline: the socket status says so */ })
        .then(function () {
          // Back off when the server is slow to render (at most a third of its time on one tab, 5 s apart at worst).
          self.gap = Math.min(5000, Math.max(self.minGap, 3 * (Date.now() - self.last)));
          self.busy = false;
          if (self.again) { self.again = false; self.request(); }
        });
    },
    goneShown: false,
    gone: function () {
      if (this.goneShown) return;
      this.goneShown = true;
      flash("This no longer exists: it was deleted or purged. The page shows its last known state.", "warning");
    },
    swap: function (html) {
      var doc = new DOMParser().parseFromString(html, "text/html");
      var active = document.activeElement;
      $$("[data-region][id]").forEach(function (region) {
        var fresh = doc.getElementById(region.id);
        if (!fresh) return;
        var holdsFocus = active && within(region, active);
        // Never yank a field the user is typing in.
        if (holdsFocus && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName) && active.type !== "checkbox") {
          Refresh.again = true;
          return;
        }
        if (fresh.innerHTML === region.innerHTML) return;
        var checked = {};
        $$('input[type="checkbox"][name="ids"]', region).forEach(function (c) { if (c.checked) checked[c.value] = true; });
        var allChecked = $("#select-all", region) && $("#select-all", region).checked;
        var open = $$("details[open]", region).map(function (d) { return d.id || null; });
        var seen = {};
        $$("tr[data-task-id]", region).forEach(function (tr) { seen[tr.dataset.taskId] = true; });
        var focusKey = holdsFocus ? focusKeyOf(active) : null;
        region.innerHTML = fresh.innerHTML;
        $$('input[type="checkbox"][name="ids"]', region).forEach(function (c) { if (checked[c.value]) c.checked = true; });
        if (allChecked && $("#select-all", region)) $("#select-all", region).checked = true;
        open.forEach(function (id) { if (id && document.getElementById(id)) document.getElementById(id).open = true; });
        $$("tr[data-task-id]", region).forEach(function (tr) { if (!seen[tr.dataset.taskId]) tr.classList.add("is-new"); });
        if (focusKey) { var again = findByFocusKey(region, focusKey); if (again) again.focus(); }
        tickTimes(region);
        highlightJson(region);
      });
      var title = doc.querySelector("title");
      if (title) document.title = title.textContent;
      this.hooks.forEach(function (fn) { fn(); });
    }
  };

  Refresh.hooks.push(reask);

  // Node's own contains(): on a form, a field named "contains" (the task list's
  // payload filter) shadows the method.
  function within(root, node) { return Node.prototype.contains.call(root, node); }

  function focusKeyOf(el) {
    if (el.id) return { id: el.id };
    if (el.name && el.value) return { name: el.name, value: el.value, tag: el.tagName };
    if (el.tagName === "A") return { href: el.getAttribute("href") };
    return null;
  }

  function findByFocusKey(root, key) {
    if (key.id) return document.getElementById(key.id);
    if (key.href) return $$("a", root).filter(function (a) { return a.getAttribute("href") === key.href; })[0] || null;
    return $$(key.tag.toLowerCase() + '[name="' + key.name + '"]', root).filter(function (x) { return x.value === key.value; })[0] || null;
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && Refresh.again) { Refresh.again = false; Refresh.request(); }
  });

  function every(ms, fn) { setInterval(function () { if (!document.hidden) fn(); }, ms); }

  // ---------------------------------------------------------------- JSON highlighting

  function escapeHtml(s) { return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }

  function highlightJson(root) {
    $$("pre.json:not([data-hl])", root).forEach(function (pre) {
      var text = pre.textContent;
      if (text.length > 200000) return;
      var re = /("(?:\\.|[^"\\])*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|\b(true|false|null)\b/g;
      var out = "", last = 0, m;
      while ((m = re.exec(text))) {
        out += escapeHtml(text.slice(last, m.index));
        if (m[1]) out += '<span class="' + (m[2] ? "k" : "s") + '">' + escapeHtml(m[1]) + "</span>" + (m[2] ? escapeHtml(m[2]) : "");
        else if (m[3]) out += '<span class="n">' + m[3] + "</span>";
        else out += '<span class="b">' + m[4] + "</span>";
        last = re.lastIndex;
      }
      out += escapeHtml(text.slice(last));
      pre.innerHTML = out;
      pre.setAttribute("data-hl", "");
    });
  }

  // ---------------------------------------------------------------- charts (inline SVG)

  var SVGNS = "http://www.w3.org/2000/svg";

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVGNS, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(node);
    return node;
  }

  function niceMax(v) {
    if (v <= 0) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v))), n = v / p;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * p;
  }

  function fmtNum(v) {
    if (v === 0) return "0";
    if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "k";
    if (v >= 10) return v.toFixed(0);
    if (v >= 1) return v.toFixed(1).replace(/\.0$/, "");
    return v.toFixed(2).replace(/0$/, "");
  }

  /* spec: {series: [{values, cls, area}], labels: [x labels], note, unit} */
  function drawChart(container, spec) {
    if (!container) return;
    var w = Math.max(200, container.clientWidth || 300), h = container.clientHeight || 150;
    var left = 34, right = 6, top = 8, bottom = 18;
    var svg = el("svg", { viewBox: "0 0 " + w + " " + h, preserveAspectRatio: "none", "aria-hidden": "true" });
    var n = spec.labels.length;
    var max = 0;
    spec.series.forEach(function (s) { s.values.forEach(function (v) { if (v > max) max = v; }); });
    max = niceMax(max);
    var x = function (i) { return left + (n <= 1 ? 0 : (i * (w - left - right)) / (n - 1)); };
    var y = function (v) { return top + (h - top - bottom) * (1 - v / max); };
    [0, 0.5, 1].forEach(function (f) {
      var yy = Math.round(y(max * f)) + 0.5;
      el("line", { x1: left, x2: w - right, y1: yy, y2: yy, class: "axis" }, svg);
      el("text", { x: left - 4, y: yy + 3, "text-anchor": "end", class: "tick" }, svg).textContent = fmtNum(max * f);
    });
    var gap = spec.labelGap || 60;
    var step = Math.max(1, Math.ceil(n / Math.max(2, Math.floor((w - left - right) / gap))));
    for (var i = 0; i < n; i += step) {
      el("text", { x: x(i), y: h - 4, "text-anchor": i === 0 ? "start" : "middle", class: "tick" }, svg).textContent = spec.labels[i];
    }
    spec.series.forEach(function (s) {
      if (!s.values.length) return;
      var pts = s.values.map(function (v, i) { return x(i).toFixed(1) + "," + y(v).toFixed(1); });
      if (s.area) {
        el("path", { d: "M" + x(0) + "," + y(0) + " L" + pts.join(" L") + " L" + x(s.values.length - 1) + "," + y(0) + " Z", class: s.cls }, svg);
      } else {
        el("polyline", { points: pts.join(" "), class: s.cls }, svg);
      }
    });
    if (spec.note) {
      el("text", { x: left + (w - left) / 2, y: top + (h - top - bottom) / 2, "text-anchor": "middle", class: "note" }, svg).textContent = spec.note;
    }
    container.innerHTML = "";
    container.appendChild(svg);
  }

  function sparkline(values, cls) {
    var w = 60, h = 16, max = Math.max.apply(null, values.concat([1]));
    var svg = el("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h, "aria-hidden": "true" });
    var pts = values.map(function (v, i) { return ((i * w) / Math.max(1, values.length - 1)).toFixed(1) + "," + (h - 1 - ((h - 2) * v) / max).toFixed(1); });
    el("polyline", { points: pts.join(" "), fill: "none", stroke: "currentColor", "stroke-width": 1.2, class: cls || "" }, svg);
    return svg;
  }

  // History: GET /api/v1/stats/history?minutes=60 ->
  //   {"series": [{"minute", "queue", "enqueued", "completed", "failed", "backlog"}, ...]}
  // one row per queue per minute; minutes without activity are omitted.
  var History = {
    url: "",
    rows: null,
    available: false,
    load: function (url, done) {
      var self = this;
      self.url = url;
      if (!url) { self.available = false; done(); return; }
      fetch(url + "?minutes=60", { credentials: "same-origin", headers: { Accept: "application/json" }, cache: "no-store" })
        .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.json(); })
        .then(function (data) { self.rows = (data && data.series) || []; self.available = true; })
        .catch(function () { self.available = false; self.rows = null; })
        .then(done);
    },
    /* 60 minute buckets ending at the current minute; backlog carried forward per queue. */
    minutes: function (queue, endMs) {
      var now = new Date(endMs || Date.now()); now.setUTCSeconds(0, 0);
      var startMs = now.getTime() - 59 * 60000;
      var out = [];
      for (var i = 0; i < 60; i++) out.push({ t: new Date(startMs + i * 60000), completed: 0, failed: 0, enqueued: 0, backlog: 0 });
      var lastBacklog = {}, byMinute = {};
      (this.rows || []).slice().sort(function (a, b) { return a.minute < b.minute ? -1 : 1; }).forEach(function (r) {
        if (queue && r.queue !== queue) return;
        var t = new Date(r.minute).getTime();
        if (t < startMs) { lastBacklog[r.queue] = r.backlog || 0; return; }
        var idx = Math.round((t - startMs) / 60000);
        if (idx < 0 || idx >= 60) return;
        (byMinute[idx] || (byMinute[idx] = [])).push(r);
      });
      for (var j = 0; j < 60; j++) {
        (byMinute[j] || []).forEach(function (r) {
          out[j].completed += r.completed || 0;
          out[j].failed += r.failed || 0;
          out[j].enqueued += r.enqueued || 0;
          lastBacklog[r.queue] = r.backlog || 0;
        });
        out[j].backlog = Object.keys(lastBacklog).reduce(function (s, q) { return s + lastBacklog[q]; }, 0);
      }
      return out;
    }
  };

  // ---------------------------------------------------------------- pages

  var LIVE_SECONDS = 60;

  function initOverview() {
    var tp = $("#chart-throughput");
    var historyUrl = tp ? tp.dataset.history : "";
    function drawHistory() {
      var labels, completed = [], failed = [], backlog = [], note = "";
      var mins = History.minutes(null);
      labels = mins.map(function (m) { return hhmm(m.t); });
      if (History.available) {
        mins.forEach(function (m) { completed.push(m.completed / 60); failed.push(m.failed / 60); backlog.push(m.backlog); });
      } else {
        note = historyUrl ? "history unavailable right now" : "no per-minute history on this server yet";
      }
      drawChart($("#chart-throughput .chart-body"), { labels: labels, note: note, series: [{ values: completed, cls: "line-ok" }, { values: failed, cls: "line-bad" }] });
      drawChart($("#chart-backlog .chart-body"), { labels: labels, note: note, series: [{ values: backlog, cls: "area-backlog", area: true }] });
    }
    function drawLive() {
      var labels = [];
      var now = Math.floor(Date.now() / 1000);
      for (var s = now - LIVE_SECONDS + 1; s <= now; s++) labels.push(hhmm(new Date(s * 1000), true));
      drawChart($("#chart-live .chart-body"), {
        labels: labels,
        labelGap: 80,
        series: [
          { values: Rates.series("enqueued", LIVE_SECONDS), cls: "line-enq" },
          { values: Rates.series("completed", LIVE_SECONDS), cls: "line-ok" },
          { values: Rates.series("failed", LIVE_SECONDS), cls: "line-bad" }
        ]
      });
      var c = $("#rate-completed"), f = $("#rate-failed");
      if (c) c.textContent = fmtRate(Rates.perSecond("completed", 10));
      if (f) f.textContent = fmtRate(Rates.perSecond("failed", 10));
    }
    History.load(historyUrl, drawHistory);
    every(60000, function () { History.load(historyUrl, drawHistory); });
    drawLive();
    every(1000, drawLive);
    window.addEventListener("resize", function () { drawHistory(); drawLive(); });
    Live.on(function (events) { if (events.length) Refresh.request(); });
    every(5000, function () { Refresh.request(); });
  }

  function fillThroughput() {
    $$("[data-throughput]").forEach(function (td) {
      var q = td.dataset.throughput;
      var done = Rates.perSecond("q:" + q + ":completed", 60), bad = Rates.perSecond("q:" + q + ":failed", 60);
      td.innerHTML = "";
      var text = document.createElement("span");
      text.textContent = done ? fmtRate(done) + "/s" : "0/s";
      if (!done) text.className = "muted";
      text.title = "completed per second over the last minute (live)" + (bad ? "; " + fmtRate(bad) + "/s failed" : "");
      td.appendChild(text);
      if (bad) { var b = document.createElement("span"); b.className = "err"; b.textContent = " " + fmtRate(bad) + "/s ✕"; td.appendChild(b); }
      if (History.available) {
        var values = History.minutes(q).map(function (m) { return m.completed; });
        var line = sparkline(values);
        line.setAttribute("aria-label", "completed per minute, last hour");
        td.appendChild(line);
      }
    });
  }

  function initQueues() {
    var table = $("#queue-table");
    var historyUrl = table ? table.dataset.history : "";
    History.load(historyUrl, fillThroughput);
    every(60000, function () { History.load(historyUrl, fillThroughput); });
    Refresh.hooks.push(fillThroughput);
    every(2000, fillThroughput);
    Live.on(function (events) { if (events.length) Refresh.request(); });
    every(10000, function () { Refresh.request(); });
  }

  function initQueueDetail() {
    var queue = body.dataset.queue;
    Live.on(function (events) {
      if (events.some(function (e) { return e.queue === queue; })) Refresh.request();
    });
    every(10000, function () { Refresh.request(); });
  }

  function initTasks() {
    var filterQueue = body.dataset.filterQueue || "";
    Live.on(function (events) {
      if (events.some(function (e) { return !filterQueue || e.queue === filterQueue; })) Refresh.request();
    });
    var form = $("#bulk-form");
    if (!form) return;
    function sync() {
      var boxes = $$('input[name="ids"]', form);
      var n = boxes.filter(function (c) { return c.checked; }).length;
      $("#selected-count").textContent = n + " selected";
      $$("[data-needs-selection]", form).forEach(function (b) { b.disabled = READ_ONLY || n === 0; });
      var all = $("#select-all", form);
      if (all) { all.checked = boxes.length > 0 && n === boxes.length; all.indeterminate = n > 0 && n < boxes.length; }
    }
    form.addEventListener("change", function (e) {
      if (e.target.id === "select-all") {
        $$('input[name="ids"]', form).forEach(function (c) { c.checked = e.target.checked; });
      }
      sync();
    });
    Refresh.hooks.push(sync);
    sync();
  }

  function initTaskDetail() {
    var ids = (body.dataset.taskIds || "").split(" ").filter(Boolean);
    var mine = ids[0];
    Live.on(function (events) {
      var relevant = events.some(function (e) { return ids.indexOf(e.task_id) !== -1; });
      if (!relevant) return;
      if (events.some(function (e) { return e.task_id === mine && e.kind === "deleted"; })) {
        flash("This task was deleted.", "warning");
      }
      Refresh.request();
    });
    // Active tasks report progress and lease extensions, which emit no events.
    every(3000, function () {
      var state = $("#task-state .badge");
      if (state && state.textContent === "active") Refresh.request();
    });
  }

  function initPolling(ms) {
    every(ms, function () { Refresh.request(); });
  }

  function initWorkers() {
    Live.on(function (events) { if (events.length) Refresh.request(); });
    initPolling(3000);
  }

  function initCronForm() {
    var spec = $("#c-spec"), tz = $("#c-tz"), out = $("#spec-preview");
    if (!spec || !out) return;
    var timer = null, seq = 0;
    function render(data) {
      out.innerHTML = "";
      if (!data) return;
      if (data.ok) {
        var p = document.createElement("p"); p.className = "preview-title"; p.textContent = "Next five runs";
        var ol = document.createElement("ol");
        data.fires.forEach(function (f, i) {
          var li = document.createElement("li");
          var t = document.createElement("time");
          t.setAttribute("datetime", f);
          var d = new Date(f);
          var local = (data.local && data.local[i]) || f.replace("T", " ").replace("Z", " UTC");
          var utc = data.timezone && data.timezone !== "UTC" ? " · " + f.slice(11, 19) + " UTC" : "";
          t.textContent = local + utc + " (" + relative(d) + ")";
          li.appendChild(t); ol.appendChild(li);
        });
        out.appendChild(p); out.appendChild(ol);
        spec.removeAttribute("aria-invalid");
      } else {
        var e = document.createElement("p"); e.className = "preview-error"; e.textContent = data.error;
        out.appendChild(e);
        spec.setAttribute("aria-invalid", "true");
      }
    }
    function update() {
      var value = spec.value.trim();
      if (!value) { render(null); return; }
      var mine = ++seq;
      var url = out.dataset.previewUrl + "?spec=" + encodeURIComponent(value) + "&timezone=" + encodeURIComponent((tz && tz.value) || "UTC");
      fetch(url, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (data) { if (mine === seq && data) render(data); })
        .catch(function () { /* keep the last preview */ });
    }
    function later() { clearTimeout(timer); timer = setTimeout(update, 250); }
    spec.addEventListener("input", later);
    if (tz) tz.addEventListener("change", later);
    if (spec.value.trim()) update();
  }

  function initEvents() {
    var form = $("#event-filters"), rows = $("#event-rows"), count = 0, paused = false, MAX = 1000;
    var taskBase = $("#event-table").dataset.taskBase || "/tasks/";
    var kinds = function () { return $$('input[name="kind"]:checked', form).map(function (c) { return c.value; }); };
    function params() {
      var q = new URLSearchParams();
      var queue = $("#e-queue").value.trim(), type = $("#e-type").value.trim();
      if (queue) q.set("queue", queue.replace(/\s+/g, ""));
      if (type) q.set("type", type.replace(/\s*,\s*/g, ","));
      return q.toString();
    }
    function cell(tr, text, cls) { var td = document.createElement("td"); if (cls) td.className = cls; if (text instanceof Node) td.appendChild(text); else td.textContent = text; tr.appendChild(td); return td; }
    function row(e) {
      var tr = document.createElement("tr");
      tr.dataset.kind = e.kind;
      tr.dataset.taskId = e.task_id;
      var t = document.createElement("time"); t.setAttribute("datetime", e.at); t.textContent = hhmm(new Date(e.at), true); t.title = e.at;
      cell(tr, t, "mono");
      var k = document.createElement("span"); k.className = "badge k-" + e.kind; k.textContent = e.kind; cell(tr, k);
      var a = document.createElement("a"); a.className = "mono"; a.href = taskBase + encodeURIComponent(e.task_id).replace(/%2F/g, "/") + "/"; a.textContent = e.task_id;
      var td = cell(tr, a, "task-cell"); var sub = document.createElement("div"); sub.className = "sub"; sub.textContent = e.type;
      var onQueue = document.createElement("span"); onQueue.className = "show-sm"; onQueue.textContent = " · " + e.queue; sub.appendChild(onQueue);
      td.appendChild(sub);
      cell(tr, e.queue, "hide-sm");
      var s = document.createElement("span"); s.className = "badge s-" + e.state; s.textContent = e.state; cell(tr, s, "hide-sm");
      cell(tr, String(e.attempt), "num hide-sm");
      cell(tr, e.last_error || "", "hide-sm err");
      return tr;
    }
    function applyKinds() {
      var allowed = kinds();
      $$("tr[data-kind]", rows).forEach(function (tr) { tr.hidden = allowed.indexOf(tr.dataset.kind) === -1; });
    }
    Live.on(function (events, what) {
      if (what === "open" || !events.length || paused) return;
      var placeholder = $(".placeholder", rows);
      if (placeholder) placeholder.remove();
      var allowed = kinds();
      var frag = document.createDocumentFragment();
      for (var i = events.length - 1; i >= 0; i--) {
        var tr = row(events[i]);
        if (allowed.indexOf(events[i].kind) === -1) tr.hidden = true;
        frag.appendChild(tr);
      }
      rows.insertBefore(frag, rows.firstChild);
      count += events.length;
      $("#event-count").textContent = String(count);
      while (rows.children.length > MAX) rows.removeChild(rows.lastChild);
    });
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var p = params();
      history.replaceState(null, "", location.pathname + (p ? "?" + p : ""));
      Live.connect(p);
    });
    form.addEventListener("change", function (e) { if (e.target.name === "kind") applyKinds(); });
    $("#events-pause").addEventListener("click", function () {
      paused = !paused;
      this.setAttribute("aria-pressed", String(paused));
      this.textContent = paused ? "Resume" : "Pause";
    });
    $("#events-clear").addEventListener("click", function () {
      rows.innerHTML = "";
      count = 0;
      $("#event-count").textContent = "0";
    });
    return params();
  }

  // ---------------------------------------------------------------- boot

  tickTimes();
  setInterval(function () { tickTimes(); }, 1000);
  // A bulk job running: its progress is read back every second until it ends.
  every(1000, function () { if ($("[data-bulk-running]")) Refresh.request(); });
  highlightJson();
  Live.on(function (events) { if (events.length) Rates.add(events); });

  var params = "";
  switch (PAGE) {
    case "overview": initOverview(); break;
    case "queues": if ($("#queue-table")) initQueues(); else initQueueDetail(); break;
    case "tasks": if ($("#bulk-form")) initTasks(); else if ($("#task-main")) initTaskDetail(); break;
    case "workers": initWorkers(); break;
    case "cron": if ($("#cron-form")) initCronForm(); else initPolling(5000); break;
    case "webhooks": if (!$("#webhook-form")) initPolling(5000); break;
    case "events": params = initEvents(); break;
  }
  Live.connect(params);

  window.Conveyor = { Live: Live, Refresh: Refresh, Rates: Rates, History: History };
})();
