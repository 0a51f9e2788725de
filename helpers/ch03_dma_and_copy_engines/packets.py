"""How much of a PCIe link is data: the packet-efficiency ceiling of a stream of TLPs.

A copy's bytes cross the link inside transaction layer packets (TLPs), and each TLP costs link
time beyond its payload. The model here counts what every TLP carries and nothing else:

- the link: 32 GT/s per lane per direction at Gen5, 16 lanes, 128b/130b encoding (2 bits of
  every 130 are the block header), so 32e9 * 16 * 128/130 / 8 bytes per second of symbols;
- per TLP, without ECRC: a 4-byte framing token (STP, which at 8 GT/s and above carries the
  TLP's length and its sequence number), a header of 16 bytes (4 DW: a memory write or read
  request with a 64-bit address) or 12 bytes (3 DW: a completion), and a 4-byte LCRC. So 24
  bytes for a posted write, 20 for a completion;
- not counted: data link layer packets travelling the same way (acknowledgements and
  flow-control updates for traffic in the other direction), SKP ordered sets, idle time, and
  PCIe 6's Flit Mode, which replaces per-TLP framing and LCRC with fixed 256-byte flits.

Those facts are the PCI Express Base Specification's (transaction layer: header formats; data
link layer: sequence numbers, LCRC, DLLPs; physical layer: 128b/130b encoding and framing
tokens); the course names the parts but has not checked them against a copy of the
specification, which PCI-SIG publishes to members. The ceiling is therefore a model, and the
chapter compares it with the recorded bandwidth instead of claiming it.
"""

from __future__ import annotations

import math

from helpers.core.errors import InputError, InputTypeError

GEN5_GT_PER_S = 32.0          # transfers per second per lane, per direction, in units of 1e9
X16_LANES = 16
ENCODING = 128 / 130          # 128b/130b: 128 payload bits in every 130-bit block
WRITE_OVERHEAD_B = 4 + 16 + 4  # STP token + 4-DW header + LCRC: a posted memory write
COMPLETION_OVERHEAD_B = 4 + 12 + 4  # STP token + 3-DW header + LCRC: a completion with data


def _positive(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputTypeError(f"{what} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{what} must be a positive finite number, got {value!r}")
    return float(value)


def symbol_gbps(gt_per_s: float = GEN5_GT_PER_S, lanes: int = X16_LANES) -> float:
    """GB/s (1e9 B) one direction of a link carries after line encoding, before any packet overhead."""
    return _positive(gt_per_s, "gt_per_s") * _positive(lanes, "lanes") * ENCODING / 8


def ceiling_gbps(payload: int, overhead: int = WRITE_OVERHEAD_B, gt_per_s: float = GEN5_GT_PER_S,
                 lanes: int = X16_LANES) -> float:
    """GB/s of payload when every TLP carries `payload` bytes and costs `overhead` more (DLLPs not counted)."""
    p = _positive(payload, "payload")
    o = overhead if overhead == 0 else _positive(overhead, "overhead")
    return symbol_gbps(gt_per_s, lanes) * p / (p + o)


def recorded_mps(limits: dict | None) -> int | None:
    """The GPU's Max Payload Size from a `copy_engines.pcie_limits` recording (None if not read)."""
    gpu = (limits or {}).get("gpu") or {}
    return gpu.get("mps")


def efficiency_verdict(limits: dict | None, bidir: dict, verb: str = "recorded") -> str:
    """The one-direction bandwidths set against the TLP ceiling of the GPU's MPS; `verb` is the
    bandwidths' Evidence's (evidence.VERBS: 'measured now' live, 'recorded' in replay)."""
    mps = recorded_mps(limits)
    if not mps:
        return "no recorded MPS: the packet-efficiency ceiling cannot be set against the measurement."
    raw, ceiling = symbol_gbps(), ceiling_gbps(mps)
    d2h, h2d = bidir["d2h"]["median_gbps"], bidir["h2d"]["median_gbps"]
    lines = [f"posted writes of {mps} B (the GPU's MPS) cost {mps + WRITE_OVERHEAD_B} B of link each: the TLP "
             f"ceiling is {ceiling:.1f} GB/s, {ceiling / raw:.1%} of the {raw:.1f} GB/s left after 128b/130b encoding.",
             f"the device→host copy ({verb}) moved {d2h:.1f} GB/s, {d2h / ceiling:.1%} of that ceiling; the other "
             f"{1 - d2h / ceiling:.1%} is what the model leaves out (DLLPs, SKP ordered sets, gaps between requests)."]
    small = ceiling_gbps(64, COMPLETION_OVERHEAD_B)
    if h2d > small:
        lines.append(f"host→device data arrives in completions (20 B of overhead each). Completions of 64 B would cap "
                     f"it at {small:.1f} GB/s, below the {h2d:.1f} GB/s {verb}, so this root complex returned larger "
                     "completions: an inference from the model, not a measurement of completion sizes.")
    else:
        lines.append(f"host→device moved {h2d:.1f} GB/s, within the {small:.1f} GB/s that 64-byte completions would "
                     "allow: these data cannot tell how the root complex split its completions.")
    return "\n".join(lines)
