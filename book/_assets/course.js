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

// Plotly figures in a phone-width column: plotly cannot wrap, so below 560 px the legend moves
// above the plot (a row, pushing the plot down rather than sitting on it or on the x-axis title)
// and the text gets smaller; back to the figure's own layout when the column widens again.
(function () {
  var NARROW = 560;
  function fit(gd) {
    if (!window.Plotly || !gd.layout || !gd._fullLayout) return;
    var narrow = gd.clientWidth > 0 && gd.clientWidth < NARROW;
    if (narrow === !!gd.__courseNarrow) return;
    if (narrow) {
      var l = gd.layout;
      gd.__courseWide = {legend: JSON.parse(JSON.stringify(l.legend || {})),
                         font: JSON.parse(JSON.stringify(l.font || {})),
                         xt: l.xaxis && l.xaxis.automargin, yt: l.yaxis && l.yaxis.automargin};
      gd.__courseNarrow = true;
      window.Plotly.relayout(gd, {'legend.orientation': 'h', 'legend.x': 0, 'legend.xanchor': 'left',
                                  'legend.y': 1.02, 'legend.yanchor': 'bottom', 'font.size': 10,
                                  'xaxis.automargin': true, 'yaxis.automargin': true});
    } else {
      var w = gd.__courseWide || {};
      gd.__courseNarrow = false;
      window.Plotly.relayout(gd, {legend: w.legend || {}, font: w.font || {},
                                  'xaxis.automargin': w.xt, 'yaxis.automargin': w.yt});
    }
  }
  function fitAll() { document.querySelectorAll('figure.course-figure .js-plotly-plot').forEach(fit); }
  window.addEventListener('resize', function () { setTimeout(fitAll, 50); });
  window.addEventListener('load', function () { setTimeout(fitAll, 50); });
})();
