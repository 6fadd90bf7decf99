/* ctxweb's session chart: one stacked column per turn, regions in the fixed order of docs/design.md §3,
   lines for the context window, the usable limit and the compaction trigger, markers for
   compactions and applied operations. Drawn on a canvas (fast with thousands of turns); the
   hovered or focused turn is drawn on a second canvas on top, so moving the mouse never redraws
   the stacks. Every piece of data reaches the page as text (textContent), never as HTML.

   API for live updates and tests:
     window.ctxwebChart.appendTurn(turn)  add (or replace, same index) one turn, API shape
     window.ctxwebChart.appendTurns(list) the same for several turns, drawn once
     window.ctxwebChart.setTurns(turns)   replace every turn
     window.ctxwebChart.lastIndex()       the last turn's index, -1 with none
     window.ctxwebChart.stacks()          {count, regions: names with nonzero tokens, hidden}
     window.ctxwebChart.select(index)     focus a turn by its index and show its tooltip
*/
(function () {
  "use strict";

  var dataNode = document.getElementById("chart-data");
  var root = document.getElementById("chart");
  if (!dataNode || !root) return;
  var config = JSON.parse(dataNode.textContent);
  var USED = config.regions.slice(0, config.regions.indexOf("reserve"));
  var ALL = USED.concat(["reserve", "free"]);
  var MARGIN = { left: 52, right: 88, top: 16, bottom: 26 };

  var base = root.querySelector("canvas.base");
  var overlay = root.querySelector("canvas.overlay");
  var tip = root.querySelector(".tooltip");
  var live = document.getElementById("chart-live");
  var legend = document.getElementById("chart-legend");
  var empty = root.querySelector(".chart-empty");

  var colors = {};
  var styles = getComputedStyle(document.documentElement);
  var FALLBACK = {
    system: "#475569", tools: "#7c3aed", summary: "#0d9488", user: "#2563eb",
    assistant: "#16a34a", tool_calls: "#ca8a04", tool_results: "#ea580c", reasoning: "#db2777",
    media: "#0891b2", other: "#78350f", unattributed: "#9ca3af", reserve: "#d1d5db", free: "#f3f4f6"
  };
  ALL.forEach(function (name) {
    colors[name] = styles.getPropertyValue("--region-" + name).trim() || FALLBACK[name];
  });

  var turns = [];
  var hidden = {};
  var hover = -1;     // position in `turns` under the mouse
  var selected = -1;  // position chosen with the keyboard (or the last click)
  var size = { width: 0, height: 0, ratio: 1 };

  function normalize(turn) {
    return {
      index: turn.index,
      total: turn.total_tokens || 0,
      counted: turn.counted_tokens == null ? turn.total_tokens : turn.counted_tokens,
      regions: turn.regions || {},
      reported: turn.reported_input_tokens == null ? null : turn.reported_input_tokens,
      events: turn.events || [],
      window: turn.context_window || config.window,
      reserve: turn.max_output_tokens || config.reserve
    };
  }

  function fmt(n) {
    return Math.round(n).toLocaleString("en-US");
  }

  function short(n) {
    if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1).replace(/\.0$/, "") + "M";
    if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1).replace(/\.0$/, "") + "K";
    return String(Math.round(n));
  }

  function pct(share) {
    return (share * 100).toFixed(share < 0.1 ? 1 : 0) + "%";
  }

  function label(name) {
    return name.replace(/_/g, " ");
  }

  // --- geometry --------------------------------------------------------------------------------

  function plot() {
    return {
      x: MARGIN.left,
      y: MARGIN.top,
      w: Math.max(10, size.width - MARGIN.left - MARGIN.right),
      h: Math.max(10, size.height - MARGIN.top - MARGIN.bottom)
    };
  }

  function visibleUsed(t) {
    var sum = 0;
    for (var k = 0; k < USED.length; k++) {
      if (!hidden[USED[k]]) sum += t.regions[USED[k]] || 0;
    }
    return sum;
  }

  function yMax() {
    // a policy's trigger in tokens may lie above the window: keep its line on the chart
    var top = Math.max(config.window || 1, config.trigger || 0);
    for (var i = 0; i < turns.length; i++) {
      var t = turns[i];
      top = Math.max(top, t.window, t.total);
    }
    return top * 1.04;
  }

  function columnOf(clientX) {
    var rect = overlay.getBoundingClientRect();
    var p = plot();
    var x = clientX - rect.left - p.x;
    if (x < 0 || x > p.w || !turns.length) return -1;
    return Math.min(turns.length - 1, Math.floor((x / p.w) * turns.length));
  }

  function stackX(i, p) {
    var step = p.w / turns.length;
    var x0 = Math.floor(p.x + i * step);
    var x1 = Math.floor(p.x + (i + 1) * step);
    var gap = step >= 5 ? 1 : 0;
    return { x: x0, w: Math.max(1, x1 - x0 - gap) };
  }

  // --- drawing ---------------------------------------------------------------------------------

  function resize() {
    var rect = root.getBoundingClientRect();
    var ratio = window.devicePixelRatio || 1;
    size = { width: Math.max(200, rect.width), height: Math.max(160, rect.height), ratio: ratio };
    [base, overlay].forEach(function (canvas) {
      canvas.width = Math.round(size.width * ratio);
      canvas.height = Math.round(size.height * ratio);
      canvas.style.width = size.width + "px";
      canvas.style.height = size.height + "px";
    });
    draw();
  }

  function niceStep(range, count) {
    var raw = range / count;
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  }

  function draw() {
    var ctx = base.getContext("2d");
    ctx.setTransform(size.ratio, 0, 0, size.ratio, 0, 0);
    ctx.clearRect(0, 0, size.width, size.height);
    if (empty) empty.hidden = turns.length > 0;
    if (!turns.length) { drawOverlay(); return; }
    var p = plot();
    var top = yMax();
    var Y = function (v) { return p.y + p.h - (v / top) * p.h; };

    // grid and y labels
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = "#5b6475";
    ctx.strokeStyle = "#eceef2";
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    var step = niceStep(top, 5);
    for (var v = 0; v <= top; v += step) {
      var gy = Math.round(Y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(p.x, gy); ctx.lineTo(p.x + p.w, gy); ctx.stroke();
      ctx.fillText(short(v), p.x - 6, gy);
    }

    // stacks, one region at a time (one fillStyle per region, thousands of rects)
    var acc = new Float64Array(turns.length);
    var xs = turns.map(function (_, i) { return stackX(i, p); });
    USED.forEach(function (name) {
      if (hidden[name]) return;
      ctx.fillStyle = colors[name];
      for (var i = 0; i < turns.length; i++) {
        var value = turns[i].regions[name] || 0;
        if (!value) continue;
        var y0 = Y(acc[i]), y1 = Y(acc[i] + value);
        ctx.fillRect(xs[i].x, y1, xs[i].w, Math.max(y0 - y1, 0.5));
        acc[i] += value;
      }
    });
    // the output reserve above the used area, then the free space up to the window
    ["reserve", "free"].forEach(function (name) {
      if (hidden[name]) return;
      ctx.fillStyle = colors[name];
      for (var i = 0; i < turns.length; i++) {
        var t = turns[i];
        var from = acc[i];
        var to = name === "reserve" ? Math.min(from + t.reserve, Math.max(t.window, from)) : t.window;
        if (to <= from) continue;
        ctx.fillRect(xs[i].x, Y(to), xs[i].w, Y(from) - Y(to));
        acc[i] = to;
      }
    });

    // lines: window, usable limit, compaction trigger
    var lines = [
      { value: config.window, color: "#111827", dash: [], name: "window" },
      { value: config.usable, color: "#374151", dash: [6, 4], name: "usable" },
      { value: config.trigger, color: "#dc2626", dash: [3, 3], name: "trigger" }
    ].sort(function (a, b) { return b.value - a.value; }); // top to bottom, whatever the policy
    ctx.textAlign = "left";
    var lastLabel = -Infinity;
    lines.forEach(function (line) {
      if (!line.value) return;
      var ly = Math.round(Y(line.value)) + 0.5;
      ctx.strokeStyle = line.color;
      ctx.lineWidth = 1.5;
      ctx.setLineDash(line.dash);
      ctx.beginPath(); ctx.moveTo(p.x, ly); ctx.lineTo(p.x + p.w, ly); ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = line.color;
      // lines are drawn top to bottom: push a label down when it would overlap the one above
      var labelY = Math.max(ly, lastLabel + 12);
      ctx.fillText(line.name + " " + short(line.value), p.x + p.w + 4, labelY);
      lastLabel = labelY;
    });

    // markers: compactions (red, pointing down) and applied operations (blue diamonds)
    for (var i = 0; i < turns.length; i++) {
      var events = turns[i].events;
      for (var e = 0; e < events.length; e++) {
        var type = events[e].type;
        if (type !== "compaction" && type !== "operation") continue;
        var cx = xs[i].x + xs[i].w / 2;
        ctx.fillStyle = type === "compaction" ? "#b91c1c" : "#1d4ed8";
        ctx.beginPath();
        if (type === "compaction") {
          ctx.moveTo(cx - 5, p.y - 10); ctx.lineTo(cx + 5, p.y - 10); ctx.lineTo(cx, p.y - 2);
        } else {
          ctx.moveTo(cx, p.y - 11); ctx.lineTo(cx + 4, p.y - 6); ctx.lineTo(cx, p.y - 1); ctx.lineTo(cx - 4, p.y - 6);
        }
        ctx.closePath(); ctx.fill();
      }
    }

    // x labels: turn indices at a readable step
    ctx.fillStyle = "#5b6475";
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    var every = Math.max(1, niceStep(turns.length, Math.max(2, Math.floor(p.w / 70))));
    for (var k = 0; k < turns.length; k++) {
      if (turns[k].index % every !== 0) continue;
      ctx.fillText(String(turns[k].index), xs[k].x + xs[k].w / 2, p.y + p.h + 6);
    }
    ctx.strokeStyle = "#9ca3af";
    ctx.beginPath(); ctx.moveTo(p.x, p.y + p.h + 0.5); ctx.lineTo(p.x + p.w, p.y + p.h + 0.5); ctx.stroke();
    drawOverlay();
  }

  function current() {
    return hover >= 0 ? hover : selected;
  }

  function drawOverlay() {
    var ctx = overlay.getContext("2d");
    ctx.setTransform(size.ratio, 0, 0, size.ratio, 0, 0);
    ctx.clearRect(0, 0, size.width, size.height);
    var i = current();
    if (i < 0 || i >= turns.length) { tip.hidden = true; return; }
    var p = plot();
    var s = stackX(i, p);
    ctx.fillStyle = "rgba(17, 24, 39, 0.08)";
    ctx.fillRect(s.x - 2, p.y, s.w + 4, p.h);
    ctx.strokeStyle = "#111827";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(s.x - 1.5, p.y + 0.5, s.w + 3, p.h - 1);
    showTip(i, s, p);
  }

  // --- tooltip (DOM built with textContent only) ---------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text != null) node.textContent = text;
    return node;
  }

  function describe(t) {
    var usable = Math.max(1, t.window - t.reserve);
    return "Turn " + t.index + ": " + fmt(t.total) + " tokens, " + pct(t.total / usable) + " of usable";
  }

  function showTip(i, s, p) {
    var t = turns[i];
    tip.textContent = "";
    var usable = Math.max(1, t.window - t.reserve);
    tip.appendChild(el("div", "tip-title", "Turn " + t.index));
    tip.appendChild(el("div", "tip-sub", fmt(t.total) + " tokens · " + pct(t.total / usable) + " of usable (" + short(usable) + ")"));
    var table = el("table", "tip-regions");
    for (var k = USED.length - 1; k >= 0; k--) {
      var name = USED[k];
      var value = t.regions[name] || 0;
      if (!value) continue;
      var row = el("tr", hidden[name] ? "off" : "");
      var cell = el("td");
      var swatch = el("span", "region-swatch");
      swatch.style.backgroundColor = colors[name];
      cell.appendChild(swatch);
      cell.appendChild(document.createTextNode(label(name)));
      row.appendChild(cell);
      row.appendChild(el("td", "num", fmt(value)));
      row.appendChild(el("td", "num", pct(t.total ? value / t.total : 0)));
      table.appendChild(row);
    }
    tip.appendChild(table);
    var counted = "Counted " + fmt(t.counted);
    if (t.reported != null) {
      counted += " · reported " + fmt(t.reported);
      var diff = t.reported - t.counted;
      if (diff > 0) counted += " (+" + fmt(diff) + " unattributed)";
      else if (diff < 0) counted += " (" + fmt(diff) + ")";
    } else {
      counted += " · no reported usage";
    }
    tip.appendChild(el("div", "tip-note", counted));
    t.events.forEach(function (event) {
      if (event.type === "compaction") {
        var text = "Compaction";
        if (event.tokens_before != null) text += ": " + fmt(event.tokens_before) + " → " + fmt(event.tokens_after) + " tokens";
        if (event.source && event.source !== "detected") text += " (" + event.source + ")";
        tip.appendChild(el("div", "tip-event compaction", text));
      } else if (event.type === "operation") {
        tip.appendChild(el("div", "tip-event operation", "Operation: " + (event.strategy || "applied")));
      } else if (event.type === "interrupted") {
        tip.appendChild(el("div", "tip-event interrupted", "Interrupted: the answer was cut"));
      }
    });
    tip.appendChild(el("div", "tip-hint", "Click or press Enter to inspect"));
    tip.hidden = false;
    // place it beside the stack, inside the chart
    var width = tip.offsetWidth, height = tip.offsetHeight;
    var left = s.x + s.w + 12;
    if (left + width > size.width) left = Math.max(0, s.x - width - 12);
    var topPx = Math.max(0, Math.min(p.y + 8, size.height - height));
    tip.style.left = left + "px";
    tip.style.top = topPx + "px";
  }

  function announce(i) {
    if (live && i >= 0 && i < turns.length) live.textContent = describe(turns[i]);
  }

  // --- interaction -----------------------------------------------------------------------------

  function open(i) {
    if (i < 0 || i >= turns.length) return;
    window.location.assign(config.turn_url + turns[i].index + "/");
  }

  function choose(i) {
    if (!turns.length) return;
    selected = Math.max(0, Math.min(turns.length - 1, i));
    hover = -1;
    drawOverlay();
    announce(selected);
  }

  overlay.addEventListener("mousemove", function (event) {
    var i = columnOf(event.clientX);
    if (i === hover) return;
    hover = i;
    drawOverlay();
  });
  overlay.addEventListener("mouseleave", function () {
    hover = -1;
    drawOverlay();
  });
  overlay.addEventListener("click", function (event) {
    var i = columnOf(event.clientX);
    if (i >= 0) open(i);
  });
  root.addEventListener("focus", function () {
    if (selected < 0) choose(turns.length - 1);
    else drawOverlay();
  });
  root.addEventListener("blur", function () {
    if (hover < 0) tip.hidden = true;
  });
  root.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var at = selected >= 0 ? selected : turns.length - 1;
    var moves = { ArrowLeft: -1, ArrowRight: 1, PageUp: -10, PageDown: 10 };
    if (event.key in moves) choose(at + moves[event.key]);
    else if (event.key === "Home") choose(0);
    else if (event.key === "End") choose(turns.length - 1);
    else if (event.key === "Enter" || event.key === " ") open(at);
    else if (event.key === "Escape") { tip.hidden = true; return; }
    else return;
    event.preventDefault();
  });

  if (legend) {
    legend.querySelectorAll("button[data-region]").forEach(function (button) {
      button.addEventListener("click", function () {
        var name = button.dataset.region;
        hidden[name] = !hidden[name];
        button.setAttribute("aria-pressed", hidden[name] ? "false" : "true");
        draw();
      });
    });
  }

  // --- public API ------------------------------------------------------------------------------

  function setTurns(list) {
    turns = (list || []).map(normalize).sort(function (a, b) { return a.index - b.index; });
    if (selected >= turns.length) selected = turns.length - 1;
    hover = -1;
    draw();
  }

  function merge(turn) {
    var t = normalize(turn);
    var last = turns.length ? turns[turns.length - 1] : null;
    if (last && t.index <= last.index) {
      var at = turns.findIndex(function (x) { return x.index === t.index; });
      if (at >= 0) turns[at] = t;
      else { turns.push(t); turns.sort(function (a, b) { return a.index - b.index; }); }
    } else {
      turns.push(t);
    }
  }

  // Turns added (or replaced, by index), drawn once: a live turn, or a page of a catch-up.
  function appendTurns(list) {
    var wasLast = selected >= 0 && selected === turns.length - 1;
    (list || []).forEach(merge);
    if (wasLast) selected = turns.length - 1;
    draw();
  }

  function appendTurn(turn) {
    appendTurns([turn]);
  }

  function stacks() {
    var seen = {};
    turns.forEach(function (t) {
      USED.forEach(function (name) { if (t.regions[name]) seen[name] = true; });
    });
    return {
      count: turns.length,
      regions: USED.filter(function (name) { return seen[name]; }),
      hidden: ALL.filter(function (name) { return hidden[name]; })
    };
  }

  window.ctxwebChart = {
    appendTurn: appendTurn,
    appendTurns: appendTurns,
    setTurns: setTurns,
    lastIndex: function () { return turns.length ? turns[turns.length - 1].index : -1; },
    stacks: stacks,
    select: function (index) {
      var at = turns.findIndex(function (t) { return t.index === index; });
      if (at >= 0) { root.focus(); choose(at); }
    },
    config: config
  };

  turns = config.turns.map(normalize);
  if (typeof ResizeObserver === "function") new ResizeObserver(resize).observe(root);
  else window.addEventListener("resize", resize);
  resize();
})();
