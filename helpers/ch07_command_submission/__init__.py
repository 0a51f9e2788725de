"""Chapter 7 — command submission: rings, doorbells, fences (toy GPU) and real launches."""
