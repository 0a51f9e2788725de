/* MathJax 2's `MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])`, answered by MathJax 3.
 *
 * The site typesets LaTeX with its own MathJax 3 (book/_static/mathjax), but the Jupyter widget
 * manager (ipywidgets 8's typeset() for labels and descriptions) still calls MathJax 2's API
 * whenever `window.MathJax` exists, which throws on a page that has both math and widgets.
 * This installs a small `MathJax.Hub` that hands such requests to MathJax 3's typesetPromise.
 */
(function () {
  "use strict";
  var pending = [];

  function typeset(element) {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
      mj.startup.promise
        .then(function () { return mj.typesetPromise(element ? [element] : undefined); })
        .catch(function (err) { console.warn("MathJax typeset failed:", err); });
    } else {
      pending.push(element);
    }
  }

  var hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[0] === "Typeset") typeset(job[2]);
        else if (typeof job === "function") job();
      }
    },
    Config: function () {},
    Register: { StartupHook: function () {}, MessageHook: function () {} },
  };

  function attach() {
    var mj = window.MathJax;
    if (mj && !mj.Hub) mj.Hub = hub;
    if (mj && mj.typesetPromise && pending.length) pending.splice(0).forEach(typeset);
  }

  attach();
  document.addEventListener("DOMContentLoaded", attach);
  window.addEventListener("load", attach);
})();
