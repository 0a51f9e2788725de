"""The first and last call of every notebook: say which mode runs, get evidence, clean up.

    from helpers import course
    ctx = course.start("Chapter 0 — your machine")
    ctx.predict("ch00.h2d_gbps", 20, unit="GB/s", kind="bandwidth")   # the learner's guess, kept before the result shows
    ev = ctx.get("transfers.pinned_vs_pageable")   # the one way to get an experiment's data
    ...
    course.finish()
"""

from __future__ import annotations

import sys
from dataclasses import KW_ONLY, dataclass

from helpers.core import config, evidence, gpu, mode, reference
from helpers.core.evidence import Evidence
from helpers.core.experiments import DEFAULT_REFERENCE, P2P_REFERENCE
from helpers.core.gpu import cp, cuda, cupyx  # noqa: F401  (the names the code on a page uses)
from helpers.core.mode import Mode
from helpers.learning import predictions
from helpers.measure import host_memory


@dataclass(frozen=True)
class Context:
    """What a notebook needs to choose its path: the mode, why, the GPU and the replay references."""

    mode: Mode
    reason: str
    _: KW_ONLY
    gpu_name: str | None
    reference_name: str | None
    p2p_reference_name: str = config.DEFAULT_P2P_REFERENCE
    forced_replay: bool = False  # COURSE_MODE=replay: even CPU-only experiments replay

    @property
    def live(self) -> bool:
        return self.mode is Mode.LIVE

    def reference(self, which: str = DEFAULT_REFERENCE) -> reference.Reference:
        """The validated reference machine replays read: the course's main machine, or ("p2p") the
        two-GPU machine. A missing or damaged manifest raises ReferenceDataError naming it."""
        if which == P2P_REFERENCE:
            return reference.load(self.p2p_reference_name)
        return reference.load(self.reference_name)

    def get(self, experiment_id: str, *, quick: bool = False, recorded: bool = False, code=None,
            **params) -> Evidence:
        """The experiment's Evidence, live or replayed (the rules: helpers.core.evidence).

        A recording the experiment declares optional on its machine (`optional_on`) and that is missing
        comes back as Evidence with data None and `missing` saying why. recorded=True: the reference machine's recording even when live (side by side).
        quick=True: the recorder's smoke-test sizes. code=: the learner's version of the measuring
        function the page shows (it runs live; replay shows the course's). Other keywords are the
        experiment's own parameters (`python -m helpers.record --list` shows them)."""
        return evidence.get(self, experiment_id, quick=quick, recorded=recorded, code=code, **params)

    def predict(self, question: str, guess, *, unit: str = "", kind: str = "") -> predictions.Prediction | None:
        """Keep the learner's guess for `question` before the result is shown, with the kind of
        quantity it is (one of predictions.KINDS: time, bandwidth, count, size, ratio, outcome)."""
        return predictions.commit(question, guess, unit=unit, kind=kind)

    def compare(self, question: str, measured: float, *, unit: str = "", source: Evidence | str = "",
                mode: Mode | str | None = None) -> None:
        """Print the kept guess beside the measured value (and how far off it was), and keep the
        comparison for the learner's prediction record. `source` is the Evidence the value came
        from (its mode and machine are kept) or, for a value that comes from no Evidence (a model
        run on the page), a short text with `mode` saying live, replay or simulated.

        Returns None, so a compare that ends a cell shows its line once
        (predictions.compare returns the Comparison itself)."""
        if isinstance(source, Evidence):
            source, mode = source.source, source.mode if mode is None else mode
        print(predictions.compare(question, measured, unit=unit, source=source, mode=mode).line)

def start(chapter: str | None = None, *, quiet: bool = False) -> Context:
    """Decide the mode once, switch Numba to its simulator without a GPU, print the banner,
    and return the notebook's Context."""
    info = mode.detect()
    simulator = mode.configure_numba(info)
    ref_name = reference.default_reference_name()
    if not quiet:
        print(mode.banner(info, chapter, simulator=simulator, reference_name=ref_name))
    return Context(info.mode, info.reason, gpu_name=info.probe.name if info.probe.usable else None,
                   reference_name=ref_name, p2p_reference_name=config.p2p_reference_name(),
                   forced_replay=config.requested_mode() == "replay")


def finish(*, quiet: bool = False) -> dict:
    """Hand CuPy's cached device and pinned blocks back, stop the shared capture-card process (if a
    radar experiment started one) and report what this process still holds.

    Returns {'device_used_bytes', 'locked_host_bytes'} so tests and learners can check that
    a notebook leaves nothing behind.
    """
    gpu.release_pools()
    ring = sys.modules.get("helpers.models.radar.ring")  # loaded only where a radar experiment may have run
    if ring is not None:
        ring.stop_shared_host()  # the capture-card process Chapter 9's experiments share
    out = {"device_used_bytes": None, "locked_host_bytes": host_memory.pinned_bytes_of_process()}
    if gpu.probe().usable:
        cp = gpu.cupy()
        out["device_used_bytes"] = int(cp.get_default_memory_pool().used_bytes())
    if not quiet:
        print(f"cleaned up: CuPy pool holds {out['device_used_bytes']} device bytes, "
              f"process has {out['locked_host_bytes']} locked host bytes")
    return out
