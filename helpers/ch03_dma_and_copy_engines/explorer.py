"""Chapter 3's explorer: a control that places one copy on the fitted copy-cost model.

The explorer is an ipywidgets control (size, direction, memory kind). When the sweep was
measured live, it measures the chosen copy now; when the sweep is a replay, it looks up the
recorded measurement at that size. Either way the point is drawn over the model fitted to
the whole sweep, so the learner sees where a size sits between the latency-bound and the
bandwidth-bound regimes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.ch03_dma_and_copy_engines import views
from helpers.core import validate
from helpers.core.evidence import Evidence
from helpers.measure.sysinfo import fmt_bytes
from helpers.measure.transfers import DIRECTIONS, measure_copy
from helpers.models import copy_cost
from helpers.presentation import widgets
from helpers.presentation.figures import CourseFigure

MIN_SIZE, MAX_SIZE = 4, 256 << 20


@dataclass(frozen=True, kw_only=True)
class Point:
    """One copy placed on the model: what was measured (or recorded) and what the model says."""

    nbytes: int
    direction: str
    host_kind: str
    measured_gbps: float
    model_gbps: float
    source: str  # "measured now" or "recorded"

    @property
    def regime(self) -> str:
        """Below n½ the fixed cost dominates; above it the link's bandwidth does."""
        return "latency-bound (n < n½)" if self.model_gbps < 0.5 * self._b else "bandwidth-bound (n > n½)"

    _b: float = 0.0

    def describe(self) -> str:
        ratio = self.measured_gbps / self.model_gbps
        return (f"{self.host_kind} {self.direction}, {self.nbytes} B ({self.source}): {self.measured_gbps:.3f} GB/s; "
                f"the model says {self.model_gbps:.3f} GB/s (measured/model = {ratio:.2f}); {self.regime}")


def check_size(nbytes) -> int:
    """A copy size for the explorer: a whole number of bytes from 4 B to 256 MiB."""
    return validate.byte_size(nbytes, "copy size", MIN_SIZE, MAX_SIZE)


def recorded_point(sweep: Evidence, fits: dict, nbytes: int, direction: str, host_kind: str) -> Point:
    """The swept median at the swept size nearest `nbytes` (log scale), on the model."""
    nbytes = check_size(nbytes)
    s = copy_cost.series_for(sweep.require(), host_kind, direction)
    sizes = np.asarray(s["nbytes"], dtype=float)
    i = int(np.argmin(np.abs(np.log2(sizes) - np.log2(nbytes))))
    n = int(sizes[i])
    f = fits[(host_kind, direction)]
    return Point(nbytes=n, direction=direction, host_kind=host_kind, measured_gbps=n / s["median_s"][i] / 1e9,
                 model_gbps=float(f.predict_gbps(n)), source="measured now" if sweep.live else "recorded",
                 _b=f.bandwidth_gbps)


def live_point(fits: dict, nbytes: int, direction: str, host_kind: str) -> Point:
    """Measure the chosen copy now and place it on the model."""
    nbytes = check_size(nbytes)
    copy_cost.series_for({"series": [{"host_kind": host_kind, "direction": direction}]}, host_kind, direction)
    r = measure_copy(nbytes, direction, host_kind, reps=20)
    f = fits[(host_kind, direction)]
    return Point(nbytes=nbytes, direction=direction, host_kind=host_kind, measured_gbps=r.bandwidth_gbps,
                 model_gbps=float(f.predict_gbps(nbytes)), source="measured now", _b=f.bandwidth_gbps)


def explorer_figure(sweep: Evidence, fits: dict, point: Point) -> CourseFigure:
    """The sweep and its models, with the chosen point as a star."""
    return views.bandwidth_figure(
        sweep, fits, highlight=(point.nbytes, point.measured_gbps,
                                f"chosen: {point.host_kind} {point.direction}, {point.source}"))


def explorer(sweep: Evidence, fits: dict, *, nbytes: int = 4096, direction: str = "h2d",
             host_kind: str = "pinned"):
    """An ipywidgets control: pick size, direction and memory kind; see the point on the model.

    A live sweep measures each chosen copy now; a replayed one shows the recorded point."""
    import ipywidgets as w

    sizes = [1 << k for k in range(2, 29)]
    size_w = w.SelectionSlider(options=[(fmt_bytes(s), s) for s in sizes], value=check_size(nbytes),
                               description="size", continuous_update=False, layout={"width": "560px"})
    dir_w = w.ToggleButtons(options=list(DIRECTIONS), value=direction, description="direction")
    kind_w = w.ToggleButtons(options=list(copy_cost.HOST_KINDS), value=host_kind, description="memory")
    out = w.Output()

    def redraw(*_):
        p = (live_point(fits, size_w.value, dir_w.value, kind_w.value) if sweep.live
             else recorded_point(sweep, fits, size_w.value, dir_w.value, kind_w.value))
        widgets.show(out, p.describe(), explorer_figure(sweep, fits, p))

    for c in (size_w, dir_w, kind_w):
        c.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HTML(sweep.caption("<b>Place one copy on the model</b>")), size_w, dir_w, kind_w, out])
