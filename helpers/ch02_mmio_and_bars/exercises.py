"""Chapter 2's exercises: the expected answers are computed here, from the chapter's evidence,
never on the page (helpers.learning.checks explains the kinds)."""

from __future__ import annotations

import numpy as np

from helpers.ch02_mmio_and_bars import mmio
from helpers.core.evidence import Evidence
from helpers.learning import checks
from helpers.learning.checks import factor_hint


def ex_2_1_round_trip(answer) -> bool | None:
    """2.1: ns per 4-byte load behind the 1.7 s of the 2009 forum report."""
    return checks.close("2.1 ns per 4-byte load", answer, mmio.implied_read_ns(width=4), rel_tol=0.02,
                        hints=[factor_hint(0.25, "That is per byte: the loads were 4 bytes wide, so there were "
                                                 "4x fewer of them, each taking 4x longer."),
                               factor_hint(1e-3, "A unit slip: the answer is in nanoseconds, not microseconds."),
                               factor_hint(1e3, "A unit slip: the answer is in nanoseconds, not picoseconds.")],
                        hint="Count the loads (bytes / 4), then divide the time by that count; answer in ns.",
                        why="one load at a time, each waiting for its completion: time / loads is the round trip.")


def ex_2_2_uncached_mbps(answer, reads: Evidence) -> bool | None:
    """2.2: MB/s of 8-byte reads one at a time, from the measured GPU→host read latency."""
    if reads.data is None:
        print("… 2.2: the reference recording of mmio.gpu_read_latency is pending, so this exercise has "
              "no measured latency to work from yet. Run it live on a GPU, or come back after the recording.")
        return None
    expected = 8 / reads.data["host_median_ns"] * 1e3  # bytes per ns = GB/s; x1e3 -> MB/s
    return checks.close("2.2 MB/s of dependent 8-byte reads", answer, expected, rel_tol=0.03,
                        hints=[factor_hint(1e3, "1000x too large: bytes per nanosecond is already GB/s, so one factor "
                                                "of 1000 turns it into MB/s, not two."),
                               factor_hint(1e-3, "Bytes per nanosecond is GB/s: multiply by 1000 for MB/s."),
                               factor_hint(8, "Each read carries 8 bytes, not 64: the chase reads one int64."),
                               factor_hint(1 / 8, "Each read carries 8 bytes: multiply reads per second by 8.")],
                        hint="Reads per second = 1e9 / (ns per read); bytes per second = 8 x that.",
                        why="a dependent read cannot start before the last one's completion, so bandwidth is "
                            "bytes per read over the round trip: hopeless for bulk data, and why DMA exists.")


def ex_2_3_wc_bursts(answer, wc_buffer_bytes: int) -> bool | None:
    """2.3: write-combined bursts for 1 MiB on the toy GPU."""
    return checks.equal("2.3 WC bursts for 1 MiB", answer, (1 << 20) // wc_buffer_bytes,
                        hint="One burst carries one full write-combining buffer (gpu.link.params.wc_buffer_bytes).",
                        why="write-combining gathers a buffer's worth of stores into one packet.")


QUESTION_2_4 = {
    "a": "because the CPU's cache must first be flushed before any read of a device",
    "b": "because a read is non-posted: the reader must wait for a completion carrying the data to come back, "
         "while a write is posted and needs no answer",
    "c": "because the BAR is too small to hold the data being read",
    "d": "because PCIe carries reads and writes on separate lanes, and the read lanes are slower",
}
EXPLAIN_2_4 = {
    "a": "No: an uncached mapping bypasses the CPU's caches; there is nothing to flush. The cost is the wait "
         "for the answer.",
    "b": "Yes. A load needs its data: the request crosses the link, the device answers with a completion, "
         "and only then can the load retire. A store hands its data to the link and retires; the measured "
         "GPU-side numbers show the same asymmetry.",
    "c": "No: BAR size decides what can be addressed, not how fast one access is.",
    "d": "No: every lane carries both directions (a transmit and a receive pair); reads and writes are packets "
         "on the same lanes. The read is slow because it waits for an answer.",
}


def ex_2_4_why_reads_wait(answer) -> bool | None:
    """2.4: why uncached reads cost a round trip and writes do not."""
    return checks.choice("2.4 why reads wait", answer, QUESTION_2_4, "b", EXPLAIN_2_4)


def _follow(chain: np.ndarray, start: int, steps: int) -> int:
    j = start
    for _ in range(steps):
        j = int(chain[j])
    return j


def chase_trial(fn) -> list[str]:
    """Run the learner's `follow(chain, start, steps) -> int` (a Numba kernel inside) on chains
    the check builds, then follow them by hand. Runs on the CUDA simulator without a GPU."""
    from helpers.measure.gpu_chase import make_chain

    def chains():
        for seed, steps in ((3, 5), (11, 17)):
            yield (*make_chain(256 * 24, seed=seed), steps)

    def judge(case, got) -> list[str]:
        chain, start, steps = case
        if got is not None and int(got) == -1:
            raise checks.NotAnswered("out[0] still holds the starter's -1: your kernel has not written it yet")
        want = _follow(chain, start, steps)
        if got is None or int(got) != want:
            return [f"on a 24-slot chain from index {start}, {steps} steps should end at index {want}, "
                    f"your function returned {got!r}. Does each step read nxt[j] and make that the new j, "
                    "and does the kernel write the last j to out[0]?"]
        return []

    return checks.learner_first(chains(), lambda case: fn(*case), judge)


def ex_2_5_write_a_chase(fn) -> bool | None:
    """2.5 (coding): a Numba kernel that follows a pointer chain."""
    return checks.code("2.5 your pointer chase", fn, chase_trial,
                       why="each read's address is the value of the one before, the shape of every latency probe.")
