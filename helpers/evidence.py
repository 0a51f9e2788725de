"""One experiment's data for a notebook: measured now (live) or read back (replay), never mixed up.

    ev = evidence.get(ctx, "um.migration")
    ev.data, ev.mode, ev.source   # the numbers, LIVE/REPLAY, and which machine

Live runs the registered experiment in this process, exactly as the recorder would; replay
reads the reference file's recording and fails with a clear message when it has none.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import experiments
from .errors import InputError, ReferenceDataError
from .mode import Mode


@dataclass(frozen=True)
class Evidence:
    """Data of one experiment and where it came from."""

    experiment_id: str
    data: dict
    mode: Mode
    source: str  # the GPU measured now, or the reference machine's label

    @property
    def parts(self) -> list[tuple[Mode, str]]:
        """Provenance parts for figures.CourseFigure."""
        return [(self.mode, self.source)]

    def caption(self, what: str) -> str:
        verb = "measured now on" if self.mode is Mode.LIVE else "REPLAY: recorded on"
        return f"{what} ({'LIVE: ' if self.mode is Mode.LIVE else ''}{verb} {self.source})"


def get(ctx, experiment_id: str, *, quick: bool = False) -> Evidence:
    """Run `experiment_id` live when ctx.live, else read its recording from ctx's reference."""
    registry = experiments.discover()
    if experiment_id not in registry:
        raise InputError(f"no experiment {experiment_id!r} is registered (have: {', '.join(registry)})")
    if ctx.live:
        data = registry[experiment_id].run(quick)
        return Evidence(experiment_id, data, Mode.LIVE, ctx.gpu_name or "this GPU")
    ref = ctx.reference()
    if not ref.has(experiment_id):
        raise ReferenceDataError(
            f"{ref.path.name} has no recording of {experiment_id!r}, so this cell cannot replay it. "
            "Record it on a GPU with `python -m helpers.record --out data/reference/<name>.json` "
            f"(the course's maintainers re-record {ref.name} with every new experiment).")
    return Evidence(experiment_id, ref.experiment(experiment_id), Mode.REPLAY, ref.label)
