"""The toy GPU's link model: what each kind of bus transaction costs, in modelled time.

Every cost the toy device reports comes from here, from the parameters in `LinkParams`,
never from a clock: the toy runs on a CPU, so its wall-clock speed says nothing about a
PCIe link. The numbers are illustrative values of the right order for a PCIe Gen4 x16
GPU (a round trip near a microsecond, tens of GB/s of payload bandwidth); chapters that
compare with hardware use recorded measurements instead.

The model distinguishes the CPU's three ways of touching a BAR:
- an uncached (UC) read is non-posted: the CPU stalls for a full round trip per load;
- an uncached write is posted: the CPU sends it and moves on, one small packet per store;
- write-combined (WC) stores gather in a 64-byte buffer and leave as one larger packet,
  so fewer packets carry the same bytes. Loads from a WC mapping are not cached either, but
  the CPU may issue them speculatively (which is why registers are never mapped WC); an
  ordinary load still fetches 8 bytes (16 from an SSE register) per round trip, while a
  streaming load (MOVNTDQA) may fetch a whole 64-byte line into a streaming-load buffer.
and the device's DMA engine: a fixed start-up latency per descriptor, then bandwidth.

Jitter is drawn from a numpy generator seeded by the caller, so the same seed and the same
sequence of transactions give the same modelled times, run after run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from helpers.core import validate
from helpers.core.errors import InputError, InputTypeError


@dataclass(frozen=True, kw_only=True)
class LinkParams:
    """Every parameter of the link model, in one place (ns, bytes, bytes per ns = GB/s)."""

    mmio_read_rtt_ns: float = 900.0  # CPU load -> completion back; the CPU waits for it
    uc_write_ns: float = 60.0        # CPU cost of issuing one posted uncached store
    wc_buffer_bytes: int = 64        # size of a write-combining buffer (one burst)
    wc_flush_ns: float = 10.0        # CPU cost of issuing one write-combined burst (several in flight)
    tlp_overhead_bytes: int = 24     # header + framing of each PCIe packet (TLP)
    link_gbps: float = 26.0          # payload bandwidth of the link, GB/s (= bytes/ns)
    dma_latency_ns: float = 1500.0   # DMA start-up per descriptor (fetch, first round trip)
    dma_gbps: float = 24.0           # DMA streaming bandwidth, GB/s
    cmd_fetch_ns: float = 700.0      # the front end fetching one 64-byte command entry
    vram_gbps: float = 1000.0        # FILL / SAXPY bandwidth inside the device, GB/s
    jitter: float = 0.03             # relative standard deviation of one transaction's cost

    def __post_init__(self):
        for k, v in asdict(self).items():
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise InputTypeError(f"LinkParams.{k} must be a finite number >= 0, got {v!r}")
            if not math.isfinite(v) or v < 0:
                raise InputError(f"LinkParams.{k} must be a finite number >= 0, got {v!r}")
        for k in ("link_gbps", "dma_gbps", "vram_gbps", "wc_buffer_bytes"):
            if getattr(self, k) <= 0:
                raise InputError(f"LinkParams.{k} must be > 0, got {getattr(self, k)!r}")

    def with_(self, **changes) -> LinkParams:
        """A copy with some parameters changed (unknown names raise TypeError)."""
        return replace(self, **changes)


class LinkModel:
    """Modelled cost of transactions, deterministic for a given seed and sequence."""

    def __init__(self, params: LinkParams | None = None, seed: int = 1):
        if params is not None and not isinstance(params, LinkParams):
            raise InputTypeError(f"params must be LinkParams, got {type(params).__name__}")
        self.params = params or LinkParams()
        self.seed = validate.whole_number(seed, "seed", 0)
        self._rng = np.random.default_rng(self.seed)

    def _jittered(self, mean_one: float, n: int) -> float:
        """n transactions of mean cost mean_one: the sum, with the spread of a sum of n."""
        if n <= 0:
            return 0.0
        sd = self.params.jitter / math.sqrt(n)
        factor = 1.0 + float(self._rng.normal(0.0, sd)) if sd > 0 else 1.0
        return n * mean_one * max(0.5, factor)

    def _packet_ns(self, payload: int) -> float:
        return (payload + self.params.tlp_overhead_bytes) / self.params.link_gbps

    def uc_reads(self, count: int, width: int = 8) -> float:
        """ns for `count` uncached loads of `width` bytes each: one full round trip per load."""
        _check_count(count, width)
        return self._jittered(self.params.mmio_read_rtt_ns + self._packet_ns(width), count)

    def uc_writes(self, count: int, width: int = 8) -> float:
        """ns for `count` posted uncached stores of `width` bytes: one small packet each."""
        _check_count(count, width)
        return self._jittered(self.params.uc_write_ns + self._packet_ns(width), count)

    def wc_writes(self, nbytes: int) -> float:
        """ns for `nbytes` of write-combined stores: one packet per filled 64-byte buffer."""
        _check_count(nbytes, 1)
        bursts = math.ceil(nbytes / self.params.wc_buffer_bytes)
        return self._jittered(self.params.wc_flush_ns + self._packet_ns(self.params.wc_buffer_bytes), bursts)

    def wc_bursts(self, nbytes: int) -> int:
        """How many write-combined bursts carry `nbytes`."""
        _check_count(nbytes, 1)
        return math.ceil(nbytes / self.params.wc_buffer_bytes)

    def dma(self, nbytes: int) -> float:
        """ns for one DMA descriptor moving `nbytes`: start-up latency, then bandwidth."""
        _check_count(nbytes, 1)
        return self._jittered(self.params.dma_latency_ns + nbytes / self.params.dma_gbps, 1)

    def command_fetch(self) -> float:
        """ns for the device front end to fetch one command entry."""
        return self._jittered(self.params.cmd_fetch_ns, 1)

    def vram_op(self, nbytes: int) -> float:
        """ns for a FILL or SAXPY touching `nbytes` of VRAM."""
        _check_count(nbytes, 1)
        return self._jittered(nbytes / self.params.vram_gbps, 1) if nbytes else 0.0

    def half_bandwidth_bytes(self) -> float:
        """DMA size at which start-up latency equals streaming time (half the peak bandwidth)."""
        return self.params.dma_latency_ns * self.params.dma_gbps


ACCESS_WIDTHS = (1, 2, 4, 8, 16, 32, 64)  # bytes one load or store can move


def _check_count(count: int, width: int) -> None:
    validate.whole_number(count, "transaction count", 0)
    validate.whole_number(width, "access width", 1)
    validate.choice(width, "access width (bytes)", ACCESS_WIDTHS)


# -- a second device on the fabric: peer-to-peer DMA (Chapter 8) --------------------------------
PLACEMENTS = ("same_switch", "root_ports", "acs_redirect")


@dataclass(frozen=True, kw_only=True)
class FabricParams:
    """Where a second PCIe device (a capture card) sits relative to the toy GPU, and what the
    paths between them cost (GB/s = bytes/ns, ns). Illustrative values, like LinkParams.

    - same_switch: card and GPU below one PCIe switch; a peer write turns around in the
      switch and never reaches the root complex (nvidia-smi would say PIX);
    - root_ports: each on its own root port; a peer write is forwarded inside the root
      complex, which many CPUs do slowly or not at all (PHB);
    - acs_redirect: below one switch, but ACS P2P Request Redirect sends every peer write
      up to the root complex (and its IOMMU) before it comes back down.
    """

    placement: str = "same_switch"
    card_gbps: float = 12.0        # the capture card's DMA engine (a Gen4 x8 card)
    card_latency_ns: float = 2000.0
    rc_p2p_gbps: float = 9.0       # root-complex forwarding of peer writes; 0 = not supported
    switch_gbps: float = 26.0      # a switch port turning a write around

    def __post_init__(self):
        if self.placement not in PLACEMENTS:
            raise InputError(f"placement must be one of {PLACEMENTS}, got {self.placement!r}")
        for k in ("card_gbps", "card_latency_ns", "rc_p2p_gbps", "switch_gbps"):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise InputError(f"FabricParams.{k} must be a finite number >= 0, got {v!r}")
        if self.card_gbps <= 0 or self.switch_gbps <= 0:
            raise InputError(f"FabricParams.card_gbps and .switch_gbps must be > 0, got {self.card_gbps!r} "
                             f"and {self.switch_gbps!r}")

    @property
    def peer_crosses_root_complex(self) -> bool:
        """Whether a peer write from the card to the GPU's BAR1 passes through the root complex."""
        return self.placement != "same_switch"

    def peer_gbps(self) -> float:
        """Bandwidth of a card -> GPU BAR1 peer write on this placement (0 = impossible)."""
        path = self.rc_p2p_gbps if self.peer_crosses_root_complex else self.switch_gbps
        return min(self.card_gbps, path) if path > 0 else 0.0


def card_dma_ns(model: LinkModel, fabric: FabricParams, nbytes: int, *, peer: bool) -> float:
    """Modelled ns for the capture card to DMA `nbytes` into system memory (peer=False) or
    straight into the GPU's BAR1 (peer=True)."""
    _check_count(nbytes, 1)
    gbps = fabric.peer_gbps() if peer else min(fabric.card_gbps, model.params.link_gbps)
    if gbps <= 0:
        raise InputError(f"no peer path on placement {fabric.placement!r}: the root complex does not "
                         "forward peer writes (rc_p2p_gbps=0); bounce through system memory instead")
    return model._jittered(fabric.card_latency_ns + nbytes / gbps, 1)
