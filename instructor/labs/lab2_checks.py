"""Lab 2's graded parts, run by the grader (tools/grader) outside the learner's process.

The simulated GPU clock of `timed_copy` and the timers of `benchmark` run here: the learner's
code gets stand-ins (helpers.labs.grading.remote) whose every event, copy and timing is a question to
this process, so the worker never holds t0, B, the number of timer calls or the answer.
Later parts get the reference's fit (computed here) as their input.
"""

from __future__ import annotations

import numpy as np

from helpers.labs import lab2
from helpers.labs.grading import wire
from instructor.labs import lab2 as ref
from instructor.labs.common import recorded
from tools.grader.api import Part, own

FIT_FORBIDDEN = {"helpers.models.copy_cost": ("fit", "fit_series", "fit_all")}


class Clock:
    """The simulated CUDA clock (lab2.FakeCuda) behind the worker's RemoteCuda."""

    def __init__(self, t0_s: float, bw_Bps: float) -> None:
        self.fake = lab2.FakeCuda(t0_s, bw_Bps)
        self.events: list = []

    def _event(self, i):
        if type(i) is not int or not 0 <= i < len(self.events):
            raise ValueError("not an event of this simulated CUDA")
        return self.events[i]

    def __call__(self, op: str, *args):
        f = self.fake
        if op == "event":
            self.events.append(f.Event())
            return len(self.events) - 1
        if op == "record":
            return self._event(args[0]).record(f.stream)
        if op == "event_sync":
            return self._event(args[0]).synchronize()
        if op == "event_done":
            return self._event(args[0]).done
        if op == "stream_sync":
            return f.stream.synchronize()
        if op == "memcpy":
            return f.runtime.memcpyAsync(0xD0, 0x50, int(args[0]), int(args[1]), args[2])
        if op == "elapsed":
            return f.get_elapsed_time(self._event(args[0]), self._event(args[1]))
        raise ValueError(f"unknown CUDA operation {op!r}")


def timed_copy(c, student, seed: int) -> None:
    for n, t0_s, bw in ref.cases("timed_copy", seed=seed):
        clock = Clock(t0_s, bw)
        t = student.call("timed_copy", wire.remote("cuda", name="cuda"), wire.remote("cuda_stream", name="cuda"),
                         0xD0, 0x50, n, lab2.H2D, callbacks={"cuda": clock})
        truth = clock.fake.copy_time(n)
        c.require(isinstance(t, (int, float)) and np.isfinite(t), f"timed_copy returned {t!r}, not a number of seconds")
        c.require(not np.isclose(t, truth * 1e3, rtol=1e-6),
                  "your time is 1000x too large: get_elapsed_time returns milliseconds; return seconds")
        c.require(t > 0, f"your time is {t:g} s: was the end event recorded before the copy was queued?")
        c.close(f"the time of a simulated {n}-byte copy", t, truth, 1e-6,
                "record start, queue the copy, record end, wait for end, then read the elapsed time")


def _result(c, res) -> None:
    c.require(isinstance(res, dict) and {"times_s", "median_s", "min_s"} <= set(res),
              f"benchmark should return a dict with times_s, median_s and min_s, got {res!r}"[:300])
    c.require(isinstance(res["median_s"], (int, float)) and isinstance(res["min_s"], (int, float)),
              "median_s and min_s should be numbers of seconds")


def benchmark_warmup(c, student, seed: int) -> None:
    for k in ref.cases("benchmark_warmup", seed=seed):
        reps, warmup = k["reps"], k["warmup"]
        timer = lab2.warmup_timer(k["steady_s"], reps + warmup, slow_calls=k["slow_calls"],
                                   slow_factor=k["slow_factor"], seed=k["seed"])
        res = student.call("benchmark", wire.remote("callback", name="timer"), kwargs={"reps": reps, "warmup": warmup},
                           callbacks={"timer": timer})
        _result(c, res)
        c.require(timer.calls == reps + warmup, f"your benchmark called timer() {timer.calls} times; with "
                  f"warmup={warmup} and reps={reps} it should call it {reps + warmup} times")
        try:
            kept = np.asarray(res["times_s"], dtype=float)
        except (TypeError, ValueError):
            kept = np.zeros(0)
        c.require(kept.size == reps, f"times_s has {kept.size} timings; it should keep the last reps={reps}")
        spread = kept.max() / kept.min()
        c.require(spread < 2, f"your slowest kept timing is {spread:.0f}x your fastest: the slow first calls "
                  "are in your timings — did you discard the warm-up calls?")
        want = np.median(timer.times_s[warmup:])
        c.require(np.isclose(res["median_s"], want, rtol=1e-9),
                  f"median_s is {res['median_s']:.6g} s but the median of your kept timings is {want:.6g} s"
                  + (" — that is the mean, not the median" if np.isclose(res["median_s"], kept.mean()) else ""))
        c.require(np.isclose(res["min_s"], kept.min(), rtol=1e-9), f"min_s is {res['min_s']!r}, not the minimum")
    plain = lab2.CountingTimer([2e-3] * 5, "simulated timings")
    student.call("benchmark", wire.remote("callback", name="timer"), kwargs={"reps": 5, "warmup": 0},
                 callbacks={"timer": plain})
    c.require(plain.calls == 5, f"with reps=5, warmup=0 your benchmark called timer() {plain.calls} times, not 5")


def benchmark_agrees(c, student, seed: int) -> None:
    for name, ts, warm in ref.cases("benchmark_agrees", recorded("transfers.large_copy"), seed=seed):
        timer = lab2.replay_timer(ts)
        res = student.call("benchmark", wire.remote("callback", name="timer"), kwargs={"reps": len(ts) - warm, "warmup": warm}, callbacks={"timer": timer})
        _result(c, res)
        c.require(timer.calls == len(ts), f"your benchmark used {timer.calls} of the {len(ts)} timings of {name}, "
                  f"with reps={len(ts) - warm} and warmup={warm}: call timer() warmup + reps times")
        c.close(f"your median of {name}", res["median_s"], float(np.median(ts[warm:])), 1e-9,
                "the median of the timings after the warm-up ones")


def _pair(c, got) -> tuple[float, float]:
    c.require(isinstance(got, (list, tuple)) and len(got) == 2 and all(isinstance(x, (int, float)) for x in got),
              f"fit_line should return two numbers (t0 in s, B in B/s), got {got!r}"[:300])
    return float(got[0]), float(got[1])


def fit_synthetic(c, student, seed: int) -> None:
    n = np.logspace(2, np.log10(256 << 20), 30)
    for t0_true, bw_true, noise_seed in ref.cases("fit", seed=seed):
        times = lab2.synthetic_line(t0_true, bw_true, n, noise=0.03, seed=noise_seed)
        t0, bw = _pair(c, student.call("fit_line", n, times, forbid=FIT_FORBIDDEN))
        c.require(not np.isclose(bw * 1e9, bw_true, rtol=0.3),
                  "your bandwidth is 1e9 times too small: return bytes per second, not GB/s")
        c.close(f"fitted B for data made with B = {bw_true:.3g} B/s", bw, bw_true, 0.05,
                "check that B is bytes per second and the slope is 1/B")
        c.close(f"fitted t0 (us) for data made with t0 = {t0_true * 1e6:.3g} us", t0 * 1e6, t0_true * 1e6, 0.25,
                "an unweighted fit in seconds is dominated by the largest copies: weight each point by 1/t")


def predict_reference(c, student, seed: int) -> None:
    for name, n, t in ref.cases("predict", recorded("transfers.pinned_vs_pageable"), seed=seed):
        train = np.arange(n.size) % 2 == 0
        t0, bw = ref.fit_line(n[train], t[train])  # the reference fit: this part grades predict_time alone
        got = student.call("predict_time", n[~train], t0, bw, bind=ref.earlier("predict"))
        try:
            pred = np.asarray(got, dtype=float)
        except (TypeError, ValueError):
            pred = np.zeros(0)
        c.require(pred.shape == n[~train].shape, f"predict_time should give one time per size, got {got!r}"[:300])
        want = ref.predict_time(n[~train], t0, bw)
        c.require(np.allclose(pred, want, rtol=1e-9), f"{name}: your predictions differ from t0 + n/B "
                  f"by up to {np.max(np.abs(pred / want - 1)):.1%}")
        err = pred / t[~train] - 1
        worst = int(np.argmax(np.abs(err)))
        c.require(np.abs(err).max() <= 0.20,
                  f"for {int(n[~train][worst])} bytes you predict {pred[worst] * 1e6:.2f} us, {name} has "
                  f"{t[~train][worst] * 1e6:.2f} us ({err[worst]:+.0%}); small sizes test t0, large ones B")


def batch_slowdown(c, student, seed: int) -> None:
    for name, n, t, pairs in ref.cases("batch", recorded("transfers.pinned_vs_pageable"), seed=seed):
        t0, bw = ref.fit_line(n, t)
        for count, each in pairs:
            mine = student.call("batch_slowdown", count, each, t0, bw, bind=ref.earlier("batch"))
            c.close(f"{name}: your slowdown for {count} x {each} B", mine, ref.batch_slowdown(count, each, t0, bw),
                    1e-9, "count copies cost count * t(n); one copy of everything costs t(count * n)")


GRADED = (
    Part("timed_copy_events", 4, ("timed_copy",), timed_copy),
    Part("benchmark_warmup", 4, ("benchmark",), benchmark_warmup),
    Part("benchmark_agrees", 5, ("benchmark",), benchmark_agrees),
    Part("fit_synthetic", 5, ("fit_line",), fit_synthetic, own_work=own(FIT_FORBIDDEN)),
    Part("predict_reference", 4, ("predict_time",), predict_reference),
    Part("batch_slowdown", 3, ("batch_slowdown",), batch_slowdown),
)
