"""Bad parameters to every registered experiment raise, live and replay, and nothing runs or replays.

For each experiment that declares parameters, each parameter's bad values are derived from its
own validator: of CANDIDATES, those it rejects (with InputError or InputTypeError; any other
exception from a validator is a failure too). Each bad value goes through `ctx.get` on a
Context built by hand in LIVE and in REPLAY mode, with the experiment's run replaced by a
stand-in that records calls and the Context's reference reading spied on, so nothing touches
a GPU: the call must raise InputError/InputTypeError, the run must never be called and no
reference must be read (no replay). The counts are printed (`pytest -rA` shows them).
"""

from __future__ import annotations

import dataclasses

from helpers import course
from helpers.core import experiments, validate
from helpers.core.errors import InputError, InputTypeError
from helpers.core.mode import Mode

CANDIDATES = (-1, 0, 10**12, 2.5, True, "x", None, float("nan"))
BAD = (InputError, InputTypeError)


def rejected(rule, what: str) -> list:
    """The candidates `rule` refuses (an exception other than InputError/InputTypeError propagates)."""
    out = []
    for value in CANDIDATES:
        try:
            rule(value, what)
        except BAD:
            out.append(value)
    return out


def check_all(registry: dict, monkeypatch) -> tuple[dict, list[str]]:
    """Feed every declared parameter its bad values in both modes: (counts, failures)."""
    runs, reads = [], []
    stand_ins = {eid: dataclasses.replace(e, run=lambda quick, _id=eid, **kw: runs.append((_id, kw)) or {})
                 for eid, e in registry.items()}
    monkeypatch.setattr(experiments, "discover", lambda: dict(stand_ins))
    monkeypatch.setattr(course.Context, "reference", lambda self, which="default": reads.append(which))
    counts = {"experiments": 0, "params": 0, "bad values": 0, "calls": 0}
    failures = []
    for eid, exp in registry.items():
        if not exp.params:
            continue
        counts["experiments"] += 1
        for name, rule in exp.params.items():
            counts["params"] += 1
            bad_values = rejected(rule, f"{eid}: {name}")
            if not bad_values:
                failures.append(f"{eid}: {name}: its validator ({rule}) accepts every candidate {CANDIDATES}")
            counts["bad values"] += len(bad_values)
            for mode in (Mode.LIVE, Mode.REPLAY):
                ctx = course.Context(mode, "test", gpu_name="Stand-in GPU" if mode is Mode.LIVE else None,
                                     reference_name="h100-pcie")
                for value in bad_values:
                    counts["calls"] += 1
                    try:
                        ev = ctx.get(eid, **{name: value})
                        failures.append(f"{eid}: {name}={value!r} ({mode.value}) returned {ev!r}")
                    except BAD:
                        pass
                    except Exception as exc:  # noqa: BLE001 - anything but bad input is a failure here
                        failures.append(f"{eid}: {name}={value!r} ({mode.value}) raised {type(exc).__name__}: {exc}")
                    if runs or reads:
                        failures.append(f"{eid}: {name}={value!r} ({mode.value}) ran {runs} / read {reads}")
                        runs.clear()
                        reads.clear()
    return counts, failures


def test_the_check_catches_a_validator_that_lets_bad_values_through(monkeypatch):
    def run(quick, frames=10, kind="a"):
        return {}

    loose = {"frames": lambda v, what="value": v}  # accepts anything: the check must say so
    reg = {"demo.strict": experiments.Experiment("demo.strict", 0, "t", run,
                                                 params={"frames": validate.count(1, 100),
                                                         "kind": validate.one_of("a", "b")}),
           "demo.loose": experiments.Experiment("demo.loose", 0, "t", run, params=loose),
           "demo.none": experiments.Experiment("demo.none", 0, "t", lambda quick: {})}
    counts, failures = check_all(reg, monkeypatch)
    assert counts == {"experiments": 2, "params": 3, "bad values": 8 + 8, "calls": 2 * 16}
    assert failures == [f"demo.loose: frames: its validator ({loose['frames']}) accepts every candidate {CANDIDATES}"]


def test_bad_parameters_to_every_registered_experiment_raise_in_both_modes(monkeypatch):
    registry = experiments.discover()
    counts, failures = check_all(registry, monkeypatch)
    summary = (f"{counts['experiments']} of {len(registry)} registered experiments declare parameters: "
               f"{counts['params']} parameters, {counts['bad values']} bad values, "
               f"{counts['calls']} ctx.get calls (live and replay)")
    print(summary)
    assert counts["params"], f"no registered experiment declares parameters, so nothing was checked ({summary})"
    assert not failures, summary + "\n" + "\n".join(failures)
