"""The PCIe limits behind a copy's bandwidth: Max Payload Size and Max Read Request Size.

Both live in the PCI Express capability of a function's configuration space (Device Control,
offset 8 of the capability: MPS in bits 7:5, MRRS in bits 14:12, each 128 << value bytes; Device
Capabilities, offset 4, bits 2:0: the largest MPS the function supports). sysfs `config` gives all
of it to root, only the first 64 bytes to others, so `lspci -vv` (which reads the same file) is the
fallback; where neither works the record says why instead of guessing.

The Resizable BAR capability (PCIe extended capability 0x15, in the extended space from offset
0x100, so root only) is read from the same bytes: per resizable BAR, the sizes the function
supports (capability register, bits 4 and up: 1 MiB << (bit - 4)) and the size now programmed
(control register bits 12:8: 1 MiB << value). Offsets and fields as Linux names them in
include/uapi/linux/pci_regs.h (PCI_EXT_CAP_ID_REBAR, PCI_REBAR_CAP, PCI_REBAR_CTRL and its
_BAR_IDX, _NBAR_MASK/_NBAR_SHIFT and _BAR_SIZE fields).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from helpers.core import config, gpu
from helpers.core.errors import InputError
from helpers.core.experiments import GPU, experiment

PCI_CAP_PTR = 0x34
PCI_CAP_ID_EXP = 0x10
SYSFS = Path("/sys/bus/pci/devices")
_ADDR = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def from_config(raw: bytes) -> dict | None:
    """MPS supported/set and MRRS from a configuration space dump (None: no PCIe capability in it)."""
    if len(raw) < 0x40:
        raise InputError(f"a configuration space dump has at least 64 bytes, got {len(raw)}")
    pos, seen = raw[PCI_CAP_PTR] & 0xFC, set()
    while pos and pos + 12 <= len(raw) and pos not in seen:
        seen.add(pos)
        if raw[pos] == PCI_CAP_ID_EXP:
            devcap = int.from_bytes(raw[pos + 4:pos + 8], "little")
            devctl = int.from_bytes(raw[pos + 8:pos + 10], "little")
            return {"mps_supported": 128 << (devcap & 0x7), "mps": 128 << ((devctl >> 5) & 0x7),
                    "mrrs": 128 << ((devctl >> 12) & 0x7), "source": "config space"}
        pos = raw[pos + 1] & 0xFC
    return None


PCI_EXT_CAP_START = 0x100
PCI_EXT_CAP_ID_REBAR = 0x15
MiB = 1 << 20


def _u32(raw: bytes, at: int) -> int:
    return int.from_bytes(raw[at:at + 4], "little")


def rebar_from_config(raw: bytes) -> dict:
    """The Resizable BAR capability from a configuration space dump: {"present": bool, "bars":
    [{"bar", "supported_bytes", "current_bytes"}]}, or {"present": None, "why": ...} when the
    dump stops before the extended space (a non-root read gets 64 bytes)."""
    if len(raw) < PCI_EXT_CAP_START + 4:
        return {"present": None, "why": f"only {len(raw)} bytes of config space readable (the extended space "
                                        "starts at 0x100; root reads 4096)"}
    pos, seen = PCI_EXT_CAP_START, set()
    while pos and pos + 8 <= len(raw) and pos not in seen:
        seen.add(pos)
        header = _u32(raw, pos)
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == PCI_EXT_CAP_ID_REBAR:
            nbars = (_u32(raw, pos + 8) >> 5) & 0x7
            bars = []
            for i in range(max(nbars, 1)):
                cap, ctrl = _u32(raw, pos + 4 + 8 * i), _u32(raw, pos + 8 + 8 * i)
                bars.append({"bar": ctrl & 0x7,
                             "supported_bytes": [MiB << (b - 4) for b in range(4, 32) if cap >> b & 1],
                             "current_bytes": MiB << ((ctrl >> 8) & 0x1F),
                             "cap_register": f"0x{cap:08x}", "ctrl_register": f"0x{ctrl:08x}"})
            return {"present": True, "offset": f"0x{pos:03x}", "bars": bars}
        pos = (header >> 20) & 0xFFC
    return {"present": False, "bars": []}


def from_lspci(text: str) -> dict | None:
    """The same three numbers from `lspci -vv` output (None when it does not show them)."""
    cap = re.search(r"DevCap:\s*MaxPayload (\d+) bytes", text)
    ctl = re.search(r"DevCtl:.*?MaxPayload (\d+) bytes, MaxReadReq (\d+) bytes", text, re.S)
    if not ctl:
        return None
    return {"mps_supported": int(cap.group(1)) if cap else None, "mps": int(ctl.group(1)),
            "mrrs": int(ctl.group(2)), "source": "lspci -vv"}


def limits_of(address: str) -> dict:
    """MPS and MRRS of the PCI function at `address`, or the reasons they could not be read."""
    if not isinstance(address, str) or not _ADDR.match(address):
        raise InputError(f"a PCI address looks like 0000:00:06.0, got {address!r}")
    why = []
    try:
        raw = (SYSFS / address / "config").read_bytes()
        found = from_config(raw)
        if found:
            return {"address": address, **found, "rebar": rebar_from_config(raw)}
        why.append("sysfs config: no PCIe capability in the bytes readable here (non-root reads see 64 bytes)")
    except OSError as exc:
        why.append(f"sysfs config: {exc.strerror or exc}")
    lspci = config.tool_on_path("lspci")
    if lspci:
        try:
            out = subprocess.run([lspci, "-vv", "-s", address], capture_output=True, text=True, timeout=20)
            found = from_lspci(out.stdout)
            if found:
                return {"address": address, **found,
                        "rebar": {"present": None, "why": "sysfs config was not readable; lspci's text is not parsed for it"}}
            why.append("lspci -vv: no DevCtl line (it needs root to read the capability)")
        except (OSError, subprocess.SubprocessError) as exc:
            why.append(f"lspci: {exc}")
    else:
        why.append("lspci is not installed")
    return {"address": address, "mps": None, "mrrs": None, "mps_supported": None, "unavailable": "; ".join(why)}


def upstream_of(address: str) -> str | None:
    """The PCI address of the bridge above `address` (None at a root bus, or in a VM without one)."""
    try:
        parent = os.path.basename(os.path.dirname(os.path.realpath(SYSFS / address)))
    except OSError:
        return None
    return parent if _ADDR.match(parent) else None


@experiment("copy_engines.pcie_limits", chapter=3, needs=(GPU,),
            title="The GPU's (and its upstream port's) PCIe Max Payload Size and Max Read Request Size; "
                  "the GPU's Resizable BAR capability")
def record_pcie_limits(quick: bool) -> dict:
    addr = gpu.probe().pci_bus_id
    if not addr:
        return {"gpu": None, "upstream": None, "unavailable": "CUDA gave no PCI address"}
    up = upstream_of(addr)
    return {"gpu": limits_of(addr), "upstream": limits_of(up) if up else None}


def limits_line(data: dict) -> str:
    """One line per function: what was recorded, or why nothing was."""
    out = []
    for name in ("gpu", "upstream"):
        f = data.get(name)
        if not f:
            out.append(f"{name}: none (no upstream bridge visible)" if name == "upstream" else f"{name}: not read")
        elif f.get("mps") is None:
            out.append(f"{name} {f['address']}: not readable here ({f.get('unavailable')})")
        else:
            out.append(f"{name} {f['address']}: MPS {f['mps']} B (supports up to {f['mps_supported']} B), "
                       f"MRRS {f['mrrs']} B, from {f['source']}")
    gpu_f = data.get("gpu") or {}
    if gpu_f.get("mps") is not None:
        out.append(rebar_line(gpu_f.get("rebar")))
    return "\n".join(out)


def _size(n: int) -> str:
    return f"{n >> 30} GiB" if n >= 1 << 30 else f"{n >> 20} MiB"


def rebar_line(rebar: dict | None) -> str:
    """The GPU's Resizable BAR capability in one line per BAR, or why it is not known."""
    if rebar is None:
        return "Resizable BAR: not recorded (a recording made before the course read it)"
    if rebar["present"] is None:
        return f"Resizable BAR: not readable here ({rebar['why']})"
    if not rebar["present"]:
        return ("Resizable BAR: no Resizable BAR capability (extended capability 0x15) in the configuration space "
                "this machine sees (in a virtual machine, the hypervisor decides what the guest is shown)")
    return "\n".join(f"Resizable BAR{b['bar']}: set to {_size(b['current_bytes'])}; supported "
                     f"{', '.join(_size(x) for x in b['supported_bytes']) or 'none listed'}" for b in rebar["bars"])
