"""Chapter 9's exercises: expected values come from the chapter's data here, never from the page.

    from helpers.ch09_radar_pipeline import exercises
    exercises.registered_frame_ms(answer, params)   # derivation from the model's parameters
    exercises.copy_kernel_overlap(my_overlap_ns)    # coding: copy/kernel overlap from CUPTI-style records
    exercises.dropped_frames(answer)                # reasoning: a slow consumer and a 2-slot ring
    exercises.rank_from_one_run(answer)             # conceptual: what one run of 2,000 frames can rank
    exercises.detect_kernel(my_detect)              # coding: a Numba detection kernel on the range-Doppler map
    exercises.queue_depth(answer)                   # conceptual: why the flag design queues a bounded few frames
"""

from __future__ import annotations

import numpy as np

from helpers.learning import checks
from helpers.learning.checks import Hint, factor_hint
from helpers.models.radar import simulator


def registered_frame_ms(answer, params: simulator.MachineParams) -> bool | None:
    """9.1 — ms per 16 MiB frame for 'registered': pinned copy + processing + polling overhead."""
    n = 16 << 20
    expected = (params.copy_s(n, True) + params.kernel_s(n) + params.overhead_s) * 1e3
    no_overhead = (params.copy_s(n, True) + params.kernel_s(n)) * 1e3
    return checks.close("9.1 registered, 16 MiB, per frame", answer, expected, 0.05,
                        hints=[factor_hint(1000, "that looks like µs: the answer is in ms"),
                               Hint(lambda a, e: abs(a - no_overhead) < 0.02 * no_overhead,
                                    "you left out the polling overhead: the host sees 'done' that much later")],
                        hint="add the pinned copy time t0 + n/B, the processing time for 16 MiB and the overhead",
                        why="one frame at a time: the copy, then the kernels queued behind it, then the host noticing")


def dropped_frames(answer) -> bool | None:
    """9.2 — the model's drops for a 5 ms consumer, a 2 ms card and a 2-slot ring, over 100 frames."""
    slow = simulator.MachineParams(pinned_t0_s=5e-3, pinned_Bps=1e30, pageable_t0_s=5e-3, pageable_Bps=1e30,
                               memcpy_Bps=1e30, kernel_s_per_byte=0.0, kernel_t0_s=0.0, overhead_s=0.0,
                               source="exercise")
    expected = simulator.simulate(slow, "registered", 1 << 20, 2e-3, 100, slots=2)["dropped"]
    return checks.equal("9.2 frames dropped", answer, expected,
                        hint="in steady state the consumer finishes one frame per 5 ms while 2.5 arrive; "
                             "the 2 slots only delay the first loss",
                        why="the consumer keeps 1 of every 2.5 frames (plus the ring's head start); the rest are lost")


RANK_OPTIONS = {
    "a": "Yes: the design with the lowest p99.9 is the best, whatever the sample size.",
    "b": "No: p99.9 of 2,000 frames rests on the two or so largest samples; to rank, repeat the runs and compare "
         "intervals.",
    "c": "Yes, if the difference is more than 5%.",
    "d": "No: tails cannot be measured at all; only medians can.",
}
RANK_WHY = {
    "a": "With 2,000 frames the 99.9th percentile is set by about two samples: one descheduling or one page fault "
         "moves it. A single run per design cannot tell a real difference from luck.",
    "b": "Right. A tail estimate needs many samples beyond it, or repeated runs; the breaking-point experiment runs "
         "each configuration several times and gives a bootstrap interval, and only intervals that do not overlap "
         "rank two designs.",
    "c": "A fixed threshold ignores how noisy the estimate is. Two runs of the same design can differ by more than "
         "5% at p99.9; the spread between repeats is what tells you.",
    "d": "Tails can be measured — with enough samples and repeats. A real-time system is judged by them.",
}


def rank_from_one_run(answer) -> bool | None:
    """9.3 — can one run of 2,000 frames per design rank designs by p99.9?"""
    return checks.choice("9.3 ranking tails from one run", answer, RANK_OPTIONS, "b", RANK_WHY)


def _overlap_cases() -> list[tuple[str, list[dict]]]:
    """Records shaped like CUPTI's (helpers.measure.cupti_trace) that the overlap trial feeds the learner:
    a copy under one kernel, two kernels on two channels under one copy (counted once), two copies under
    one kernel, work that only touches, and a seeded random pipeline of three streams."""
    def rec(kind, s, e, channel):
        return {"kind": kind, "name": kind, "copy": "HtoD" if kind == "memcpy" else "", "bytes": 1 << 20 if kind == "memcpy" else 0,
                "stream": channel, "channel": channel, "channel_type": "async_memcpy" if kind == "memcpy" else "compute",
                "start_ns": s, "end_ns": e, "correlation": s, "device": 0}

    rng = np.random.default_rng(41)
    pipeline = []
    for f in range(12):
        t = int(f * 3000 + rng.integers(0, 800))
        copy_end = t + int(rng.integers(900, 1600))
        pipeline.append(rec("memcpy", t, copy_end, 10 + f % 3))
        k = copy_end + int(rng.integers(0, 300))
        for _ in range(int(rng.integers(2, 5))):
            d = int(rng.integers(200, 1500))
            pipeline.append(rec("kernel", k, k + d, 1 + f % 3))
            k += d + int(rng.integers(0, 200))
    return [("a copy under one kernel", [rec("memcpy", 0, 1000, 10), rec("kernel", 600, 2000, 1)]),
            ("two kernels on two channels under one copy",
             [rec("memcpy", 0, 1000, 10), rec("kernel", 100, 900, 1), rec("kernel", 300, 700, 2)]),
            ("two copies under one kernel",
             [rec("memcpy", 0, 500, 10), rec("memcpy", 200, 800, 11), rec("kernel", 400, 1500, 1)]),
            ("a kernel that starts as the copy ends", [rec("memcpy", 0, 1000, 10), rec("kernel", 1000, 1800, 1)]),
            ("twelve frames on three streams", pipeline)]


def _pairwise_ns(records: list[dict]) -> int:
    """The slip the hint names: every (copy, kernel) pair's overlap summed, time under two kernels twice."""
    from helpers.measure import cupti_trace

    copies = [r for r in records if r["kind"] == "memcpy"]
    kernels = [r for r in records if r["kind"] != "memcpy"]
    return sum(cupti_trace.overlap_ns(c, k) for c in copies for k in kernels)


def _overlap_trial(fn) -> list[str]:
    """Run the learner's overlap function on the cases, each on a fresh copy, then judge it against the
    course's union of the copies' intervals intersected with the kernels' (cupti_trace.set_overlap),
    computed only after the learner's function returned (checks.learner_first)."""
    import copy

    return checks.learner_first(_overlap_cases(), lambda case: fn(copy.deepcopy(case[1])), _judge_overlap)


def _judge_overlap(case: tuple[str, list[dict]], got) -> list[str]:
    from helpers.measure import cupti_trace

    name, records = case
    if isinstance(got, bool) or not isinstance(got, int | float | np.integer | np.floating):
        return [f"on '{name}' your function returned {got!r}, not a number of nanoseconds"]
    want = cupti_trace.set_overlap([r for r in records if r["kind"] == "memcpy"],
                                   [r for r in records if r["kind"] != "memcpy"])["ns"]
    if got == want:
        return []
    slip = (" — that is every (copy, kernel) pair summed: time under two kernels at once was counted twice; "
            "merge the copies' intervals and the kernels' intervals first"
            if got == _pairwise_ns(records) != want else "")
    return [f"on '{name}' ({len(records)} records) you got {got} ns, expected {want} ns{slip}"]


def copy_kernel_overlap(fn) -> bool | None:
    """9.6 — a function overlap_ns(records) -> ns during which some copy and some kernel both ran."""
    return checks.code("9.6 copy/kernel overlap from CUPTI records", fn, _overlap_trial,
                       why="the union of the copies' busy time intersected with the kernels': CUPTI gives each "
                           "engine's own start and end, so this is time the copy engine and the SMs really worked "
                           "at once, which the events' bars (stream order, one lane per stream) can only suggest")


def _detect_trial(fn) -> list[str]:
    """Run the learner's kernel on maps whose shapes are not multiples of the block, then judge each
    map against NumPy's, computed after the launch (checks.learner_first)."""
    from helpers.core.gpu import cuda

    def maps():
        rng = np.random.default_rng(3)
        for shape, block in (((19, 23), (8, 8)), ((7, 40), (4, 16))):
            power = rng.exponential(1.0, shape).astype(np.float32)
            yield power, np.float32(np.quantile(power, 0.9)), block

    def launch(case) -> np.ndarray:
        power, thr, block = case
        d_out = cuda.to_device(np.full((power.shape[0] + 2, power.shape[1] + 2), 7, dtype=np.int8))  # guard cells
        grid = (-(-power.shape[0] // block[0]), -(-power.shape[1] // block[1]))
        fn[grid, block](cuda.to_device(power), thr, d_out[1:-1, 1:-1])
        return d_out.copy_to_host()

    return checks.learner_first(maps(), launch, _judge_detection)


def _judge_detection(case, got: np.ndarray) -> list[str]:
    power, thr, _ = case
    rows, cols = power.shape
    if np.all(got == 7):
        raise checks.NotAnswered("your kernel wrote nothing to out yet")
    want = (power > thr).astype(np.int8)
    if not np.array_equal(got[1:-1, 1:-1], want):
        wrong = np.argwhere(got[1:-1, 1:-1] != want)[0]
        return [f"on a {rows}x{cols} map, cell {tuple(int(x) for x in wrong)} is wrong (1 where the power exceeds "
                "the threshold, else 0; are rows and columns the right way round?)"]
    inner = got.copy()
    inner[1:-1, 1:-1] = 7
    if np.any(inner != 7):
        return [f"on a {rows}x{cols} map, a thread wrote outside the map (check both bounds)"]
    return []


def detect_kernel(fn) -> bool | None:
    """9.4 — a Numba kernel detect(power, threshold, out): out[i, j] = 1 where power > threshold."""
    return checks.code("9.4 detection kernel", fn, _detect_trial,
                       why="one thread per map cell, bounds checked: the last stage of the pipeline, after the "
                           "range-Doppler map, and cheap next to the FFTs")


DEPTH_OPTIONS = {
    "a": "Nothing would go wrong; a bounded depth only saves GPU memory.",
    "b": "The GPU's queue of submitted work is finite: once it is full, the next launch waits in the CPU for room. "
         "With every queued frame stuck behind a flag the CPU has not written yet, that launch can wait forever, and "
         "the flag is never written.",
    "c": "A stream can hold only one cuStreamWaitValue32 at a time.",
    "d": "A stream wait gives up after a few milliseconds, so frames queued too early would run on old data.",
}
DEPTH_WHY = {
    "a": "Memory is the smaller problem. Each queued frame holds room in the channel's command queue (Chapter 7's "
         "ring of work the GPU fetches from), and that room is bounded.",
    "b": "Right. A launch that finds the queue full blocks until the GPU consumes work, and the GPU consumes nothing "
         "while it waits on a flag: if the thread that would write the flag is the one blocked, no one releases it "
         "(the driver API's documentation warns that these calls can deadlock an application). Queueing a few "
         "frames, refilled as DONE advances, keeps every launch short of the limit. (The course did not run a deep "
         "queue of warmed-up frames to watch this happen: its own probe hung earlier, at one frame, on a kernel "
         "loaded for the first time behind the wait; section 11 says why.)",
    "c": "A stream can hold many waits in order; the flag design queues several, one per frame.",
    "d": "A stream wait has no timeout of its own: it waits until the condition holds. That is why the course's "
         "teardown writes READY past every queued frame, and why the CPU side polls DONE with a deadline.",
}


def queue_depth(answer) -> bool | None:
    """9.5 — why the flag design keeps a bounded number of frames queued ahead."""
    return checks.choice("9.5 a bounded queue ahead", answer, DEPTH_OPTIONS, "b", DEPTH_WHY)
