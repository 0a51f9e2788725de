"""Lab 3's graded parts, run by the grader (tools/grader) outside the learner's process.

Frames, targets, latencies and machines are drawn here; the learner's functions get them as
data in the worker, and their maps, reports and picks are judged here against Chapter 9's
float64 reference and the pipeline model, run in this process.
"""

from __future__ import annotations

import numpy as np

from helpers.labs import lab3
from helpers.labs.grading import wire
from helpers.models.radar import card, designs, dsp, metrics, simulator
from instructor.labs import lab3 as ref
from tools.grader.api import Part, own

NUMPY = wire.remote("module", name="numpy")
OWN_PROCESSING = {m.__name__: names for m, names in lab3.OWN_PROCESSING.items()}
OWN_REPORT = {m.__name__: names for m, names in lab3.OWN_REPORT.items()}


def _map(c, student, frame: np.ndarray) -> np.ndarray:
    got = student.call("range_doppler", NUMPY, frame, dsp.matched_filter(np), forbid=OWN_PROCESSING,
                       keep_arrays=True)
    try:  # values, not types: the map may come back as any array-like of numbers (helpers.labs.grading.wire.plain)
        arr = np.asarray(got)
    except (ValueError, TypeError):
        arr = None
    c.require(arr is not None and arr.dtype.kind in "biufc",
              f"range_doppler should return a NumPy array of numbers, got {type(got).__name__}")
    return arr


def rd_matches_reference(c, student, seed: int) -> None:
    for nbytes, card_seed, variant in ref.cases("range_doppler", seed):
        frame = dsp.synth_frame(nbytes, seed=card_seed, variant=variant)
        got = _map(c, student, frame)
        want = dsp.reference_map(frame)
        c.require(got.shape == want.shape,
                  f"your map has shape {got.shape}, expected {want.shape} (pulses x range bins)")
        c.require(got.dtype == np.float32, f"your map is {got.dtype}; return float32 power")
        err = dsp.map_error(got, want)
        if err > 1e-3:
            hint = ""
            if dsp.map_error(np.fft.fftshift(got, axes=0), want) < 1e-3:
                hint = " — it matches once shifted along axis 0: did you forget fftshift (or shift twice)?"
            elif dsp.map_error(got, want ** 0.5) < 1e-3:
                hint = " — it matches the magnitude: return the power |x|², not |x|"
            c.require(False, f"your map differs from the reference by {err:.2g} of its peak "
                             f"({frame.shape[0]} pulses){hint}")


def rd_finds_target(c, student, seed: int) -> None:
    chirp = card.chirp()
    for pulses, rbin, dbin in ref.cases("targets", seed):
        x = np.zeros((pulses, 1024), np.complex64)
        x[:, rbin:rbin + chirp.size] = chirp * np.exp(2j * np.pi * dbin / pulses * np.arange(pulses))[:, None]
        m = _map(c, student, x)
        c.require(m.ndim == 2 and m.size > 0, f"your map has shape {m.shape}, expected a 2-D map")
        d, r = np.unravel_index(int(np.argmax(m)), m.shape)
        c.require(r == rbin, f"the target is at range bin {rbin}; your map peaks at range bin {r}: is the "
                  "pulse compression along axis 1, with the matched filter multiplied (not divided)?")
        c.require(d - pulses // 2 == dbin, f"the target is at Doppler bin {dbin} (row {pulses // 2 + dbin} after "
                  f"fftshift); your map peaks at row {d}: is the Doppler FFT along axis 0, then shifted?")


def deadline_report(c, student, seed: int) -> None:
    for period, late, dropped, lat_seed in ref.cases("deadline_report", seed):
        rng = np.random.default_rng(lat_seed)
        lat = np.round(rng.lognormal(np.log(900), 0.3, 3000)).astype(int)
        lat = np.minimum(lat, int(period * 1e6))
        lat[rng.choice(lat.size, late, replace=False)] = int(period * 1e6) + 1 + rng.integers(0, 5000, late)
        rep = student.call("deadline_report", lat.tolist(), period, dropped, forbid=OWN_REPORT)
        c.require(isinstance(rep, dict), f"deadline_report should return a dict, got {type(rep).__name__}")
        want = metrics.summarize(lat, period, dropped)
        for key in ("p50_ms", "p99_ms", "p999_ms", "max_ms"):
            c.require(key in rep, f"your report has no {key!r}")
            c.require(isinstance(rep[key], (int, float)), f"{key} should be a number, got {rep[key]!r}"[:200])
            c.require(not np.isclose(rep[key], want[key] * 1e3, rtol=1e-6),
                      f"{key} is {rep[key]:g}: that is microseconds; report milliseconds")
            c.close(key, rep[key], want[key], 1e-6, "np.percentile(latencies_in_ms, [50, 99, 99.9]) and the max")
        exact = int(np.sum(lat == int(period * 1e6)))
        c.require(rep.get("misses") == want["misses"],
                  f"with period {period * 1e3:g} ms you count {rep.get('misses')} misses, expected {want['misses']}"
                  + (f" ({exact} frames took exactly one period: they are not misses)" if exact else ""))
        c.require(rep.get("dropped") == dropped, f"dropped should be {dropped}, got {rep.get('dropped')}")
        c.require(rep.get("ok") == (want["misses"] == 0 and dropped == 0),
                  f"ok is {rep.get('ok')} with {want['misses']} misses and {dropped} dropped frames")


def _pick(c, student, name, p, nbytes, period, deadline):
    pick = student.call("choose_design", nbytes, period, deadline, p)
    if pick is None:
        return None
    c.require(isinstance(pick, dict) and {"design", "buffers", "slots"} <= set(pick),
              f"on {name}: choose_design should return a dict with design, buffers and slots, got {pick!r}"[:300])
    c.require(pick["design"] in designs.DESIGNS, f"{pick['design']!r} is not one of {designs.DESIGNS}")
    c.require(all(type(pick[k]) is int and 1 <= pick[k] <= 64 for k in ("buffers", "slots")),
              f"on {name}: buffers and slots should be whole numbers from 1 to 64, got {pick!r}")
    return pick


def choose_design(c, student, seed: int) -> None:
    for name, p, nbytes, period, deadline, best in ref.cases("choose_design", seed):
        pick = _pick(c, student, name, p, nbytes, period, deadline)
        if best is None:
            continue  # no design meets it: any answer is allowed here (the next part wants None)
        c.require(pick is not None, f"on {name} a design meets every deadline, but you returned None")
        r = lab3.judge(p, pick, nbytes, period, deadline)
        c.require(r["summary"]["misses"] == 0 and r["dropped"] == 0,
                  f"on {name}: the model predicts {r['summary']['misses']} late frames and {r['dropped']} drops for "
                  f"{pick}, although some design meets every deadline there")


def choose_design_cheapest(c, student, seed: int) -> None:
    for name, p, nbytes, period, deadline, best in ref.cases("choose_design", seed):
        pick = _pick(c, student, name, p, nbytes, period, deadline)
        if best is None:
            c.require(pick is None, f"on {name} no design meets the budget, so the answer is None, not {pick!r}")
            continue
        c.require(pick is not None, f"on {name} you returned None, but a design meets the budget")
        r = lab3.judge(p, pick, nbytes, period, deadline)
        ok = r["summary"]["misses"] == 0 and r["dropped"] == 0
        cpu, cheapest_cpu = pick["design"] not in ("registered", "pipelined"), best["design"] not in ("registered",
                                                                                                   "pipelined")
        c.require(ok and (cpu, pick["buffers"], pick["slots"]) <= (cheapest_cpu, best["buffers"], best["slots"]),
                  f"on {name}: {pick} " + ("does not meet the budget" if not ok else
                  "is not the cheapest design that does: fewer buffers or slots, or a design without the CPU in "
                  "the data path, would also meet every deadline"))


WIRE_TYPES = (simulator.MachineParams,)  # the machine each choose_design case hands the learner

GRADED = (
    Part("rd_matches_reference", 5, ("range_doppler",), rd_matches_reference, own_work=own(OWN_PROCESSING)),
    Part("rd_finds_target", 3, ("range_doppler",), rd_finds_target, own_work=own(OWN_PROCESSING)),
    Part("deadline_report", 4, ("deadline_report",), deadline_report, own_work=own(OWN_REPORT)),
    Part("choose_design", 6, ("choose_design",), choose_design),
    Part("choose_design_cheapest", 4, ("choose_design",), choose_design_cheapest),
)
