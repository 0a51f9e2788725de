"""Chapter 8 — peer-to-peer transfers."""
