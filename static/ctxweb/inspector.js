/* Turn inspector shortcuts: k or ← previous turn, j or → next turn, s toggles largest first.
   Ignored while typing in a field or with a modifier key held. */
(function () {
  "use strict";
  function follow(id) {
    var link = document.getElementById(id);
    if (link && link.href) window.location.assign(link.href);
  }
  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    if (event.key === "k" || event.key === "ArrowLeft") follow("prev-turn");
    else if (event.key === "j" || event.key === "ArrowRight") follow("next-turn");
    else if (event.key === "s") follow("order-toggle");
    else return;
    event.preventDefault();
  });
})();
