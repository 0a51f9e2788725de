"""Chapter 3's glue: get an experiment's data live or from the reference, and the explorer
control that places one copy on the fitted latency/bandwidth model.

The explorer is an ipywidgets control (size, direction, memory kind). Live, it measures the
chosen copy now; in replay it looks up the recorded measurement at that size. Either way the
point is drawn over the model fitted to the whole sweep, so the learner sees where a size
sits between the latency-bound and the bandwidth-bound regimes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.core import experiments, widgets
from helpers.core.errors import SkipExperiment
from helpers.core.mode import Mode
from helpers.measure.transfers import DIRECTIONS, measure_copy
from helpers.models import copy_cost
from helpers.models.copy_cost import ModelInputError

SWEEP_ID = "transfers.pinned_vs_pageable"
MIN_SIZE, MAX_SIZE = 4, 256 << 20


def obtain(ctx, experiment_id: str, *, quick: bool = False) -> tuple[dict, list]:
    """(data, provenance parts): run the registered experiment live, or read its recording.

    Live, an experiment that cannot run on this machine (SkipExperiment) falls back to the
    recording, and the parts say REPLAY, so the figure never claims a live number it lacks.
    """
    if ctx.live:
        reg = experiments.discover()
        if experiment_id not in reg:
            raise ModelInputError(f"no experiment {experiment_id!r} is registered")
        try:
            return reg[experiment_id].run(quick), [(Mode.LIVE, ctx.gpu_name or "this GPU")]
        except SkipExperiment as exc:  # e.g. no nvcc for the C cross-check: show the recording
            print(f"{experiment_id} cannot run live here ({exc}); showing the reference recording instead")
    ref = ctx.reference()
    return ref.experiment(experiment_id), [(Mode.REPLAY, ref.label)]


@dataclass(frozen=True)
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
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or not MIN_SIZE <= nbytes <= MAX_SIZE:
        raise ModelInputError(f"copy size must be a whole number of bytes from {MIN_SIZE} to {MAX_SIZE}, "
                              f"got {nbytes!r}")
    return int(nbytes)


def recorded_point(data: dict, fits: dict, nbytes: int, direction: str, host_kind: str) -> Point:
    """The recorded median at the recorded size nearest `nbytes` (log scale), on the model."""
    nbytes = check_size(nbytes)
    s = copy_cost.series_for(data, host_kind, direction)
    sizes = np.asarray(s["nbytes"], dtype=float)
    i = int(np.argmin(np.abs(np.log2(sizes) - np.log2(nbytes))))
    n = int(sizes[i])
    f = fits[(host_kind, direction)]
    return Point(n, direction, host_kind, n / s["median_s"][i] / 1e9, float(f.predict_gbps(n)), "recorded",
                 f.bandwidth_gbps)


def live_point(fits: dict, nbytes: int, direction: str, host_kind: str) -> Point:
    """Measure the chosen copy now and place it on the model."""
    nbytes = check_size(nbytes)
    copy_cost.series_for({"series": [{"host_kind": host_kind, "direction": direction}]}, host_kind, direction)
    r = measure_copy(nbytes, direction, host_kind, reps=20)
    f = fits[(host_kind, direction)]
    return Point(nbytes, direction, host_kind, r.bandwidth_gbps, float(f.predict_gbps(nbytes)), "measured now",
                 f.bandwidth_gbps)


def explorer_figure(data: dict, fits: dict, parts: list, point: Point):
    """The sweep and its models, with the chosen point as a star."""
    return copy_cost.bandwidth_figure(
        data, fits, parts, highlight=(point.nbytes, point.measured_gbps,
                                      f"chosen: {point.host_kind} {point.direction}, {point.source}"))


def explorer(ctx, data: dict, fits: dict, parts: list, *, nbytes: int = 4096, direction: str = "h2d",
             host_kind: str = "pinned"):
    """An ipywidgets control: pick size, direction and memory kind; see the point on the model."""
    import ipywidgets as w

    sizes = [1 << k for k in range(2, 29)]
    size_w = w.SelectionSlider(options=[(_label(s), s) for s in sizes], value=check_size(nbytes),
                               description="size", continuous_update=False, layout={"width": "560px"})
    dir_w = w.ToggleButtons(options=list(DIRECTIONS), value=direction, description="direction")
    kind_w = w.ToggleButtons(options=list(copy_cost.HOST_KINDS), value=host_kind, description="memory")
    out = w.Output()

    def redraw(*_):
        p = (live_point(fits, size_w.value, dir_w.value, kind_w.value) if ctx.live
             else recorded_point(data, fits, size_w.value, dir_w.value, kind_w.value))
        widgets.show(out, p.describe(), explorer_figure(data, fits, parts, p))

    for c in (size_w, dir_w, kind_w):
        c.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HTML("<b>Place one copy on the model</b> "
                          f"({'LIVE: measured now' if ctx.live else 'REPLAY: recorded points'})"),
                   size_w, dir_w, kind_w, out])


def _label(n: int) -> str:
    from helpers.core.figures import _size_label

    return _size_label(n)
