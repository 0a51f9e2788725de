"""Chapter 4's exercises: each computes what it expects from the chapter's Evidence, never on the page.

4.1 break_even     — derivation (checks.close with hints): copies after which registering pays.
4.2 wc_reading     — conceptual (checks.choice): what Section 5's write-combining numbers support.
4.3 wc_why         — conceptual (checks.explain): how a KVM guest's write-combined mapping can act
                     as write-back.
4.4 gather_kernel  — coding (checks.code): a zero-copy Numba gather kernel, run on inputs the
                     check chooses (on the GPU, or on Numba's CUDA simulator without one).
4.5 zero_copy_why  — conceptual (checks.choice): why zero-copy wins where it wins most.
4.6 radar_fix      — conceptual (checks.choice): the standard fix for source question 002's card.
4.7 device_sees    — conceptual (checks.choice): why data a device wrote is not yet in the pinned page
                     (swiotlb bouncing: pinned is not the page the device sees).
"""

from __future__ import annotations

import numpy as np

from helpers.ch04_pinned_memory import pinning, write_combined, zero_copy
from helpers.core.evidence import Evidence
from helpers.learning import checks
from helpers.learning.checks import Hint, factor_hint


def break_even_copies(cost: dict, reg: dict) -> float:
    """Copies of the Section 3 buffer after which cudaHostRegister + Unregister pays for itself."""
    n = reg["nbytes"]
    row = pinning.row_at(cost, n)
    registered = next(c for c in reg["cases"] if c["kind"] == "anonymous-private" and c["outcome"] == "ok")
    saved = reg["pageable_h2d_s"] - registered["h2d_s"]
    return (row["register"] + row["unregister"]) / saved


def break_even(answer, cost: Evidence, reg: Evidence) -> bool | None:
    """Exercise 4.1."""
    c, r = cost.require(), reg.require()
    want = break_even_copies(c, r)
    row = pinning.row_at(c, r["nbytes"])
    only_register = want * row["register"] / (row["register"] + row["unregister"])
    hints = [Hint(lambda a, e: abs(a - only_register) <= 0.05 * only_register,
                  "Unpinning is part of the price: add the cudaHostUnregister time to the register time."),
             factor_hint(1000, "A unit slip: the table is in milliseconds, the copy times in seconds — use one unit."),
             factor_hint(1 / 1000, "A unit slip: the table is in milliseconds, the copy times in seconds — use one "
                                   "unit."),
             Hint(lambda a, e: a < 0, "The saving per copy is the pageable time minus the registered time (positive).")]
    return checks.close("4.1 break-even copies", answer, want, rel_tol=0.05, hints=hints,
                        hint="(register + unregister time) / (pageable copy time − registered copy time).",
                        why="one pin costs as much as the time it saves on this many copies; below it, copy "
                            "from pageable memory, above it, pin once and reuse.")


WC_OPTIONS = {
    "a": "write-combining took effect: the CPU reads the buffer far more slowly than ordinary pinned memory",
    "b": "the buffer read about as fast as ordinary pinned memory: here the write-combining request had no "
         "visible effect on CPU reads, and these numbers alone do not say why",
    "c": "the NVIDIA driver does not implement write-combining",
    "d": "write-combining made the GPU's copies clearly faster",
}


def wc_correct(data: dict) -> str:
    """The option the recorded numbers support."""
    return "a" if write_combined.ratios(data)["cpu_read_gbps"] < 0.5 else "b"


def wc_reading(answer, wc: Evidence) -> bool | None:
    """Exercise 4.2: what do Section 5's numbers support?"""
    data = wc.require()
    r = write_combined.ratios(data)
    read, h2d = r["cpu_read_gbps"], r["h2d_gbps"]
    correct = wc_correct(data)
    expl = {
        "a": f"the measured ratio of CPU read speeds is {read:.2f}; " + (
            "below 0.5, so yes: reads were slow." if correct == "a" else
            "an uncached read would be many times slower, so the data do not show that."),
        "b": f"the ratio is {read:.2f}: " + (
            "reads were clearly slower here, so the request did take effect." if correct == "a" else
            "the buffer behaved like write-back memory. Why is a separate question (Section 5 explains a "
            "likely cause on a virtual machine), which a speed ratio cannot answer."),
        "c": "the module does encode write-combining (nv_encode_caching) when it maps these pages; a speed "
             "ratio from one machine cannot tell a missing feature from something below the guest overriding it.",
        "d": f"the host→device ratio is {h2d:.2f}: within a few percent of 1, no clear gain.",
    }
    return checks.choice("4.2 what the write-combining data support", answer, WC_OPTIONS, correct, expl)


WC_MODEL = ("The guest's page tables ask for write-combining, but on an Intel host with EPT the memory "
            "type the CPU finally uses combines the guest's PAT type with the type KVM writes into the EPT "
            "entry for guest RAM. Unless the VM has a device doing non-coherent DMA, KVM (vmx_get_mt_mask) "
            "sets write-back with the 'ignore PAT' bit, so the guest's choice is dropped and the buffer is "
            "cached like ordinary RAM: reads are fast. A passed-through GPU behind an IOMMU that enforces "
            "snooping counts as coherent, so this case applies. The guest cannot see its EPT entries, so "
            "this is the likely cause, not one the recording proves.")
WC_POINTS = (("the guest asks for WC in its own page tables (PAT)", ("pat", "page attribute", "guest page table")),
             ("the host's second-level tables (EPT) also carry a memory type", ("ept", "extended page", "second")),
             ("KVM forces write-back and ignores the guest's PAT for RAM", ("ignore", "ipat", "write-back", "wb")),
             ("the guest cannot check this from inside", ("cannot see", "can't see", "not visible", "inside")))


def wc_why(answer) -> bool | None:
    """Exercise 4.3: explain how the request could have no effect on a KVM guest."""
    return checks.explain("4.3 why write-combining may not bite in a VM", answer, WC_MODEL, WC_POINTS)


def gather_trial(kernel, *, n: int = 4096, m: int = 300) -> list[str]:
    """Run the learner's `gather_sum[blocks, threads](x, idx, out)` with x in mapped pinned memory
    (Numba's simulator without a GPU): it must add x[idx[i]] for every i into out[0]. The expected
    sum is computed after each launch (checks.learner_first): the inputs are all a frame holds."""
    from numba import cuda

    if not hasattr(kernel, "__getitem__"):
        return ["decorate your function with @cuda.jit, so it can be launched as gather_sum[blocks, threads](...)"]
    rng = np.random.default_rng(7)
    values = (np.arange(n) % 7).astype(np.float32)
    idx = rng.integers(0, n, m, dtype=np.int64)
    x = cuda.mapped_array(n, dtype=np.float32)
    x[:] = values
    d_idx = cuda.to_device(idx)

    def launch(grid: tuple[int, int]) -> float:
        out = cuda.to_device(np.zeros(1, dtype=np.float64))
        kernel[grid](x, d_idx, out)
        cuda.synchronize()
        return float(out.copy_to_host()[0])

    def judge(grid: tuple[int, int], got: float) -> list[str]:
        blocks, threads = grid
        if got == 0.0:
            raise checks.NotAnswered("your kernel added nothing to out[0] yet")
        want = float(values[idx].astype(np.float64).sum())
        if got != want and got == float(values[idx[:blocks * threads]].astype(np.float64).sum()):
            raise checks.NotAnswered(f"the kernel still adds one element per thread, as the starter does (the "
                                     f"first {blocks * threads} of {m} indices with {blocks}x{threads} threads)")
        if got == want:
            return []
        whole = float(values.astype(np.float64).sum())
        hint = (" It looks like you summed the whole array, not the gathered elements x[idx[i]]." if got == whole
                else " Use a grid-stride loop over idx (start = cuda.grid(1), stride = cuda.gridsize(1)) so "
                     "each i is added exactly once, whatever the grid.")
        return [f"with {blocks} block(s) of {threads} threads the sum was {got:g}, expected {want:g}.{hint}"]

    grids = ((1, 32), (3, 64)) if getattr(cuda, "simulator_enabled", False) else ((1, 32), (64, 256))
    return checks.learner_first(grids, launch, judge)


def gather_kernel(kernel) -> bool | None:
    """Exercise 4.4: a zero-copy gather kernel, checked on inputs the check chooses."""
    return checks.code("4.4 zero-copy gather kernel", kernel, gather_trial,
                       why="each thread walks idx with a grid stride and reads x[idx[i]] where it lies, in host "
                           "memory: only the gathered elements cross the link, which is why sparse gathers "
                           "favour zero-copy.")


ZC_OPTIONS = {
    "a": "the kernel reads only the bytes it needs, in place; copy-then-compute must move the whole buffer first",
    "b": "PCIe reads are faster than reads of GPU memory",
    "c": "mapped memory is cached in the GPU's L2 for the whole run, so each element crosses the link once "
         "however often it is read",
    "d": "zero-copy uses the copy engines in parallel with the kernel",
}
REASON_OF = {"gather_sparse": "a", "gather_dense": "a", "stream": "a", "stream_x8": "c"}


def zero_copy_why(answer, zc: Evidence, l2: Evidence | None = None) -> bool | None:
    """Exercise 4.5: why zero-copy wins most for the pattern where the data say it does. Option c's
    feedback states what zero_copy.l2_reread measured about the L2 (or that it is not yet recorded)."""
    from helpers.ch04_pinned_memory import l2_reread

    data = zc.require()
    best = max(zero_copy.speedups(data), key=lambda r: r["speedup"])
    correct = REASON_OF[best["pattern"]]
    expl = {
        "a": f"the largest speed-up in the data ({best['speedup']:.1f}x) is for {best['pattern']}: reading in "
             "place moves only what the kernel touches, while copying first moves every byte.",
        "b": "no: a PCIe Gen5 x16 link moves at most about 64 GB/s each way; an H100's HBM over 2 TB/s.",
        "c": _l2_feedback(l2_reread, l2),
        "d": "a zero-copy kernel's loads are the SMs' own PCIe reads; no copy engine is involved.",
    }
    if correct == "c":  # the re-reading pattern won most: only an L2 that served its re-reads explains that
        expl["c"] = (f"yes: the largest speed-up ({best['speedup']:.1f}x) re-reads its data, so its re-reads were "
                     "served on the GPU, not by the link. " + expl["c"])
    return checks.choice("4.5 why zero-copy wins where it wins", answer, ZC_OPTIONS, correct, expl)


def _l2_feedback(l2_reread, l2: Evidence | None) -> str:
    """Option c's feedback, from the L2 measurement: mapped lines are cached in L2, but not 'for the whole
    run, however often': only what fits, and (where measured) only within one kernel."""
    if l2 is None or l2.data is None:
        return ("the L2 can hold lines of mapped memory, but only as much as fits in it (50 MB on an H100) and "
                "only until they are evicted; whether re-reads were served from it is not yet recorded "
                "(zero_copy.l2_reread). Either way it does not explain a win that reads each byte once or not at all.")
    text = "; ".join(l2_reread.lines(l2)[1:])
    return ("the L2 does hold mapped lines, but not for the whole run and not however often: " + text
            + ". The largest win reads each byte at most once, so the L2 is not why it wins.")


RADAR_OPTIONS = {
    "a": "call cudaHostRegister on the card's mapping with cudaHostRegisterIoMemory",
    "b": "allocate the buffer with cudaHostAlloc in the application and have the card's driver pin those pages "
         "(pin_user_pages) and DMA into them, or share one buffer between the drivers as a dma-buf",
    "c": "mlock the card's mapping first, so the pages count as locked",
    "d": "raise RLIMIT_MEMLOCK so the driver is allowed to pin the mapping",
}
RADAR_EXPL = {
    "a": "IoMemory takes the module's I/O path (os_lookup_user_io_memory), which accepts a VM_IO/VM_PFNMAP "
         "mapping only if its page frames are physically contiguous (get_io_ptes); a buffer made of scattered "
         "kernel pages fails, and such memory is meant for device registers, not RAM.",
    "b": "the pages then belong to an ordinary user mapping that both drivers can pin: CUDA already pinned it, "
         "and the card's driver takes its own long-term pin to get DMA addresses. dma-buf is the kernel's "
         "standard way for two drivers to share one buffer.",
    "c": "mlock does not change the mapping's VM_IO/VM_PFNMAP flags, and those flags are why pin_user_pages "
         "refuses it (check_vma_flags in mm/gup.c), even when struct pages stand behind it.",
    "d": "the NVIDIA module does not charge its pins to RLIMIT_MEMLOCK (Section 4), and the refusal comes "
         "from the mapping's flags, not from a limit.",
}


def radar_fix(answer) -> bool | None:
    """Exercise 4.6: the standard fix for source question 002's capture card."""
    return checks.choice("4.6 source question 002's card", answer, RADAR_OPTIONS, "b", RADAR_EXPL)


DEVICE_SEES_OPTIONS = {
    "a": "the CPU's cache still holds old lines of the page; the DMA wrote to memory behind it",
    "b": "the device wrote into a swiotlb bounce buffer, not into the pinned page; the kernel copies the data "
         "across only at dma_sync_*_for_cpu or dma_unmap_*",
    "c": "the IOMMU delays the device's writes until the mapping is torn down",
    "d": "the pin failed silently, so the device wrote to whatever page now sits at that physical address",
}
DEVICE_SEES_EXPL = {
    "a": "Not on x86: the root complex snoops the CPU caches, so a device write invalidates any cached copy (only "
         "requests with PCIe's No Snoop attribute skip that). On architectures whose DMA does not snoop (many Arm "
         "systems) dma_sync does invalidate caches, which is why the question says x86.",
    "b": "Yes. dma-direct bounces a mapping through swiotlb when the device's DMA mask cannot reach the page, or "
         "always in a confidential VM (SEV, TDX) whose private memory no device may touch. The device gets the "
         "bounce buffer's address; the kernel copies between it and your pinned page when the driver syncs or "
         "unmaps. Pinned memory is not necessarily the memory the device sees.",
    "c": "An IOMMU translates each request as it arrives; it does not hold writes back. With translation the "
         "device still writes straight into your page, at an IOVA the IOMMU maps to it.",
    "d": "A long-term pin either succeeds or the call fails; once pinned, the page cannot move until it is "
         "unpinned (the only move is the migration out of ZONE_MOVABLE or CMA that happens at pin time, before "
         "any DMA address is handed out).",
}


def device_sees(answer) -> bool | None:
    """Exercise 4.7: a device's write is visible in the pinned page only after dma_sync: why (swiotlb)."""
    return checks.choice("4.7 which page the device wrote", answer, DEVICE_SEES_OPTIONS, "b", DEVICE_SEES_EXPL)
