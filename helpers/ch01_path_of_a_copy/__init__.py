"""Chapter 1 — the path of a copy: syscalls, the driver's mappings, ioctls, CPU time."""
