// Records what went wrong in the page into the DOM (#errors), so that a headless browser's
// dumped DOM shows it: script errors, console errors and requests the page's
// Content-Security-Policy refused (the page makes none).
(function () {
  var box = document.getElementById("errors");
  function note(kind, text) {
    var line = document.createElement("div");
    line.className = "error";
    line.setAttribute("data-kind", kind);
    line.textContent = kind + ": " + text;
    box.appendChild(line);
    box.hidden = false;
  }
  window.addEventListener("error", function (e) {
    note("script error", e.message + " at " + e.filename + ":" + e.lineno);
  });
  window.addEventListener("unhandledrejection", function (e) {
    note("unhandled rejection", String(e.reason));
  });
  document.addEventListener("securitypolicyviolation", function (e) {
    note("blocked request", e.violatedDirective + " " + e.blockedURI);
  });
  var consoleError = console.error;
  console.error = function () {
    note("console error", Array.prototype.join.call(arguments, " "));
    consoleError.apply(console, arguments);
  };
})();
