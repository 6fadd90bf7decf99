/* ctxweb's replay pages: a replay's live progress, and its charts stacked on one scale.

   Included as <script src=".../replay.js" data-socket="<the session's socket path>" defer>.
   Progress: the replays followed are the page's [data-replay][data-replay-url] element (a
   replay's page) or the list in the #replay-follow JSON ([{id, url}], the replays page). The
   session's socket sends replay.progress ({replay, done, total, status}) and replay.finished;
   when the socket is not open (a server without WebSockets, a dropped connection) the script
   asks each replay's ?format=json every POLL_MS instead. A replay's page reloads once its replay
   has finished, to show the charts and the table; the replays page updates the row.

   Charts: #replay-data holds {regions, columns: [{position, label, window, usable, trigger,
   turns: [{index, total, regions, window, over, compacted}], compactions}]}. Each
   figure.replay-chart[data-column] gets its column drawn on a canvas: regions stacked in the
   fixed order with the colours of regions.css, lines for the window, the usable limit and the
   trigger, a marker above each compaction and a red tick under each turn over the window.
   Every chart shares one y scale and one turn axis, so heights and turns line up; hovering or
   moving with the arrow keys shows the same turn on every chart. Text is only ever set with
   textContent.

   For tests: window.ctxwebReplay.charts() -> [{position, turns, drawn}],
   window.ctxwebReplay.select(index) focuses a turn on every chart. */
(function () {
  "use strict";

  var POLL_MS = 1500;
  var RELOAD_MS = 800;
  var MIN_DELAY = 1000;
  var MAX_DELAY = 30000;
  var FINAL_CODES = { 4401: true, 4403: true, 4404: true };
  var script = document.currentScript;
  var socketPath = script && script.getAttribute("data-socket");

  // --- progress ----------------------------------------------------------------------------------

  var state = document.querySelector("#replay-state[data-replay-url]");
  var followed = {}; // id -> {url, element, finished}

  function follow(id, url, element) {
    if (id == null || !url) return;
    followed[String(id)] = { url: url, element: element, finished: false };
  }

  if (state && /^(queued|running)$/.test(state.getAttribute("data-replay-status-value") || "")) {
    follow(state.getAttribute("data-replay"), state.getAttribute("data-replay-url"), state);
  }
  var listNode = document.getElementById("replay-follow");
  if (listNode) {
    try {
      JSON.parse(listNode.textContent).forEach(function (item) {
        follow(item.id, item.url, document.querySelector('[data-replay="' + item.id + '"]'));
      });
    } catch (e) { /* nothing to follow */ }
  }

  function pending() {
    return Object.keys(followed).filter(function (id) { return !followed[id].finished; });
  }

  function show(id, progress) {
    var item = followed[String(id)];
    if (!item || item.finished) return;
    var el = item.element;
    var done = progress.done || 0;
    var total = progress.total || 0;
    if (el) {
      var bar = el.querySelector("[data-replay-progress]");
      if (bar) {
        bar.max = Math.max(total, 1);
        bar.value = Math.min(done, Math.max(total, 1));
        bar.textContent = done + " of " + total;
        bar.setAttribute("aria-valuetext", done + " of " + total + " turns");
      }
      var count = el.querySelector("[data-replay-count]");
      if (count) count.textContent = done + " of " + total;
      var status = el.querySelector("[data-replay-status]");
      if (status && progress.status) status.textContent = progress.status;
    }
    if (progress.status === "succeeded" || progress.status === "failed") finish(id, progress);
  }

  function finish(id, progress) {
    var item = followed[String(id)];
    if (!item || item.finished) return;
    item.finished = true;
    var live = item.element && item.element.querySelector("[data-replay-live]");
    if (live) live.textContent = "Replay " + id + " " + progress.status + ".";
    if (item.element === state) {
      var status = state.querySelector("[data-replay-status]");
      if (status) status.textContent = progress.status;
      var note = state.querySelector("[data-replay-count]");
      if (note && progress.status === "succeeded") note.textContent += " (loading the results)";
      // The charts and the table are the server's to render: show them, once the finished
      // bar has been seen.
      window.setTimeout(function () { window.location.reload(); }, RELOAD_MS);
      return;
    }
    var el = item.element;
    if (!el) return;
    var bar = el.querySelector("[data-replay-progress]");
    if (bar) bar.remove();
    var status = el.querySelector("[data-replay-status]");
    if (status) status.textContent = progress.status;
    var row = el.closest("tr");
    if (row) row.className = row.className.replace(/status-\w+/, "status-" + progress.status);
  }

  function poll(id) {
    var item = followed[id];
    if (!item || item.finished) return Promise.resolve();
    return fetch(item.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) { if (data) show(id, data); })
      .catch(function () { /* the next round asks again */ });
  }

  var socket = null;
  var socketOpen = false;
  var attempts = 0;
  var polling = null;

  function pollAll() {
    pending().forEach(poll);
  }

  function pollWhileClosed() {
    if (polling) return;
    polling = window.setInterval(function () {
      if (!pending().length) { window.clearInterval(polling); polling = null; return; }
      if (!socketOpen) pollAll();
    }, POLL_MS);
  }

  function replayId(message) {
    var r = message.replay;
    if (r && typeof r === "object") return r.id;
    return r;
  }

  function onMessage(event) {
    var message;
    try { message = JSON.parse(event.data); } catch (e) { return; }
    if (message.type === "hello") {
      pollAll(); // events sent before this socket opened are caught up once
    } else if (message.type === "replay.progress") {
      var r = message.replay && typeof message.replay === "object" ? message.replay : message;
      show(replayId(message), {
        done: message.done != null ? message.done : r.done,
        total: message.total != null ? message.total : r.total,
        status: message.status || r.status
      });
    } else if (message.type === "replay.finished") {
      var id = replayId(message);
      if (followed[String(id)]) poll(String(id)).then(function () {
        var item = followed[String(id)];
        var status = message.status || (message.replay && message.replay.status) || "succeeded";
        if (item && !item.finished) finish(id, { status: status });
      });
    }
  }

  function connect() {
    if (!socketPath || !("WebSocket" in window) || !pending().length) return;
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    try {
      socket = new WebSocket(scheme + window.location.host + socketPath);
    } catch (e) {
      return;
    }
    socket.onopen = function () { socketOpen = true; attempts = 0; };
    socket.onmessage = onMessage;
    socket.onclose = function (event) {
      socketOpen = false;
      if (FINAL_CODES[event.code] || !pending().length) return;
      var delay = Math.min(MAX_DELAY, MIN_DELAY * Math.pow(2, attempts));
      attempts += 1;
      window.setTimeout(connect, delay / 2 + Math.random() * (delay / 2));
    };
  }

  if (pending().length) {
    connect();
    pollWhileClosed();
  }

  // --- charts ------------------------------------------------------------------------------------

  var dataNode = document.getElementById("replay-data");
  var holder = document.getElementById("replay-charts");
  var config = null;
  try { config = dataNode ? JSON.parse(dataNode.textContent) : null; } catch (e) { config = null; }
  if (!config || !holder || !config.columns || !config.columns.length) {
    window.ctxwebReplay = { charts: function () { return []; }, select: function () {} };
    return;
  }

  var MARGIN = { left: 52, right: 88, top: 14, bottom: 22 };
  var USED = config.regions.slice(0, Math.max(0, config.regions.indexOf("reserve")));
  var FALLBACK = {
    system: "#475569", tools: "#7c3aed", summary: "#0d9488", user: "#2563eb",
    assistant: "#16a34a", tool_calls: "#ca8a04", tool_results: "#ea580c", reasoning: "#db2777",
    media: "#0891b2", other: "#78350f", unattributed: "#9ca3af"
  };
  var styles = getComputedStyle(document.documentElement);
  var colors = {};
  USED.forEach(function (name) {
    colors[name] = styles.getPropertyValue("--region-" + name).trim() || FALLBACK[name] || "#9ca3af";
  });

  // One turn axis and one y scale for every chart. The scale follows the windows and the
  // stacks only: a trigger far above them (a custom one in tokens) is drawn at the top edge,
  // named, rather than flattening every chart.
  var first = Infinity, last = -Infinity, top = 1;
  config.columns.forEach(function (column) {
    top = Math.max(top, column.window || 0);
    column.turns.forEach(function (t) {
      first = Math.min(first, t.index);
      last = Math.max(last, t.index);
      top = Math.max(top, t.total || 0, t.window || 0);
    });
  });
  if (first === Infinity) { first = 0; last = 0; }
  var slots = last - first + 1;
  top *= 1.04;

  function fmt(n) { return Math.round(n).toLocaleString("en-US"); }

  function short(n) {
    if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1).replace(/\.0$/, "") + "M";
    if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1).replace(/\.0$/, "") + "K";
    return String(Math.round(n));
  }

  function niceStep(range, count) {
    var raw = range / count;
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  }

  var charts = [];
  var hover = -1; // a turn index, shared by every chart
  var byPosition = {};
  config.columns.forEach(function (column) { byPosition[column.position] = column; });

  holder.querySelectorAll("figure.replay-chart[data-column]").forEach(function (figure) {
    var column = byPosition[figure.getAttribute("data-column")];
    if (!column) return;
    var root = figure.querySelector(".replay-canvas");
    var base = root.querySelector("canvas");
    var overlay = document.createElement("canvas");
    overlay.className = "overlay";
    overlay.setAttribute("aria-hidden", "true");
    root.appendChild(overlay);
    var byIndex = {};
    column.turns.forEach(function (t) { byIndex[t.index] = t; });
    charts.push({
      column: column, root: root, base: base, overlay: overlay, byIndex: byIndex,
      tip: root.querySelector(".replay-tip"), size: { width: 0, height: 0, ratio: 1 }, drawn: false
    });
  });

  function plot(chart) {
    return {
      x: MARGIN.left,
      y: MARGIN.top,
      w: Math.max(10, chart.size.width - MARGIN.left - MARGIN.right),
      h: Math.max(10, chart.size.height - MARGIN.top - MARGIN.bottom)
    };
  }

  function slotX(index, p) {
    var step = p.w / slots;
    var x0 = Math.floor(p.x + (index - first) * step);
    var x1 = Math.floor(p.x + (index - first + 1) * step);
    return { x: x0, w: Math.max(1, x1 - x0 - (step >= 5 ? 1 : 0)) };
  }

  function draw(chart) {
    var ctx = chart.base.getContext("2d");
    var size = chart.size;
    var column = chart.column;
    ctx.setTransform(size.ratio, 0, 0, size.ratio, 0, 0);
    ctx.clearRect(0, 0, size.width, size.height);
    var p = plot(chart);
    var Y = function (v) { return p.y + p.h - (v / top) * p.h; };

    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = "#5b6475";
    ctx.strokeStyle = "#eceef2";
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    var step = niceStep(top, 3);
    for (var v = 0; v <= top; v += step) {
      var gy = Math.round(Y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(p.x, gy); ctx.lineTo(p.x + p.w, gy); ctx.stroke();
      ctx.fillText(short(v), p.x - 6, gy);
    }

    var turns = column.turns;
    var xs = turns.map(function (t) { return slotX(t.index, p); });
    var acc = new Float64Array(turns.length);
    USED.forEach(function (name) {
      ctx.fillStyle = colors[name];
      for (var i = 0; i < turns.length; i++) {
        var value = turns[i].regions[name] || 0;
        if (!value) continue;
        var y0 = Y(acc[i]), y1 = Y(acc[i] + value);
        ctx.fillRect(xs[i].x, y1, xs[i].w, Math.max(y0 - y1, 0.5));
        acc[i] += value;
      }
    });
    // A turn whose regions were not sent (older results): its total, in one grey stack.
    ctx.fillStyle = "#9ca3af";
    for (var k = 0; k < turns.length; k++) {
      if (acc[k] || !turns[k].total) continue;
      ctx.fillRect(xs[k].x, Y(turns[k].total), xs[k].w, Y(0) - Y(turns[k].total));
    }

    var lines = [
      { value: column.window, color: "#111827", dash: [], name: "window" },
      { value: column.usable, color: "#374151", dash: [6, 4], name: "usable" },
      { value: column.trigger, color: "#dc2626", dash: [3, 3], name: "trigger" }
    ].filter(function (line) { return line.value; })
      .sort(function (a, b) { return b.value - a.value; });
    ctx.textAlign = "left";
    var lastLabel = -Infinity;
    lines.forEach(function (line) {
      var above = line.value > top;
      var ly = Math.round(Y(Math.min(line.value, top))) + 0.5;
      ctx.strokeStyle = line.color;
      ctx.lineWidth = 1.5;
      ctx.setLineDash(line.dash);
      ctx.beginPath(); ctx.moveTo(p.x, ly); ctx.lineTo(p.x + p.w, ly); ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = line.color;
      var labelY = Math.max(ly, lastLabel + 12);
      ctx.fillText(line.name + " " + short(line.value) + (above ? " ↑" : ""), p.x + p.w + 4, labelY);
      lastLabel = labelY;
    });

    // Compactions: a marker above the turn that compacted.
    ctx.fillStyle = "#b91c1c";
    var marked = {};
    column.compactions.forEach(function (c) { if (c.turn != null) marked[c.turn] = true; });
    turns.forEach(function (t) { if (t.compacted) marked[t.index] = true; });
    Object.keys(marked).forEach(function (index) {
      var s = slotX(Number(index), p);
      var cx = s.x + s.w / 2;
      ctx.beginPath();
      ctx.moveTo(cx - 4, p.y - 10); ctx.lineTo(cx + 4, p.y - 10); ctx.lineTo(cx, p.y - 3);
      ctx.closePath(); ctx.fill();
    });
    // Turns over the window: a red tick under the axis.
    ctx.fillStyle = "#dc2626";
    for (var j = 0; j < turns.length; j++) {
      if (turns[j].over) ctx.fillRect(xs[j].x, p.y + p.h + 2, xs[j].w, 4);
    }

    ctx.fillStyle = "#5b6475";
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    var every = Math.max(1, niceStep(slots, Math.max(2, Math.floor(p.w / 70))));
    for (var n = first; n <= last; n++) {
      if (n % every !== 0) continue;
      var sx = slotX(n, p);
      ctx.fillText(String(n), sx.x + sx.w / 2, p.y + p.h + 8);
    }
    ctx.strokeStyle = "#9ca3af";
    ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(p.x, p.y + p.h + 0.5); ctx.lineTo(p.x + p.w, p.y + p.h + 0.5); ctx.stroke();
    chart.drawn = true;
    drawOverlay(chart);
  }

  function drawOverlay(chart) {
    var ctx = chart.overlay.getContext("2d");
    var size = chart.size;
    ctx.setTransform(size.ratio, 0, 0, size.ratio, 0, 0);
    ctx.clearRect(0, 0, size.width, size.height);
    if (hover < first || hover > last) { chart.tip.hidden = true; return; }
    var p = plot(chart);
    var s = slotX(hover, p);
    ctx.fillStyle = "rgba(17, 24, 39, 0.08)";
    ctx.fillRect(s.x - 2, p.y, s.w + 4, p.h);
    ctx.strokeStyle = "#111827";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(s.x - 1.5, p.y + 0.5, s.w + 3, p.h - 1);
    showTip(chart, s, p);
  }

  function showTip(chart, s, p) {
    var tip = chart.tip;
    var t = chart.byIndex[hover];
    tip.textContent = "";
    var title = document.createElement("div");
    title.className = "tip-title";
    title.textContent = "Turn " + hover;
    tip.appendChild(title);
    var line = document.createElement("div");
    if (!t) {
      line.textContent = "not replayed";
    } else {
      var usable = chart.column.usable || 1;
      var text = fmt(t.total) + " tokens · " + (100 * t.total / usable).toFixed(1) + "% of usable";
      if (t.compacted) text += " · compacted";
      if (t.over) text += " · over the window";
      line.textContent = text;
    }
    tip.appendChild(line);
    tip.hidden = false;
    var width = tip.offsetWidth;
    var left = s.x + s.w + 10;
    if (left + width > chart.size.width) left = Math.max(0, s.x - width - 10);
    tip.style.left = left + "px";
    tip.style.top = p.y + "px";
  }

  function resize(chart) {
    var rect = chart.root.getBoundingClientRect();
    var ratio = window.devicePixelRatio || 1;
    chart.size = { width: Math.max(200, rect.width), height: Math.max(100, rect.height), ratio: ratio };
    [chart.base, chart.overlay].forEach(function (canvas) {
      canvas.width = Math.round(chart.size.width * ratio);
      canvas.height = Math.round(chart.size.height * ratio);
      canvas.style.width = chart.size.width + "px";
      canvas.style.height = chart.size.height + "px";
    });
    draw(chart);
  }

  var announcer = document.getElementById("replay-chart-live");

  function setHover(index) {
    hover = index;
    charts.forEach(drawOverlay);
  }

  function announce() {
    // The keyboard's turn, read out for every chart: the tooltips are drawn, not spoken.
    if (!announcer || hover < first) return;
    announcer.textContent = "Turn " + hover + ": " + charts.map(function (chart) {
      var t = chart.byIndex[hover];
      if (!t) return chart.column.label + " not replayed";
      return chart.column.label + " " + fmt(t.total) + " tokens" +
        (t.compacted ? ", compacted" : "") + (t.over ? ", over the window" : "");
    }).join("; ");
  }

  function turnAt(chart, clientX) {
    var rect = chart.overlay.getBoundingClientRect();
    var p = plot(chart);
    var x = clientX - rect.left - p.x;
    if (x < 0 || x > p.w) return -1;
    return first + Math.min(slots - 1, Math.floor((x / p.w) * slots));
  }

  charts.forEach(function (chart) {
    chart.overlay.addEventListener("mousemove", function (event) {
      var index = turnAt(chart, event.clientX);
      if (index !== hover) setHover(index);
    });
    chart.overlay.addEventListener("mouseleave", function () { setHover(-1); });
    chart.root.addEventListener("focus", function () { if (hover < first) setHover(last); });
    chart.root.addEventListener("keydown", function (event) {
      if (event.altKey || event.ctrlKey || event.metaKey) return;
      var at = hover >= first ? hover : last;
      var moves = { ArrowLeft: -1, ArrowRight: 1, PageUp: -10, PageDown: 10 };
      if (event.key in moves) setHover(Math.max(first, Math.min(last, at + moves[event.key])));
      else if (event.key === "Home") setHover(first);
      else if (event.key === "End") setHover(last);
      else if (event.key === "Escape") { setHover(-1); return; }
      else return;
      event.preventDefault();
      announce();
    });
    if (typeof ResizeObserver === "function") {
      new ResizeObserver(function () { resize(chart); }).observe(chart.root);
    } else {
      window.addEventListener("resize", function () { resize(chart); });
    }
    resize(chart);
  });

  window.ctxwebReplay = {
    charts: function () {
      return charts.map(function (chart) {
        return { position: chart.column.position, turns: chart.column.turns.length, drawn: chart.drawn };
      });
    },
    select: function (index) { setHover(index); },
    scale: function () { return { top: top, first: first, last: last }; }
  };
})();
