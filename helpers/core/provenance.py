"""Reading a recording's provenance: which board a PCI id names, and the one-line label every
replayed figure carries.

A recording's provenance (machine, driver, CUDA and package versions, when) is gathered on the
machine that measures, by helpers.measure.this_machine.
"""

from __future__ import annotations

# Boards by PCI vendor:device id, as the PCI ID database (pci.ids) names them. CUDA's name does
# not tell the boards apart ("NVIDIA H100 80GB HBM3" is the SXM5 module), and the link a board
# sits on is not its form factor: the course's reference H100 is an SXM5 module on a PCIe Gen5
# x16 link, passed through to a VM.
BOARDS = {
    "10de:2330": "H100 SXM5 80GB",
    "10de:2331": "H100 PCIe",
    "10de:2335": "H200 SXM 141GB",
}


def board(pci_id: str | None) -> str | None:
    """The board a PCI id names (BOARDS), or None when the course does not know it."""
    return BOARDS.get(str(pci_id or "").lower())


def label(prov: dict) -> str:
    """A one-line description for figure captions: GPU (and its board, from the PCI id), driver,
    CUDA, link, date."""
    g = prov.get("gpu", {})
    date = str(prov.get("date", ""))[:10]
    name = g.get("name", "?")
    known = board(g.get("pci_id"))
    if known:
        name += f" ({known}, {g['pci_id'].lower()})"
    return (f"{name} · driver {prov.get('driver') or '?'} · "
            f"CUDA {prov.get('cuda_runtime') or '?'} · {prov.get('pcie', {}).get('current') or 'PCIe ?'} · {date}")
