"""Chapter 3's exercises (all three parts): expected answers computed here from the chapter's
evidence, never on the page (helpers.learning.checks explains the kinds)."""

from __future__ import annotations

import numpy as np

from helpers.ch03_dma_and_copy_engines import packets
from helpers.core.evidence import Evidence
from helpers.learning import checks
from helpers.learning.checks import factor_hint
from helpers.models.copy_cost import LinearFit


def ex_3_1_n90(answer, fit: LinearFit) -> bool | None:
    """3.1: the smallest copy reaching 90% of B under t(n) = t0 + n/B."""
    return checks.close("3.1 size for 90% of B", answer, 9 * fit.t0_s * fit.bandwidth_Bps, rel_tol=0.05,
                        hints=[factor_hint(1 / 9, "That is n½, where the copy reaches 50% of B; 90% needs more bytes."),
                               factor_hint(0.9, "n / (t0 + n/B) = 0.9 B: solve for n; it is not 0.9·n½."),
                               factor_hint(1e-3, "Bytes, not kilobytes.")],
                        hint="Solve n / (t0 + n/B) = 0.9·B for n; the answer is a multiple of n½ = t0·B.",
                        why="n = 9·t0·B = 9·n½: each further step towards B costs ever more bytes.")


def ex_3_2_batching(answer, fit: LinearFit) -> bool | None:
    """3.2: 1024 copies of 4 KiB vs one of 4 MiB, under the fitted model."""
    ratio = 1024 * fit.predict_s(4096) / fit.predict_s(4 << 20)
    return checks.close("3.2 1024 small copies vs one", answer, float(ratio), rel_tol=0.05,
                        hints=[checks.Hint(lambda a, e: abs(a - 1024) < 5, "1024 would mean every copy costs only "
                                           "its t0: the bytes are the same in both cases and cost the same time.")],
                        hint="Each 4 KiB copy pays t0 once: 1024·(t0 + 4096/B) against t0 + 4 MiB/B.",
                        why="the bytes cost the same either way; the 1023 extra t0s are the difference.")


def ex_3_3_rate(answer, gated: Evidence) -> bool | None:
    """3.3: small copies per second one stream sustains: paced by the slower of enqueue and device time."""
    r = next(r for r in gated.require()["runs"] if r["direction"] == "h2d" and r["nbytes"] == 4)
    slow, fast = max(r["enqueue_median_s"], r["device_median_s"]), min(r["enqueue_median_s"], r["device_median_s"])
    return checks.close("3.3 small copies per second", answer, 1 / slow, rel_tol=0.02,
                        hints=[checks.Hint(lambda a, e: abs(a - 1 / fast) < 0.02 / fast,
                                           "That is the rate of the faster side; a pipeline runs at its slowest stage."),
                               checks.Hint(lambda a, e: abs(a - 1 / (slow + fast)) < 0.02 / (slow + fast),
                                           "That adds both costs, as a synchronous copy would; asynchronous copies "
                                           "overlap the host's enqueue with the engine's work.")],
                        hint="1 / max(enqueue, device time per copy), both from the 4-byte h2d row.",
                        why="enqueueing copy k+1 overlaps the engine's work on copy k, so the slower side sets the pace.")


def ex_3_4_read_requests(answer, limits: Evidence) -> bool | None:
    """3.4: read requests a copy engine sends for a 1 MiB host→device copy, from the recorded MRRS."""
    g = (limits.data or {}).get("gpu") or {}
    if not g.get("mrrs"):
        print("… 3.4: the reference machine's MPS/MRRS recording is pending (or the values were not readable "
              "there); on a GPU machine where you are root, the cell above reads them live.")
        return None
    return checks.close("3.4 read requests for 1 MiB", answer, (1 << 20) / g["mrrs"], rel_tol=0.001,
                        hints=[factor_hint(g["mrrs"] / g["mps"], "That divides by MPS: MPS limits each completion's "
                                                                   "data, but the requests are sized by MRRS.")],
                        hint="Each read request asks for at most MRRS bytes.",
                        why="a host-to-device copy is many read requests; their completions come back in pieces of at "
                            "most MPS bytes, and enough requests must be in flight to cover the round trip.")


QUESTION_3_5 = {
    "a": "device→host copies use more PCIe lanes than host→device copies",
    "b": "device→host data leaves as posted writes that need no answer; host→device data must be fetched by read "
         "requests whose completions come back a round trip later, and only a limited number can be outstanding",
    "c": "the GPU has more copy engines for device→host than for host→device",
    "d": "host memory is faster to write than to read",
}
EXPLAIN_3_5 = {
    "a": "No: every lane carries both directions, one transmit pair and one receive pair; both directions use "
         "all 16 lanes.",
    "b": "Yes. A write stream is limited by the link and the packet headers; a read stream is also limited by "
         "how many requests (tags, completion credits) the reader can keep in flight to cover the round trip, "
         "and every completion carries its own header.",
    "c": "No: asyncEngineCount counts copy engines the CUDA runtime can use concurrently; it says nothing about "
         "directions, and the driver maps logical engines onto physical ones as it sees fit.",
    "d": "Not the reason: the host's DRAM serves both at tens of GB/s per channel, well above one x16 link.",
}


def ex_3_5_why_h2d_trails(answer) -> bool | None:
    """3.5: why host→device is the harder direction (it trails device→host when too few reads are in flight)."""
    return checks.choice("3.5 why h2d is the harder direction", answer, QUESTION_3_5, "b", EXPLAIN_3_5)


def ex_3_8_tlp_ceiling(answer, limits: Evidence) -> bool | None:
    """3.8: the payload GB/s a Gen5 x16 link can carry in posted writes of the recorded MPS (DLLPs not counted)."""
    mps = packets.recorded_mps(limits.data)
    if not mps:
        print("… 3.8: the reference machine's MPS recording is pending (or MPS was not readable there); "
              "on a GPU machine where you are root, section 4 reads it live.")
        return None
    expected = packets.ceiling_gbps(mps)
    hints = [factor_hint(130 / 128, "That skips the line encoding: at 32 GT/s, 2 bits of every 130 are block "
                                    "headers (128b/130b).", rel_tol=0.004),
             factor_hint((mps + packets.WRITE_OVERHEAD_B) / mps, "That is the link after encoding, with no packet "
                                                                 "overhead: each TLP also carries 24 bytes of framing, "
                                                                 "header and LCRC.", rel_tol=0.004),
             factor_hint(8, "Gigabits, not gigabytes: divide by 8.", rel_tol=0.01)]
    mrrs = ((limits.data or {}).get("gpu") or {}).get("mrrs")
    if mrrs and mrrs != mps:
        hints.append(factor_hint(packets.ceiling_gbps(mrrs) / expected, "That uses MRRS as the payload: a posted "
                                 "write carries at most MPS bytes; MRRS only limits read requests.", rel_tol=0.002))
    return checks.close("3.8 the link's TLP ceiling", answer, expected, rel_tol=0.01, hints=hints,
                        hint=f"32 GT/s x 16 lanes x 128/130 / 8 bits, times MPS / (MPS + 24): MPS = {mps} B here.",
                        why="every posted write spends 24 bytes of link on framing, header and LCRC, so the share of "
                            "the link that is data grows with MPS; DLLPs and SKP ordered sets take a few percent more.")


def _starter_check(dst: np.ndarray, src: np.ndarray, threads: int) -> None:
    """Raise NotAnswered when a kernel wrote nothing into `dst` (all zeros still), or exactly what
    the starter's one element per thread copies (the first `threads` elements, and no others)."""
    n = dst.size
    if not dst.any():
        raise checks.NotAnswered("your kernel wrote nothing yet")
    if n > threads and np.array_equal(np.flatnonzero(dst == src), np.arange(threads)) and not dst[threads:].any():
        raise checks.NotAnswered(f"the kernel still copies one element per thread, as the starter does "
                                 f"({threads} of {n} elements: one per thread of the grid)")


def copy_trial(fn, synchronize=None) -> list[str]:
    """Run the learner's Numba kernel `copy(dst, src)` on arrays larger than its grid, the way the
    check launches it (2 blocks of 32 threads): a kernel without a grid-stride loop misses elements.
    `synchronize` waits for the launch (numba.cuda.synchronize unless given). The expected
    output is the input `src` itself (a copy), so the trial computes nothing a frame could leak."""
    if synchronize is None:
        from helpers.core.gpu import cuda

        synchronize = cuda.synchronize
    problems = []
    for n in (64, 1000, 4099):
        src = np.arange(n, dtype=np.uint64) * 3 + 1
        dst = np.zeros(n, dtype=np.uint64)
        fn[2, 32](dst, src)
        synchronize()
        bad = np.flatnonzero(dst != src)
        _starter_check(dst, src, 2 * 32)
        if bad.size:
            problems.append(f"with {n} elements and 2 blocks of 32 threads, {bad.size} elements were not copied "
                            f"(first at index {bad[0]}). Each thread must go on in steps of cuda.gridsize(1) "
                            "until it passes dst.size.")
            break
    return problems


def ex_3_6_copy_kernel(fn) -> bool | None:
    """3.6 (coding): a grid-stride copy kernel, checked on sizes larger than its grid."""
    return checks.code("3.6 your copy kernel", fn, copy_trial,
                       why="a grid-stride loop lets one launch of any size cover any array, the shape of "
                           "time_kernel_copy's kernel.")


def ex_3_7_staging_cost(answer) -> bool | None:
    """3.7 (concept, written): why a real-time pipeline cares about a pageable copy's CPU time."""
    return checks.explain(
        "3.7 the cost of staging", answer,
        model="A pageable copy keeps a CPU core busy copying into staging buffers for the whole transfer, so at "
              "4 MB every 8 ms a share of a core goes to copying instead of to receiving the next frame or "
              "preparing work; and since that CPU copy runs inside the library, its time varies with caches and page "
              "layout, which threatens a deadline more than an average bandwidth shows. A pinned buffer leaves the "
              "bytes to the copy engine and frees the core.",
        points=[("the CPU is busy copying for the whole transfer", ("cpu", "core", "busy", "memcpy", "staging")),
                ("that time is taken from other work in a deadline loop", ("deadline", "8 ms", "frame", "other work")),
                ("pinned memory hands the bytes to the engine", ("pinned", "engine", "dma"))])
