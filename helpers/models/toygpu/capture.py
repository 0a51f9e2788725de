"""A capture card next to the toy GPU: frames DMAed straight into BAR1, or bounced via RAM.

Seed 002's question: a PCIe card captures a 4 MB block every 8 ms; can it write into GPU
memory directly instead of into system memory first? `CaptureCard` moves real bytes into the
toy GPU's VRAM both ways and reports, from the link model (`link.card_dma_ns`,
`LinkModel.dma`), what each way costs:

- bounce: card DMA -> a buffer in system memory, then the GPU's DMA engine copies it to VRAM.
  Every byte crosses the root complex twice and is written to and read from DRAM.
- peer: the card writes into the GPU's BAR1 aperture. A VRAM page has a bus address only
  while BAR1's page table maps it, so the destination is first mapped into BAR1 (as
  nvidia_p2p_get_pages does for a third-party driver, handing it the page table of bus
  addresses); the card then writes the aperture directly and the mapping is taken down.
  Below a common switch nothing crosses the root complex and DRAM is untouched.

Times are modelled, never measured; the bytes really land in the toy's VRAM, so a test can
download them and compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.core.errors import InputError, InputTypeError
from helpers.models.toygpu import regs as R
from helpers.models.toygpu.bus import dma_chunks
from helpers.models.toygpu.link import FabricParams, card_dma_ns


@dataclass(frozen=True, kw_only=True)
class FrameReport:
    """What one frame's delivery cost, in the model."""

    route: str            # "bounce" or "peer"
    placement: str
    nbytes: int
    root_complex_bytes: int   # payload bytes passing through the root complex
    dram_bytes: int           # bytes written to plus read from system memory
    model_ns: float           # modelled time from capture to data in VRAM
    page_runs: int            # physically contiguous VRAM runs the card wrote (peer) / DMA descriptors


class CaptureCard:
    """A modelled PCIe capture card that delivers frames into a ToyGPU's VRAM."""

    def __init__(self, gpu, fabric: FabricParams | None = None):
        if fabric is not None and not isinstance(fabric, FabricParams):
            raise InputTypeError(f"fabric must be FabricParams, got {type(fabric).__name__}")
        self.gpu = gpu
        self.fabric = fabric or FabricParams()

    def _frame(self, frame) -> np.ndarray:
        buf = np.ascontiguousarray(frame).view(np.uint8).reshape(-1)
        if buf.size == 0 or buf.size % 8:
            raise InputError(f"a frame must be a non-empty multiple of 8 bytes, got {buf.size} bytes")
        return buf

    def bar1_runs(self, dva: int, nbytes: int) -> list[tuple[int, int]]:
        """(VRAM offset, length) runs behind [dva, dva+nbytes): the physically contiguous pieces."""
        runs: list[tuple[int, int]] = []
        pos = 0
        while pos < nbytes:
            phys = self.gpu.translate(dva + pos)
            if phys is None:
                raise InputError(f"DVA {dva + pos:#x} is not mapped: allocate the destination with alloc_vram first")
            take = min(R.PAGE_SIZE - (dva + pos) % R.PAGE_SIZE, nbytes - pos)
            if runs and runs[-1][0] + runs[-1][1] == phys:
                runs[-1] = (runs[-1][0], runs[-1][1] + take)
            else:
                runs.append((phys, take))
            pos += take
        return runs

    def deliver(self, frame, dva: int, route: str) -> FrameReport:
        """Move one frame into VRAM at `dva` by `route` ('bounce' or 'peer')."""
        buf = self._frame(frame)
        n = int(buf.size)
        if route == "peer":
            ns = card_dma_ns(self.gpu.link, self.fabric, n, peer=True)
            runs = self.bar1_runs(dva, n)
            at = self.gpu.bar1_map_dva(dva, n)  # the destination gets bus addresses in BAR1
            try:
                self.gpu.peer_write(at, buf)  # the card's writes, translated by BAR1's table
            finally:
                self.gpu.bar1_unmap(at - at % R.PAGE_SIZE, at % R.PAGE_SIZE + n)
            rc = n if self.fabric.peer_crosses_root_complex else 0
            return FrameReport(route="peer", placement=self.fabric.placement, nbytes=n, root_complex_bytes=rc,
                               dram_bytes=0, model_ns=ns, page_runs=len(runs))
        if route == "bounce":
            stage = self.gpu.alloc_sys(n, align=64)
            try:
                ns = card_dma_ns(self.gpu.link, self.fabric, n, peer=False)
                stage.view[:] = buf           # the card's DMA into system memory
                descs = dma_chunks(stage.addr, dva, n)
                self.gpu.dma(descs)           # the toy GPU's own DMA engine does the second hop
                ns += self.gpu.link.dma(n)    # the GPU's DMA engine: system memory -> VRAM
            finally:
                self.gpu.free_sys(stage)
            return FrameReport(route="bounce", placement=self.fabric.placement, nbytes=n,
                               root_complex_bytes=2 * n, dram_bytes=2 * n, model_ns=ns, page_runs=len(descs))
        raise InputError(f"route must be 'bounce' or 'peer', got {route!r}")
