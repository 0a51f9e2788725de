"""Shared helpers for the toy-GPU tests (not a test module itself)."""

from __future__ import annotations

import os


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def pid_alive(pid: int) -> bool:
    """The opposite of process_gone, for readability in asserts."""
    return not process_gone(pid) and os.path.exists(f"/proc/{pid}")



def shm_exists(name: str) -> bool:
    """True while a shared-memory block of that name exists (Linux shows them in /dev/shm)."""
    return os.path.exists(f"/dev/shm/{name}")


def start_device(**kw):
    """A small toy GPU for tests (1 MiB of VRAM and of system memory, short timeouts)."""
    from helpers.models.toygpu import ToyGPU

    args = dict(vram_bytes=1 << 20, sysmem_bytes=1 << 20, seed=1, timeout=3.0)
    args.update(kw)
    return ToyGPU(**args)
