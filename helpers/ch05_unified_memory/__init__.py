"""Chapter 5 — unified memory and the GPU MMU."""
