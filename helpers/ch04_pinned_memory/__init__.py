"""Chapter 4 — pinned memory: cudaHostAlloc, cudaHostRegister, write-combining, zero-copy."""
