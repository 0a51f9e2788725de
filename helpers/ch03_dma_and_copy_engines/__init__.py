"""Chapter 3 — DMA and copy engines."""
