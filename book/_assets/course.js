// Names for the sliders the static widget manager draws (noUiSlider handles have role=slider but
// no name): each takes its widget's description label, once the widgets have rendered.
(function () {
  function name() {
    document.querySelectorAll('.noUi-handle[role="slider"]:not([aria-label])').forEach(function (h) {
      var w = h.closest('.widget-slider, .jupyter-widgets');
      var label = w && w.querySelector('.widget-label');
      h.setAttribute('aria-label', (label && label.textContent.trim()) || 'value');
    });
  }
  new MutationObserver(name).observe(document.documentElement, {childList: true, subtree: true});
  document.addEventListener('DOMContentLoaded', name);
})();
