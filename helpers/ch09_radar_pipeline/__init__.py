"""Chapter 9 — the real-time radar pipeline (capstone)."""
