"""Chapter 2 — MMIO and BARs."""
