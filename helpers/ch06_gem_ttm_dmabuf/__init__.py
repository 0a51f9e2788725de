"""Chapter 6 — GEM, TTM and dma-buf."""
