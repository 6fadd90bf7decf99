/* The imports page: while an import is queued or running, ask the API for it once a second and
   update its row (status, progress bar, turn count); reload once it has finished, to show the
   sessions it stored. */
(function () {
  "use strict";
  var ACTIVE = { queued: true, running: true };

  function rows() {
    return Array.prototype.filter.call(document.querySelectorAll("tr[data-job]"), function (row) {
      return ACTIVE[row.getAttribute("data-status")];
    });
  }

  function update(row, job) {
    var percent = job.progress.percent === null ? 0 : job.progress.percent;
    var bar = row.querySelector(".progress");
    bar.setAttribute("aria-valuenow", String(percent));
    bar.firstElementChild.style.width = percent + "%";
    var count = row.querySelector(".count");
    count.textContent = job.progress.done + (job.progress.total === null ? "" : " / " + job.progress.total) + " turns";
    var tag = row.querySelector(".status .tag");
    tag.textContent = job.status;
    tag.className = "tag status-" + job.status;
    row.setAttribute("data-status", job.status);
  }

  function poll() {
    var active = rows();
    if (!active.length) return;
    var finished = false;
    var pending = active.map(function (row) {
      return fetch(row.getAttribute("data-url"), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (job) {
          if (!job) return;
          update(row, job);
          if (!ACTIVE[job.status]) finished = true;
        })
        .catch(function () { /* try again next time */ });
    });
    Promise.all(pending).then(function () {
      if (finished) window.location.reload();
      else window.setTimeout(poll, 1000);
    });
  }

  window.setTimeout(poll, 1000);
})();
