/* ctxweb live updates: one WebSocket per session page.

   Included as <script src=".../live.js" data-session="<external_id>" data-socket="<path>"
   data-turns-url="<url>" data-operation-url="<url or empty>" defer></script>: the page hands
   over every URL, the script builds none.
   - turn.created        -> window.ctxwebChart.appendTurn(turn) when the chart is on the page
   - operation.progress  -> the [data-operation-progress] bar (created inside [data-operation]
                            when the page has only that), with the stage as text
   - operation.finished  -> the result or error in the operation's status element; the page that
                            follows this operation (?operation=<id>) reloads to show it in full
   Reconnects with exponential backoff (1 s doubling to 30 s, with jitter). Each time the socket
   opens (the first time too: a turn may come between the page's drawing and the socket's
   opening) it catches up with the turns the chart lacks: those after the chart's last turn
   (data-turns-url?after=N), a page of CATCH_UP_PAGE at a time following the answer's
   Link rel="next", each page added with window.ctxwebChart.appendTurns. A close with 4401 or
   4404 (not logged in, not a member) is final. Message content is only ever set as text,
   never as HTML. */
(function () {
  "use strict";

  var script = document.currentScript;
  var sessionId = script && script.getAttribute("data-session");
  // The page hands over every URL (data-socket, data-turns-url, data-operation-url).
  var socketPath = script && script.getAttribute("data-socket");
  var turnsUrl = script && script.getAttribute("data-turns-url");
  var operationUrl = script && script.getAttribute("data-operation-url");
  if (!sessionId || !socketPath || !("WebSocket" in window)) return;

  var MIN_DELAY = 1000;
  var MAX_DELAY = 30000;
  var PING_EVERY = 25000;
  var CATCH_UP_PAGE = 500; // turns a request when catching up (the API's most)
  var FINAL_CODES = { 4401: true, 4403: true, 4404: true };

  var attempts = 0;
  var socket = null;
  var ping = null;
  var followed = new URLSearchParams(window.location.search).get("operation");

  function chart() {
    return window.ctxwebChart || null;
  }

  function announce(text) {
    var region = document.getElementById("chart-live") || document.querySelector("[data-live-status]");
    if (region) region.textContent = text;
  }

  function socketUrl() {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + window.location.host + socketPath;
  }

  // The URL of the page after this one, from a Link header (`<url>; rel="next"`), as a path on
  // this page's origin (a server behind a proxy may name another scheme or host), or null.
  function nextPage(link) {
    var found = /<([^>]*)>\s*;\s*rel="?next"?/.exec(link || "");
    if (!found) return null;
    var url = new URL(found[1], window.location.href);
    return url.pathname + url.search;
  }

  function catchUp() {
    var c = chart();
    if (!c || typeof c.appendTurns !== "function" || !turnsUrl) return;
    var query = "limit=" + CATCH_UP_PAGE;
    var last = c.lastIndex();
    if (last >= 0) query += "&after=" + last;
    fetchPage(turnsUrl + (turnsUrl.indexOf("?") >= 0 ? "&" : "?") + query, c);
  }

  function fetchPage(url, c) {
    fetch(url, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    })
      .then(function (response) {
        if (!response.ok) return null;
        var next = nextPage(response.headers.get("Link"));
        return response.json().then(function (turns) {
          if (Array.isArray(turns)) c.appendTurns(turns);
          if (next) fetchPage(next, c);
        });
      })
      .catch(function () {
        /* the next reconnect tries again */
      });
  }

  function statusElement(operationId) {
    var el = document.querySelector('[data-operation="' + operationId + '"]');
    return el || document.querySelector("[data-operation]:not([data-operation=''])");
  }

  function progressBar(operationId) {
    var bar = document.querySelector("[data-operation-progress]");
    if (bar) return bar;
    var status = statusElement(operationId);
    if (!status) return null;
    bar = document.createElement("progress");
    bar.setAttribute("data-operation-progress", String(operationId));
    status.appendChild(document.createTextNode(" "));
    status.appendChild(bar);
    return bar;
  }

  function onProgress(message) {
    var op = message.operation || {};
    var bar = progressBar(op.id);
    if (bar) {
      if (bar.tagName === "PROGRESS") {
        bar.max = message.total || 1;
        bar.value = message.done || 0;
      } else {
        bar.style.setProperty("--progress", String((message.done || 0) / (message.total || 1)));
      }
      bar.setAttribute("aria-valuetext", message.stage || "");
      bar.title = message.stage || "";
    }
    var label = document.querySelector("[data-operation-stage]");
    if (label) label.textContent = message.stage || "";
    announce("Operation " + op.id + ": " + (message.stage || "running"));
  }

  function onFinished(message) {
    var op = message.operation || {};
    var status = statusElement(op.id);
    var text;
    if (op.status === "succeeded" && op.result) {
      text =
        "Operation " + op.id + " (" + op.strategy + ") succeeded: " + op.result.tokens_before +
        " → " + op.result.tokens_after + " tokens, managed context version " + op.result.version + ".";
    } else {
      text = "Operation " + op.id + " (" + op.strategy + ") failed: " + (op.error || "unknown error");
    }
    if (status) {
      status.textContent = text;
      status.setAttribute("data-operation-status", op.status || "");
    }
    announce(text);
    if (followed && String(op.id) === followed) {
      window.setTimeout(function () {
        window.location.reload();
      }, 800);
    }
  }

  function checkFollowed() {
    // The operation may have finished before this socket opened: ask once.
    if (!followed || !operationUrl) return;
    var status = statusElement(followed);
    if (!status || !/queued|running/.test(status.textContent)) return;
    fetch(operationUrl, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    })
      .then(function (response) {
        return response.ok ? response.json() : null;
      })
      .then(function (op) {
        if (op && (op.status === "succeeded" || op.status === "failed")) {
          onFinished({ operation: op });
        }
      })
      .catch(function () {});
  }

  function onMessage(event) {
    var message;
    try {
      message = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    if (message.type === "turn.created") {
      var c = chart();
      if (c && typeof c.appendTurn === "function") c.appendTurn(message.turn);
      announce("Turn " + message.turn.index + ": " + message.turn.total_tokens + " tokens");
    } else if (message.type === "operation.progress") {
      onProgress(message);
    } else if (message.type === "operation.finished") {
      onFinished(message);
    } else if (message.type === "operation.undone") {
      announce("Operation " + (message.operation || {}).id + " undone: version " + message.version);
    }
  }

  function schedule() {
    var delay = Math.min(MAX_DELAY, MIN_DELAY * Math.pow(2, attempts));
    attempts += 1;
    delay = delay / 2 + Math.random() * (delay / 2); // jitter: never a thundering herd
    window.setTimeout(connect, delay);
  }

  function connect() {
    try {
      socket = new WebSocket(socketUrl());
    } catch (e) {
      schedule();
      return;
    }
    socket.onopen = function () {
      attempts = 0;
      // the turns stored since the page was drawn, or while the socket was down: the server
      // joined this socket to the session's group before accepting it, so none falls between
      catchUp();
      checkFollowed();
      ping = window.setInterval(function () {
        if (socket && socket.readyState === WebSocket.OPEN) socket.send('{"type":"ping"}');
      }, PING_EVERY);
    };
    socket.onmessage = onMessage;
    socket.onclose = function (event) {
      if (ping) window.clearInterval(ping);
      ping = null;
      if (FINAL_CODES[event.code]) return;
      schedule();
    };
  }

  window.ctxwebLive = {
    session: sessionId,
    state: function () {
      return socket ? socket.readyState : -1;
    },
  };
  connect();
})();
