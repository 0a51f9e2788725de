"""How GPUs are connected: `nvidia-smi topo -m` parsed, and the legend of its link kinds.

`nvidia-smi topo -m` prints a matrix whose cell for (GPUi, GPUj) names the path between the
two devices: NV# (a bonded set of # NVLinks), PIX / PXB (through one or several PCIe
bridges, i.e. a PCIe switch, without the CPU), PHB (through the CPU's PCIe host bridge),
NODE (between host bridges of one NUMA node) or SYS (across the CPU interconnect). The
parser is strict about what it does not understand: an unknown cell or a missing row is a
TopologyError naming it, never a silently wrong matrix.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

from helpers.core.errors import CourseError

LEGEND = {
    "X": "the device itself",
    "NV#": "a bonded set of # NVLinks (GPU to GPU, no PCIe at all)",
    "PIX": "at most one PCIe bridge (both behind the same switch port)",
    "PXB": "several PCIe bridges, without the CPU's host bridge (a switch hierarchy)",
    "PHB": "PCIe and a PCIe host bridge (through the CPU's root complex)",
    "NODE": "PCIe and the interconnect between host bridges inside one NUMA node",
    "SYS": "PCIe and the CPU-to-CPU interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)",
}
# older nvidia-smi versions: SOC = today's SYS, PSB = today's PXB
_ALIASES = {"SOC": "SYS", "PSB": "PXB"}
_PCIE_ORDER = ["PIX", "PXB", "PHB", "NODE", "SYS"]  # nearest to farthest
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DEVICE = re.compile(r"^(GPU|NIC)(\d+)$")
_LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|PSB)$")


class TopologyError(CourseError):
    """`nvidia-smi topo -m` output that the parser cannot read, or a query it cannot answer."""


@dataclass(frozen=True, kw_only=True)
class Topology:
    """The device-to-device link matrix of one machine, as nvidia-smi reports it."""

    devices: list[str]                        # column order: GPU0, GPU1, ..., NIC0, ...
    links: dict[str, dict[str, str]]          # links[a][b] = "NV18", "SYS", "X", ...
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> list[str]:
        return [d for d in self.devices if d.startswith("GPU")]

    def link(self, a: str | int, b: str | int) -> str:
        """The link kind between two devices (ints mean GPU indices)."""
        a, b = self._name(a), self._name(b)
        return self.links[a][b]

    def _name(self, d: str | int) -> str:
        name = f"GPU{d}" if isinstance(d, int) and not isinstance(d, bool) else d
        if name not in self.links:
            raise TopologyError(f"no device {d!r} in this topology (it has {', '.join(self.devices)})")
        return name

    def gpu_matrix(self) -> list[list[str]]:
        """GPU-to-GPU link kinds as a square list of lists."""
        return [[self.links[a][b] for b in self.gpus] for a in self.gpus]

    def as_dict(self) -> dict:
        return {"devices": self.devices, "links": self.links, "cpu_affinity": self.cpu_affinity,
                "numa_affinity": self.numa_affinity, "nic_names": self.nic_names}


def describe(kind: str) -> str:
    """The legend entry of a link kind (NV18 -> 'a bonded set of 18 NVLinks ...')."""
    kind = _ALIASES.get(kind, kind)
    m = re.fullmatch(r"NV(\d+)", kind)
    if m:
        return LEGEND["NV#"].replace("#", m.group(1))
    if kind not in LEGEND:
        raise TopologyError(f"unknown link kind {kind!r}; known: {', '.join(LEGEND)}")
    return LEGEND[kind]


def rank(kind: str) -> tuple[int, int]:
    """A sort key, nearest first: NVLink (more links first), then PIX < PXB < PHB < NODE < SYS."""
    kind = _ALIASES.get(kind, kind)
    m = re.fullmatch(r"NV(\d+)", kind)
    if m:
        return (0, -int(m.group(1)))
    if kind == "X":
        return (-1, 0)
    if kind not in _PCIE_ORDER:
        raise TopologyError(f"unknown link kind {kind!r}")
    return (1 + _PCIE_ORDER.index(kind), 0)


def parse(text: str) -> Topology:
    """Parse the text of `nvidia-smi topo -m` (any number of GPUs and NICs).

    Accepts tab- or space-separated columns and the terminal's underline escape codes;
    raises TopologyError for text that has no GPU matrix, a row of the wrong length, an
    unknown link kind, a missing or duplicated row, or a diagonal that is not X.
    """
    if not isinstance(text, str):
        raise TopologyError(f"expected the text of `nvidia-smi topo -m`, got {type(text).__name__}")
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    header_at = next((i for i, ln in enumerate(lines) if _is_header(ln.split())), None)
    if header_at is None:
        raise TopologyError("no header line with GPU0 found: is this `nvidia-smi topo -m` output?")
    columns = [tok for tok in re.split(r"\s+", lines[header_at].strip()) if _DEVICE.match(tok)]
    rows: dict[str, list[str]] = {}
    extra: dict[str, list[str]] = {}
    for ln in lines[header_at + 1:]:
        toks = ln.split()
        if not toks:
            if rows:
                break
            continue
        if not _DEVICE.match(toks[0]):
            break  # "Legend:" or anything after the matrix
        name = toks[0]
        if name in rows:
            raise TopologyError(f"row {name} appears twice")
        cells = toks[1:1 + len(columns)]
        if len(cells) < len(columns):
            raise TopologyError(f"row {name} has {len(cells)} link cells, the header has {len(columns)} devices")
        for col, cell in zip(columns, cells, strict=True):
            if not _LINK.match(cell):
                raise TopologyError(f"row {name}, column {col}: unknown link kind {cell!r}")
        rows[name] = [_ALIASES.get(c, c) for c in cells]
        extra[name] = toks[1 + len(columns):]
    missing = [c for c in columns if c not in rows]
    if missing:
        raise TopologyError(f"the header names {', '.join(missing)} but there is no row for it")
    links = {a: dict(zip(columns, rows[a], strict=True)) for a in columns}
    for a in columns:
        if links[a][a] != "X":
            raise TopologyError(f"diagonal cell {a}/{a} is {links[a][a]!r}, expected X")
        for b in columns:
            if (links[a][b] == "X") != (a == b):
                raise TopologyError(f"cell {a}/{b} is {links[a][b]!r}: X may only mark a device itself")
    cpu = {n: e[0] for n, e in extra.items() if n.startswith("GPU") and e}
    numa = {n: e[1] for n, e in extra.items() if n.startswith("GPU") and len(e) > 1}
    nics = {}
    for ln in lines:
        m = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", ln)
        if m:
            nics[m.group(1)] = m.group(2)
    return Topology(devices=columns, links=links, cpu_affinity=cpu, numa_affinity=numa, nic_names=nics)


def _is_header(toks: list[str]) -> bool:
    """The header starts with GPU0 followed by another device or a column title, a row
    with GPU0 followed by a link kind (its own cell is X)."""
    return len(toks) >= 2 and toks[0] == "GPU0" and not _LINK.match(toks[1])


def nvidia_smi_topo(timeout_s: float = 15.0) -> str | None:
    """The text of `nvidia-smi topo -m` on this machine, or None without nvidia-smi; the header's
    underline escape codes are taken out (a page shows them raw)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise TopologyError(f"`nvidia-smi topo -m` did not answer within {timeout_s:g} s") from None
    if out.returncode != 0:
        raise TopologyError(f"`nvidia-smi topo -m` failed (exit {out.returncode}): {out.stderr.strip()[:200]}")
    return _ANSI.sub("", out.stdout)
