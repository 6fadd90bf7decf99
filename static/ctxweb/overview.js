/* The project overview's day chart: token-turns per day stacked by region (the session chart's
   colours, from regions.css) on one canvas, and below it turns per day (bars), sessions active
   (dots) and estimated cost (line) on a second. ← → Home End move a focused day; its numbers show
   in a tooltip and are read out. Data arrives through json_script and reaches the page as text
   only (textContent), never as HTML. The filter form hides the custom dates unless asked for.

   A click on a day, or Enter on the focused one, opens the overview of that day alone.

   API for tests: window.ctxwebOverview.days() (count), .select(position).
*/
(function () {
  "use strict";

  var form = document.getElementById("overview-filters");
  if (form) {
    var range = form.querySelector("#f-range");
    var sync = function () {
      form.classList.toggle("preset", range.value !== "custom");
    };
    range.addEventListener("change", sync);
    sync();
    form.addEventListener("submit", function () {
      // Keep the shared URL short: no empty filter, and no dates for a preset range.
      form.querySelectorAll("input, select").forEach(function (field) {
        var date = field.closest(".custom-dates");
        if (!field.value || (date && range.value !== "custom")) field.disabled = true;
      });
    });
    // Back from another page, the browser may restore the fields disabled at submit.
    window.addEventListener("pageshow", function () {
      form.querySelectorAll("input, select").forEach(function (field) {
        field.disabled = false;
      });
    });
  }

  var dataNode = document.getElementById("overview-data");
  var root = document.getElementById("overview-chart");
  if (!dataNode || !root) return;
  var config = JSON.parse(dataNode.textContent);
  var days = config.days;
  var REGIONS = config.regions;
  var stacksCanvas = root.querySelector("canvas.stacks");
  var activityCanvas = root.querySelector("canvas.activity");
  var tip = root.querySelector(".tooltip");
  var live = document.getElementById("overview-chart-live");
  var MARGIN = { left: 56, right: 56, top: 10, bottom: 22 };
  var ACTIVITY_HEIGHT = 90;

  var styles = getComputedStyle(document.documentElement);
  var colors = {};
  REGIONS.forEach(function (name) {
    colors[name] = styles.getPropertyValue("--region-" + name).trim() || "#9ca3af";
  });
  var selected = -1;

  function fmt(n) {
    return Math.round(n).toLocaleString("en-US");
  }

  function short(n) {
    if (n >= 1e9) return (n / 1e9).toFixed(1).replace(/\.0$/, "") + "B";
    if (n >= 1e6) return (n / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
    if (n >= 1e3) return (n / 1e3).toFixed(1).replace(/\.0$/, "") + "K";
    return String(Math.round(n));
  }

  function money(n) {
    return "$" + (n || 0).toFixed(2);
  }

  function setup(canvas, height) {
    var ratio = window.devicePixelRatio || 1;
    var width = root.clientWidth;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    var ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    return { ctx: ctx, width: width, height: height };
  }

  function plot(area) {
    return {
      x: MARGIN.left,
      y: MARGIN.top,
      w: Math.max(10, area.width - MARGIN.left - MARGIN.right),
      h: Math.max(10, area.height - MARGIN.top - MARGIN.bottom)
    };
  }

  function column(i, p) {
    var step = p.w / days.length;
    var x0 = p.x + i * step;
    var gap = step >= 6 ? Math.min(4, step * 0.2) : 0;
    return { x: x0 + gap / 2, w: Math.max(1, step - gap), mid: x0 + step / 2 };
  }

  function drawStacks() {
    var area = setup(stacksCanvas, root.clientHeight - ACTIVITY_HEIGHT);
    var ctx = area.ctx;
    var p = plot(area);
    var top = 1;
    days.forEach(function (d) {
      var sum = 0;
      REGIONS.forEach(function (r) { sum += d.regions[r] || 0; });
      top = Math.max(top, sum);
    });
    top *= 1.05;
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = "#5b6475";
    ctx.strokeStyle = "#eef0f4";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (var g = 0; g <= 4; g++) {
      var y = p.y + p.h - (g / 4) * p.h;
      ctx.beginPath();
      ctx.moveTo(p.x, Math.round(y) + 0.5);
      ctx.lineTo(p.x + p.w, Math.round(y) + 0.5);
      ctx.stroke();
      ctx.fillText(short((g / 4) * top), p.x - 6, y);
    }
    days.forEach(function (d, i) {
      var c = column(i, p);
      var y = p.y + p.h;
      REGIONS.forEach(function (r) {
        var n = d.regions[r] || 0;
        if (!n) return;
        var h = (n / top) * p.h;
        ctx.fillStyle = colors[r];
        ctx.fillRect(c.x, y - h, c.w, h);
        y -= h;
      });
      if (i === selected) {
        ctx.strokeStyle = "#111827";
        ctx.lineWidth = 2;
        ctx.strokeRect(c.x - 1, p.y, c.w + 2, p.h);
        ctx.lineWidth = 1;
      }
    });
    // first, middle and last day under the axis
    ctx.fillStyle = "#5b6475";
    ctx.textBaseline = "top";
    ctx.textAlign = "center";
    var marks = [0, Math.floor((days.length - 1) / 2), days.length - 1];
    marks.forEach(function (i, k) {
      if (k && i === marks[k - 1]) return;
      ctx.fillText(days[i].day, column(i, p).mid, p.y + p.h + 5);
    });
  }

  function drawActivity() {
    var area = setup(activityCanvas, ACTIVITY_HEIGHT);
    var ctx = area.ctx;
    var p = { x: MARGIN.left, y: 8, w: Math.max(10, area.width - MARGIN.left - MARGIN.right), h: ACTIVITY_HEIGHT - 16 };
    var turns = 1, sessions = 1, cost = 0;
    days.forEach(function (d) {
      turns = Math.max(turns, d.turns);
      sessions = Math.max(sessions, d.sessions);
      cost = Math.max(cost, d.cost || 0);
    });
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.fillStyle = "#5b6475";
    ctx.textAlign = "right";
    ctx.fillText(short(turns) + " turns", p.x - 6, p.y + 4);
    ctx.textAlign = "left";
    ctx.fillText(money(cost), p.x + p.w + 6, p.y + 4);
    days.forEach(function (d, i) {
      var c = column(i, p);
      var h = (d.turns / turns) * p.h;
      ctx.fillStyle = i === selected ? "#64748b" : "#cbd5e1";
      ctx.fillRect(c.x, p.y + p.h - h, c.w, h);
      if (d.sessions) {
        ctx.fillStyle = "#2563eb";
        ctx.beginPath();
        ctx.arc(c.mid, p.y + p.h - (d.sessions / sessions) * p.h, 2.5, 0, Math.PI * 2);
        ctx.fill();
      }
    });
    if (cost > 0) {
      ctx.strokeStyle = "#16a34a";
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      days.forEach(function (d, i) {
        var x = column(i, p).mid;
        var y = p.y + p.h - ((d.cost || 0) / cost) * p.h;
        if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y);
      });
      ctx.stroke();
      ctx.lineWidth = 1;
    }
  }

  function draw() {
    if (!days.length) return;
    drawStacks();
    drawActivity();
  }

  function row(table, label, value) {
    var tr = document.createElement("tr");
    var a = document.createElement("td");
    var b = document.createElement("td");
    a.textContent = label;
    b.textContent = value;
    tr.appendChild(a);
    tr.appendChild(b);
    table.appendChild(tr);
  }

  function summary(d) {
    return d.day + ": " + fmt(d.tokens) + " token-turns, " + fmt(d.turns) + " turns, " +
      fmt(d.sessions) + " sessions, " + money(d.cost);
  }

  function showTip(i) {
    var d = days[i];
    tip.textContent = "";
    var title = document.createElement("div");
    title.className = "tip-title";
    title.textContent = d.day;
    tip.appendChild(title);
    var table = document.createElement("table");
    row(table, "token-turns", fmt(d.tokens));
    row(table, "turns", fmt(d.turns));
    row(table, "sessions", fmt(d.sessions));
    row(table, "cost", money(d.cost));
    REGIONS.slice().reverse().forEach(function (r) {
      if (d.regions[r]) row(table, r.replace(/_/g, " "), fmt(d.regions[r]));
    });
    tip.appendChild(table);
    tip.hidden = false;
    var p = plot({ width: root.clientWidth, height: root.clientHeight - ACTIVITY_HEIGHT });
    var c = column(i, p);
    var left = c.mid + 12;
    if (left + tip.offsetWidth > root.clientWidth) left = Math.max(0, c.mid - 12 - tip.offsetWidth);
    tip.style.left = left + "px";
    tip.style.top = "8px";
  }

  function select(i) {
    if (!days.length) return;
    selected = Math.max(0, Math.min(days.length - 1, i));
    draw();
    showTip(selected);
    if (live) live.textContent = summary(days[selected]);
  }

  function dayAt(clientX) {
    var rect = root.getBoundingClientRect();
    var p = plot({ width: root.clientWidth, height: 0 });
    var x = clientX - rect.left - p.x;
    if (x < 0 || x > p.w) return -1;
    return Math.min(days.length - 1, Math.floor((x / p.w) * days.length));
  }

  root.addEventListener("mousemove", function (event) {
    var i = dayAt(event.clientX);
    if (i < 0) {
      tip.hidden = true;
      return;
    }
    showTip(i);
  });
  root.addEventListener("mouseleave", function () {
    if (selected < 0) tip.hidden = true;
    else showTip(selected);
  });
  // A day opens the overview of that day alone, the other filters kept.
  function dayUrl(i) {
    var url = new URL(window.location.href);
    Array.from(url.searchParams.keys()).forEach(function (key) {
      if (!url.searchParams.get(key)) url.searchParams.delete(key);
    });
    url.searchParams.set("range", "custom");
    url.searchParams.set("start", days[i].day);
    url.searchParams.set("end", days[i].day);
    url.searchParams.delete("format");
    url.searchParams.delete("table");
    return url.toString();
  }

  root.addEventListener("click", function (event) {
    var i = dayAt(event.clientX);
    if (i >= 0) window.location.assign(dayUrl(i));
  });
  root.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && selected >= 0) {
      event.preventDefault();
      window.location.assign(dayUrl(selected));
      return;
    }
    var moves = { ArrowLeft: selected - 1, ArrowRight: selected < 0 ? 0 : selected + 1, Home: 0, End: days.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    select(moves[event.key]);
  });
  root.addEventListener("blur", function () {
    tip.hidden = true;
  });

  var pending = 0;
  window.addEventListener("resize", function () {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(draw);
  });
  draw();

  window.ctxwebOverview = {
    days: function () { return days.length; },
    select: select
  };
})();
