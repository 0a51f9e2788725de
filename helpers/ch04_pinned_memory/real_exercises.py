"""The exercises of Chapter 4, part 2 (DMA through an IOMMU, edu under QEMU): expected values come
from the recorded or live transcript (real_vfio_dma), never from the page."""

from __future__ import annotations

import random

from helpers.ch04_pinned_memory import real_vfio_dma
from helpers.core.evidence import Evidence
from helpers.learning import checks

PAGE = 4096


def unmapped_answer(answer, ev: Evidence) -> bool | None:
    """Prediction (choice): what happens to a device write to an IOVA nobody mapped."""
    line = real_vfio_dma.facts(ev)["fault_line"]
    return checks.choice(
        "a DMA to an unmapped IOVA", answer,
        {"a": "the write lands at physical address 0x900000", "b": "the IOMMU blocks it and the kernel logs a fault",
         "c": "VFIO refuses to let the program start the DMA"}, "b",
        {"a": "only without an IOMMU (or in passthrough) are bus addresses physical addresses; here they are "
              "translated, and 0x900000 translates to nothing",
         "b": f"the kernel logged: {line}",
         "c": "VFIO never sees the DMA: the program programmed edu's registers through BAR0 and the device did "
              "the rest; only the IOMMU stands between the device and memory"})


def above_mask_answer(answer, ev: Evidence) -> bool | None:
    """Prediction: the IOVA a write to 0x10100000 reaches when edu's DMA mask has 28 bits."""
    f = real_vfio_dma.facts(ev)
    landed = 0x100000 if f["mask_landed_low"] else (f["mask_iova"] if f["mask_landed_high"] else None)
    return checks.equal("where a 29-bit IOVA lands", answer, landed,
                        "edu ANDs every DMA address with its mask (2**28 - 1) before using it",
                        why="the device cannot drive address bit 28, so the driver must keep IOVAs below the "
                            "device's DMA mask (dma_set_mask in a kernel driver)")


RECORDED_MAPS = ((0, 3 * PAGE), (0, 1 << 20))  # (offset, size) of the MAP_DMAs the transcript records


def _recorded_pages(ev: Evidence) -> dict[tuple[int, int], int]:
    """The pages the kernel charged (locked_vm) for each recorded map."""
    f = real_vfio_dma.facts(ev)
    rk = f["root_vmlck"]
    return dict(zip(RECORDED_MAPS, (f["vmlck_map_kib"] // 4, (rk["vmlck_mapped_kib"] - rk["vmlck_before_kib"]) // 4),
                    strict=True))


def pages_charged_trial(fn, ev: Evidence) -> list[str]:
    """Run pages_charged(offset, size) on the recorded maps and on drawn cases. The expected count
    is read from the recording (what the kernel charged) or computed only after the learner's answer
    (checks.learner_first). The recording is reachable from this frame: it is the learner's anyway
    (the notebook hands it to this check), and it holds KiB, not a page count."""
    rng = random.Random(3)
    cases = [*RECORDED_MAPS, *((rng.randrange(PAGE), rng.randrange(1, 1 << 16)) for _ in range(30))]

    def judge(case: tuple[int, int], got) -> list[str]:
        off, size = case
        want = _recorded_pages(ev).get(case, (off + size + PAGE - 1) // PAGE)
        return [] if got == want else [f"pages_charged({off}, {size}) gave {got}; the kernel would lock a "
                                       "different number of pages"]

    return checks.learner_first(cases, lambda case: fn(*case), judge)


def pages_charged_answer(fn, ev: Evidence) -> bool | None:
    """Coding: the pages a MAP_DMA of `size` bytes starting `offset` bytes into a page pins and charges."""
    return checks.code("pages charged by MAP_DMA", fn, lambda g: pages_charged_trial(g, ev),
                       why="vfio_pin_pages_remote pins whole pages: every page the range touches counts")


def memlock_room_answer(answer, ev: Evidence) -> bool | None:
    """Derivation: the largest further MAP_DMA (bytes) that fits after the 16 KiB one under the recorded limit."""
    f = real_vfio_dma.facts(ev)
    used = ev.require()["memlock"]["map_16384"]["vmlck_kib"] * 1024
    return checks.equal("room left under RLIMIT_MEMLOCK", answer, f["memlock_limit"] - used,
                        "the limit counts every page this process has locked, the 16 KiB already mapped included",
                        why="vfio_pin_pages_remote fails once locked_vm + new pages would pass the limit")
