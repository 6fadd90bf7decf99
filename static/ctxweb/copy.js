/* ctxweb copy buttons: <button class="copy" data-copy="<id>"> copies the text of element <id>.
   A static file, not an inline script: the Content-Security-Policy runs only ctxweb's own files. */
(function () {
  "use strict";
  document.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.dataset.copy);
      if (!source) return;
      var done = function () {
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = "Copy"; }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.innerText).then(done);
      } else {
        var range = document.createRange();
        range.selectNodeContents(source);
        var selection = getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        document.execCommand("copy");
        done();
      }
    });
  });
})();
