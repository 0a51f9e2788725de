"""Chapter 8's exercises: expected values come from the chapter's Evidence here, never from the page.

    from helpers.ch08_peer_to_peer import exercises
    exercises.speedup(answer, mats)           # derivation: peer vs staged, from the recorded matrices
    exercises.capture_bytes(bounce, peer)      # reasoning: bytes through the root complex, toy capture card
    exercises.nvlink_judges_pcie(answer)       # conceptual: what NVLink data can say about a PCIe claim
    exercises.copy_kernel(my_copy)             # coding: a grid-stride copy kernel (Numba; the simulator without a GPU)
"""

from __future__ import annotations

import numpy as np

from helpers.ch08_peer_to_peer import views
from helpers.core.evidence import Evidence
from helpers.learning import checks
from helpers.learning.checks import Hint, factor_hint


def speedup(answer, mats: Evidence) -> bool | None:
    """8.1 — how many times faster is the direct peer copy than staging (large copies, mean over pairs)?"""
    expected = views.peer_vs_staged(mats.require())
    return checks.close(
        "8.1 peer vs staged speed-up", answer, expected, rel_tol=0.15,
        hints=[Hint(lambda a, e: a < 1, "the direct copy is the faster one: divide the staged time by the peer time "
                                        "(or the peer GB/s by the staged GB/s), so the answer is above 1"),
               factor_hint(2.0, "that is twice the ratio: did you add both directions' bandwidth for the peer copy?"),
               factor_hint(0.5, "that is half the ratio: the staged bandwidth in the table is already end to end")],
        hint="for each pair, staged time / peer time (or peer GB/s / staged GB/s), then the mean",
        why="staging moves every byte twice over the host's links and the direct path is a separate, faster link")


def capture_bytes(bounce, peer, frame_bytes: int = 1920 * 1080 * 4) -> bool | None:
    """8.2 — payload bytes through the root complex for one frame below a shared PCIe switch."""
    if bounce is None and peer is None:  # one exercise, one "not answered yet"
        return checks.verdict("8.2 bytes through the root complex", None)
    r = {x["route"]: x for x in views.capture_rows(frame_bytes, placements=("same_switch",))}
    a = checks.equal("8.2 bounce: bytes through the root complex", bounce, r["bounce"]["root_complex_bytes"],
                     hint="the card writes the frame to DRAM, then the GPU reads it back: how many times does "
                          "each byte pass the root complex?",
                     why="once up into DRAM, once down to the GPU: two crossings of the whole frame")
    b = checks.equal("8.2 peer below a switch: bytes through the root complex", peer, r["peer"]["root_complex_bytes"],
                     hint="where does a write from one switch port to another turn around?",
                     why="the switch routes the write from one downstream port to the other; the root complex "
                         "never sees it (unless ACS redirect sends it up)")
    return None if a is None or b is None else bool(a and b)


NVLINK_OPTIONS = {
    "a": "Yes: the measured ratio is far above 2x, so the claim is confirmed and then some.",
    "b": "No: the pair is joined by NVLink, which carries no PCIe, so the ratio says nothing about PCIe peer copies.",
    "c": "Yes, after dividing by the ratio of NVLink to PCIe bandwidth.",
    "d": "No: peer copies are never faster than staging over PCIe.",
}
NVLINK_WHY = {
    "a": "The two numbers measure different links. The claim was about PCIe, where a direct copy saves one of two "
         "crossings; NVLink adds a separate, much faster link, so its ratio is no test of a PCIe claim.",
    "b": "Right. A verdict can only claim what its data covers: this recording is of NVLink (NV18, most likely "
         "through NVSwitch). On PCIe a direct copy crosses the bus once and a staged copy twice, so about 2x is "
         "what to expect when the host legs run at link speed — to be measured on a PCIe pair.",
    "c": "Scaling by a bandwidth ratio assumes the two paths differ only in speed. They differ in route (no host "
         "legs, no DRAM passes, different protocol), so no factor turns one into the other.",
    "d": "Below a shared PCIe switch a direct copy crosses the bus once instead of twice and skips DRAM, so it can "
         "be faster; whether the platform allows it (ACS, IOMMU, consumer-GPU restrictions) is another matter.",
}


def nvlink_judges_pcie(answer) -> bool | None:
    """8.3 — does the NVLink recording confirm the source's PCIe claim?"""
    return checks.choice("8.3 NVLink data and a PCIe claim", answer, NVLINK_OPTIONS, "b", NVLINK_WHY)


def _copy_trial(fn) -> list[str]:
    """Run the learner's kernel with a grid far smaller than the data (a grid-stride loop is needed)
    and with a size that is not a multiple of anything (bounds are needed). The expected output is
    the input `src` itself (a copy), so the trial computes nothing a frame could leak."""
    from helpers.core.gpu import cuda

    problems = []
    rng = np.random.default_rng(8)
    for n, blocks, threads in ((1000, 2, 32), (77, 1, 32), (300, 4, 16)):
        src = rng.integers(0, 2**31, n, dtype=np.int64)
        dst = np.full(n + 8, -1, dtype=np.int64)  # 8 guard elements past the end
        d_src, d_dst = cuda.to_device(src), cuda.to_device(dst)
        fn[blocks, threads](d_src, d_dst[:n])
        got = d_dst.copy_to_host()
        copied = np.flatnonzero(got[:n] == src)
        if np.all(got == -1):
            raise checks.NotAnswered("your kernel wrote nothing yet")
        if n > blocks * threads and np.array_equal(copied, np.arange(blocks * threads)) \
                and np.all(got[blocks * threads:] == -1):
            raise checks.NotAnswered(f"the kernel still copies one element per thread, as the starter does "
                                     f"({blocks * threads} of {n} elements on {blocks}x{threads} threads)")
        if not np.array_equal(got[:n], src):
            bad = int(np.flatnonzero(got[:n] != src)[0])
            problems.append(f"with n={n} on {blocks}x{threads} threads, element {bad} was not copied "
                            "(does every thread loop over i, i + stride, … until n?)")
            break
        if np.any(got[n:] != -1):
            problems.append(f"with n={n}, something was written past the end (check i < n)")
            break
    return problems


def copy_kernel(fn) -> bool | None:
    """8.4 — a Numba grid-stride copy kernel `copy(src, dst)`, checked on inputs of the check's choosing."""
    return checks.code("8.4 grid-stride copy kernel", fn, _copy_trial,
                       why="with peer access on, this kernel could store into a peer GPU's memory: the same "
                           "loads and stores, travelling over NVLink or PCIe")


def peer_hop(answer, lat: Evidence, mats: Evidence) -> bool | None:
    """8.5 — how many bytes could one direction of the peer link have carried in the time the hop
    adds to one read (mean over the pairs of peer minus local ns, times the one-way peer GB/s)?"""
    from helpers.ch08_peer_to_peer import peer_latency

    rows = peer_latency.pair_rows(lat.require())
    added_s = float(np.mean([r["added_ns"] for r in rows])) * 1e-9
    gbps = float(np.mean([x for row in views.gbps_matrix(mats.require(), "peer") for x in row if x is not None]))
    expected = added_s * gbps * 1e9
    return checks.close(
        "8.5 bytes the link could carry in one read's extra wait", answer, expected, rel_tol=0.1,
        hints=[factor_hint(1e3, "a factor of 1000 off: ns are 1e-9 s and GB/s are 1e9 bytes/s"),
               factor_hint(1e-3, "a factor of 1000 off: ns are 1e-9 s and GB/s are 1e9 bytes/s")],
        hint="(peer ns - local ns, mean over the pairs) x 1e-9 s x (one-way peer GB/s, mean over the pairs) x 1e9",
        why="a dependent read waits for the whole round trip while the link could have moved that many bytes: "
            "latency, not bandwidth, limits a chase, which is why peer code reads in large, independent batches")
