"""Chapter 0 — your machine: the first copies, here and on the reference machine."""
